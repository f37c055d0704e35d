"""What a recorded delivery means: commands on a PR comment, a push, a close, an owner
accepting the App's new permissions. Runs in the inbox worker (never in the webhook request):
reads the commenter's permission and the PR's head SHA from GitHub, writes jobs, and puts every
answer in the outbox."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ondemand.git import GitError
from service.changes.selector import ChangeReport, ChangeSelector
from service.db.engine import Database, utcnow
from service.db.leases import LeasedRows
from service.db.models import Delivery, Job, OutboxItem
from service.queue import queries
from service.queue.jobs import JobQueue, NewJob
from service.queue.operators import OperatorCatalog
from service.receive.approval import Approval, approved_head
from service.receive.commands import (
    AcceptCommand,
    CancelCommand,
    ChangedCommand,
    Command,
    CommandError,
    HelpCommand,
    RetestCommand,
    Selector,
    Target,
    TestCommand,
    format_command,
    parse_comment,
)
from service.receive.gate import Gate
from service.receive.heads import PullHeads
from service.receive.payloads import (
    CheckRunPayload,
    CommentPayload,
    InstallationPayload,
    PullRequestPayload,
)
from service.receive.trust import Commenter, TTLCache, is_bot
from service.render.comment import gate_failed
from service.render.config_replies import render_problems
from service.render.replies import (
    join_replies,
    render_accept_summary,
    render_cancel_summary,
    render_command_error,
    render_duplicate,
    render_help,
    render_missing_permission,
    render_not_allowed,
    render_not_approved,
    render_retest_summary,
    render_unknown_operator,
)
from service.render.selection import (
    SelectionReply,
    render_capped,
    render_selection,
    render_selection_failed,
)
from service.render.views import JobView
from service.report.app_permissions import find
from service.report.github import (
    FILES_CAP,
    FileTooLarge,
    GitHubClient,
    InstallationInfo,
    MissingPermission,
    PullInfo,
)
from service.report.installations import InstallationProblems
from service.report.job_views import JobViews
from service.report.notices import enqueue_note, enqueue_reaction, enqueue_reply, has_note
from workflows.changes import Selection
from workflows.models import JobStatus
from workflows.repo_config import (
    CONFIG_PATH,
    ConfigReading,
    parse_repo_config,
    too_large_reading,
)

log = logging.getLogger(__name__)

RETEST_STATUSES = frozenset({JobStatus.failed, JobStatus.errored, JobStatus.timed_out})
HEAD_EVENTS = frozenset({"opened", "reopened", "synchronize"})  # the PR's head changes
HEAD_WAIT_S = 10.0  # how long a command that approves nothing waits for a late push event
HEAD_RETRY_S = 2.0
ACK_REACTION = "eyes"
PUSH_NOTE = "changed-on-push"  # the one note per pull request a trusted push keeps current


@dataclass(frozen=True)
class Origin:
    """Who asked for jobs on which pull request: a comment's author, or a pull request's
    trusted author by pushing (no comment)."""

    repo: str
    clone_url: str
    private: bool
    pr_number: int
    login: str
    comment_id: int | None = None


@dataclass(frozen=True)
class CommentEvent:
    delivery_id: str
    repo: str
    clone_url: str
    private: bool
    pr_number: int
    comment_id: int
    body: str
    written_at: datetime
    login: str
    sender_type: str

    @classmethod
    def from_payload(cls, delivery_id: str, payload: dict[str, Any]) -> CommentEvent:
        data = CommentPayload.model_validate(payload)
        return cls(
            delivery_id=delivery_id,
            repo=data.repository.full_name,
            clone_url=data.repository.clone_url,
            private=data.repository.private,
            pr_number=data.issue.number,
            comment_id=data.comment.id,
            body=data.comment.body,
            written_at=data.comment.created_at,
            login=data.sender.login,
            sender_type=data.sender.type,
        )

    @property
    def origin(self) -> Origin:
        return Origin(
            self.repo, self.clone_url, self.private, self.pr_number, self.login, self.comment_id
        )


class RetryLater(Exception):
    """The delivery cannot be decided yet (a push it depends on may still be on its way)."""

    def __init__(self, after_s: float, why: str) -> None:
        super().__init__(why)
        self.after_s = after_s


class NoCredentials(RuntimeError):
    """A delivery needs GitHub and the service has no credentials for it."""


class DeliveryHandler:
    """Handles the deliveries the webhook accepted; GitHubError propagates (the inbox retries)."""

    def __init__(
        self,
        *,
        db: Database,
        jobs: JobQueue,
        views: JobViews,
        github: GitHubClient | None,
        gate: Gate | None,
        backend_names: Mapping[str, str],
        default_backends: Sequence[str],
        kick_outbox: Callable[[], None],
        heads: PullHeads,
        operators: OperatorCatalog,
        selector: ChangeSelector | None = None,
        head_wait_s: float = HEAD_WAIT_S,
        settings_cache_s: float = 60.0,
        problems: InstallationProblems | None = None,
    ) -> None:
        self.db = db
        self.problems = problems
        self.selector = selector
        # The settings file, read for every command and push: a burst (a base moved, every
        # pull request rebased) reads it once. At a SHA it cannot change; at the default
        # branch a change shows within `settings_cache_s`.
        self._settings_read: TTLCache[tuple[str, str], ConfigReading] = TTLCache(
            max(settings_cache_s, 0.001)
        )
        self.jobs = jobs
        self.heads = heads
        self.operators = operators
        self.head_wait_s = head_wait_s
        self.views = views
        self._github = github
        self._gate = gate
        self.backend_names = backend_names
        self.default_backends = default_backends
        self.kick_outbox = kick_outbox

    @property
    def github(self) -> GitHubClient:
        if self._github is None:
            raise NoCredentials("no GitHub credentials: set ONDEMAND_GITHUB_TOKEN or an App")
        return self._github

    @property
    def gate(self) -> Gate:
        if self._gate is None:
            raise NoCredentials("no GitHub credentials: set ONDEMAND_GITHUB_TOKEN or an App")
        return self._gate

    def handle(
        self, delivery_id: str, event: str, payload: dict[str, Any], received_at: datetime
    ) -> str:
        """Process one delivery recorded at `received_at`; returns what was done."""
        if event == "issue_comment":
            return self.comment(CommentEvent.from_payload(delivery_id, payload), received_at)
        if event == "pull_request":
            return self.pull_request(PullRequestPayload.model_validate(payload))
        if event == "check_run":
            return self.check_run(CheckRunPayload.model_validate(payload), received_at)
        if event == "installation":
            return self.installation(InstallationPayload.model_validate(payload))
        return f"{event}: nothing to do"

    # -- permissions ----------------------------------------------------------------------

    def permission_missing(
        self, delivery_id: str, event: str, payload: dict[str, Any], missing: MissingPermission
    ) -> None:
        """Tell a command's pull request, once, that it waits for a permission GitHub refused
        (the inbox parks the delivery). A push or a Re-run press is told nothing, nor is
        anyone when the permission missing is the one to comment with."""
        if event != "issue_comment" or missing.permission == "issues":
            return
        ev = CommentEvent.from_payload(delivery_id, payload)
        permission = find(missing.permission, missing.level)
        cannot = permission.cannot if permission else f"use {missing.permission}"
        label = permission.label if permission else f"{missing.permission}: {missing.level}"
        app = self._github is not None and self._github.app_mode
        body = render_missing_permission(cannot, label, app=app)
        with self.db.writes() as session, session.begin():
            enqueue_reply(session, ev.repo, ev.pr_number, f"{delivery_id}:{missing.key}", body)
        self.kick_outbox()

    def installation(self, data: InstallationPayload) -> str:
        """An owner accepted the App's new permissions: what waited for a permission on a
        repository of that installation is tried again at once, with new tokens."""
        if data.action != "new_permissions_accepted":
            return f"installation {data.action}: nothing to do"
        if self._github is None:
            return "installation: no GitHub App credentials here: nothing to do"
        inst = data.installation
        account = inst.account.login if inst.account is not None else ""
        still: list[str] = []
        if self.problems is not None:
            info = InstallationInfo(inst.id, account, dict(inst.permissions))
            still = [p.permission.label for p in self.problems.record(info)]
        deliveries = LeasedRows(self.db, Delivery)
        items = LeasedRows(self.db, OutboxItem)
        waiting = [(d.id, _delivery_repo(d)) for d in deliveries.parked()]
        held = [(i.id, str(i.payload.get("repo") or "")) for i in items.parked()]
        covered = {
            repo
            for repo in {r for _, r in waiting + held if r}
            if self.github.installation_of(repo) == inst.id  # before its tokens are dropped
        }
        self.github.forget_installation(inst.id)
        released = (
            deliveries.release([i for i, repo in waiting if repo in covered]),
            items.release([i for i, repo in held if repo in covered]),
        )
        if released[1]:
            self.kick_outbox()
        lacks = f"; still lacks {', '.join(still)}" if still else ""
        return (
            f"installation {inst.id} on {account or '?'} accepted new permissions: "
            f"{released[0]} delivery(ies) and {released[1]} outbox item(s) tried again{lacks}"
        )

    # -- check_run ----------------------------------------------------------------------

    def check_run(self, data: CheckRunPayload, received_at: datetime) -> str:
        """The Re-run button of one of the App's check runs: the same job again, on the same
        commit, when the one who pressed it may start jobs. A job of that target and commit
        created since the press was received stands for it (this press processed again after a
        crash, or a command meanwhile), so a press runs the job once."""
        if data.action != "rerequested":
            return f"check_run {data.action}: nothing to do"
        repo = data.repository.full_name
        external = data.check_run.external_id or ""
        old = self.jobs.get_job(int(external)) if external.isdigit() else None
        if old is None or old.repo != repo or old.sha != data.check_run.head_sha:
            return "check run of no job of ours"
        presser = Commenter(data.sender.login, data.sender.type, None)
        if is_bot(presser):
            return "bot: ignored"
        decision = self.gate.decide(repo, presser)
        if not decision.allowed:
            return f"re-run not allowed: {decision.reason}"
        with self.db.reads() as session:
            since = [
                j
                for j in queries.target_jobs(session, repo, old.pr_number, old.op, old.backend)
                if j.sha == old.sha and j.created_at >= received_at
            ]
        if since:
            return f"re-run of job {old.id}: job {since[0].id} already stands for it"
        pull = self.github.pull(repo, old.pr_number)
        if pull.state != "open":
            return f"#{old.pr_number} is {pull.state}: nothing runs"
        job, new = self.jobs.create_job(
            NewJob(
                repo=repo,
                clone_url=old.clone_url,
                pr_number=old.pr_number,
                sha=old.sha,
                op=old.op,
                backend=old.backend,
                bench=old.bench,
                compare=old.compare,
                base_ref=pull.base_ref,
                base_sha=pull.base_sha,
                requested_by=data.sender.login,
                private=old.private,
                threshold=old.threshold,
                gate=old.gate,
            )
        )
        again = "" if new else " (it was still queued or running)"
        return f"re-run of job {old.id} by {data.sender.login}: job {job.id}{again}"

    # -- pull_request -------------------------------------------------------------------

    def pull_request(self, data: PullRequestPayload) -> str:
        repo = data.repository.full_name
        pr = data.pull_request
        head = pr.head.sha
        if data.action in HEAD_EVENTS:
            self.heads.record(repo, pr.number, head, pr.updated_at, event=data.action, seen=False)
        if data.action == "closed":
            jobs = self.jobs.cancel(repo, pr.number, "pull request closed")
            return f"closed: {len(jobs)} job(s) cancelled"
        done = f"{data.action}: head {head[:7]} recorded"
        if data.action == "synchronize":
            jobs = self.jobs.supersede(repo, pr.number, head)
            done = f"push to {head[:7]}: {len(jobs)} job(s) superseded or cancelled"
        if data.action in HEAD_EVENTS and self._github is not None:
            done += f"; {self._on_push(data)}"
        return done

    def _on_push(self, data: PullRequestPayload) -> str:
        """Run the changed operators of a pull request whose author may start jobs, when the
        repository opts in (`changes.on_push`, read from its default branch): the author's
        push approves its own head. Anyone else's pull request runs nothing and is told
        nothing, whatever the file says; a maintainer's command still runs it."""
        repo = data.repository.full_name
        pr = data.pull_request
        if pr.user is None:
            return "no author: nothing runs"
        settings = self._read_settings(repo, data.repository.default_branch)
        wanted = settings.config.changes.on_push
        known = (self.backend_names.get(b) for b in wanted)
        backends = tuple(dict.fromkeys(b for b in known if b))
        if not backends:
            return "no automatic runs configured"
        author = Commenter(pr.user.login, pr.user.type, None)
        if is_bot(author) or not self.gate.decide(repo, author).allowed:
            return f"author {pr.user.login} may not start jobs: nothing runs"
        pull = self.github.pull(repo, pr.number)
        if pull.state != "open" or pull.head_sha != pr.head.sha:
            return f"head moved on to {pull.head_sha[:7]}: its own event runs it"
        base = self._settings(repo, pull)  # the gate's thresholds, as for a command
        origin = Origin(
            repo, pull.clone_url or data.repository.clone_url, data.repository.private,
            pr.number, pr.user.login,
        )  # fmt: skip
        cmd = ChangedCommand(backends=backends)
        # The pusher may not be the author (a maintainer pushing to the branch), and a note
        # that mentions someone pings them on every edit: it names neither.
        who = "A push to this pull request"
        if data.action != "synchronize":
            who = f"This pull request, {data.action}"
        with self.db.reads() as session:  # once a note says what ran, it says when nothing does
            quiet = not has_note(session, repo, pr.number, PUSH_NOTE)
        text, outcome = self._run_changed(origin, cmd, pull, pr.head.sha, base, who, quiet=quiet)
        if text:
            with self.db.writes() as session, session.begin():
                enqueue_note(session, repo, pr.number, PUSH_NOTE, pr.head.sha, text)
            self.kick_outbox()
        return outcome

    def _read_settings(self, repo: str, ref: str) -> ConfigReading:
        """The settings file at `ref` (a SHA or a branch), from GitHub or read lately."""
        reading = self._settings_read.get((repo, ref))
        if reading is None:
            try:
                reading = parse_repo_config(self.github.file_at(repo, CONFIG_PATH, ref) or "")
            except FileTooLarge as exc:
                reading = too_large_reading(exc.size)
            self._settings_read.set((repo, ref), reading)
        return reading

    # -- issue_comment ------------------------------------------------------------------

    def comment(self, ev: CommentEvent, received_at: datetime) -> str:
        commands = parse_comment(ev.body, self.backend_names, self.default_backends)
        if not commands:
            return "no command"
        commenter = Commenter(ev.login, ev.sender_type, None)
        if is_bot(commenter):
            return "bot: ignored"
        # Seen, before anything is asked of GitHub: the 👀 goes out with the first call that
        # can, the answer follows whenever GitHub allows (a refusal is an answer too).
        self._react(ev, ACK_REACTION)
        only_help = all(isinstance(c, HelpCommand | CommandError) for c in commands)
        if not only_help:
            decision = self.gate.decide(ev.repo, commenter)
            if not decision.allowed:
                self._reply(ev, render_not_allowed(ev.login, decision.reason))
                return f"not allowed: {decision.reason}"
        pull: PullInfo | None = None
        approval: Approval | None = None
        settings: ConfigReading | None = None
        replies: list[str] = []
        if any(isinstance(c, TestCommand | RetestCommand | ChangedCommand) for c in commands):
            pull = self.github.pull(ev.repo, ev.pr_number)
            approval = self._approval(ev, pull, received_at)
            settings = self._settings(ev.repo, pull)
            problems = render_problems(settings.problems, CONFIG_PATH, pull.base_ref)
            if problems:
                replies.append(problems)
        outcomes: list[str] = []
        for command in commands:
            text, outcome = self._one(ev, command, pull, approval, settings)
            outcomes.append(outcome)
            if text:
                replies.append(text)
        if replies:
            self._reply(ev, join_replies(replies))
        return "; ".join(outcomes)

    def _approval(self, ev: CommentEvent, pull: PullInfo, received_at: datetime) -> Approval:
        """What the comment approves; while it approves nothing and is young, wait a little
        for a `pull_request` event that may still be on its way (GitHub does not promise
        order), then answer."""
        changes = self.heads.changes(ev.repo, ev.pr_number)
        approval = approved_head(changes, pull.head_sha, ev.written_at)
        young = (utcnow() - received_at).total_seconds() < self.head_wait_s
        if approval.sha is None and young and pull.state == "open":
            retry = min(HEAD_RETRY_S, self.head_wait_s / 4)
            raise RetryLater(retry, f"waiting for the push of {pull.head_sha[:7]}")
        if not self.heads.seen_before(ev.repo, ev.pr_number, pull.head_sha):
            # GitHub's times are whole seconds: a read in the second of a push ties with it,
            # and a push wins a tie (it was there to be read).
            read_at = utcnow().replace(microsecond=0)
            self.heads.record(
                ev.repo, ev.pr_number, pull.head_sha, read_at, event="read", seen=True
            )
        return approval

    def _settings(self, repo: str, pull: PullInfo) -> ConfigReading:
        """The repository's settings file as its base has it (never the pull request's head:
        a pull request cannot loosen its own gate); the defaults where there is none."""
        return self._read_settings(repo, pull.base_sha)

    def _one(
        self,
        ev: CommentEvent,
        command: Command,
        pull: PullInfo | None,
        approval: Approval | None,
        settings: ConfigReading | None = None,
    ) -> tuple[str, str]:
        if isinstance(command, CommandError):
            return render_command_error(command, self.views.backends()), "command error"
        if isinstance(command, HelpCommand):
            known = sorted(self.operators.of_repo(ev.repo))
            return render_help(self.views.backends(), self.default_backends, known), "help"
        if isinstance(command, CancelCommand):
            return self._cancel(ev, command)
        if isinstance(command, AcceptCommand):
            return self._accept(ev, command)
        assert pull is not None and approval is not None  # read for every test and retest
        assert settings is not None
        if pull.state != "open":
            return f"#{ev.pr_number} is {pull.state}: nothing runs.", "pull request not open"
        if approval.sha is None:
            return render_not_approved(command, approval.head, approval.why), "head moved"
        if isinstance(command, TestCommand):
            return self._test(ev, command, pull, approval.sha, settings)
        if isinstance(command, ChangedCommand):
            who = f"`{format_command(command)}`"
            return self._run_changed(ev.origin, command, pull, approval.sha, settings, who)
        if isinstance(command, RetestCommand):
            return self._retest(ev, pull, approval.sha, settings)
        return "", "unknown command"

    def _queue(
        self,
        origin: Origin,
        pull: PullInfo,
        sha: str,
        target: Target,
        cmd: TestCommand | ChangedCommand,
        settings: ConfigReading,
    ) -> tuple[Job, bool]:
        """The job of `target`, created now or already queued or running; True when it is
        this request's: new, or made by this very comment processed again."""
        policy = settings.config.for_op(target.op)
        job, new = self.jobs.create_job(
            NewJob(
                repo=origin.repo,
                clone_url=pull.clone_url or origin.clone_url,
                pr_number=origin.pr_number,
                sha=sha,
                op=target.op,
                backend=target.backend,
                bench=cmd.bench,
                compare=cmd.compare,
                base_ref=pull.base_ref,
                base_sha=pull.base_sha,
                requested_by=origin.login,
                command_comment_id=origin.comment_id,
                private=origin.private,
                threshold=policy.threshold,
                gate=policy.gate,
            )
        )
        again = origin.comment_id is not None and job.command_comment_id == origin.comment_id
        return job, new or again

    def _run_changed(
        self,
        origin: Origin,
        cmd: ChangedCommand,
        pull: PullInfo,
        sha: str,
        settings: ConfigReading,
        who: str,
        quiet: bool = False,
    ) -> tuple[str, str]:
        """Select the operators the pull request changes at `sha` and queue one job per
        (operator, backend); the reply says what was chosen and why. `quiet` (a push whose
        pull request has no note yet): say nothing when no operator changed."""
        if self.selector is None:
            raise NoCredentials("no GitHub credentials: set ONDEMAND_GITHUB_TOKEN or an App")
        changes = settings.config.changes
        try:
            report = self.selector.select(
                origin.repo, pull, sha, cmd.backends, changes.selection_rules()
            )
        except GitError as exc:
            log.warning("selection of %s#%s failed: %s", origin.repo, origin.pr_number, exc)
            return render_selection_failed(who, str(exc)), "selection failed"
        if report.capped:
            text = render_capped(who, report.total, FILES_CAP, cmd.backends)
            return text, f"selection: {report.total} files, past GitHub's list"
        chosen = _chosen(report)
        if not chosen.operators and quiet:
            return "", "selection: no operator changed"
        over = len(chosen.operators) > changes.limit and not cmd.everything
        queued: list[JobView] = []
        existing: list[JobView] = []
        if not over:
            for op in chosen.operators:
                for backend in cmd.backends:
                    if op not in report.by_backend.get(backend, ()):
                        continue  # this backend's tests do not name it
                    job, mine = self._queue(origin, pull, sha, Target(op, backend), cmd, settings)
                    (queued if mine else existing).append(self._view(job))
        reply = SelectionReply(
            who=who,
            sha=sha,
            backends=cmd.backends,
            operators=chosen.operators,
            unmatched=chosen.unmatched,
            files=report.listed,
            limit=changes.limit,
            over_limit=over,
            queued=queued,
            existing=existing,
        )
        n_ops = len(chosen.operators)
        outcome = f"selection: {n_ops} operator(s), {len(queued)} job(s) queued"
        if over:
            outcome = f"selection: {n_ops} operator(s), past the limit of {changes.limit}"
        return render_selection(reply), outcome

    def _unknown_operator(self, repo: str, sha: str, target: Target, new_op: bool) -> str | None:
        """The answer for an operator the service knows is not there, or None to queue it:
        certain when a runner reported this very commit's operators; otherwise only for a near
        miss of a known operator (a typo), unless the command says the operator is new."""
        exact = self.operators.at(repo, sha)
        if exact is not None:
            if target.op in exact:
                return None
            close = difflib.get_close_matches(target.op, sorted(exact), n=3, cutoff=0.6)
            return render_unknown_operator(target.op, target.backend, close, sha)
        known = self.operators.of_repo(repo)
        if new_op or not known or target.op in known:
            return None
        close = difflib.get_close_matches(target.op, sorted(known), n=3, cutoff=0.8)
        if not close:
            return None  # perhaps new in this pull request: the runner will tell
        return render_unknown_operator(target.op, target.backend, close, None)

    def _test(
        self, ev: CommentEvent, cmd: TestCommand, pull: PullInfo, sha: str, settings: ConfigReading
    ) -> tuple[str, str]:
        answers: list[str] = []
        created = 0
        for target in cmd.targets:
            unknown = self._unknown_operator(ev.repo, sha, target, cmd.new_op)
            if unknown is not None:
                answers.append(unknown)
                continue
            job, mine = self._queue(ev.origin, pull, sha, target, cmd, settings)
            if mine:
                created += 1
                continue
            answers.append(render_duplicate(target, self._view(job)))
        return "\n\n".join(answers), f"{created} job(s) queued, {len(answers)} not queued"

    def _retest(
        self, ev: CommentEvent, pull: PullInfo, sha: str, settings: ConfigReading
    ) -> tuple[str, str]:
        again: list[Job] = []
        for last in self.jobs.latest_per_target(ev.repo, ev.pr_number):
            if last.status not in RETEST_STATUSES:
                continue
            cmd = TestCommand((Target(last.op, last.backend),), last.bench, last.compare)
            job, _ = self._queue(ev.origin, pull, sha, cmd.targets[0], cmd, settings)
            again.append(job)
        views = [self._view(job) for job in again]
        return render_retest_summary(views), f"retest: {len(again)} job(s)"

    def _cancel(self, ev: CommentEvent, cmd: CancelCommand) -> tuple[str, str]:
        def match(job: Job) -> bool:
            return not cmd.selectors or any(_selects(s, job) for s in cmd.selectors)

        jobs = self.jobs.cancel(ev.repo, ev.pr_number, f"cancelled by @{ev.login}", match=match)
        views = [self._view(job) for job in jobs]
        return render_cancel_summary(views, cmd), f"cancelled {len(jobs)} job(s)"

    def _accept(self, ev: CommentEvent, cmd: AcceptCommand) -> tuple[str, str]:
        """A maintainer accepts the regressions that failed the gate of this PR's latest jobs
        (those the selectors match): their comments and statuses then say so."""
        failed = [
            job
            for job in self.jobs.latest_per_target(ev.repo, ev.pr_number)
            if (not cmd.selectors or any(_selects(s, job) for s in cmd.selectors))
            and gate_failed(self._view(job))
        ]
        accepted = self.jobs.accept_regression([job.id for job in failed], ev.login)
        views = [self._view(job) for job in accepted]
        return render_accept_summary(views, cmd, ev.login), f"accepted {len(accepted)} job(s)"

    def _view(self, job: Job) -> JobView:
        with self.db.reads() as session:
            fresh = session.get(Job, job.id) or job
            return self.views.view(session, fresh)

    def _react(self, ev: CommentEvent, content: str) -> None:
        with self.db.writes() as session, session.begin():
            enqueue_reaction(session, ev.repo, ev.comment_id, content)
        self.kick_outbox()

    def _reply(self, ev: CommentEvent, body: str) -> None:
        with self.db.writes() as session, session.begin():
            enqueue_reply(session, ev.repo, ev.pr_number, ev.delivery_id, body)
        self.kick_outbox()


def _delivery_repo(delivery: Delivery) -> str:
    """`owner/name` of a delivery's repository ("" when its payload has none)."""
    repository = (delivery.payload or {}).get("repository")
    return str(repository.get("full_name") or "") if isinstance(repository, dict) else ""


def _chosen(report: ChangeReport) -> Selection:
    assert report.selection is not None  # a capped report is answered before
    return report.selection


def _selects(selector: Selector, job: Job) -> bool:
    return selector.op == job.op and selector.backend in (None, job.backend)
