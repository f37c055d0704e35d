"""The first process of a job step's namespaces: `python -I jail.py --uid U --gid G [--groups
G1,G2] [--hide PATH]... -- ARGV...`, started as root by `unshare --pid --fork --kill-child
--mount-proc [--net]`.

Still root, inside the new mount namespace, it covers each `--hide` path (the runner's state,
mirrors, logs, other slots' workspaces) with an empty read-only tmpfs; then it drops to the job
user for good: only the groups the job user has (a GPU's device group, say), an empty
capability bounding set, no new privileges (setuid binaries gain nothing). It runs ARGV as
its child, forwards SIGTERM and SIGINT to it (the kernel delivers to a namespace's first
process only the signals it handles), reaps the orphans the step leaves, and exits with the
child's status; the kernel then kills everything still alive in the namespace. Standard
library only, run isolated (`-I`): nothing of the checkout can be imported into it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
CAP_LAST = 63
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def hide(paths: list[str]) -> None:
    """Cover each existing path with an empty, read-only tmpfs (this namespace only)."""
    libc = _libc()
    flags = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC
    for path in paths:
        if not os.path.isdir(path):
            continue
        if libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, b"size=4k,mode=0555") != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"cannot hide {path}: {os.strerror(err)}")


def drop_privileges(uid: int, gid: int, groups: list[int]) -> None:
    """Become `uid`:`gid` with only `groups`, no capabilities and no way to gain any."""
    libc = _libc()
    if os.geteuid() == 0:
        for cap in range(CAP_LAST + 1):
            libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)  # unknown numbers fail: harmless
        os.setgroups(groups)
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")


def parse(argv: list[str]) -> tuple[int, int, list[int], list[str], list[str]]:
    uid = gid = -1
    groups: list[int] = []
    hidden: list[str] = []
    i = 0
    while i < len(argv) and argv[i] != "--":
        flag, value = argv[i], argv[i + 1]
        if flag == "--uid":
            uid = int(value)
        elif flag == "--gid":
            gid = int(value)
        elif flag == "--groups":
            groups = [int(g) for g in value.split(",") if g]
        elif flag == "--hide":
            hidden.append(value)
        else:
            raise SystemExit(f"jail: unknown option {flag}")
        i += 2
    command = argv[i + 1 :]
    if uid < 0 or gid < 0 or not command:
        raise SystemExit("usage: jail.py --uid U --gid G [--groups G,...] [--hide PATH]... -- ARGV")
    return uid, gid, groups, hidden, command


def main(argv: list[str]) -> int:
    uid, gid, groups, hidden, command = parse(argv)
    hide(hidden)
    drop_privileges(uid, gid, groups)
    child = os.fork()
    if child == 0:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            print(f"jail: {command[0]}: {exc}", file=sys.stderr)
            os._exit(127)

    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 0
        except InterruptedError:
            continue
        if pid == child:
            return os.waitstatus_to_exitcode(status) if status else 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.exit(code if code >= 0 else 128 - code)
