"""What the client's parts (`reads.py`, `posts.py`, `issues.py`) call of the client itself:
its transport, stated once. `GitHubClient` inherits the parts and defines each of these, with
its pauses, budget and error mapping."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Transport:
    """The client's own calls, for the parts that inherit it."""

    def _request(
        self,
        repo: str,
        verb: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        need: str | None = None,
    ) -> Any:
        raise NotImplementedError  # the client's

    def _call(self, fn: Callable[[], T], need: str | None = None, repo: str | None = None) -> T:
        raise NotImplementedError  # the client's

    def _repo(self, repo: str) -> Any:
        raise NotImplementedError  # the client's

    def login(self) -> str:
        raise NotImplementedError  # the client's
