"""`push` to the default branch: where the repository opts in (`main.on_push` in the settings
at the pushed commit), a run of the default branch's own, with no pull request: the operators
the push changed (`changed`, before..after) or every operator (`all`), on the configured
backends, each compared with the last default-branch commit that ran it. The pull request the
push merged, if any, is looked up (GitHub's `commits/{sha}/pulls`) so the alerts can speak on
it, and told once when the settings file has problems. Every push also keeps the repository's
nightly schedule as its settings say."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from service.receive.context import Services
from service.receive.main_runs import ZERO_SHA, MainRequest, MainRuns
from service.receive.payloads import PushPayload
from service.render.config_replies import render_problems
from workflows.repo_config import CONFIG_PATH


class PushHandler:
    def __init__(self, services: Services, runs: MainRuns) -> None:
        self.services = services
        self.runs = runs

    def handle(self, _delivery_id: str, payload: dict[str, Any], _received_at: datetime) -> str:
        data = PushPayload.model_validate(payload)
        services = self.services
        repository = data.repository
        repo, branch = repository.full_name, repository.default_branch
        if data.ref != f"refs/heads/{branch}":
            return f"push to {data.ref}: not the default branch"
        if data.deleted or data.after == ZERO_SHA:
            return "the default branch was deleted: nothing runs"
        settings = services.repo_settings(repo, data.after)
        main = settings.config.main
        clone_url = repository.clone_url
        self.runs.remember_schedule(repo, clone_url, repository.private, branch, main.nightly)
        known = (services.backend_names.get(b) for b in main.backends)
        backends = tuple(dict.fromkeys(b for b in known if b))
        runs = main.on_push != "none" and bool(backends)
        if not runs and settings.ok:
            return f"push to {branch} at {data.after[:7]}: no runs configured"
        pull = services.github.merged_pull(repo, data.after)
        if not settings.ok and pull is not None:
            services.reply(repo, pull, f"settings-{data.after[:12]}",
                           render_problems(settings.problems, CONFIG_PATH, branch))  # fmt: skip
        if not runs:
            return f"push to {branch} at {data.after[:7]}: the settings have problems"
        pusher = data.sender.login if data.sender is not None else None
        request = MainRequest(
            repo=repo, clone_url=clone_url, private=repository.private, default_branch=branch,
            trigger="push", key=f"push:{data.after}", sha=data.after,
            before=None if data.before == ZERO_SHA else data.before, pull_number=pull,
            pusher=pusher, alerts=tuple(main.alerts), drift_window=main.drift_window,
        )  # fmt: skip
        run_id = self.runs.begin(request)
        outcome = self.runs.settle(run_id, main.on_push, backends, settings)
        merged = f" (merging #{pull})" if pull is not None else ""
        return f"{outcome}{merged}"
