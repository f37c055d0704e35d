"""A Triton compile cache shared between jobs that no job can write.

Compiling is most of an accuracy step's time, and a job's own cache dies with it. Triton's
cache key already hashes the kernel's source, its options, the backend and Triton's version,
but a cache entry is whatever files sit under that key: a job that could write a shared cache
could put its own binary under the key of a kernel another job compiles. So:

- **The shared layer** (`ROOT/<repository and backend>/triton`) is the runner's alone: only
  the runner writes it, from *trusted builds* (the repository's base commit, built by the
  runner after a job's verdict, outside any pull request's job: `runner.daemon.warmup`). One layer
  per repository and backend: one repository's code never fills another's cache. Jobs never
  see it (it lives under the runner's cache directory, covered in their namespace).
- **The private layer** (`JOB_DIR/compile/triton`, the job's `TRITON_CACHE_DIR`) is the job's
  own, removed with it. It starts as the shared layer's entries: hard links to the runner's
  read-only files where steps run as the job user (who cannot write, chmod or truncate them;
  replacing a link changes only the job's own directory), copies where steps run as the
  runner's own user (no boundary to keep there). What a job compiles stays in its private
  layer and is never published, so one job's writes are never read by another job.

Triton's group files (`__grp__<name>.json`) name an entry's files by absolute path, and a
group whose files are not all there is a miss. Both copies rewrite them: published groups
name the shared layer's files, seeded groups the private layer's, each only files of its
own entry (a group naming anything else is dropped), so a moved cache still hits and no
group ever leads a job outside its own layer.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Triton's entry names are base32 keys; the files in them, kernel names with suffixes.
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]{0,199}$")
MAX_FILE = 256 * 1024 * 1024
MAX_ENTRY_FILES = 64
BUILT = "built.json"
DURATIONS = "durations.json"  # each test's time in the last trusted build
GROUP = "__grp__"  # Triton's group files: which files make one compiled kernel
MAX_GROUP = 1024 * 1024
KEEP_BUILT = 50


@dataclass(frozen=True)
class CompileCache:
    """The runner's shared compile caches, one layer per repository and backend."""

    root: Path

    def layer(self, clone_url: str, backend: str) -> Path:
        digest = hashlib.sha256(f"{clone_url}\0{backend}".encode()).hexdigest()[:32]
        return self.root / digest

    def built(self, layer: Path) -> list[str]:
        """The trusted commits whose compiles the layer holds, oldest first."""
        try:
            data = json.loads((layer / BUILT).read_text())
        except (OSError, ValueError):
            return []
        return [s for s in data if isinstance(s, str)] if isinstance(data, list) else []

    def has_built(self, layer: Path, sha: str) -> bool:
        return sha in self.built(layer)

    def entries(self, layer: Path) -> int:
        shared = layer / "triton"
        return sum(1 for p in shared.iterdir() if p.is_dir()) if shared.is_dir() else 0


def seed(layer: Path, private: Path, owner: tuple[int, int] | None) -> int:
    """Start the job's private cache with the shared layer's entries; the number seeded.

    With an `owner` (steps run as the job user) entries are hard links to the runner's
    files, in directories of the job user's; without one, copies. Never call `give` on the
    private layer afterwards: changing the owner of a link changes the shared file."""
    private.mkdir(parents=True, exist_ok=True)
    _own(private, owner)
    shared = layer / "triton"
    if not shared.is_dir():
        return 0
    seeded = 0
    for entry in _entries(shared):
        target = private / entry.name
        if target.exists():
            continue
        target.mkdir()
        for src in _files(entry):
            dst = target / src.name
            if src.name.startswith(GROUP):
                _rewrite_group(src, dst, target)
                if owner is not None:
                    os.chown(dst, *owner)
                continue
            if owner is None:
                shutil.copyfile(src, dst)
                continue
            try:
                os.link(src, dst, follow_symlinks=False)
            except OSError as exc:
                if exc.errno != errno.EXDEV:
                    raise
                shutil.copyfile(src, dst)  # another filesystem: a copy the job user owns
                os.chown(dst, *owner)
        _own(target, owner)
        seeded += 1
    return seeded


def publish(private: Path, layer: Path, sha: str | None) -> int:
    """Copy a trusted build's new entries into the shared layer (the runner's files, read-only
    for everyone else); record `sha` as built. Entries already there are kept as they are.
    Only plain files with plain names are taken, nothing is followed; each entry appears
    whole or not at all (built aside, then renamed into place)."""
    shared = layer / "triton"
    shared.mkdir(parents=True, exist_ok=True)
    layer.chmod(0o700)
    shared.chmod(0o755)
    added = 0
    with _locked(layer):
        for entry in _entries(private) if private.is_dir() else []:
            target = shared / entry.name
            if target.exists():
                continue
            files = list(_files(entry))
            if not files:
                continue
            tmp = shared / f".tmp-{entry.name}-{os.getpid()}"
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(mode=0o755)
            for src in files:
                if src.name.startswith(GROUP):
                    _rewrite_group(src, tmp / src.name, target)
                else:
                    _copy_plain(src, tmp / src.name)
            tmp.chmod(0o755)
            os.rename(tmp, target)
            added += 1
        if sha is not None:
            done = [s for s in _read_built(layer) if s != sha] + [sha]
            tmp_built = layer / f".{BUILT}.{os.getpid()}"
            tmp_built.write_text(json.dumps(done[-KEEP_BUILT:]))
            os.replace(tmp_built, layer / BUILT)
    return added


def record_durations(junit: Path, layer: Path) -> int:
    """Keep each test's time from a trusted build's JUnit report in the layer (`durations.json`,
    `classname.name` to seconds), for the order of later jobs' tests
    (runner/plugins/pytest_order.py); the number of tests recorded."""
    import xml.etree.ElementTree as ET

    from runner.results.results import read_artifact

    try:
        root = ET.fromstring(read_artifact(junit))
    except (OSError, ET.ParseError):
        return 0
    times: dict[str, float] = {}
    for case in root.iter("testcase"):
        try:
            seconds = float(case.get("time") or "")
        except ValueError:
            continue
        times[f"{case.get('classname', '')}.{case.get('name', '')}"] = round(seconds, 4)
    if not times:
        return 0
    tmp = layer / f".{DURATIONS}.{os.getpid()}"
    tmp.write_text(json.dumps(times))
    tmp.chmod(0o644)
    os.replace(tmp, layer / DURATIONS)
    return len(times)


def _rewrite_group(src: Path, dst: Path, entry: Path) -> None:
    """`src`, a Triton group file, written to `dst` with its files named in `entry` (the
    directory the group will be read in): only names of files the entry holds; a group that
    names anything else, or does not parse, is not written (Triton then compiles afresh)."""
    try:
        with open(src, "rb", opener=_no_follow) as handle:
            data = json.loads(handle.read(MAX_GROUP))
        children = data["child_paths"]
        names = {name: os.path.basename(path) for name, path in children.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return
    here = {p.name for p in src.parent.iterdir()}
    if not all(isinstance(n, str) and _NAME.match(n) and n in here for n in names.values()):
        return
    dst.write_text(json.dumps({"child_paths": {k: str(entry / n) for k, n in names.items()}}))
    dst.chmod(0o644)


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)


def _read_built(layer: Path) -> list[str]:
    return CompileCache(layer.parent).built(layer)


def _entries(directory: Path) -> Iterator[Path]:
    for path in sorted(directory.iterdir()):
        if _NAME.match(path.name) and not path.is_symlink() and path.is_dir():
            yield path


def _files(entry: Path) -> Iterator[Path]:
    count = 0
    for path in sorted(entry.iterdir()):
        if not _NAME.match(path.name):
            continue
        info = path.lstat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE:
            continue
        count += 1
        if count > MAX_ENTRY_FILES:
            return
        yield path


def _copy_plain(src: Path, dst: Path) -> None:
    """Copy a regular file without following a link planted at `src` meanwhile."""
    fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as source, open(dst, "xb") as out:
        if not stat.S_ISREG(os.fstat(source.fileno()).st_mode):
            raise OSError(f"{src} is not a regular file")
        shutil.copyfileobj(source, out, MAX_FILE)
    dst.chmod(0o644)


def _own(path: Path, owner: tuple[int, int] | None) -> None:
    if owner is not None:
        os.chown(path, *owner)
        path.chmod(0o700)


@contextlib.contextmanager
def _locked(layer: Path) -> Iterator[None]:
    """One publisher at a time per layer (slots may finish trusted builds together)."""
    with open(layer / ".lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
