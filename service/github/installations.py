"""Whether the App's installations granted what it needs. `check_installations` lists each
installation's missing permissions (the service's start-up check, and anything else that wants
to know); `InstallationProblems` keeps what the last check and GitHub's `installation` events
found, for the log and the dashboard."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from service.github.client import GitHubClient, GitHubError, InstallationInfo
from service.github.permissions import Permission, missing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PermissionProblem:
    """An installation of the App (`installation_id`, on `account`) lacks `permission`; it
    has `granted` of it ("none" when not at all)."""

    installation_id: int
    account: str
    permission: Permission
    granted: str = "none"

    def message(self) -> str:
        """One line for the log: which permission, which installation, what it breaks."""
        return (
            f"GitHub App installation {self.installation_id} on {self.account or '?'} lacks "
            f"{self.permission.label} (has {self.granted}): {self.permission.without}; an "
            f"owner of {self.account or 'the account'} must grant it (accept the App's new "
            "permissions)"
        )


def problems_of(
    installation_id: int, account: str, granted: Mapping[str, str], *, teams: bool = False
) -> list[PermissionProblem]:
    """What one installation lacks, given its granted `permissions` object."""
    return [
        PermissionProblem(installation_id, account, p, str(granted.get(p.name, "none")))
        for p in missing(granted, teams=teams)
    ]


def check_installations(client: GitHubClient, *, teams: bool = False) -> list[PermissionProblem]:
    """Every installation's missing permissions (suspended installations left out; none for a
    token user, who has no installation). `teams`: the service uses team allow-lists, so
    `members: read` is needed too. Raises GitHubError when GitHub cannot be asked."""
    found: list[PermissionProblem] = []
    for info in client.installations():
        if not info.suspended:
            found += problems_of(info.id, info.account, info.permissions, teams=teams)
    return found


class InstallationProblems:
    """What the App's installations lack, as last found: thread-safe, per process."""

    def __init__(self, *, teams: bool = False) -> None:
        self.teams = teams
        self._lock = threading.Lock()
        self._by_installation: dict[int, list[PermissionProblem]] = {}

    def all(self) -> list[PermissionProblem]:
        with self._lock:
            return [p for _, found in sorted(self._by_installation.items()) for p in found]

    def replace(self, problems: list[PermissionProblem]) -> None:
        """A whole check's findings."""
        by: dict[int, list[PermissionProblem]] = {}
        for problem in problems:
            by.setdefault(problem.installation_id, []).append(problem)
        with self._lock:
            self._by_installation = by

    def record(self, info: InstallationInfo) -> list[PermissionProblem]:
        """One installation's permissions as GitHub now says (an `installation` event)."""
        found = problems_of(info.id, info.account, info.permissions, teams=self.teams)
        with self._lock:
            self._by_installation[info.id] = found
        return found

    def check(self, client: GitHubClient) -> list[PermissionProblem]:
        """Check every installation now; logs one line per problem, or one saying GitHub could
        not be asked (never raises: it must not stop the service)."""
        try:
            found = check_installations(client, teams=self.teams)
        except GitHubError as exc:
            log.warning("could not check the GitHub App's installations' permissions: %s", exc)
            return []
        self.replace(found)
        for problem in found:
            log.warning("%s", problem.message())
        return found

    def check_in_background(self, client: GitHubClient) -> threading.Thread:
        """`check` on a daemon thread, so start-up never waits for GitHub."""
        thread = threading.Thread(
            target=self.check, args=(client,), name="installations-check", daemon=True
        )
        thread.start()
        return thread
