"""Device checks: cached for the check interval, redone after `invalidate`, reported to the
service on every change (and while sick, every keepalive), and run in a scrubbed environment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.daemon.health import Health, run_device_check
from runner.link.client import ServiceUnavailable
from workflows.spec import WorkflowSpec, load_workflows

CPU = load_workflows()["cpu"]
WORKFLOWS = {"cpu": CPU, "other": CPU.model_copy(update={"name": "other"})}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Fixture:
    """A Health over two backends whose verdicts the test sets."""

    def __init__(self) -> None:
        self.verdicts: dict[str, str | None] = {"cpu": None, "other": None}
        self.checks: list[str] = []
        self.reports: list[tuple[bool, str | None, list[str]]] = []
        self.report_error: Exception | None = None
        self.clock = Clock()
        self.health = Health(
            workflows=WORKFLOWS,
            backends=["cpu", "other"],
            check_interval_s=60,
            check=self.check,
            report=self.report,
            keepalive_s=30,
            clock=self.clock,
        )

    def check(self, workflow: WorkflowSpec) -> str | None:
        self.checks.append(workflow.name)
        return self.verdicts[workflow.name]

    def report(
        self,
        healthy: bool,
        reason: str | None,
        backends: list[str],
        drained: dict[str, object] | None = None,
    ) -> None:
        if self.report_error is not None:
            raise self.report_error
        self.reports.append((healthy, reason, backends))


def test_verdicts_are_cached_for_the_interval_and_redone_after_invalidate() -> None:
    f = Fixture()
    assert f.health.healthy_backends() == ["cpu", "other"]
    assert f.checks == ["cpu", "other"]
    assert f.reports == [(True, None, ["cpu", "other"])]
    f.clock.now += 60
    assert f.health.healthy_backends() == ["cpu", "other"]
    assert f.checks == ["cpu", "other"]  # not yet due
    f.health.invalidate("other")
    f.health.healthy_backends()
    assert f.checks == ["cpu", "other", "other"]
    f.clock.now += 1
    f.health.healthy_backends()
    assert f.checks == ["cpu", "other", "other", "cpu"]  # cpu's 60 s are over
    assert len(f.reports) == 1  # healthy and unchanged: nothing to tell


def test_a_sick_backend_is_left_out_reported_and_kept_alive() -> None:
    f = Fixture()
    f.verdicts["other"] = "device check failed: no device"
    assert f.health.healthy_backends() == ["cpu"]
    sick = (False, "other: device check failed: no device", ["cpu", "other"])
    assert f.reports == [sick]
    f.clock.now += 30
    f.health.healthy_backends()
    assert f.reports == [sick]
    f.clock.now += 1  # the keepalive is due: the service keeps showing why
    f.health.healthy_backends()
    assert f.reports == [sick, sick]
    f.verdicts["other"] = None
    f.health.invalidate("other")
    assert f.health.healthy_backends() == ["cpu", "other"]
    assert f.reports[-1] == (True, None, ["cpu", "other"])


def test_a_failed_report_is_tried_again_and_report_again_repeats_it() -> None:
    f = Fixture()
    f.report_error = ServiceUnavailable("down")
    f.health.healthy_backends()
    assert f.reports == []
    f.report_error = None
    f.health.healthy_backends()
    assert f.reports == [(True, None, ["cpu", "other"])]
    f.health.report_again()  # a new registration has not heard it
    f.health.healthy_backends()
    assert len(f.reports) == 2
    assert f.checks == ["cpu", "other"]  # reporting again needs no new check


def test_the_device_check_runs_scrubbed_with_the_slots_device(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONDEMAND_RUNNER_TOKEN", "secret")
    script = (
        "import os, sys; "
        "sys.exit(f\"{os.environ.get('DEV')} {os.environ.get('ONDEMAND_RUNNER_TOKEN')} "
        "{os.environ['HOME']} {os.environ['KERNELS_VENDOR']}\")"
    )
    workflow = CPU.model_copy(update={"device_check": ["{python}", "-c", script]})
    home = tmp_path / "check-home"
    reason = run_device_check(workflow, home=home, visible_devices=("DEV", "3"))
    assert reason == f"device check failed: 3 None {home} cpu"
    passing = CPU.model_copy(update={"device_check": [sys.executable, "-c", "pass"]})
    assert run_device_check(passing, home=home, visible_devices=None) is None
