"""Which commit a command approves: the pure rule over recorded head changes, and the service
against the sandbox with GitHub slow, deliveries reordered and a push racing the comment."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from service.receive.approval import HeadChange, approved_head
from tests.service.test_flow import REPO, Flow, make_flow

T = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
A, B, C = "a" * 40, "b" * 40, "c" * 40


def at(seconds: float) -> datetime:
    return T + timedelta(seconds=seconds)


@pytest.mark.parametrize(
    ("changes", "head", "approved"),
    [
        ([HeadChange(A, at(-60), opened=True)], A, A),  # nothing moved
        ([HeadChange(A, at(0), opened=True)], A, A),  # opened in the command's second
        ([HeadChange(A, at(-60), opened=True), HeadChange(B, at(5))], B, None),  # pushed after
        ([HeadChange(A, at(-60), opened=True), HeadChange(B, at(0))], B, None),  # same second
        ([HeadChange(A, at(-60), opened=True), HeadChange(B, at(-5))], B, B),  # pushed before
        ([HeadChange(A, at(-60), opened=True)], B, None),  # a push not heard of yet
        # a push heard of only after the command, back to the head the command saw
        ([HeadChange(A, at(-60)), HeadChange(B, at(3)), HeadChange(A, at(4))], A, None),
        ([], A, A),  # no history at all: the head now (first sight)
        ([HeadChange(A, at(30), seen=True)], A, A),  # first read after the command
        ([HeadChange(A, at(-30), seen=True)], B, None),  # read as A before the command
        ([HeadChange(A, at(30), seen=True)], B, None),  # read as A, now B: moved
        # a lost push event, then the head read, then a new command: approved
        ([HeadChange(A, at(-90), opened=True), HeadChange(B, at(-30), seen=True)], B, B),
        # a read in the second of a push: the push wins the tie
        ([HeadChange(A, at(-1), seen=True), HeadChange(B, at(-1))], B, B),
    ],
)
def test_the_rule(changes: list[HeadChange], head: str, approved: str | None) -> None:
    approval = approved_head(changes, head, T)
    assert approval.sha == approved, approval
    assert approval.head == head and approval.why


@pytest.fixture
def flow(tmp_path: Path, db_url: str) -> Iterator[Flow]:
    """On SQLite and on PostgreSQL. A command that approves nothing waits 1.5 s for a late push
    (10 s in production): the pushes here are sent at once, and each refusal waits it out."""
    with make_flow(tmp_path, db_url=db_url, head_wait_s=1.5) as made:
        made.comment("/test add:cpu")  # the service reads the PR's head once
        made.wait_until(lambda: len(made.jobs()) == 1 and made.quiet())
        yield made


def replies(flow: Flow) -> list[str]:
    return [c["body"] for c in flow.bot_comments() if "ondemand:reply" in c["body"]]


def test_a_push_while_github_was_slow_is_not_run(flow: Flow) -> None:
    """The PR read fails until a push has landed: processed seconds later, the comment would
    have read the pushed head. It approves nothing instead, and says so."""
    flow.admin.inject_fault(503, 10_000, path_prefix=f"/repos/{REPO}/pulls")
    flow.comment("/test mul:cpu")
    time.sleep(1.05)
    flow.admin.push(REPO, flow.pr, flow.next_head)
    flow.wait_until(lambda: flow.jobs()[0].status == "superseded")  # the push is known
    flow.admin.clear_faults()  # GitHub answers again
    flow.wait_until(lambda: replies(flow), timeout=30)
    flow.wait_until(flow.quiet, timeout=20)
    assert [j.sha for j in flow.jobs()] == [flow.head]  # nothing ran on the new head
    (reply,) = replies(flow)
    assert "changed after the command was written" in reply and flow.next_head[:7] in reply
    time.sleep(1.05)
    flow.comment("/test mul:cpu")  # a new approval of the new head runs it
    flow.wait_until(lambda: len(flow.jobs()) == 2)
    assert flow.jobs()[-1].sha == flow.next_head


@pytest.mark.parametrize("reverse", [False, True])
def test_a_push_racing_the_comment_is_not_run_whatever_the_order(
    flow: Flow, reverse: bool
) -> None:
    flow.admin.hold_deliveries()
    flow.comment("/test mul:cpu")
    time.sleep(1.05)
    flow.admin.push(REPO, flow.pr, flow.next_head)
    flow.admin.release_deliveries(reversed_order=reverse, duplicate=True)
    flow.wait_until(lambda: replies(flow), timeout=30)
    flow.wait_until(flow.quiet, timeout=20)
    assert [j.sha for j in flow.jobs()] == [flow.head]
    assert len(replies(flow)) == 1  # the duplicated delivery answered once


def test_a_late_push_event_is_waited_for(flow: Flow) -> None:
    """The push came before the comment but its event arrives after it: the comment waits a
    little for it instead of refusing what was approved."""
    flow.admin.hold_deliveries()
    flow.admin.push(REPO, flow.pr, flow.next_head)
    time.sleep(1.05)
    flow.comment("/test mul:cpu")
    flow.admin.release_deliveries(reversed_order=True)  # the comment first, the push second
    flow.wait_until(lambda: len(flow.jobs()) == 2, timeout=20)
    assert flow.jobs()[-1].sha == flow.next_head
    flow.wait_until(flow.quiet, timeout=20)
    assert replies(flow) == []


def test_retest_binds_the_same_way(flow: Flow) -> None:
    flow.admin.inject_fault(503, 10_000, path_prefix=f"/repos/{REPO}/pulls")
    flow.comment("/retest")
    time.sleep(1.05)
    flow.admin.push(REPO, flow.pr, flow.next_head)
    flow.wait_until(lambda: flow.jobs()[0].status == "superseded")
    flow.admin.clear_faults()
    flow.wait_until(lambda: replies(flow), timeout=30)
    assert "`/retest`" in replies(flow)[0] and flow.next_head[:7] in replies(flow)[0]
    assert [j.sha for j in flow.jobs()] == [flow.head]
