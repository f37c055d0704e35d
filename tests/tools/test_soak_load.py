"""The soak's load keeps pull requests open for the whole run: closing more than a repository
has branches used to leave it with none, and the load's thread died on the next command
(an hour's soak loaded for 27 minutes)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

from tools.soak.load import OPEN_PULLS, Load
from tools.soak.repo import SoakRepo


class _Recorder:
    """What the load asks of GitHub, answered as the sandbox would (new numbers, ids)."""

    def __init__(self) -> None:
        self.numbers = itertools.count(1)
        self.ids = itertools.count(100)
        self.opened: list[tuple[str, str]] = []
        self.closed: list[int] = []

    def open_pull(self, repo: str, *, head: str, **_: Any) -> dict[str, Any]:
        self.opened.append((repo, head))
        return {"number": next(self.numbers)}

    def close_pull(self, repo: str, number: int, **_: Any) -> None:
        self.closed.append(number)

    def comment(self, repo: str, number: int, user: str, body: str) -> dict[str, Any]:
        return {"id": next(self.ids)}


def test_closing_more_pull_requests_than_branches_keeps_every_repository_loaded(
    tmp_path: Path,
) -> None:
    repos = [
        SoakRepo(f"o/r{i}", tmp_path, "0" * 40, {"pr-0": ["a" * 40], "pr-1": ["b" * 40]})
        for i in range(2)
    ]
    admin = _Recorder()
    load = Load(admin, repos, random.Random(3), "http://x", "s", list)  # type: ignore[arg-type]
    load.open_pulls()
    assert all(len(load.pulls[r.name]) == OPEN_PULLS for r in repos)  # 3 on 2 branches
    for _ in range(40):
        load._close()
        assert all(len(load.pulls[r.name]) == OPEN_PULLS for r in repos)
    numbers = [p.number for pulls in load.pulls.values() for p in pulls]
    assert len(admin.closed) == 40 and not set(numbers) & set(admin.closed)
    assert {head for _, head in admin.opened} == {"a" * 40, "b" * 40}
    load._test()  # a command still finds a pull request
    assert load.sent[-1].kind == "test"
