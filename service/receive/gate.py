"""Who may start jobs, as the service finds out: the pure trust decision (`trust`) over the
commenter's repository permission and team memberships, read from GitHub and cached."""

from __future__ import annotations

from service.github.client import GitHubClient
from service.receive.trust import (
    Commenter,
    TrustDecision,
    TrustPolicy,
    TTLCache,
    decide,
    needs_permission_lookup,
)


class Gate:
    def __init__(self, github: GitHubClient, policy: TrustPolicy, cache_seconds: float) -> None:
        self.github = github
        self.policy = policy
        ttl = max(cache_seconds, 0.001)
        self.permissions: TTLCache[tuple[str, str], str] = TTLCache(ttl)
        self.memberships: TTLCache[tuple[str, str, str], bool] = TTLCache(ttl)

    def decide(self, repo: str, commenter: Commenter) -> TrustDecision:
        """The trust decision, reading permission and team membership (cached) as needed."""
        if needs_permission_lookup(commenter, self.policy):
            key = (repo, commenter.login.lower())
            permission = self.permissions.get(key)
            if permission is None:
                permission = self.github.permission(repo, commenter.login)
                self.permissions.set(key, permission)
            commenter = Commenter(commenter.login, commenter.type, permission)
        decision = decide(commenter, self.policy)
        if decision.allowed or not self.policy.allowed_teams:
            return decision
        teams = frozenset(t for t in self.policy.allowed_teams if self._member(repo, t, commenter))
        return decide(
            Commenter(commenter.login, commenter.type, commenter.permission, teams), self.policy
        )

    def _member(self, repo: str, team: str, commenter: Commenter) -> bool:
        org, _, slug = team.rpartition("/")
        org = org or repo.split("/")[0]
        key = (org.lower(), slug.lower(), commenter.login.lower())
        known = self.memberships.get(key)
        if known is None:
            known = self.github.team_member(org, slug, commenter.login)
            self.memberships.set(key, known)
        return known
