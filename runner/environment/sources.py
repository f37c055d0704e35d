"""Where the job's environment gets what the host lacks (the runner's wheelhouse and/or
index: `--wheelhouse`, `--index-url`), and, when pip could not get it, which packages and which
runner setting would fix it."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from runner.environment.requirements import contains
from workflows.device import canonical

_NOT_FOUND = re.compile(r"No matching distribution found for (\S+)")


@dataclass(frozen=True)
class PackageSources:
    """Where the environment build may get what the host lacks (runner settings)."""

    wheelhouse: Path | None = None
    index_url: str | None = None

    def pip_args(self) -> list[str]:
        args: list[str] = []
        if self.index_url:
            args += ["--index-url", self.index_url]
        elif self.wheelhouse is not None:
            args.append("--no-index")
        if self.wheelhouse is not None:
            args += ["--find-links", str(self.wheelhouse)]
        return args

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """`--wheelhouse` and `--index-url` (or ONDEMAND_WHEELHOUSE, ONDEMAND_INDEX_URL)."""
        parser.add_argument(
            "--wheelhouse",
            type=Path,
            default=os.environ.get("ONDEMAND_WHEELHOUSE") or None,
            help="a directory of wheels for what a repository needs and the host lacks "
            "(alone: no index is asked; for offline hosts)",
        )
        parser.add_argument(
            "--index-url",
            default=os.environ.get("ONDEMAND_INDEX_URL") or None,
            help="the package index the environment build may use",
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PackageSources:
        return cls(wheelhouse=args.wheelhouse, index_url=args.index_url)

    def lacking(self, reqs: Sequence[str]) -> tuple[str, ...]:
        """Of `reqs`, those no wheel in the wheelhouse satisfies by name and version (pip
        still checks the platform tags). With an index, or no wheelhouse, none is known."""
        if self.index_url or self.wheelhouse is None:
            return ()
        held: dict[str, list[str]] = {}
        for wheel in self.wheelhouse.glob("*.whl"):
            parts = wheel.name.split("-")
            if len(parts) >= 5:
                held.setdefault(canonical(parts[0]), []).append(parts[1])
        lacking = []
        for line in reqs:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                lacking.append(line)
                continue
            versions = held.get(canonical(req.name), [])
            if not any(contains(req, v) for v in versions):
                lacking.append(line)
        return tuple(lacking)

    def describe(self) -> str:
        found = [f"wheelhouse {self.wheelhouse}"] if self.wheelhouse else []
        found += [f"index {self.index_url}"] if self.index_url else []
        return " and ".join(found) or "pip's default index"


def not_installed(
    missing: Sequence[str], sources: PackageSources, pip_output: str, outside: Sequence[str] = ()
) -> str:
    """Why the environment step failed: the requirements no source holds, first, with the
    runner setting that fixes it (and where the runner alone sees them); then pip's own last
    lines."""
    known = sources.lacking(missing)  # what the wheelhouse surely lacks, read before pip
    absent = known or tuple(_NOT_FOUND.findall(pip_output)) or tuple(missing)
    them = "it" if len(absent) == 1 else "them"
    others = [m for m in missing if m not in absent]
    held = "which it holds" if known else "which pip stopped before"
    also = f" (the host also lacks {', '.join(others)}, {held})" if others else ""
    return (
        f"missing on this host and in {sources.describe()}: {', '.join(absent)}{also}. "
        f"Put {'its wheel' if len(absent) == 1 else 'their wheels'} in the runner's wheelhouse "
        f"(--wheelhouse DIR or ONDEMAND_WHEELHOUSE), or let it reach an index that has {them} "
        f"(--index-url URL or ONDEMAND_INDEX_URL).{_outside(outside)}\n{pip_output}"
    )


def _outside(seen: Sequence[str]) -> str:
    if not seen:
        return ""
    return (
        f" The runner itself imports {', '.join(seen)} through its own path (PYTHONPATH), "
        "which jobs do not see: install it into the host's site-packages, or give the wheel."
    )
