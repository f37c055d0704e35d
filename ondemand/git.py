"""Git, as every part runs it: argv lists only, no prompt, no hook, filter or fsmonitor of any
repository's configuration; one cached bare mirror per repository URL, updated until it has a
pinned commit; and a commit's tree and sources read in two calls (`ls-tree`, one
`cat-file --batch`), for the change selection. The URL and SHA come from GitHub or the
service: the SHA is checked to be hex before git sees it."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

SHA = re.compile(r"^[0-9a-f]{7,64}$")
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
# No hook, filter or fsmonitor command of any repository's configuration ever runs: git runs
# on mirrors of pull requests.
GIT_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")
MAX_BLOB_BYTES = 2 * 1024 * 1024  # a source past this is left unread, as one not parsable
MAX_TREE_BYTES = 256 * 1024 * 1024  # the Python sources read of one tree (FlagGems': 25 MB)


class GitError(RuntimeError):
    """A git call that failed; the message says which call and why."""


def _env(token: str | None = None) -> dict[str, str]:
    """Git's environment: no prompt, no service secret; with `token`, every HTTP request
    carries it as GitHub takes a token for git (basic auth, user `x-access-token`). It goes
    by environment, never argv (which any process on the host can read), and is written to
    no configuration file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONDEMAND_")} | GIT_ENV
    if token:
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        env |= {
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "http.extraHeader",
            "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
        }
    return env


def git(
    args: Sequence[str], cwd: Path | None = None, timeout: float = 600, token: str | None = None
) -> str:
    """Run git with `args` (a fetch from a private repository with a read `token`); its
    stdout, or GitError with its stderr."""
    env = _env(token)
    try:
        proc = subprocess.run(
            ["git", *GIT_SAFE, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from exc
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise GitError(f"git {' '.join(args[:2])}: {' / '.join(detail[-3:]) or 'failed'}")
    return proc.stdout


def check_sha(sha: str) -> str:
    if not SHA.match(sha):
        raise GitError(f"not a commit SHA: {sha!r}")
    return sha


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (a file beside a mirror) across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Mirrors:
    """Bare mirrors under `root/mirrors`, one per repository URL."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mirrors = root / "mirrors"

    def mirror_path(self, url: str) -> Path:
        digest = hashlib.sha256(url.encode()).hexdigest()[:16]
        tail = re.sub(r"[^A-Za-z0-9_.-]+", "_", url.rstrip("/").rsplit("/", 1)[-1])[:40]
        return self.mirrors / f"{tail}-{digest}.git"

    def has_commit(self, mirror: Path, sha: str) -> bool:
        try:
            git(["cat-file", "-e", f"{sha}^{{commit}}"], cwd=mirror)
        except GitError:
            return False
        return True

    def fetch(
        self,
        url: str,
        sha: str,
        pr_number: int | None = None,
        *,
        shallow: bool = False,
        token: str | None = None,
    ) -> Path:
        """The mirror of `url`, updated until it has `sha`: branches and tags, then the PR's
        head ref, then the SHA itself (servers that allow it). `shallow`: only the commit is
        wanted, not its history (its tree, for the change selection): the SHA alone, one
        commit deep, first; a first fetch of a large repository's every branch takes far
        longer. `token`: a private repository's read token."""
        check_sha(sha)
        mirror = self.mirror_path(url)
        with locked(mirror.with_suffix(".lock")):
            if not (mirror / "HEAD").exists():
                if mirror.exists():
                    shutil.rmtree(mirror)
                git(["init", "--bare", "--quiet", str(mirror)])
            if self.has_commit(mirror, sha):
                return mirror
            wanted = [[sha]]
            if pr_number is not None:
                pr = int(pr_number)
                wanted.append([f"+refs/pull/{pr}/head:refs/pull/{pr}/head"])
            every = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
            # (options, refspecs): history first, the PR's head, then the SHA itself; shallow,
            # the SHA and the PR's head one deep before any of that.
            attempts = [([], every), *(([], w) for w in reversed(wanted))]
            if shallow:
                attempts = [(["--depth=1"], w) for w in wanted] + attempts
            problems = []
            for options, refspecs in attempts:
                try:
                    fetch = ["fetch", "--quiet", "--no-tags", *options, "--", url, *refspecs]
                    git(fetch, cwd=mirror, token=token)
                except GitError as exc:
                    problems.append(str(exc))
                    continue
                if self.has_commit(mirror, sha):
                    return mirror
            why = "; ".join(problems) or "no fetched ref contains it"
            raise GitError(f"commit {sha} not found in {url}: {why}")

    def fetch_branch(
        self, mirror: Path, url: str, branch: str, *, token: str | None = None
    ) -> None:
        """Bring `branch` of `url` up to date in the mirror (for the merge base)."""
        if branch.startswith("-") or not re.match(r"^[A-Za-z0-9._/-]+$", branch):
            raise GitError(f"not a branch name: {branch!r}")
        with locked(mirror.with_suffix(".lock")):
            refspec = f"+refs/heads/{branch}:refs/heads/{branch}"
            git(["fetch", "--quiet", "--no-tags", "--", url, refspec], cwd=mirror, token=token)


def python_blobs(repo: Path, ref: str) -> dict[str, tuple[str, int] | None]:
    """Every path of the tree at `ref` → its blob and size (None for a file not read: not
    Python, or past MAX_BLOB_BYTES)."""
    out = git(["ls-tree", "-r", "-l", "-z", "--end-of-options", ref], cwd=repo)
    found: dict[str, tuple[str, int] | None] = {}
    for entry in filter(None, out.split("\0")):
        meta, _, path = entry.partition("\t")
        kind, sha, size = meta.split()[1:4]
        python = kind == "blob" and path.endswith(".py") and int(size) <= MAX_BLOB_BYTES
        found[path] = (sha, int(size)) if python else None
    return found


def read_blobs(repo: Path, shas: Sequence[str], limit: int = MAX_BLOB_BYTES) -> dict[str, str]:
    """The blobs' texts, read by one `git cat-file --batch` (a tree has thousands); a blob
    over `limit` bytes is left out, as a file that cannot be parsed."""
    unique = list(dict.fromkeys(shas))
    proc = subprocess.run(
        ["git", *GIT_SAFE, "-C", str(repo), "cat-file", "--batch"],
        input="".join(f"{sha}\n" for sha in unique).encode(),
        capture_output=True,
        env=_env(),
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise GitError(f"git cat-file: {proc.stderr.decode(errors='replace').strip()}")
    data, at, found = proc.stdout, 0, {}
    for sha in unique:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        at = end + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        if size <= limit:
            found[sha] = data[at : at + size].decode("utf-8", errors="replace")
        at += size + 1
    return found


class Tree:
    """A commit's tree as the change selection reads it: every path, and the Python sources
    (read up front, in one call)."""

    def __init__(self, repo: Path, ref: str, budget: int = MAX_TREE_BYTES) -> None:
        """GitError when the tree's Python sources come to more than `budget` bytes: a pull
        request's tree is read into memory, and a hostile one could be any size."""
        blobs = python_blobs(repo, ref)
        total = sum(blob[1] for blob in blobs.values() if blob)
        if total > budget:
            raise GitError(
                f"the Python files of {ref[:12]} come to {total / 2**20:,.0f} MiB; "
                f"the selection reads at most {budget / 2**20:,.0f} MiB"
            )
        self._blobs = {path: blob[0] for path, blob in blobs.items() if blob}
        self._sources = read_blobs(repo, list(self._blobs.values()))
        self.paths = list(blobs)

    def read(self, path: str) -> str | None:
        """A Python file's source; None for a path that is not one (or too large to read)."""
        return self._sources.get(self._blobs.get(path, ""))


def changed_between(repo: Path, before: str, after: str) -> list[tuple[str, str, str | None]]:
    """What `after` changes against `before` (two commits whose trees the mirror holds, one
    deep will do): each file's status letter (A, M, D, R, C, T), its path at `after` (its old
    one for a removal) and the path it was renamed or copied from."""
    out = _run_bytes(["diff", "--raw", "-z", "-M", "--no-abbrev", "--end-of-options",
                      check_sha(before), check_sha(after)], repo)  # fmt: skip
    fields = out.decode("utf-8", "replace").split("\0")
    found: list[tuple[str, str, str | None]] = []
    at = 0
    while at < len(fields) - 1:
        letter = fields[at].lstrip(":").split()[-1][:1]
        if letter in "RC":
            found.append((letter, fields[at + 2], fields[at + 1]))
            at += 3
        else:
            found.append((letter, fields[at + 1], None))
            at += 2
    return found


def diff_zero(repo: Path, before: str, after: str) -> str:
    """`git diff -U0` of `after` against `before`, renames found (its hunks give each file's
    changed lines); undecodable bytes replaced."""
    argv = ["diff", "-U0", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
            "--end-of-options", check_sha(before), check_sha(after)]  # fmt: skip
    return _run_bytes(argv, repo).decode("utf-8", "replace")


def _run_bytes(args: Sequence[str], cwd: Path, timeout: float = 300) -> bytes:
    """git with `args`, its stdout as bytes (a diff is any bytes), or GitError."""
    try:
        proc = subprocess.run(
            ["git", *GIT_SAFE, *args], cwd=cwd, env=_env(), capture_output=True,
            timeout=timeout, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"git {args[0]}: {exc}") from exc
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"git {' '.join(args[:2])}: {' / '.join(detail[-3:]) or 'failed'}")
    return proc.stdout
