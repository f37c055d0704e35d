"""`pull_request` opened, reopened, synchronize or closed: the head it now has is recorded
(what commands are judged against), a push supersedes the old head's jobs, a close cancels
them, and where the repository opts in (`changes.on_push`) a trusted author's push runs the
operators it changes, with one note per pull request edited in place."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from service.publish.notices import enqueue_note, has_note
from service.receive.context import Origin, Services
from service.receive.enqueue import ChangedRequest, run_changed
from service.receive.payloads import PullRequestPayload
from service.receive.trust import Commenter, is_bot

HEAD_EVENTS = frozenset({"opened", "reopened", "synchronize"})  # the PR's head changes
PUSH_NOTE = "changed-on-push"  # the one note per pull request a trusted push keeps current


class PullRequestHandler:
    def __init__(self, services: Services) -> None:
        self.services = services

    def handle(self, _delivery_id: str, payload: dict[str, Any], _received_at: datetime) -> str:
        data = PullRequestPayload.model_validate(payload)
        services = self.services
        repo = data.repository.full_name
        pr = data.pull_request
        head = pr.head.sha
        if data.action in HEAD_EVENTS:
            services.heads.record(
                repo, pr.number, head, pr.updated_at, event=data.action, seen=False
            )
        if data.action == "closed":
            jobs = services.jobs.cancel(repo, pr.number, "pull request closed")
            return f"closed: {len(jobs)} job(s) cancelled"
        done = f"{data.action}: head {head[:7]} recorded"
        if data.action == "synchronize":
            jobs = services.jobs.supersede(repo, pr.number, head)
            done = f"push to {head[:7]}: {len(jobs)} job(s) superseded or cancelled"
        if data.action in HEAD_EVENTS and services.github_client is not None:
            done += f"; {self._on_push(data)}"
        return done

    def _on_push(self, data: PullRequestPayload) -> str:
        """Run the changed operators of a pull request whose author may start jobs, when the
        repository opts in (`changes.on_push`, read from its default branch): the author's
        push approves its own head. Anyone else's pull request runs nothing and is told
        nothing, whatever the file says; a maintainer's command still runs it."""
        services = self.services
        repo = data.repository.full_name
        pr = data.pull_request
        if pr.user is None:
            return "no author: nothing runs"
        settings = services.repo_settings(repo, data.repository.default_branch)
        wanted = settings.config.changes.on_push
        known = (services.backend_names.get(b) for b in wanted)
        backends = tuple(dict.fromkeys(b for b in known if b))
        if not backends:
            return "no automatic runs configured"
        author = Commenter(pr.user.login, pr.user.type, None)
        if is_bot(author) or not services.gate.decide(repo, author).allowed:
            return f"author {pr.user.login} may not start jobs: nothing runs"
        pull = services.github.pull(repo, pr.number)
        if pull.state != "open" or pull.head_sha != pr.head.sha:
            return f"head moved on to {pull.head_sha[:7]}: its own event runs it"
        base = services.repo_settings(repo, pull.base_sha)  # the gate's thresholds, as a command
        origin = Origin(
            repo, pull.clone_url or data.repository.clone_url, data.repository.private,
            pr.number, pr.user.login,
        )  # fmt: skip
        # The pusher may not be the author (a maintainer pushing to the branch), and a note
        # that mentions someone pings them on every edit: it names neither.
        who = "A push to this pull request"
        if data.action != "synchronize":
            who = f"This pull request, {data.action}"
        with services.db.reads() as session:  # once a note says what ran, it says when nothing does
            quiet = not has_note(session, repo, pr.number, PUSH_NOTE)
        request = ChangedRequest(backends)
        text, outcome = run_changed(
            services, origin, request, pull, pr.head.sha, base, who, quiet=quiet
        )
        if text:
            with services.db.writes() as session, session.begin():
                enqueue_note(session, repo, pr.number, PUSH_NOTE, pr.head.sha, text)
            services.kick_outbox()
        return outcome
