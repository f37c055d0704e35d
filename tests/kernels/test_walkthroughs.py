"""docs/adding-an-operator.md and docs/adding-a-vendor.md, applied to a copy of the repository.

Each page's code blocks are its steps: ```python file=PATH``` writes a file, ```python
entry=OPERATORS``` (or VENDORS) adds an entry to kernels/registry.py (vendors before `cpu`).
One fresh process then checks what the pages promise: the export, the forced vendor's
override, the marker under --strict-markers, the toy test selected by it, and the benchmark
finding the new definition.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# No operator marker: an operator's job (`pytest -m <op>` on its device) tests the operator, and
# this test runs the interpreter in a subprocess whatever the device (8 s of a warm GPU job's
# 21); the pages are checked by `make test` with every change.

REPO = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```python (file|entry)=(\S+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
COPIED = [
    "pyproject.toml",
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/kernels/__init__.py",
    "tests/kernels/conftest.py",
    "tests/kernels/support.py",
    "tests/support/__init__.py",
    "tests/support/tls.py",  # the root conftest shares one TLS context a process
]


def apply(page: Path, root: Path) -> int:
    """Apply a page's steps under `root`; the number of steps."""
    steps = BLOCK.findall(page.read_text())
    registry = root / "kernels" / "registry.py"
    for kind, target, text in steps:
        if kind == "file":
            path = root / target
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            continue
        source = registry.read_text()
        if target == "OPERATORS":
            start = source.index("OPERATORS: tuple[Operator, ...] = (")
            at = source.index("\n)\n", start) + 1
        else:
            at = source.index('    Vendor("cpu"')
        registry.write_text(source[:at] + text + source[at:])
    return len(steps)


CHECKS = r"""
import contextlib, io, json, sys
import pytest
import torch
import kernels
from kernels import runtime
from kernels.benchmark import __main__ as bench, implementations

report = {}
report["doc"] = kernels.toy_relu.__doc__
x = torch.randn(2, 3, 9, 10, 11)
want = torch.nn.functional.adaptive_max_pool3d(x, (4, 3, 5), return_indices=True)
with runtime.force("acme"):
    report["forced"] = runtime.implementation("adaptive_max_pool3d")
    got = kernels.adaptive_max_pool3d(x, (4, 3, 5))
report["override_exact"] = all(torch.equal(a, b) for a, b in zip(got, want))
report["impls"] = list(implementations.IMPLS)
markers = io.StringIO()
with contextlib.redirect_stdout(markers):
    pytest.main(["--markers", "-p", "no:cacheprovider"])
report["marker"] = "@pytest.mark.toy_relu:" in markers.getvalue()
quiet = io.StringIO()
with contextlib.redirect_stdout(quiet):
    report["pytest"] = int(pytest.main(
        ["tests/kernels", "-m", "toy_relu", "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]
    ))
report["pytest_out"] = quiet.getvalue()[-2000:]
with contextlib.redirect_stdout(io.StringIO()):
    report["bench"] = bench.main(
        ["--op", "toy_relu", "--sizes", "tiny", "--dtypes", "float16", "--host-reps", "1",
         "--no-progress", "--json", "toy.json"]
    )
report["rows"] = len(json.load(open("toy.json"))["rows"])
print(json.dumps(report))
"""


def test_the_walkthroughs_work(tmp_path: Path) -> None:
    shutil.copytree(
        REPO / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in COPIED:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / name, tmp_path / name)
    assert apply(REPO / "docs" / "adding-an-operator.md", tmp_path) == 4
    assert apply(REPO / "docs" / "adding-a-vendor.md", tmp_path) == 5
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "KERNELS_VENDOR": "cpu"}
    env.update(CUDA_VISIBLE_DEVICES="", MUSA_VISIBLE_DEVICES="")  # the interpreter everywhere
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run(
        [sys.executable, "-c", CHECKS],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["doc"] == "max(x, 0) elementwise, NaN kept (an example)."
    assert report["forced"] == "kernels.backends._acme.ops.adaptive_max_pool3d.adaptive_max_pool3d"
    assert report["override_exact"]
    assert report["impls"] == ["active", "generic", "mthreads", "acme"]
    assert report["marker"], "the hook did not register the new operator's marker"
    assert report["pytest"] == 0, report["pytest_out"]
    assert "12 passed" in report["pytest_out"]
    assert (report["bench"], report["rows"]) == (0, 4)
