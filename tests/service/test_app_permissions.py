"""A GitHub App installation that lacks a permission, against the sandbox (which enforces them
as GitHub does) and a real service: nothing GitHub refuses for a missing permission is dropped.
A command waits (its delivery parked, not given up), its pull request is told once which
permission is missing, the dashboard names it; when an owner grants it (`installation`
`new_permissions_accepted`), the command runs and its job gets its verdict. An outbox item
refused the same way waits too, however often it is tried. At start-up the service checks
every installation and logs what each lacks, without waiting for GitHub."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from service.db.models import Delivery, OutboxItem
from service.github.client import GitHubClient
from service.github.installations import check_installations
from service.github.permissions import manifest
from tests.service.helpers import live_service, service_settings, sqlite_at_head
from tests.service.test_flow import (
    APP_ID,
    REPO,
    SECRET,
    Flow,
    auth,
    make_flow,
    sandbox_world,
    seed_result,
)
from tests.support.live import free_port
from workflows.models import JobStatus

BOT = "ondemand[bot]"
EVERYTHING = manifest("ondemand", "http://x")["default_permissions"]


def _without(name: str) -> dict[str, str]:
    return {k: v for k, v in EVERYTHING.items() if k != name}


def _installation(flow: Flow) -> int:
    return int(flow.admin.state()["installations"][0]["id"])


def _rows(flow: Flow, model: type[Any]) -> list[Any]:
    with flow.svc.service.db.reads() as session:
        return list(session.scalars(select(model).order_by(model.id)))


def _dashboard(flow: Flow) -> str:
    return httpx.get(f"{flow.svc.url}/").text


def _bot_replies(flow: Flow, contains: str) -> list[dict[str, Any]]:
    return [
        c for c in flow.admin.comments(REPO, flow.pr) if c["user"] == BOT and contains in c["body"]
    ]


def test_a_command_waits_for_contents_read_then_runs_when_it_is_granted(
    tmp_path: Path, db_url: str
) -> None:
    with make_flow(tmp_path, app=True, private=True, db_url=db_url) as flow:
        installation = _installation(flow)
        flow.admin.set_installation_permissions(installation, _without("contents"))
        flow.comment("/test add:cpu")

        # Told once, on the pull request, which permission is missing and that it waits.
        reply = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="Contents: read")
        assert "cannot read this repository's contents" in reply["body"]
        assert "accept the App's new permissions" in reply["body"]
        (delivery,) = flow.wait_until(
            lambda: [d for d in _rows(flow, Delivery) if d.waiting_for == "contents:read"]
        )
        assert delivery.done_at is None and not (delivery.outcome or "").startswith("gave up")
        assert flow.jobs() == []

        page = _dashboard(flow)
        assert "The GitHub App lacks permissions" in page
        assert "<strong>Contents: read</strong> on a private repository of acme" in page
        assert "acme/kernels" not in page  # a private repository is not named
        metrics = httpx.get(f"{flow.svc.url}/metrics").text
        assert 'ondemand_deliveries{outcome="parked"} 1.0' in metrics

        # Tried again (as the backoff would, minutes later): still waiting, still one reply.
        inbox = flow.svc.service.inbox
        inbox.deliveries.release([delivery.id])
        inbox.kick()
        flow.wait_until(lambda: _rows(flow, Delivery)[0].attempts >= 2)
        flow.wait_until(lambda: _rows(flow, Delivery)[0].waiting_for == "contents:read")
        assert len(_bot_replies(flow, "Contents: read")) == 1

        # An owner accepts: GitHub tells the App, the command runs.
        answer = flow.admin.set_installation_permissions(installation, EVERYTHING)
        assert answer["event"] == "new_permissions_accepted"
        flow.wait_until(lambda: [j.status for j in flow.jobs()] == [JobStatus.queued])
        flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="ondemand:add:cpu")
        done = [d for d in _rows(flow, Delivery) if d.payload is not None]  # not the ignored
        assert [d.event for d in done] == ["issue_comment", "installation"]
        assert all(d.done_at is not None and d.waiting_for is None for d in done)
        assert "1 job(s) queued" in (done[0].outcome or "")
        assert "lacks permissions" not in _dashboard(flow)

        # ... and its job its verdict (a runner over HTTP, with a read token it now gets).
        _, token = flow.svc.register("cpu-1", ["cpu"])
        api = f"{flow.svc.url}/api/v1/jobs"
        spec = httpx.post(
            f"{api}/claim", json={"wait_s": 5}, headers=auth(token), timeout=30
        ).json()
        assert spec["git_token"].startswith("ghs_")
        result = seed_result(flow.head).model_dump(mode="json")
        httpx.post(f"{api}/{spec['id']}/complete", json=result, headers=auth(token))
        flow.wait_until(lambda: [j.status for j in flow.jobs()] == [JobStatus.succeeded])
        flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="69 passed")
        assert len(_bot_replies(flow, "Contents: read")) == 1


def test_an_outbox_item_refused_for_checks_write_is_kept_not_given_up(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True) as flow:
        installation = _installation(flow)
        flow.admin.set_installation_permissions(installation, {**EVERYTHING, "checks": "read"})
        flow.comment("/test add:cpu")
        flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="ondemand:add:cpu")

        def check_item() -> OutboxItem | None:
            found = [i for i in _rows(flow, OutboxItem) if i.kind == "check"]
            return found[0] if found and found[0].waiting_for == "checks:write" else None

        item = flow.wait_until(check_item)
        outbox = flow.svc.service.outbox
        for tries in range(2, 6):  # past the three tries after which a refusal is given up
            outbox.items.release([item.id])
            outbox.kick()

            def parked_again(n: int = tries) -> bool:  # tried, and parked again (not in flight)
                i = check_item()
                return i is not None and i.attempts >= n and i.locked_until is None

            flow.wait_until(parked_again)
        item = check_item()
        assert item is not None and item.done_at is None and item.attempts >= 5
        # The job's check run and its head's `ondemand` check wait.
        assert "<strong>Checks: write</strong> on acme/kernels: 2 updates to GitHub" in _dashboard(
            flow
        )
        assert _bot_replies(flow, "Checks: write") == []  # a check run is no command's answer

        flow.admin.set_installation_permissions(installation, EVERYTHING)
        runs = f"{flow.admin.base_url}/repos/{REPO}/commits/{flow.head}/check-runs"
        flow.wait_until(lambda: httpx.get(runs).json()["total_count"] == 2)  # the job's, the head's
        flow.wait_until(flow.quiet)
        assert "lacks permissions" not in _dashboard(flow)


def test_start_up_checks_every_installation_and_does_not_wait_for_github(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="service.github.installations")
    with sandbox_world(tmp_path, app=True) as world:
        installation = int(world.admin.state()["installations"][0]["id"])
        world.admin.set_installation_permissions(installation, _without("contents"))
        client = GitHubClient(
            world.url, app_id=APP_ID, private_key=world.auth["github_private_key"]
        )
        (problem,) = check_installations(client)
        assert (problem.installation_id, problem.permission.key) == (installation, "contents:read")
        assert [p.permission.key for p in check_installations(client, teams=True)] == [
            "contents:read",
            "members:read",
        ]

        settings = service_settings(
            sqlite_at_head(tmp_path / "startup.db"), github_api_url=world.url, **world.auth
        )
        with live_service(settings) as svc:
            world.admin.set_webhook(f"{svc.url}/webhook", SECRET)
            problems = svc.service.problems
            assert [p.permission.key for p in _wait(lambda: problems.all())] == ["contents:read"]
            page = httpx.get(f"{svc.url}/").text
            assert f"<strong>Contents: read</strong> on installation {installation}" in page
            logged = [r.getMessage() for r in caplog.records if "lacks Contents: read" in r.message]
            assert logged and f"installation {installation}" in logged[0]
            # Granted: the installation event clears it.
            world.admin.set_installation_permissions(installation, EVERYTHING)
            _wait(lambda: not problems.all())
            assert "lacks permissions" not in httpx.get(f"{svc.url}/").text

    # GitHub unreachable: the service starts and serves all the same, and says it once.
    caplog.clear()
    unreachable = service_settings(
        sqlite_at_head(tmp_path / "away.db"),
        github_api_url=f"http://127.0.0.1:{free_port()}",
        **world.auth,
    )
    with live_service(unreachable) as svc:
        assert httpx.get(f"{svc.url}/healthz").status_code == 200
        _wait(lambda: any("could not check" in r.getMessage() for r in caplog.records))
        assert svc.service.problems.all() == []


def _wait(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"timed out waiting for {check}"
            return value
        time.sleep(0.05)
