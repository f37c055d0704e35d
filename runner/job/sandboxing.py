"""Where a step runs: an allow-list of environment variables (never the runner's own secrets),
and a jail: the job user, its own PID namespace, no network.

The steps run code from a pull request. They get PATH, a per-job HOME, the locale, the
workflow's variables, the slot's visible-devices variable and cache directories, and nothing
else: no runner token, no service URL, no cloud credentials inherited from the daemon.

A runner started as root runs each step as the job user (`Jail`): `unshare` gives the step its
own PID namespace (everything it starts dies with it), mount namespace (its own /proc, the
runner's state, mirrors, logs and other slots' workspaces covered) and, unless turned off,
network namespace (no network, loopback down); `runner/job/jail.py` drops to the job user with no
capabilities before the step's command runs. Without a job user (a runner that is not root,
or one told to keep its own user) a step only loses the network, where the host allows it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

# Inherited from the daemon's environment when set, with the workflow's `device.inherit` (a
# vendor's toolkit: MUSA_HOME); everything else is dropped.
INHERITED = ("PATH", "LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH")
# Names a workflow may never set, whatever its file says.
FORBIDDEN_PREFIXES = ("ONDEMAND_",)


def scrubbed_env(
    source: Mapping[str, str],
    *,
    home: Path,
    workflow_env: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
    visible_devices: tuple[str, str] | None = None,
    inherited: Sequence[str] = (),
) -> dict[str, str]:
    """The environment of a step, built from an allow-list (see the module docstring) and the
    workflow's `inherited` names.

    `visible_devices` is (variable, value), e.g. ("CUDA_VISIBLE_DEVICES", "1") for slot 1.
    """
    kept = (*INHERITED, *(n for n in inherited if not n.startswith(FORBIDDEN_PREFIXES)))
    env = {name: source[name] for name in kept if name in source}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    cache = home / ".cache"
    env.update(
        HOME=str(home),
        TMPDIR=str(home / "tmp"),
        XDG_CACHE_HOME=str(cache),
        TRITON_CACHE_DIR=str(cache / "triton"),
        TORCHINDUCTOR_CACHE_DIR=str(cache / "torchinductor"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        GIT_TERMINAL_PROMPT="0",
    )
    for mapping in (workflow_env, extra or {}):
        for name, value in mapping.items():
            if name.startswith(FORBIDDEN_PREFIXES):
                continue
            env[name] = value
    if visible_devices is not None:
        var, value = visible_devices
        env[var] = value
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return env


def visible_devices(var: str | None, device: str | None) -> tuple[str, str] | None:
    """The (variable, value) that pins a step to `device`, e.g. ("CUDA_VISIBLE_DEVICES", "1");
    None when the backend has no such variable or the slot is not pinned to a device."""
    if var and device is not None:
        return var, device
    return None


JAIL_INIT = Path(__file__).with_name("jail.py")


class JailError(RuntimeError):
    """The host cannot jail steps as configured; the message says what to change."""


@dataclass(frozen=True)
class Jail:
    """How a step's argv is confined. With a `user` (a runner started as root): namespaces and
    the drop to that user, `hide` being the runner's paths a step must not see (a slot adds the
    other slots'). Without one: `prefix` alone, which at most takes the network away."""

    prefix: tuple[str, ...]
    network: bool
    user: str | None = None
    uid: int = -1
    gid: int = -1
    groups: tuple[int, ...] = ()  # the job user's own (a GPU device group, say)
    hide: tuple[Path, ...] = field(default_factory=tuple)

    def hiding(self, *paths: Path) -> Jail:
        return replace(self, hide=(*self.hide, *paths))

    @property
    def owner(self) -> tuple[int, int] | None:
        """(uid, gid) that the step's workspace must belong to, when steps change user."""
        return (self.uid, self.gid) if self.user is not None else None

    def argv(self, command: Sequence[str]) -> list[str]:
        """`command` confined: run it with these words in front (no shell anywhere)."""
        if self.user is None:
            return [*self.prefix, *command]
        spaces = ["--pid", "--fork", "--kill-child", "--mount-proc"]
        if self.network:
            spaces.append("--net")
        init = [sys.executable, "-I", str(JAIL_INIT), "--uid", str(self.uid)]
        init += ["--gid", str(self.gid), "--groups", ",".join(map(str, self.groups))]
        for path in self.hide:
            init += ["--hide", str(path)]
        return [*self.prefix, *spaces, "--", *init, "--", *command]


def jail_for_host(job_user: str | None, network: bool) -> Jail | None:
    """The jail this host allows: as root with `job_user`, the full one (JailError when the
    user does not exist or cannot be used); otherwise only a network namespace where the host
    allows one (`unshare -n` as root, `unshare -r -n` in an unprivileged user namespace), or
    None: steps run unconfined, and the runner says so at start."""
    unshare = shutil.which("unshare")
    if job_user is not None and os.geteuid() == 0:
        if unshare is None:
            raise JailError("running steps as the job user needs unshare (util-linux)")
        try:
            entry = pwd.getpwnam(job_user)
        except KeyError as exc:
            raise JailError(
                f"job user {job_user!r} does not exist: create it (useradd --system "
                f"--no-create-home --shell /usr/sbin/nologin {job_user}) or pass --job-user"
            ) from exc
        if entry.pw_uid == 0:
            raise JailError(f"job user {job_user!r} is root: steps must not run as root")
        groups = tuple(g for g in os.getgrouplist(job_user, entry.pw_gid) if g != 0)
        return Jail((unshare,), network, job_user, entry.pw_uid, entry.pw_gid, groups)
    if unshare is None or not network:
        return None
    for prefix in ((unshare, "-n"), (unshare, "-r", "-n")):
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return Jail(prefix, network)
    return None


def check_jail(jail: Jail, python: str) -> None:
    """Fail early, with what to change, when the job user cannot run `python` (the runner's, or
    a backend's job interpreter: a Python under /root, say): otherwise every job would error in
    its first step."""
    try:
        done = subprocess.run(
            jail.argv([python, "-I", "-c", "import sys"]),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JailError(f"cannot start a jailed step: {exc}") from exc
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise JailError(
            f"the job user {jail.user} cannot run {python} "
            f"({detail[0]}): install that Python where that user can read and run it"
        )


def give(path: Path, owner: tuple[int, int] | None, mode: int = 0o700) -> None:
    """Make `path` (a directory, created if needed) and everything in it the job user's.
    Nothing is followed: a link a job left where the directory should be is removed first
    (the runner is root: following it would hand the job whatever it points at)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    path.mkdir(parents=True, exist_ok=True)
    if owner is None:
        return
    uid, gid = owner
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), uid, gid)
    os.chown(path, uid, gid)
    path.chmod(mode)
