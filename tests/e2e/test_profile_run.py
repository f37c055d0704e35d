"""`/test profile` end to end: the sandbox as GitHub, the real service on loopback and a real
runner daemon on the cpu backend, on the default-branch runs' repository (its `gelu` made
dearer by a pull request, as there). The comment's Profile section names `gelu` as the
op that got slower, and the job's page offers both sides' traces, Chrome trace JSON."""

from __future__ import annotations

import gzip
import json
import re
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest
import yaml

from tests.e2e.mainrepo import BASE_COST_US, branch_with
from tests.e2e.test_main_runs import (
    BOT,
    REPO,
    World,
    runner,
    serving,
    wait_until,
    world_of,
)
from tests.support.git import git

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
TIMER = "kernels.benchmark.timing:timed"
# The default-branch runs' slower `gelu`, made dearer still: the profiler reads wall time, which
# a loaded host stretches; eight times the thread time stays slower through that.
SLOW_US = 8 * BASE_COST_US


def _timer_in_a_module(world: World) -> None:
    """The harness's timer moved to a module of its own (what the profiler wraps), on main."""
    harness = world.repo / "kernels" / "benchmark" / "__main__.py"
    text = harness.read_text()
    start, end = text.index("def timed(fn):"), text.index("def main():")
    (harness.parent / "timing.py").write_text("import time\n\n\n" + text[start:end])
    harness.write_text(
        text[:start] + "from kernels.benchmark.timing import timed\n\n\n" + text[end:]
    )
    git(world.repo, "add", "-A")
    git(world.repo, "commit", "-q", "-m", "the benchmark's timer in a module")
    workflow = world.settings.workflows_dir / "cpu.yaml"
    cpu = yaml.safe_load(workflow.read_text())
    cpu["device"]["profiler"]["timers"] = [TIMER]
    workflow.write_text(yaml.safe_dump(cpu))


def test_a_profile_names_the_op_that_got_slower_and_offers_its_traces(tmp_path: Path) -> None:
    with world_of(tmp_path) as world, ExitStack() as stack:
        _timer_in_a_module(world)
        branch_with(world.repo, "gelu-slow", {"gelu": (SLOW_US, "")})
        pull = world.admin.open_pull(REPO, head="gelu-slow", user="alice", title="gelu-slow")
        number = int(pull["number"])
        url = f"http://127.0.0.1:{world.port}"
        stack.enter_context(serving(world))
        stack.enter_context(runner(url, world.settings.workflows_dir, tmp_path / "runner"))
        world.admin.comment(REPO, number, "alice", "/test profile gelu:cpu")

        def ended() -> bool:
            statuses = world.statuses()
            return bool(statuses) and statuses[0] not in ("queued", "running") and world.quiet()

        wait_until(ended, 180, "the profile job")
        (job,) = world.jobs()
        assert job.status == "succeeded" and job.profile, job.reason
        (body,) = [
            c["body"]
            for c in world.admin.comments(REPO, number)
            if c["user"] == BOT and "ondemand:gelu:cpu" in c["body"]
        ]
        assert "slower" in body[: body.index("#### Profile")]  # the verdict, as ever
        profile = body[body.index("#### Profile") :]
        assert "Not part of the verdict" in profile and f"/jobs/{job.id}#profile" in profile
        # The op itself first, dearer after than before.
        first = re.search(
            r"\| `([^`]+)` \| 1 \| ([\d,.]+) µs → ([\d,.]+) µs \| \+(\d+) % slower", profile
        )
        assert first is not None and first.group(1) == "gelu", profile
        page = httpx.get(f"{url}/jobs/{job.id}", timeout=10).text
        for side in ("before", "after"):
            name = f"profile-{side}-row-0.json"
            assert f"/jobs/{job.id}/artifacts/{name}" in page
            got = httpx.get(f"{url}/jobs/{job.id}/artifacts/{name}", timeout=10)
            assert got.status_code == 200
            trace = json.loads(gzip.decompress(got.content))
            names = {e.get("name") for e in trace["traceEvents"]}
            assert "ondemand.call:gelu" in names
