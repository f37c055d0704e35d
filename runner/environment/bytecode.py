"""Bytecode for the host's packages, compiled once per job environment by the runner.

Steps run with `PYTHONDONTWRITEBYTECODE=1` (a job writes nothing outside its own directories),
so where the host's packages ship without `__pycache__` (GPU images commonly do: uv does not
compile, and Docker files set the same variable) every step's process compiles every module it
imports from source: on an H200 image `import torch, triton, pytest` took 5.0–8.1 s that way
and 2.6–2.8 s from bytecode. The environment build (the runner's own user, before any job
code runs) compiles the standard library and the host's site directories into a prefix inside
the cached environment, and steps get `PYTHONPYCACHEPREFIX` pointing at it:

- only the runner writes it (a job user cannot: the environment is the runner's, checked by
  `runner.environment.pyenv.untouched` on every reuse), so no job can plant bytecode another
  job loads;
- Python checks each file against its source's size and modification time, as in
  `__pycache__`: a changed source is compiled from source, never run stale;
- with the prefix set Python reads bytecode only there, so it holds the standard library too;
- where the host's packages carry their own bytecode nothing is compiled and no prefix is set.

Also a script, run by the runner with the environment's interpreter (standard library only):
`python -I runner/environment/bytecode.py PREFIX DIR...` compiles every source under the DIRs.
"""

from __future__ import annotations

import os
import py_compile
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from importlib.util import cache_from_source
from multiprocessing import get_context
from pathlib import Path

SCRIPT = Path(__file__)
# Not walked: bytecode itself, and test suites nothing imports.
SKIPPED_DIRS = frozenset({"__pycache__", "test", "tests"})


def sources(dirs: Iterable[str]) -> Iterator[str]:
    """Every `.py` file under `dirs`, through symbolic links, each real directory once."""
    seen: set[str] = set()
    for top in dirs:
        for root, subdirs, files in os.walk(top, followlinks=True):
            real = os.path.realpath(root)
            if real in seen:
                subdirs[:] = []
                continue
            seen.add(real)
            subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS]
            yield from (os.path.join(root, f) for f in files if f.endswith(".py"))


def _own_bytecode(source: Path, cache_tag: str | None = None) -> Path:
    """Where Python keeps `source`'s bytecode without a prefix: its `__pycache__` (for the
    interpreter whose tag is `cache_tag`, default this one)."""
    tag = cache_tag or sys.implementation.cache_tag
    return source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"


# The packages every step imports, and the largest: one of them without bytecode is reason
# enough (an H200 image shipped torch without it and most small packages with it). torch's
# own; the runner adds the vendor's from its workflow (`Device.stack`).
TORCH_STACK = frozenset({"torch", "triton"})


def lacks_bytecode(
    site_dirs: Sequence[str],
    threshold: float = 0.5,
    cache_tag: str | None = None,
    stack: Collection[str] = TORCH_STACK,
) -> bool:
    """Whether the packages in `site_dirs` lack bytecode of the interpreter whose tag is
    `cache_tag` (default this one's) beside their `__init__.py`: any of the device `stack`, or
    at least `threshold` of all of them. A cheap look, one file a package."""
    missing: list[str] = []
    inits = 0
    for site in site_dirs:
        if not Path(site).is_dir():
            continue
        for package in Path(site).iterdir():
            init = package / "__init__.py"
            if init.is_file():
                inits += 1
                if not _own_bytecode(init, cache_tag).is_file():
                    missing.append(package.name)
    return bool(set(stack).intersection(missing)) or (
        inits > 0 and len(missing) >= threshold * inits
    )


def _compile(path: str) -> bool:
    try:
        py_compile.compile(path, cfile=cache_from_source(path), doraise=True)
    except (py_compile.PyCompileError, OSError, ValueError):
        return False  # not valid for this Python (an old file a package ships), or unreadable
    return True


def compile_into(prefix: Path, dirs: Sequence[str], workers: int | None = None) -> tuple[int, int]:
    """(compiled, failed): every source under `dirs` compiled into the mirror tree `prefix`."""
    sys.pycache_prefix = str(prefix)  # cache_from_source's answer, in the workers too (fork)
    files = list(sources(dirs))
    workers = workers or os.cpu_count() or 1
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:
        done = sum(pool.map(_compile, files, chunksize=64))
    return done, len(files) - done


def main(argv: Sequence[str]) -> int:
    if len(argv) < 2:
        print("usage: python -I bytecode.py PREFIX DIR...", file=sys.stderr)
        return 2
    os.umask(0o022)  # readable by the job user, writable by the runner alone
    compiled, failed = compile_into(Path(argv[0]), argv[1:])
    print(f"{compiled} compiled, {failed} failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
