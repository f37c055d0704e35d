"""`issue_comment` created on a pull request: the commands it holds, each answered by its
module in the command registry; one reply for all of them. Before anything is asked of GitHub
the comment gets its 👀; who may run what is decided once, and the pull request, the head
the comment approves and the repository's settings are read once, only when a command needs
them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from service.db.engine import utcnow
from service.github.client import MissingPermission
from service.github.permissions import find
from service.github.reads import PullInfo
from service.receive.approval import Approval, approved_head
from service.receive.commands.registry import Registry
from service.receive.commands.words import CommandError
from service.receive.context import CommandContext, CommentEvent, RetryLater, Services
from service.receive.trust import Commenter, is_bot
from service.render.config_replies import render_problems
from service.render.replies import (
    join_replies,
    render_command_error,
    render_missing_permission,
    render_not_allowed,
    render_not_approved,
)
from workflows.repo_config import CONFIG_PATH

ACK_REACTION = "eyes"
HEAD_RETRY_S = 2.0


class CommentHandler:
    """Answers the commands of a comment through `registry`."""

    def __init__(self, services: Services, registry: Registry) -> None:
        self.services = services
        self.registry = registry

    def handle(self, delivery_id: str, payload: dict[str, Any], received_at: datetime) -> str:
        ev = CommentEvent.from_payload(delivery_id, payload)
        services = self.services
        commands = self.registry.parse_comment(
            ev.body, services.backend_names, services.default_backends
        )
        if not commands:
            return "no command"
        commenter = Commenter(ev.login, ev.sender_type, None)
        if is_bot(commenter):
            return "bot: ignored"
        # Seen, before anything is asked of GitHub: the 👀 goes out with the first call that
        # can, the answer follows whenever GitHub allows (a refusal is an answer too).
        services.react(ev.repo, ev.comment_id, ACK_REACTION)
        specs = [self.registry.spec_of(c) for c in commands]
        if any(spec is not None and spec.needs.allowed for spec in specs):
            decision = services.gate.decide(ev.repo, commenter)
            if not decision.allowed:
                self._reply(ev, render_not_allowed(ev.login, decision.reason))
                return f"not allowed: {decision.reason}"
        ctx = CommandContext(services, ev, help_rows=self.registry.help_rows)
        replies: list[str] = []
        if any(spec is not None and spec.needs.pull for spec in specs):
            pull = services.github.pull(ev.repo, ev.pr_number)
            approval = self._approval(ev, pull, received_at)
            settings = services.repo_settings(ev.repo, pull.base_sha)  # never the head's
            ctx = CommandContext(services, ev, pull, approval, settings, self.registry.help_rows)
            problems = render_problems(settings.problems, CONFIG_PATH, pull.base_ref)
            if problems:
                replies.append(problems)
        outcomes: list[str] = []
        for command in commands:
            text, outcome = self._one(ctx, command)
            outcomes.append(outcome)
            if text:
                replies.append(text)
        if replies:
            self._reply(ev, join_replies(replies))
        return "; ".join(outcomes)

    def _one(self, ctx: CommandContext, command: object) -> tuple[str, str]:
        if isinstance(command, CommandError):
            text = render_command_error(
                command.line,
                command.message,
                command.suggestions,
                self.registry.usage,
                self.services.views.backends(),
            )
            return text, "command error"
        spec = self.registry.spec_of(command)
        assert spec is not None
        if spec.needs.pull:
            assert ctx.pull is not None and ctx.approval is not None
            if ctx.pull.state != "open":
                return f"#{ctx.event.pr_number} is {ctx.pull.state}: nothing runs.", (
                    "pull request not open"
                )
            if ctx.approval.sha is None:
                text = self.registry.format(command)
                reply = render_not_approved(text, ctx.approval.head, ctx.approval.why)
                return reply, "head moved"
        return spec.handle(ctx, command)

    def _approval(self, ev: CommentEvent, pull: PullInfo, received_at: datetime) -> Approval:
        """What the comment approves; while it approves nothing and is young, wait a little
        for a `pull_request` event that may still be on its way (GitHub does not promise
        order), then answer."""
        heads, wait_s = self.services.heads, self.services.head_wait_s
        approval = approved_head(heads.changes(ev.repo, ev.pr_number), pull.head_sha, ev.written_at)
        young = (utcnow() - received_at).total_seconds() < wait_s
        if approval.sha is None and young and pull.state == "open":
            raise RetryLater(
                min(HEAD_RETRY_S, wait_s / 4), f"waiting for the push of {pull.head_sha[:7]}"
            )
        if not heads.seen_before(ev.repo, ev.pr_number, pull.head_sha):
            # GitHub's times are whole seconds: a read in the second of a push ties with it,
            # and a push wins a tie (it was there to be read).
            read_at = utcnow().replace(microsecond=0)
            heads.record(ev.repo, ev.pr_number, pull.head_sha, read_at, event="read", seen=True)
        return approval

    def _reply(self, ev: CommentEvent, body: str) -> None:
        self.services.reply(ev.repo, ev.pr_number, ev.delivery_id, body)

    def permission_missing(
        self, delivery_id: str, payload: dict[str, Any], missing: MissingPermission
    ) -> None:
        """Tell a command's pull request, once, that it waits for a permission GitHub refused
        (the inbox parks the delivery); nobody when the permission missing is the one to
        comment with."""
        if missing.permission == "issues":
            return
        ev = CommentEvent.from_payload(delivery_id, payload)
        permission = find(missing.permission, missing.level)
        cannot = permission.cannot if permission else f"use {missing.permission}"
        label = permission.label if permission else f"{missing.permission}: {missing.level}"
        github = self.services.github_client
        body = render_missing_permission(cannot, label, app=github is not None and github.app_mode)
        self.services.reply(ev.repo, ev.pr_number, f"{delivery_id}:{missing.key}", body)
