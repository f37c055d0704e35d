"""Workflow files: the shipped ones load; a bad one is rejected with the file, field and why."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workflows.spec import (
    BenchmarkFormat,
    StepKind,
    WorkflowError,
    backend_names,
    load_workflow,
    load_workflows,
)

GOOD = """\
name: {name}
vendor: cpu
aliases: {aliases}
steps:
  - name: accuracy
    kind: accuracy
    argv: ["{{python}}", "-m", "pytest", "-m", "{{op}}", "--junitxml={{artifacts}}/junit.xml"]
"""
SPECIAL = 'kind: accuracy\n    proof: {prefix: X, specialization: ["%s"]}'  # where it lives
DEVICE = "device:\n  %s\n"  # one field of a device section


def test_shipped_workflows() -> None:
    specs = load_workflows()
    assert {"cpu", "nvidia", "mthreads"} <= set(specs)
    assert specs["mthreads"].visible_devices_var == "MUSA_VISIBLE_DEVICES"
    assert specs["nvidia"].visible_devices_var == "CUDA_VISIBLE_DEVICES"
    assert specs["cpu"].env["TRITON_INTERPRET"] == "1"
    names = backend_names(specs)
    assert names["musa"] == "mthreads" and names["cuda"] == "nvidia" and names["cpu"] == "cpu"
    for spec in specs.values():
        kinds = [s.kind for s in spec.steps]
        assert kinds == [StepKind.accuracy, StepKind.benchmark]
        flaggems = spec.steps_for("flaggems")
        assert flaggems[1].format is BenchmarkFormat.flaggems
        assert spec.steps_for(None) == spec.steps == spec.steps_for("unknown-layout")
    # Moore Threads jobs count the specialization's proof log, ours and FlagGems'.
    mthreads = specs["mthreads"]
    assert [s.proof.prefix for s in mthreads.steps if s.proof] == ["KERNELS_MTHREADS"]
    flaggems_proof = [s.proof for s in mthreads.steps_for("flaggems") if s.proof]
    assert [(p.prefix, p.logger) for p in flaggems_proof] == [
        ("GEMS_MTHREADS", "flag_gems.runtime.backend._mthreads")
    ]


def test_each_backend_declares_its_device_stack() -> None:
    specs = load_workflows()
    musa, cuda, cpu = specs["mthreads"].device, specs["nvidia"].device, specs["cpu"].device
    assert musa.reported() == ("torch", "triton", "torch_musa")
    assert (musa.plugin, musa.module, musa.version, musa.driver_label()) == (
        "torch_musa", "musa", "musa", "MUSA"
    )  # fmt: skip
    assert "torch-musa" in musa.host_only_names() and "torch_musa" in musa.stack()
    assert cuda.query and cuda.query[-1] == "{device}" and cuda.driver_label() == "CUDA"
    assert cuda.host_only_names() == cpu.host_only_names() == {"torch", "triton", "pytorch-triton"}
    assert (musa.inherit, cuda.inherit, cpu.inherit) == (["MUSA_HOME"], ["CUDA_HOME"], [])
    assert cpu.reported() == ("torch", "triton") and cpu.module is None and cpu.query is None


def test_the_vendor_walkthroughs_workflow_loads(tmp_path: Path) -> None:
    """docs/adding-a-vendor.md's workflow file, as the page gives it."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "adding-a-vendor.md").read_text()
    found = re.search(r"^```yaml file=workflows/(\w+)\.yaml\n(.*?)^```$", page, re.M | re.S)
    assert found is not None
    (tmp_path / f"{found.group(1)}.yaml").write_text(found.group(2))
    specs = load_workflows(tmp_path)
    assert backend_names(specs) == {"acme": "acme", "acme_ai": "acme"}
    device = specs["acme"].device
    assert device.packages == ["torch_acme"] and device.module == "acme"
    assert "torch-acme" in device.host_only_names() and device.inherit == ["ACME_HOME"]


def test_render_keeps_each_placeholder_in_its_element() -> None:
    step = load_workflows()["cpu"].steps[0]
    values = {
        "op": "x; rm -rf / #",
        "artifacts": "/a b",
        "python": "/py",
        "workspace": "/w",
        "sha": "abc",
        "backend": "cpu",
    }
    argv = step.render(values)
    assert argv[0] == "/py"
    assert "x; rm -rf / #" in argv  # one element, never split or interpreted
    assert "--junitxml=/a b/junit.xml" in argv
    assert step.results_path(values) == "/a b/junit.xml"


def test_a_list_placeholder_becomes_its_elements_and_must_stand_alone(tmp_path: Path) -> None:
    step = load_workflows()["cpu"].steps_for("flaggems")[0]
    values = {"op": "abs", "artifacts": "/a", "python": "/py", "workspace": "/w", "sha": "s",
              "backend": "cpu"}  # fmt: skip
    files = ["tests/test_a b.py", "tests/test_c.py; rm -rf /"]
    argv = step.render(values, {"op_tests": files})
    assert argv[3:5] == files  # each file one element, never joined or split
    good = GOOD.format(name="x", aliases="[]")
    bad = good.replace('"-m", "pytest"', '"-m", "pytest", "x{op_tests}"')
    (tmp_path / "x.yaml").write_text(bad)
    with pytest.raises(WorkflowError, match="stands for several arguments"):
        load_workflow(tmp_path / "x.yaml")


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("- a list\n", "expected a mapping"),
        ("name: [unclosed\n", "cannot read"),
        (GOOD.format(name="other", aliases="[]"), "must match the file name"),
        (GOOD.format(name="demo", aliases="[]").replace("{op}", "{opp}"), "unknown placeholder"),
        (GOOD.format(name="demo", aliases="[]").replace("vendor: cpu\n", ""), "vendor"),
        (GOOD.format(name="demo", aliases="[]") + "surprise: 1\n", "surprise"),
        (GOOD.format(name="demo", aliases="[]").replace("kind: accuracy", "kind: magic"), "kind"),
        (
            GOOD.format(name="demo", aliases="[]")
            + "layouts:\n  flaggems:\n"
            + "    - {name: a, argv: [x]}\n    - {name: a, argv: [y]}\n",
            "repeated",
        ),
        (
            GOOD.format(name="demo", aliases="[]")
            + "  - {name: b, kind: benchmark, argv: [x], proof: {prefix: X}}\n",
            "proof counts log lines of an accuracy step",
        ),
        (
            GOOD.format(name="demo", aliases="[]").replace("kind: accuracy", SPECIAL % "a/{x}"),
            "only {op} may stand in a specialization's path",
        ),
        (
            GOOD.format(name="demo", aliases="[]").replace("kind: accuracy", SPECIAL % "../{op}"),
            "a path inside the checkout",
        ),
        (GOOD.format(name="demo", aliases="[]") + DEVICE % "packages: [a b]", "device.packages"),
        (GOOD.format(name="demo", aliases="[]") + DEVICE % "module: torch.musa", "device.module"),
        (GOOD.format(name="demo", aliases="[]") + DEVICE % "query: [smi, '{gpu}']", "{device}"),
        (GOOD.format(name="demo", aliases="[]") + DEVICE % "inherit: [ONDEMAND_X]", "inherit"),
        (GOOD.format(name="demo", aliases="[]") + DEVICE % "drivers: x", "device.drivers"),
    ],
)
def test_bad_files_say_file_field_and_why(tmp_path: Path, text: str, fragment: str) -> None:
    path = _write(tmp_path, "demo", text)
    with pytest.raises(WorkflowError) as info:
        load_workflow(path)
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_alias_collision(tmp_path: Path) -> None:
    _write(tmp_path, "one", GOOD.format(name="one", aliases="[gpu]"))
    _write(tmp_path, "two", GOOD.format(name="two", aliases="[gpu]"))
    with pytest.raises(WorkflowError, match="'gpu' is already used by 'one'"):
        load_workflows(tmp_path)


def test_adding_a_backend_is_adding_a_file(tmp_path: Path) -> None:
    _write(tmp_path, "rocm", GOOD.format(name="rocm", aliases="[amd]"))
    specs = load_workflows(tmp_path)
    assert backend_names(specs) == {"rocm": "rocm", "amd": "rocm"}
