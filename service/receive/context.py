"""What every event handler and command handler is given: the service's parts (`Services`),
who asked on which pull request (`Origin`, `CommentEvent`), and the two ways a delivery ends
without an answer yet (`RetryLater`, `NoCredentials`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from report.views import JobView
from service.changes.selector import ChangeSelector
from service.db.engine import Database
from service.db.models import Job
from service.github.client import GitHubClient
from service.github.errors import FileTooLarge
from service.github.installations import InstallationProblems
from service.github.reads import PullInfo
from service.publish.job_views import JobViews
from service.publish.notices import enqueue_reaction, enqueue_reply
from service.queue.jobs import JobQueue
from service.queue.operators import OperatorCatalog
from service.receive.approval import Approval
from service.receive.gate import Gate
from service.receive.heads import PullHeads
from service.receive.payloads import CommentPayload
from service.receive.trust import TTLCache
from workflows.repo_config import CONFIG_PATH, ConfigReading, parse_repo_config, too_large_reading

HEAD_WAIT_S = 10.0  # how long a command that approves nothing waits for a late push event


class RetryLater(Exception):
    """The delivery cannot be decided yet (a push it depends on may still be on its way)."""

    def __init__(self, after_s: float, why: str) -> None:
        super().__init__(why)
        self.after_s = after_s


class NoCredentials(RuntimeError):
    """A delivery needs GitHub and the service has no credentials for it."""


NO_CREDENTIALS = "no GitHub credentials: set ONDEMAND_GITHUB_TOKEN or an App"


@dataclass
class Services:
    """The parts a handler uses, made once by the composition root."""

    db: Database
    jobs: JobQueue
    views: JobViews
    github_client: GitHubClient | None
    gate_: Gate | None
    backend_names: Mapping[str, str]
    default_backends: Sequence[str]
    kick_outbox: Callable[[], None]
    heads: PullHeads
    operators: OperatorCatalog
    selector: ChangeSelector | None = None
    head_wait_s: float = HEAD_WAIT_S
    settings_cache_s: float = 60.0
    problems: InstallationProblems | None = None
    # Marks a head where nothing needed testing (its `ondemand` check then says success).
    mark_idle: Callable[[Session, str, str, str], None] | None = None
    # The settings file, read for every command and push: a burst (a base moved, every pull
    # request rebased) reads it once. At a SHA it cannot change; at a branch a change shows
    # within `settings_cache_s`.
    _settings_read: TTLCache[tuple[str, str], ConfigReading] = field(init=False)

    def __post_init__(self) -> None:
        self._settings_read = TTLCache(max(self.settings_cache_s, 0.001))

    @property
    def github(self) -> GitHubClient:
        if self.github_client is None:
            raise NoCredentials(NO_CREDENTIALS)
        return self.github_client

    @property
    def gate(self) -> Gate:
        if self.gate_ is None:
            raise NoCredentials(NO_CREDENTIALS)
        return self.gate_

    def repo_settings(self, repo: str, ref: str) -> ConfigReading:
        """The settings file at `ref` (a SHA or a branch), from GitHub or read lately; the
        defaults where there is none."""
        reading = self._settings_read.get((repo, ref))
        if reading is None:
            try:
                reading = parse_repo_config(self.github.file_at(repo, CONFIG_PATH, ref) or "")
            except FileTooLarge as exc:
                reading = too_large_reading(exc.size)
            self._settings_read.set((repo, ref), reading)
        return reading

    def view(self, job: Job) -> JobView:
        """The job as the replies show it, read fresh."""
        with self.db.reads() as session:
            fresh = session.get(Job, job.id) or job
            return self.views.view(session, fresh)

    def reply(self, repo: str, pr_number: int, tag: str, body: str) -> None:
        """A reply comment, once for `tag` (e.g. the delivery id)."""
        with self.db.writes() as session, session.begin():
            enqueue_reply(session, repo, pr_number, tag, body)
        self.kick_outbox()

    def head_idle(self, repo: str, sha: str, why: str) -> None:
        """Nothing needed testing at `sha`, for `why`."""
        if self.mark_idle is None:
            return
        with self.db.writes() as session, session.begin():
            self.mark_idle(session, repo, sha, why)
        self.kick_outbox()

    def react(self, repo: str, comment_id: int, content: str) -> None:
        with self.db.writes() as session, session.begin():
            enqueue_reaction(session, repo, comment_id, content)
        self.kick_outbox()


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


@dataclass(frozen=True)
class CommandContext:
    """What one command of a comment is handled with. `pull`, `approval` and `settings` are
    read when some command of the comment needs them (its `Needs.pull`); the comment handler
    has already answered a closed pull request or a head that moved for such commands."""

    services: Services
    event: CommentEvent
    pull: PullInfo | None = None
    approval: Approval | None = None
    settings: ConfigReading | None = None
    # The help table's rows from the registry, the named command's last.
    help_rows: Callable[[str], list[tuple[str, str]]] = lambda _last: []

    def loaded(self) -> tuple[PullInfo, str, ConfigReading]:
        """The pull request, the approved head and the settings, for a command that needs
        them."""
        assert self.pull is not None and self.approval is not None and self.settings is not None
        assert self.approval.sha is not None
        return self.pull, self.approval.sha, self.settings
