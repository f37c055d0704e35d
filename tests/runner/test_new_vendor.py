"""A vendor the runner has never heard of, added by its workflow file alone: `fakevendor`, whose
torch plugin is a real package in the job's Python (importing it registers its device with
torch under its own name, as a vendor's plugin does; the device is the CPU underneath). Its
probe, device check, doctor and a whole job through `ondemand run` name it, its package and
its runtime from the workflow, with no line of the runner or the service changed."""

from __future__ import annotations

import json
import os
import py_compile
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from ondemand.doctor import Level
from runner.daemon.health import run_device_check
from runner.doctor import backend_findings
from runner.environment import bytecode, requirements
from runner.environment.interpreter import probe
from runner.environment.probe import environment_info
from runner.environment.requirements import plan_requirements
from tests.runner.tinyrepo import TinyRepo
from workflows.models import JobResult, JobStatus
from workflows.spec import WORKFLOWS_DIR, WorkflowSpec, load_workflows

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.7.1"  # the plugin's distribution
RUNTIME = "9.9"  # its device runtime, as torch.version.fakevendor

PLUGIN = {
    "__init__.py": f'''
        """A made-up vendor's torch plugin: importing it names its device to torch."""
        import torch

        from fakevendor import device

        __version__ = "{VERSION}"
        torch.utils.rename_privateuse1_backend("fakevendor")
        torch._register_device_module("fakevendor", device)
        torch.version.fakevendor = "{RUNTIME}"
    ''',
    "device.py": '''
        """torch.fakevendor: the device module, the host's CPU underneath."""
        import platform


        def is_available():
            return True


        def device_count():
            return 1


        def get_device_name(device=None):
            return "Fake Accelerator (" + platform.machine() + ")"


        def synchronize(device=None):
            pass
    ''',
}


def _workflow() -> dict[str, object]:
    """The vendor's workflow: the CPU workflow's steps (its kernels run under Triton's
    interpreter) and its own name, aliases, device check, device stack and host modules."""
    doc = yaml.safe_load((WORKFLOWS_DIR / "cpu.yaml").read_text())
    doc.update(
        name="fakevendor",
        description="A made-up vendor: its plugin is real, its device the CPU underneath.",
        aliases=["fake"],
        labels=["gpu"],
        vendor="fakevendor",
        visible_devices_var="FAKEVENDOR_VISIBLE_DEVICES",
        device_check=[
            "{python}", "-c", "import os; assert os.environ.get('FAKEVENDOR_HOME'), 'no toolkit'; "
            "import torch, fakevendor; "
            "assert torch.fakevendor.is_available(); print(torch.fakevendor.get_device_name())",
        ],
        device={
            "packages": ["fakevendor"],
            "plugin": "fakevendor",
            "module": "fakevendor",
            "version": "fakevendor",
            "label": "FAKE",
            "host_only": ["fakevendor"],
            "modules": ["fakevendor"],
            "inherit": ["FAKEVENDOR_HOME"],
        },
        python_env={"extras": ["test"], "host_modules": ["torch", "fakevendor"]},
    )  # fmt: skip
    return doc


@pytest.fixture(scope="module")
def workflows_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workflows directory holding the vendor's file alone."""
    directory = tmp_path_factory.mktemp("workflows")
    (directory / "fakevendor.yaml").write_text(yaml.safe_dump(_workflow(), sort_keys=False))
    return directory


@pytest.fixture(scope="module")
def workflow(workflows_dir: Path) -> WorkflowSpec:
    return load_workflows(workflows_dir)["fakevendor"]


@pytest.fixture(scope="module")
def vendor_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The vendor's host Python: a virtual environment with the plugin installed (its package,
    compiled as an installer compiles it, and its distribution's metadata), over the runner's
    torch, triton and pytest. Without the plugin's bytecode a job's environment would compile
    the whole host's (runner.environment.bytecode), which is not what these tests are about."""
    root = tmp_path_factory.mktemp("fakevendor-host") / "python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python*/site-packages"))
    (site / "host-stack.pth").write_text("\n".join(requirements.host_site_dirs()) + "\n")
    package = site / "fakevendor"
    package.mkdir()
    for name, text in PLUGIN.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
        py_compile.compile(str(package / name), doraise=True)
    dist = site / f"fakevendor-{VERSION}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakevendor\nVersion: {VERSION}\n")
    (dist / "RECORD").write_text("")
    return root / "bin" / "python"


def test_the_probe_names_the_vendors_package_device_and_runtime(
    workflow: WorkflowSpec, vendor_python: Path, tmp_path: Path
) -> None:
    env = {"PATH": os.environ["PATH"]}
    info = environment_info(
        vendor_python, env, workflow, runner_name="r", runner_version="1", cwd=tmp_path
    )
    assert info.packages == {"fakevendor": VERSION}
    assert info.device_name == f"Fake Accelerator ({os.uname().machine})"
    assert info.driver == f"FAKE {RUNTIME}" and info.vendor == "fakevendor"
    assert info.torch and info.triton
    # The same Python on a workflow without the vendor's device stack: no package, the CPU.
    cpu = environment_info(
        vendor_python, env, load_workflows()["cpu"], runner_name=None, runner_version=None,
        cwd=tmp_path,
    )  # fmt: skip
    assert cpu.packages == {} and (cpu.device_name or "").endswith("(CPU)")


def test_the_doctor_runs_its_device_check_and_names_its_stack(
    workflow: WorkflowSpec, vendor_python: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKEVENDOR_HOME", str(tmp_path))  # the toolkit its device check needs
    found, python = backend_findings(workflow, vendor_python, tmp_path / "home", None)
    assert python is not None and python.executable == vendor_python
    checks = {f.check: f for f in found}
    assert checks["device (fakevendor)"].level is Level.ok
    versions = checks["versions (fakevendor)"].detail
    assert f"fakevendor {VERSION}" in versions and "Fake Accelerator" in versions
    # The toolkit's variable reaches the check because the workflow keeps it, and only then
    # (a failing check's finding is tests/runner/test_doctor.py's).
    kept_none = workflow.device.model_copy(update={"inherit": []})
    bare = workflow.model_copy(update={"device": kept_none})
    reason = run_device_check(bare, home=tmp_path / "home", visible_devices=None,
                              python=vendor_python)  # fmt: skip
    assert reason is not None and "no toolkit" in reason


def test_its_packages_are_the_hosts_alone_and_their_bytecode_counts(
    workflow: WorkflowSpec, vendor_python: Path, tmp_path: Path
) -> None:
    host = probe(vendor_python, ["fakevendor"])
    only = workflow.device.host_only_names()
    plan = plan_requirements(["fakevendor>=9"], host=host, host_only=only, strict=True)
    assert plan.install == () and plan.notes == (f"fakevendor {VERSION} (repository asks >=9)",)
    assert plan_requirements(["fakevendor"], dirs=[str(tmp_path)], host_only=only).refused
    # Nine packages with bytecode and the vendor's without: the stack decides.
    site = tmp_path / "site"
    for name in [*(f"small{i}" for i in range(9)), "fakevendor"]:
        init = site / name / "__init__.py"
        init.parent.mkdir(parents=True)
        init.write_text("")
        if name != "fakevendor":
            bytecode._own_bytecode(init).parent.mkdir()
            bytecode._own_bytecode(init).write_bytes(b"")
    assert bytecode.lacks_bytecode([str(site)], stack=workflow.device.stack())
    assert not bytecode.lacks_bytecode([str(site)])


def test_the_bench_timer_synchronizes_the_device_torch_names(vendor_python: Path) -> None:
    code = (
        "import torch, fakevendor\n"
        "from runner.plugins.pytest_bench_rounds import _accelerator\n"
        "print(_accelerator(torch).__name__)\n"
    )
    done = subprocess.run(
        [str(vendor_python), "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "fakevendor.device"


def test_a_job_on_the_vendor_passes_and_its_report_names_it(
    workflows_dir: Path, vendor_python: Path, tiny_repo: TinyRepo, runner_cache: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [sys.executable, "-m", "ondemand", "run", "good_op:fake", "--workflows",
         str(workflows_dir), "--python", f"fakevendor={vendor_python}", "--repo",
         str(tiny_repo.path), "--ref", "pr", "--json", str(out), "-q",
         "--no-compile-cache"],  # no trusted build after the verdict: the job alone
        cwd=ROOT, env={**os.environ, "XDG_CACHE_HOME": str(runner_cache)},
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = proc.stdout
    assert "<!-- ondemand:good_op:fakevendor -->" in report and "3 passed" in report
    [line] = [line for line in report.splitlines() if line.startswith("**Environment:**")]
    assert "vendor `fakevendor`" in line and f"driver `FAKE {RUNTIME}`" in line
    assert f"fakevendor `{VERSION}`" in line and "device `Fake Accelerator" in line
    result = JobResult.model_validate_json(out.read_text())
    assert result.status is JobStatus.succeeded
    assert result.environment.packages == {"fakevendor": VERSION}
    assert json.loads(out.read_text())["environment"]["vendor"] == "fakevendor"
