"""`check_run` rerequested: the Re-run button of one of the App's check runs runs the same job
again, on the same commit, when the one who pressed it may start jobs (a default-branch job's
against the same commit it was compared with; its history keeps the first result of a link)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from service.db.models import NO_PULL
from service.queue import queries
from service.queue.jobs import NewJob
from service.receive.context import Services
from service.receive.enqueue import Run
from service.receive.payloads import CheckRunPayload
from service.receive.trust import Commenter, is_bot


class CheckRunHandler:
    def __init__(self, services: Services) -> None:
        self.services = services

    def handle(self, _delivery_id: str, payload: dict[str, Any], received_at: datetime) -> str:
        """A job of that target and commit created since the press was received stands for
        it (this press processed again after a crash, or a command meanwhile), so a press
        runs the job once."""
        data = CheckRunPayload.model_validate(payload)
        if data.action != "rerequested":
            return f"check_run {data.action}: nothing to do"
        services = self.services
        repo = data.repository.full_name
        external = data.check_run.external_id or ""
        old = services.jobs.get_job(int(external)) if external.isdigit() else None
        if old is None or old.repo != repo or old.sha != data.check_run.head_sha:
            return "check run of no job of ours"
        presser = Commenter(data.sender.login, data.sender.type, None)
        if is_bot(presser):
            return "bot: ignored"
        decision = services.gate.decide(repo, presser)
        if not decision.allowed:
            return f"re-run not allowed: {decision.reason}"
        with services.db.reads() as session:
            since = [
                j
                for j in queries.target_jobs(session, repo, old.pr_number, old.op, old.backend)
                if j.sha == old.sha and j.created_at >= received_at
            ]
        if since:
            return f"re-run of job {old.id}: job {since[0].id} already stands for it"
        if old.pr_number != NO_PULL:
            pull = services.github.pull(repo, old.pr_number)
            if pull.state != "open":
                return f"#{old.pr_number} is {pull.state}: nothing runs"
        # The default branch's job: the same base; a pull request's: as `/retest` runs it.
        if old.pr_number == NO_PULL:
            base_ref, base_sha = old.base_ref, old.base_sha
        else:
            base_ref, base_sha = Run.as_ran(old).against or (pull.base_ref, pull.base_sha)
        job, new = services.jobs.create_job(
            NewJob(
                repo=repo,
                clone_url=old.clone_url,
                pr_number=old.pr_number,
                sha=old.sha,
                op=old.op,
                backend=old.backend,
                bench=old.bench,
                compare=old.compare,
                exact_base=old.exact_base,
                profile=old.profile,
                base_ref=base_ref,
                base_sha=base_sha,
                requested_by=data.sender.login,
                private=old.private,
                threshold=old.threshold,
                gate=old.gate,
                trigger=old.trigger,
                main_run_id=old.main_run_id,
            )
        )
        again = "" if new else " (it was still queued or running)"
        return f"re-run of job {old.id} by {data.sender.login}: job {job.id}{again}"
