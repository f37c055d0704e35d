"""GitHub away for longer than any backoff: commands accepted meanwhile are never dropped, each
gets its 👀 as soon as GitHub can take one and its answer within seconds of GitHub's return;
the outage is logged once. A rate limit met while reading a command stops every call until
its reset, the command processor's included."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from ondemand.retry import RetryPolicy
from service.db.models import Delivery, OutboxItem
from tests.service.test_flow import BOT, REPO, make_flow


def _outbox(flow, kind: str) -> list[OutboxItem]:  # type: ignore[no-untyped-def]
    with flow.svc.service.db.reads() as session:
        return list(session.scalars(select(OutboxItem).where(OutboxItem.kind == kind)))


def test_commands_in_a_long_outage_are_answered_within_seconds_of_its_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Backoff as in production (up to 300 s between tries), its timers halved: after 10 s of
    503s a per-item backoff (from 0.5 s, not 1) would next try up to 15 s later. Here what
    waited goes out within 5 s of GitHub's return (probes at most 2.5 s apart, not 5), and
    nothing was given up."""
    caplog.set_level(logging.INFO)
    with make_flow(tmp_path, retry_max_backoff_s=300.0, github_outage_probe_max_s=2.5) as flow:
        halved = RetryPolicy(base_s=0.5, cap_s=300.0)
        flow.svc.service.inbox.policy = flow.svc.service.outbox.policy = halved
        flow.admin.inject_fault(503, 100_000)
        for body in ("/test add:cpu", "/test mul:cpu", "/test help"):
            flow.comment(body)
        flow.wait_until(lambda: len(_outbox(flow, "reaction")) == 3)  # 👀 accepted at once
        time.sleep(10)
        with flow.svc.service.db.reads() as session:
            rows = list(session.scalars(select(Delivery).where(Delivery.event == "issue_comment")))
        waiting = [d for d in rows if d.done_at is None]
        assert len(rows) == 3 and len(waiting) == 2  # /test help needs nothing of GitHub
        assert all("unavailable" in (d.last_error or "").lower() for d in waiting)
        assert not [c for c in flow.admin.comments(REPO, flow.pr) if c["user"] == BOT]

        flow.admin.clear_faults()
        back = time.monotonic()
        flow.wait_until(lambda: len(flow.bot_comments()) == 3, timeout=15)
        answered = time.monotonic() - back
        flow.wait_until(flow.quiet, timeout=15)
        assert answered <= 5, f"answers came {answered:.1f}s after GitHub returned"
        assert sorted((j.op, j.status) for j in flow.jobs()) == [
            ("add", "queued"),
            ("mul", "queued"),
        ]
        for c in flow.admin.comments(REPO, flow.pr):
            if c["user"] == "alice":
                assert [r["content"] for r in c["reactions"]] == ["eyes"]
        assert all(
            i.outcome and not i.outcome.startswith("gave up") for i in _outbox(flow, "reaction")
        )
    down = [r for r in caplog.records if r.getMessage().startswith("GitHub unavailable")]
    up = [r for r in caplog.records if r.getMessage().startswith("GitHub back after")]
    assert len(down) == 1 and len(up) == 1
    assert not [r for r in caplog.records if "retry in" in r.getMessage() and r.levelno >= 30]


def test_a_rate_limit_met_reading_a_command_stops_every_call_until_its_reset(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The primary limit is met reading the commenter's permission (403, no requests left,
    reset in 4 s). Until the reset the service asks GitHub nothing, the command processor
    included; then every command is answered. The pause is logged once, not once per
    delivery per retry."""
    caplog.set_level(logging.INFO)
    with make_flow(tmp_path) as flow:
        flow.admin.inject_fault(403, 1, path_prefix=f"/repos/{REPO}/collaborators", retry_after=4)
        flow.comment("/test add:cpu")
        limited = flow.wait_until(
            lambda: [c for c in flow.admin.state()["api_calls"] if c["status"] == 403]
        )
        for body in ("/test mul:cpu", "/test help"):
            flow.comment(body)
        # GitHub's times are whole seconds, stamped when the answer leaves: with the 403 in
        # second t and a 4 s pause, a call stamped t+2 or t+3 was made inside the window (one
        # already on its way when the 403 came back may be stamped t+1). The first command's
        # 👀 is queued before the permission read and may race it: on a loaded machine its
        # answer left the sandbox at t+2, sent before the 403 was heard.
        first = flow.admin.state()["comments"][0]["id"]
        acked = f"/repos/{REPO}/issues/comments/{first}/reactions"
        t = datetime.strptime(limited[0]["at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        inside = {(t + timedelta(seconds=k)).strftime("%Y-%m-%dT%H:%M:%SZ") for k in (2, 3)}
        while datetime.now(UTC) < t + timedelta(seconds=4.5):
            time.sleep(0.1)
        calls = flow.admin.state()["api_calls"]
        made = [c for c in calls if c["at"] in inside and c["login"] == BOT]
        assert [c for c in made if c["path"] != acked] == [], made
        flow.wait_until(lambda: len(flow.bot_comments()) == 3, timeout=15)
        assert sorted(j.op for j in flow.jobs()) == ["add", "mul"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len([m for m in warnings if m.startswith("GitHub rate limit")]) == 1, warnings
    assert not [m for m in warnings if "retry in" in m], warnings
