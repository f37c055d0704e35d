"""Building the C++ helper (`kernels.native`): where it goes, that it is reused and built
once by processes starting together, and what happens where it cannot be built.

Not marked with an operator: a runner's job selects its operator's tests, and these exercise
the build machinery, not the operators (the helper's functions are in test_native.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernels import native

needs_compiler = pytest.mark.skipif(
    native.compile_command(Path("a.cpp"), Path("a.so"), "c++20") is None,
    reason="no C++ compiler, Python headers or torch headers here",
)


@pytest.fixture(scope="module")
def built() -> Path:
    """The helper as the kernels build it: in the compile cache."""
    return native.build(native.cache_root())


@pytest.fixture
def fresh_host() -> Iterator[None]:
    """`native.host()` forgets what it loaded, before and after the test."""
    native.host.cache_clear()
    yield
    native.host.cache_clear()


@needs_compiler
def test_build_reuses_its_entry_and_keys_on_the_source(built: Path) -> None:
    root = built.parent.parent
    assert built.parent.name == f"native-{native.entry_key(native.SOURCE.read_bytes())}"
    stamp = built.stat().st_mtime_ns
    assert native.build(root) == built  # found, not built again
    assert built.stat().st_mtime_ns == stamp
    assert native.entry_key(b"// changed\n" + native.SOURCE.read_bytes()) != native.entry_key(
        native.SOURCE.read_bytes()
    )
    assert not list(root.glob(".native-build-*"))  # no scratch left behind


def test_a_failing_compiler_leaves_the_python_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh_host: None
) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", "false")
    with pytest.raises(OSError, match=r"compiling host\.cpp failed|no C\+\+ compiler"):
        native.build(tmp_path)
    assert native.host() is None
    assert native.status().startswith("unavailable: ")
    assert not [p for p in tmp_path.iterdir() if p.suffix != ".lock"]  # nothing half-built


FAKE_COMPILER = """#!/usr/bin/env python3
import sys, time
with open(sys.argv[0] + ".calls", "a") as calls:
    calls.write("x")
time.sleep(1.0)  # long enough for every process to reach the lock meanwhile
open(sys.argv[sys.argv.index("-o") + 1], "w").write("built")
"""


@needs_compiler
def test_concurrent_processes_build_once(tmp_path: Path) -> None:
    """Workers starting together (pytest-xdist, say) wait on one build instead of each
    compiling: a stand-in compiler counts its runs."""
    compiler = tmp_path / "cxx"
    compiler.write_text(FAKE_COMPILER)
    compiler.chmod(0o755)
    root = tmp_path / "cache"
    code = "import sys; from pathlib import Path; from kernels import native; "
    code += "print(native.build(Path(sys.argv[1])))"
    env = {**os.environ, "CXX": str(compiler)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(root)], env=env, stdout=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outs = [proc.communicate(timeout=120)[0].strip() for proc in procs]
    assert [proc.returncode for proc in procs] == [0] * 2
    assert len(set(outs)) == 1 and Path(outs[0]).read_text() == "built"
    assert (tmp_path / "cxx.calls").read_text() == "x"


def test_it_can_be_switched_off(monkeypatch: pytest.MonkeyPatch, fresh_host: None) -> None:
    monkeypatch.setenv("KERNELS_NATIVE", "0")
    assert native.host() is None
    assert native.status() == "off (KERNELS_NATIVE=0)"
