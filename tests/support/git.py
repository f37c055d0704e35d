"""Run git in a test repository with a fixed identity and no user configuration."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(path: Path, *args: str) -> str:
    """`git -C path ARGS…`; its stdout, stripped. Raises on a non-zero exit."""
    env = {
        "GIT_AUTHOR_NAME": "Alice",
        "GIT_AUTHOR_EMAIL": "alice@example.com",
        "GIT_COMMITTER_NAME": "Alice",
        "GIT_COMMITTER_EMAIL": "alice@example.com",
        "HOME": str(path),
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    done = subprocess.run(
        ["git", "-C", str(path), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()
