"""`ondemand doctor service|runner`: what a deployment has wrong, each finding with the setting
or step that fixes it. The checks live with their part (`service.doctor`, `runner.doctor`);
this module holds what both share: a finding, its rendering, the exit status, the dispatch."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum


class Level(StrEnum):
    ok = "ok"
    warn = "warn"  # works, but not as a deployment should
    fail = "fail"  # something users will see break


MARKS = {Level.ok: "✓", Level.warn: "!", Level.fail: "✗"}


@dataclass(frozen=True)
class Finding:
    """One check's outcome: what it looked at, what it found, and how to fix it."""

    check: str
    level: Level
    detail: str
    fix: str = ""


def ok(check: str, detail: str) -> Finding:
    return Finding(check, Level.ok, detail)


def warn(check: str, detail: str, fix: str) -> Finding:
    return Finding(check, Level.warn, detail, fix)


def fail(check: str, detail: str, fix: str) -> Finding:
    return Finding(check, Level.fail, detail, fix)


def render(title: str, findings: Sequence[Finding]) -> str:
    """The findings as lines a terminal shows: a mark, the check, what was found, and under a
    problem the fix; then one summary line."""
    width = max((len(f.check) for f in findings), default=0)
    lines = [title]
    for finding in findings:
        lines.append(f"  {MARKS[finding.level]} {finding.check:<{width}}  {finding.detail}")
        if finding.fix:
            lines.append(f"    {'':<{width}}  → {finding.fix}")
    failed = sum(f.level is Level.fail for f in findings)
    warned = sum(f.level is Level.warn for f in findings)
    lines.append(f"{failed} failed, {warned} warnings, {len(findings) - failed - warned} ok")
    return "\n".join(lines)


def exit_status(findings: Iterable[Finding]) -> int:
    """1 when any check failed, else 0 (warnings do not fail)."""
    return 1 if any(f.level is Level.fail for f in findings) else 0


PARTS = {"service": "service.doctor", "runner": "runner.doctor"}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in PARTS:
        print(
            "usage: ondemand doctor service [options]   (the service's settings, database, "
            "GitHub)\n       ondemand doctor runner [options]    (this runner's service, "
            "devices, Python, packages, git)",
            file=sys.stderr,
        )
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    module = importlib.import_module(PARTS[argv[0]])
    return int(module.main(argv[1:]))
