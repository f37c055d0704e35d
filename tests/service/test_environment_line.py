"""The report's environment line names the vendor's packages from the result, whichever runner
sent it: an older one's `torch_musa` field and a newer one's `packages` give the same bytes,
and a package's name a runner made up cannot put markdown in the comment."""

from __future__ import annotations

from report.comment import render_comment
from tests.service.test_report import seed_result, view
from workflows.models import EnvironmentInfo, JobResult, SlotInfo, known_part

# The line of a MUSA job, as the report has always written it.
MUSA_LINE = (
    "**Environment:** device `MTT S4000` · vendor `mthreads` · driver `2.7.0` · torch `2.2.0` · "
    "triton `3.1.0` · torch_musa `1.3.0`"
)


def _line(environment: EnvironmentInfo) -> str:
    result = seed_result(environment=environment)
    text = render_comment(view(result=result))
    return next(line for line in text.split("\n") if line.startswith("**Environment:**"))


def test_an_older_and_a_newer_runners_musa_job_read_the_same() -> None:
    fields = {"device_name": "MTT S4000", "vendor": "mthreads", "driver": "2.7.0",
              "torch": "2.2.0", "triton": "3.1.0", "runner_name": "musa-01"}  # fmt: skip
    older = {"status": "succeeded", "sha": "a" * 40,
             "environment": {**fields, "torch_musa": "1.3.0"}}  # fmt: skip
    read, dropped = known_part(JobResult, older)
    assert dropped == [] and read.environment.packages == {"torch_musa": "1.3.0"}
    newer = EnvironmentInfo(**fields, packages={"torch_musa": "1.3.0"})
    assert _line(read.environment) == _line(newer) == MUSA_LINE
    # Stored results (the service's rows) read back the same way.
    assert EnvironmentInfo.model_validate_json(read.environment.model_dump_json()) == newer


def test_each_package_follows_torch_and_triton_in_the_workflows_order() -> None:
    env = EnvironmentInfo(
        device_name="Acme X1", vendor="acme", torch="2.6.0", triton="3.2.0",
        packages={"torch_acme": "1.0.2", "acme-runtime": "3.1"},
    )  # fmt: skip
    line = _line(env)
    assert line.endswith("triton `3.2.0` · torch_acme `1.0.2` · acme-runtime `3.1`")


def test_a_package_name_cannot_carry_markdown() -> None:
    env = EnvironmentInfo(
        vendor="acme",
        packages={"a._b_c": "1", "x-_y": "2", "<b>": "3", "ok_name": "4", "v": "`5` | <i>"},
    )
    assert "<b>" not in env.packages  # not a name the model keeps
    line = _line(env)
    assert "a.\\_b\\_c `1`" in line and "x-\\_y `2`" in line and "ok_name `4`" in line
    assert line.endswith("v `` `5` | <i> ``")  # a version is a code span, whatever it holds


def test_the_slot_that_ran_the_job_is_named_after_the_stack() -> None:
    """A fan-out's jobs each say which slot, device and cores ran them; an older runner's
    result (no slot) reads as it always did."""
    env = EnvironmentInfo(
        vendor="nvidia", torch="2.6.0", slot=SlotInfo(index=3, device="3", cores="12-15")
    )
    assert _line(env).endswith("torch `2.6.0` · slot `3` · visible device `3` · cores `12-15`")
    unpinned = EnvironmentInfo(vendor="cpu", slot=SlotInfo(index=0))
    assert _line(unpinned).endswith("vendor `cpu` · slot `0`")
    assert "slot" not in _line(EnvironmentInfo(vendor="cpu"))
    stored = EnvironmentInfo.model_validate_json(env.model_dump_json())
    assert stored.slot == env.slot
