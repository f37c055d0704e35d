"""`merge_group` checks_requested: a merge queue wants the required checks on its group's head
(the pull request merged onto the base's tip, with the groups ahead of it). What runs there is
the repository's choice (`merge_queue` in its settings, read at the group's base): with `run:
changed`, the operators the group's pull request changes, on the configured backends, tested
at the group's head and compared with its base; otherwise nothing. Either way the head gets its
`ondemand` check, so a queue that requires it never stalls: the jobs' verdict, or success at
once when nothing runs. A group destroyed before its jobs ended (dequeued, or invalidated by a
change ahead of it) cancels those still queued or running: nothing will merge that code."""

from __future__ import annotations

import dataclasses
import re
from datetime import datetime
from typing import Any

from service.receive.context import Origin, Services
from service.receive.enqueue import ChangedRequest, run_changed
from service.receive.payloads import MergeGroupPayload
from workflows.repo_config import CONFIG_PATH

# GitHub names a group's branch `gh-readonly-queue/<base>/pr-<number>-<base sha>`.
_GROUP_PULL = re.compile(r"/pr-(\d+)-[0-9a-f]{7,64}$")
QUEUE_LOGIN = "merge-queue"  # who a group's jobs were requested by


def group_pull_number(head_ref: str) -> int | None:
    """The pull request a merge group's head ref was made for, or None."""
    found = _GROUP_PULL.search(head_ref)
    return int(found.group(1)) if found else None


class MergeGroupHandler:
    def __init__(self, services: Services) -> None:
        self.services = services

    def handle(self, _delivery_id: str, payload: dict[str, Any], _received_at: datetime) -> str:
        data = MergeGroupPayload.model_validate(payload)
        if data.action == "destroyed":
            return self._destroyed(data)
        if data.action != "checks_requested":
            return f"merge_group {data.action}: nothing to do"
        services, group = self.services, data.merge_group
        repo = data.repository.full_name
        settings = services.repo_settings(repo, group.base_sha)
        queue = settings.config.merge_queue
        known = (services.backend_names.get(b) for b in queue.backends)
        backends = tuple(dict.fromkeys(b for b in known if b))
        if queue.run == "none" or not backends:
            why = f"the merge queue runs nothing (`merge_queue` in {CONFIG_PATH})"
            services.head_idle(repo, group.head_sha, why)
            return f"merge group {group.head_sha[:7]}: nothing configured to run"
        number = group_pull_number(group.head_ref)
        if number is None:
            return f"merge group {group.head_sha[:7]}: no pull request in {group.head_ref!r}"
        pull = services.github.pull(repo, number)
        # The group's head and base stand for the pull request's: its files say what changed,
        # the group's tree what is tested, and the group's base what it is compared with.
        at_group = dataclasses.replace(
            pull,
            head_sha=group.head_sha,
            base_sha=group.base_sha,
            base_ref=group.base_ref.removeprefix("refs/heads/"),
        )
        clone_url = pull.clone_url or data.repository.clone_url
        origin = Origin(repo, clone_url, data.repository.private, number, QUEUE_LOGIN)
        _, outcome = run_changed(
            services,
            origin,
            ChangedRequest(backends),
            at_group,
            group.head_sha,
            settings,
            "The merge queue",
            quiet=True,
        )
        return f"merge group {group.head_sha[:7]} of #{number}: {outcome}"

    def _destroyed(self, data: MergeGroupPayload) -> str:
        group = data.merge_group
        number = group_pull_number(group.head_ref)
        if number is None:
            return f"merge group {group.head_sha[:7]} destroyed: no pull request in its ref"
        why = f"merge group {group.head_sha[:7]} {data.reason or 'destroyed'}"
        jobs = self.services.jobs.cancel(
            data.repository.full_name, number, why, match=lambda job: job.sha == group.head_sha
        )
        return f"{why}: {len(jobs)} job(s) cancelled"
