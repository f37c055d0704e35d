"""The progress plugin in a real pytest process (alone and under pytest-xdist) and the
runner's reader of what it writes: tests done of the total and the failures' ids as they
happen; a file the job made hostile (a link, overlong lines, garbage, absurd numbers) yields
nothing false, and reading stays bounded; the sender paces and skips what did not change."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from runner.plugins import PLUGINS
from runner.results.progress import MAX_LINE, ProgressFile, ProgressSender, ProgressWatch
from workflows.models import MAX_PROGRESS_FAILURES, Progress

RUNNER = PLUGINS  # where the job loads the plugin from, as a copy
SUITE = """\
import pytest

@pytest.mark.parametrize("n", range(6))
def test_ok(n):
    assert n >= 0

def test_bad():
    assert False

def test_skipped():
    pytest.skip("no device")

@pytest.fixture
def broken():
    raise RuntimeError("setup failed")

def test_setup_error(broken):
    pass
"""


def _pytest(tmp_path: Path, *args: str) -> ProgressFile:
    (tmp_path / "test_suite.py").write_text(SUITE)
    out = tmp_path / "progress.jsonl"
    env = {
        **os.environ,
        "TEST_PROGRESS_FILE": str(out),
        "PYTHONPATH": str(RUNNER),
        "PYTEST_ADDOPTS": "-p pytest_ondemand_progress",
    }
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
    )
    reader = ProgressFile(out, "accuracy")
    while reader.poll():
        pass
    return reader


@pytest.mark.parametrize("xdist", [(), ("-n", "2")], ids=["alone", "xdist"])
def test_the_plugin_counts_tests_and_names_failures(tmp_path: Path, xdist: tuple[str, ...]) -> None:
    progress = _pytest(tmp_path, *xdist).progress
    assert progress.step == "accuracy"
    assert progress.tests_total == 9 and progress.tests_done == 9
    assert progress.failed == 2
    assert sorted(progress.failures) == [
        "test_suite.py::test_bad",
        "test_suite.py::test_setup_error",
    ]


def test_progress_is_read_as_it_grows(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    reader = ProgressFile(path, "accuracy")
    assert not reader.poll()  # no file yet
    with path.open("a") as out:
        out.write(json.dumps({"total": 411}) + "\n" + '{"done": 1, "fai')
        out.flush()
        assert reader.poll() and reader.progress.tests_total == 411
        assert reader.progress.tests_done == 0  # half a line waits for its end
        out.write('led": 1, "id": "t::a"}\n')
        out.flush()
        assert reader.poll()
    assert reader.progress == Progress(
        step="accuracy", tests_done=1, tests_total=411, failed=1, failures=["t::a"]
    )
    assert not reader.poll()  # nothing new


def test_a_hostile_progress_file_says_nothing_false(tmp_path: Path) -> None:
    secret = tmp_path / "runner.json"
    secret.write_text(json.dumps({"total": 7}) + "\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(secret)
    assert not ProgressFile(link).poll()  # a link is not followed

    path = tmp_path / "progress.jsonl"
    lines = [
        "x" * (MAX_LINE * 3),  # overlong: skipped whole
        "[1, 2]",
        "not json",
        json.dumps({"total": -5}),
        json.dumps({"total": True}),
        json.dumps({"total": 10**12}),
        json.dumps({"done": "3", "failed": 0}),
        json.dumps({"done": 5, "failed": 1, "id": "y" * 10_000}),
        json.dumps({"done": 2, "failed": 0}),  # counts never go back
    ]
    lines += [json.dumps({"done": 6 + i, "failed": 2 + i, "id": f"t{i}"}) for i in range(50)]
    path.write_text("\n".join(lines) + "\n")
    reader = ProgressFile(path)
    while reader.poll():
        pass
    progress = reader.progress
    assert progress.tests_total is None
    assert progress.tests_done == 55 and progress.failed == 51
    assert len(progress.failures) == MAX_PROGRESS_FAILURES
    assert progress.failures[0] == "y" * 300  # cut to an id's length


def test_the_watch_emits_changes_while_a_step_runs(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    seen: list[Progress] = []
    with ProgressWatch(path, "accuracy", seen.append, poll_s=0.02):
        path.write_text(json.dumps({"total": 2}) + "\n")
        deadline = time.monotonic() + 5
        while not seen:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with path.open("a") as out:
            out.write(json.dumps({"done": 2, "failed": 0}) + "\n")
    assert seen[-1].tests_done == 2 and seen[-1].tests_total == 2  # the last read at the end


def test_the_sender_paces_and_skips_what_did_not_change() -> None:
    sent: list[tuple[float, Progress]] = []
    arrived = threading.Event()

    def send(progress: Progress) -> None:
        sent.append((time.monotonic(), progress))
        arrived.set()

    with ProgressSender(send, interval_s=0.5) as sender:
        sender.update(Progress(step="checkout"))
        assert arrived.wait(5)  # the first goes out at once
        for done in range(50):
            sender.update(Progress(step="accuracy", tests_done=done))
        time.sleep(1.2)
        sender.update(Progress(step="accuracy", tests_done=49))  # the same again: not sent
        time.sleep(0.7)
    steps = [p for _, p in sent]
    assert steps[0] == Progress(step="checkout")
    assert steps[-1] == Progress(step="accuracy", tests_done=49)
    assert len(sent) <= 3, steps  # fifty updates within an interval: one send
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(sent)]
    assert all(gap >= 0.45 for gap in gaps), gaps


def test_a_failing_send_does_not_reach_the_job() -> None:
    def send(progress: Progress) -> None:
        raise RuntimeError("service down")

    with ProgressSender(send, interval_s=0.01) as sender:
        sender.update(Progress(step="accuracy"))
        time.sleep(0.1)
