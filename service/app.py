"""The composition root: `build(settings)` makes every part of the service in dependency
order, each given what it uses through its constructor; `create_app` serves them with FastAPI
and runs the background workers for the app's lifetime."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as SQLAlchemyTimeoutError

from ondemand.git import Mirrors
from ondemand.retry import RetryPolicy
from service.changes.selector import ChangeSelector
from service.db.engine import Database
from service.db.migrate import upgrade
from service.github.client import GitHubClient
from service.github.installations import InstallationProblems
from service.history.issues_outbox import IssueSender
from service.history.record import History
from service.links import Links
from service.publish.job_views import JobViews
from service.publish.notices import Notices
from service.publish.outbox import OutboxWorker
from service.queue.jobs import JobQueue
from service.queue.listeners import JobListeners
from service.queue.logs import JobLogs
from service.queue.operators import OperatorCatalog
from service.queue.reaper import LeaseReaper
from service.queue.retention import Pruner, Retention
from service.queue.runners import RunnerRegistry
from service.queue.wakeup import ANY, PgListener, Wakeup
from service.receive.commands import REGISTRY
from service.receive.context import Services
from service.receive.events.check_run import CheckRunHandler
from service.receive.events.comment import CommentHandler
from service.receive.events.installation import InstallationHandler
from service.receive.events.merge_group import MergeGroupHandler
from service.receive.events.pull_request import PullRequestHandler
from service.receive.events.push import PushHandler
from service.receive.gate import Gate
from service.receive.handle import DeliveryHandler
from service.receive.heads import PullHeads
from service.receive.inbox import Inbox
from service.receive.main_runs import MainRuns
from service.receive.nightly import Nightly
from service.receive.recorder import DeliveryRecorder
from service.receive.trust import TrustPolicy
from service.receive.webhook import webhook_router
from service.settings import Settings
from service.web.headers import SecurityHeaders
from service.web.metrics import Metrics, WebhookMetrics
from service.web.pages import pages_router
from service.web.runner_api import runner_api_router
from service.web.unavailable import database_unavailable
from workflows.spec import WorkflowSpec, backend_names, load_workflows

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Service:
    """Every part of a running service, built once by `build`."""

    settings: Settings
    db: Database
    workflows: dict[str, WorkflowSpec]
    backend_names: dict[str, str]
    wakeup: Wakeup
    runners: RunnerRegistry
    views: JobViews
    links: Links
    notices: Notices
    github: GitHubClient | None
    outbox: OutboxWorker
    jobs: JobQueue
    logs: JobLogs
    handler: DeliveryHandler
    recorder: DeliveryRecorder
    inbox: Inbox
    reaper: LeaseReaper
    pruner: Pruner
    nightly: Nightly  # the default branches' nightly runs
    stopping: threading.Event
    problems: InstallationProblems  # what the App's installations lack, as last found

    def begin_shutdown(self) -> None:
        """Stop the workers' rounds and answer every waiting claim now."""
        self.stopping.set()
        self.wakeup.notify(ANY)


def build(settings: Settings, github: GitHubClient | None = None) -> Service:
    """Open (and migrate) the database and make every part, in dependency order: the database
    and the queue's repositories, what the service says to GitHub (`_outbox`), the queue, the
    receiving side (`_receiving`), then the workers."""
    workflows, names = _workflows(settings)
    db = Database.connect(settings.database_url)
    upgrade(db.engine)
    github = github or GitHubClient.from_settings(settings)
    stopping = threading.Event()
    policy = RetryPolicy(base_s=1.0, cap_s=settings.retry_max_backoff_s)
    wakeup = Wakeup()
    runners = RunnerRegistry(db, online_seconds=settings.runner_online_seconds)
    links = Links(settings.public_url, settings.link_keys())
    views = JobViews(links, runners, workflows)
    notices, recorder, outbox = _outbox(settings, db, github, views, policy, stopping)
    jobs = JobQueue(
        db,
        wakeup,
        lease_seconds=settings.lease_seconds,
        listener=JobListeners((notices, History(db, links))),
        on_commit=outbox.kick,
    )
    receiving = _receiving(settings, db, github, jobs, views, workflows, names, outbox, notices)
    return Service(
        settings=settings,
        db=db,
        workflows=workflows,
        backend_names=names,
        wakeup=wakeup,
        runners=runners,
        views=views,
        links=links,
        notices=notices,
        github=github,
        outbox=outbox,
        jobs=jobs,
        logs=JobLogs(db, settings.log_max_bytes),
        handler=receiving.handler,
        recorder=recorder,
        inbox=Inbox(db, receiving.handler, policy, stopping, busy=recorder.busy),
        reaper=LeaseReaper(
            jobs, stopping, runners=runners, forget_days=settings.runner_forget_days
        ),
        pruner=Pruner(db, retention(settings), stopping, busy=recorder.busy),
        nightly=Nightly(receiving.services, receiving.main_runs, stopping),
        stopping=stopping,
        problems=receiving.problems,
    )


def _workflows(settings: Settings) -> tuple[dict[str, WorkflowSpec], dict[str, str]]:
    """The workflows and the names their backends answer to; ValueError when a default
    backend is none of them."""
    workflows = load_workflows(settings.workflows_dir)
    names = backend_names(workflows)
    unknown = [b for b in settings.default_backends if b not in names]
    if unknown:
        raise ValueError(
            f"ONDEMAND_DEFAULT_BACKENDS: unknown backend(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(workflows))}"
        )
    return workflows, names


def _outbox(
    settings: Settings,
    db: Database,
    github: GitHubClient | None,
    views: JobViews,
    policy: RetryPolicy,
    stopping: threading.Event,
) -> tuple[Notices, DeliveryRecorder, OutboxWorker]:
    """What the service says to GitHub: the notices that compose it, the webhook's recorder
    (whose backlog the outbox yields to) and the outbox worker that sends it."""
    checks = github is not None and github.app_mode
    notices = Notices(db, views, settings.progress_edit_interval_s, checks=checks)
    recorder = DeliveryRecorder(db)
    outbox = OutboxWorker(
        db,
        github,
        notices.comment,
        policy,
        stopping,
        compose_check=notices.check_run,
        compose_head=notices.head_check,
        busy=recorder.busy,
        reserve=settings.github_budget_reserve,
        senders=IssueSender(db).senders(),  # the default branch's regression issues
    )
    return notices, recorder, outbox


@dataclass(frozen=True)
class _Receiving:
    """The receiving side, as `build` hands it on."""

    services: Services  # what every handler is given
    handler: DeliveryHandler
    problems: InstallationProblems  # what the App's installations lack, as last found
    main_runs: MainRuns  # the default branches' own runs (a push, a night)


def _receiving(
    settings: Settings,
    db: Database,
    github: GitHubClient | None,
    jobs: JobQueue,
    views: JobViews,
    workflows: dict[str, WorkflowSpec],
    names: dict[str, str],
    outbox: OutboxWorker,
    notices: Notices,
) -> _Receiving:
    """Who may start jobs, what every handler is given, and the handler of each event."""
    trust = TrustPolicy(
        allowed_users=frozenset(settings.allowed_users),
        allowed_teams=frozenset(settings.allowed_teams),
    )
    gate = Gate(github, trust, settings.permission_cache_seconds) if github else None
    problems = InstallationProblems(teams=bool(settings.allowed_teams))
    receiving = Services(
        db=db,
        jobs=jobs,
        views=views,
        github_client=github,
        gate_=gate,
        backend_names=names,
        default_backends=settings.default_backends,
        kick_outbox=outbox.kick,
        heads=PullHeads(db),
        operators=OperatorCatalog(db),
        selector=(
            ChangeSelector(github, Mirrors(settings.changes_dir), workflows) if github else None
        ),
        head_wait_s=settings.head_wait_s,
        settings_cache_s=settings.permission_cache_seconds,
        problems=problems,
        mark_idle=notices.head_idle,
    )
    main_runs = MainRuns(receiving, settings.nightly_hour_utc)
    handler = DeliveryHandler(
        {
            "issue_comment": CommentHandler(receiving, REGISTRY),
            "pull_request": PullRequestHandler(receiving),
            "check_run": CheckRunHandler(receiving),
            "installation": InstallationHandler(receiving),
            "merge_group": MergeGroupHandler(receiving),
            "push": PushHandler(receiving, main_runs),
        }
    )
    return _Receiving(receiving, handler, problems, main_runs)


def retention(settings: Settings) -> Retention:
    """What the settings keep, for the pruner and the pages."""
    return Retention(
        job_days=settings.retention_days,
        log_days=settings.log_retention_days,
        delivery_days=settings.delivery_retention_days,
    )


def create_app(settings: Settings | None = None, *, github: GitHubClient | None = None) -> FastAPI:
    """The service. Its lifespan runs the inbox, the outbox, the lease reaper, the pruner, the
    nightly schedule and (on PostgreSQL) the LISTEN thread."""
    settings = settings or Settings()
    service = build(settings, github)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        listener: PgListener | None = None
        if service.db.postgres:
            conninfo = make_url(settings.database_url).set(drivername="postgresql")
            listener = PgListener(conninfo.render_as_string(hide_password=False), service.wakeup)
            listener.start()
        workers = (service.reaper, service.outbox, service.inbox, service.pruner, service.nightly)
        if settings.process_workers and not service.db.postgres:
            # One process serves a SQLite database: what it finds locked, its last life left.
            for rows in (service.inbox.deliveries, service.outbox.items):
                if released := rows.release_all():
                    log.warning(
                        "%d %s row(s) left locked by a crash: taken up now",
                        released,
                        rows.model.__tablename__,
                    )
        if settings.process_workers:
            for worker in workers:
                worker.start()
            if service.github is not None and service.github.app_mode:
                service.problems.check_in_background(service.github)  # never waited for
        try:
            yield
        finally:
            service.begin_shutdown()
            service.recorder.stop()
            if settings.process_workers:
                for worker in reversed(workers):
                    worker.join()
            if listener is not None:
                listener.stop()
            service.db.dispose()

    app = FastAPI(title="ondemand", lifespan=lifespan)
    app.add_middleware(SecurityHeaders)
    budgets = service.github.budgets if service.github is not None else None
    metrics = Metrics(
        service.db, service.runners, service.workflows, service.pruner.totals, budgets
    )
    app.add_middleware(WebhookMetrics, metrics=metrics)
    for error in (DBAPIError, SQLAlchemyTimeoutError):
        app.add_exception_handler(error, database_unavailable(service.db.outages))
    app.state.service = service
    app.include_router(
        runner_api_router(
            settings=settings,
            jobs=service.jobs,
            runners=service.runners,
            logs=service.logs,
            wakeup=service.wakeup,
            backend_names=service.backend_names,
            stopping=service.stopping,
            read_token=service.github.read_token if service.github else lambda _repo: None,
        )
    )
    app.include_router(webhook_router(settings, service.recorder, service.inbox.kick))
    app.include_router(
        pages_router(
            db=service.db,
            jobs=service.jobs,
            runners=service.runners,
            logs=service.logs,
            views=service.views,
            links=service.links,
            workflows=service.workflows,
            github_html_url=settings.html_url(),
            permission_problems=service.problems.all,
            retention=service.pruner.retention,
        )
    )
    app.include_router(metrics.router())
    return app
