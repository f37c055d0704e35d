"""What a recorded delivery means: commands on a PR comment, a push, a close. Runs in the
command processor (never in the webhook request): reads the commenter's permission and the
PR's head SHA from GitHub, writes jobs, and puts every answer in the outbox."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from service.commands import (
    CancelCommand,
    Command,
    CommandError,
    HelpCommand,
    RetestCommand,
    Selector,
    Target,
    TestCommand,
    parse_comment,
)
from service.github import GitHubClient, PullInfo
from service.models import Job
from service.report import (
    JobView,
    render_cancel_summary,
    render_command_error,
    render_duplicate,
    render_help,
    render_not_allowed,
    render_retest_summary,
)
from service.reporting import enqueue_reaction, enqueue_reply
from service.store import NewJob
from service.trust import (
    Commenter,
    TrustDecision,
    TrustPolicy,
    TTLCache,
    decide,
    is_bot,
    needs_permission_lookup,
)
from workflows.models import JobStatus

if TYPE_CHECKING:
    from service.context import Context

log = logging.getLogger(__name__)

RETEST_STATUSES = frozenset({JobStatus.failed, JobStatus.errored, JobStatus.timed_out})
ACK_REACTION = "eyes"
REPLY_SEPARATOR = "\n\n---\n\n"


@dataclass(frozen=True)
class CommentEvent:
    delivery_id: str
    repo: str
    clone_url: str
    pr_number: int
    comment_id: int
    body: str
    login: str
    sender_type: str

    @classmethod
    def from_payload(cls, delivery_id: str, payload: dict[str, Any]) -> CommentEvent:
        repo = payload["repository"]
        sender = payload.get("sender") or payload["comment"].get("user") or {}
        return cls(
            delivery_id=delivery_id,
            repo=repo["full_name"],
            clone_url=repo.get("clone_url") or "",
            pr_number=int(payload["issue"]["number"]),
            comment_id=int(payload["comment"]["id"]),
            body=payload["comment"]["body"],
            login=str(sender.get("login", "")),
            sender_type=str(sender.get("type", "User")),
        )


class Handlers:
    """The handlers of the deliveries the webhook accepted."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        ttl = max(ctx.settings.permission_cache_seconds, 0.001)
        self.permissions: TTLCache[tuple[str, str], str] = TTLCache(ttl)
        self.memberships: TTLCache[tuple[str, str, str], bool] = TTLCache(ttl)
        self.policy = TrustPolicy(
            allowed_users=frozenset(ctx.settings.allowed_users),
            allowed_teams=frozenset(ctx.settings.allowed_teams),
        )

    @property
    def github(self) -> GitHubClient:
        if self.ctx.github is None:
            raise RuntimeError("no GitHub credentials: set ONDEMAND_GITHUB_TOKEN or an App")
        return self.ctx.github

    def handle(self, delivery_id: str, event: str, payload: dict[str, Any]) -> str:
        """Process one delivery; returns what was done. GitHubError propagates (retry)."""
        if event == "issue_comment":
            return self.comment(CommentEvent.from_payload(delivery_id, payload))
        if event == "pull_request":
            return self.pull_request(payload)
        return f"{event}: nothing to do"

    # -- pull_request -------------------------------------------------------------------

    def pull_request(self, payload: dict[str, Any]) -> str:
        repo = payload["repository"]["full_name"]
        pr = payload["pull_request"]
        number = int(pr["number"])
        if payload.get("action") == "synchronize":
            head = pr["head"]["sha"]
            jobs = self.ctx.store.supersede(repo, number, head)
            return f"push to {head[:7]}: {len(jobs)} job(s) superseded or cancelled"
        jobs = self.ctx.store.cancel(repo, number, "pull request closed")
        return f"closed: {len(jobs)} job(s) cancelled"

    # -- issue_comment ------------------------------------------------------------------

    def comment(self, ev: CommentEvent) -> str:
        commands = parse_comment(
            ev.body, self.ctx.backend_names, self.ctx.settings.default_backends
        )
        if not commands:
            return "no command"
        commenter = Commenter(ev.login, ev.sender_type, None)
        if is_bot(commenter):
            return "bot: ignored"
        only_help = all(isinstance(c, HelpCommand | CommandError) for c in commands)
        if not only_help:
            decision = self.trust(ev.repo, commenter)
            if not decision.allowed:
                self._reply(ev, render_not_allowed(ev.login, decision.reason))
                return f"not allowed: {decision.reason}"
        self._react(ev, ACK_REACTION)
        pull: PullInfo | None = None
        if any(isinstance(c, TestCommand | RetestCommand) for c in commands):
            pull = self.github.pull(ev.repo, ev.pr_number)
        replies: list[str] = []
        outcomes: list[str] = []
        for command in commands:
            text, outcome = self._one(ev, command, pull)
            outcomes.append(outcome)
            if text:
                replies.append(text)
        if replies:
            self._reply(ev, REPLY_SEPARATOR.join(replies))
        return "; ".join(outcomes)

    def trust(self, repo: str, commenter: Commenter) -> TrustDecision:
        """The trust decision, reading permission and team membership (cached) as needed."""
        if needs_permission_lookup(commenter, self.policy):
            key = (repo, commenter.login.lower())
            permission = self.permissions.get(key)
            if permission is None:
                permission = self.github.permission(repo, commenter.login)
                self.permissions.set(key, permission)
            commenter = Commenter(commenter.login, commenter.type, permission)
        decision = decide(commenter, self.policy)
        if decision.allowed or not self.policy.allowed_teams:
            return decision
        teams = frozenset(t for t in self.policy.allowed_teams if self._member(repo, t, commenter))
        return decide(
            Commenter(commenter.login, commenter.type, commenter.permission, teams), self.policy
        )

    def _member(self, repo: str, team: str, commenter: Commenter) -> bool:
        org, _, slug = team.rpartition("/")
        org = org or repo.split("/")[0]
        key = (org.lower(), slug.lower(), commenter.login.lower())
        known = self.memberships.get(key)
        if known is None:
            known = self.github.team_member(org, slug, commenter.login)
            self.memberships.set(key, known)
        return known

    def _one(self, ev: CommentEvent, command: Command, pull: PullInfo | None) -> tuple[str, str]:
        reporter = self.ctx.reporter
        assert reporter is not None
        if isinstance(command, CommandError):
            return render_command_error(command, reporter.backends()), "command error"
        if isinstance(command, HelpCommand):
            return render_help(reporter.backends(), self.ctx.settings.default_backends), "help"
        if isinstance(command, CancelCommand):
            return self._cancel(ev, command)
        assert pull is not None
        if pull.state != "open":
            return f"#{ev.pr_number} is {pull.state}: nothing runs.", "pull request not open"
        if isinstance(command, TestCommand):
            return self._test(ev, command, pull)
        if isinstance(command, RetestCommand):
            return self._retest(ev, pull)
        return "", "unknown command"

    def _new_job(
        self, ev: CommentEvent, pull: PullInfo, target: Target, cmd: TestCommand
    ) -> NewJob:
        return NewJob(
            repo=ev.repo,
            clone_url=pull.clone_url or ev.clone_url,
            pr_number=ev.pr_number,
            sha=pull.head_sha,
            op=target.op,
            backend=target.backend,
            bench=cmd.bench,
            compare=cmd.compare,
            base_ref=pull.base_ref,
            base_sha=pull.base_sha,
            requested_by=ev.login,
            command_comment_id=ev.comment_id,
        )

    def _test(self, ev: CommentEvent, cmd: TestCommand, pull: PullInfo) -> tuple[str, str]:
        duplicates: list[str] = []
        created = 0
        for target in cmd.targets:
            job, new = self.ctx.store.create_job(self._new_job(ev, pull, target, cmd))
            if new or job.command_comment_id == ev.comment_id:
                created += 1  # (the second case: this very comment, processed again)
                continue
            duplicates.append(render_duplicate(target, self._view(job)))
        return "\n\n".join(duplicates), f"{created} job(s) queued, {len(duplicates)} duplicate(s)"

    def _retest(self, ev: CommentEvent, pull: PullInfo) -> tuple[str, str]:
        again: list[Job] = []
        for last in self.ctx.store.latest_per_target(ev.repo, ev.pr_number):
            if last.status not in RETEST_STATUSES:
                continue
            cmd = TestCommand((Target(last.op, last.backend),), last.bench, last.compare)
            job, _ = self.ctx.store.create_job(
                self._new_job(ev, pull, Target(last.op, last.backend), cmd)
            )
            again.append(job)
        views = [self._view(job) for job in again]
        return render_retest_summary(views), f"retest: {len(again)} job(s)"

    def _cancel(self, ev: CommentEvent, cmd: CancelCommand) -> tuple[str, str]:
        def match(job: Job) -> bool:
            return not cmd.selectors or any(_selects(s, job) for s in cmd.selectors)

        jobs = self.ctx.store.cancel(
            ev.repo, ev.pr_number, f"cancelled by @{ev.login}", match=match
        )
        views = [self._view(job) for job in jobs]
        return render_cancel_summary(views, cmd), f"cancelled {len(jobs)} job(s)"

    def _view(self, job: Job) -> JobView:
        reporter = self.ctx.reporter
        assert reporter is not None
        with self.ctx.sessions() as session:
            fresh = session.get(Job, job.id) or job
            return reporter.view(session, fresh)

    def _react(self, ev: CommentEvent, content: str) -> None:
        with self.ctx.writes() as session, session.begin():
            enqueue_reaction(session, ev.repo, ev.comment_id, content)
        self._kick()

    def _reply(self, ev: CommentEvent, body: str) -> None:
        with self.ctx.writes() as session, session.begin():
            enqueue_reply(session, ev.repo, ev.pr_number, ev.delivery_id, body)
        self._kick()

    def _kick(self) -> None:
        if self.ctx.outbox is not None:
            self.ctx.outbox.kick()


def _selects(selector: Selector, job: Job) -> bool:
    return selector.op == job.op and selector.backend in (None, job.backend)
