"""What the service needs of GitHub, in one place: each permission the code uses (GitHub's key,
its level, what for, and what breaks without it) and the webhook events it handles. The App's
manifest (`ondemand app-manifest`), the docs' table (`markdown`), the start-up check of the
installations (`missing`) and the naming of a refused call all read this list. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

# GitHub's access levels, weakest first: a level includes those before it.
RANK = {"none": 0, "read": 1, "write": 2, "admin": 3}


@dataclass(frozen=True)
class Permission:
    """One permission: `name` and `level` as GitHub's API spells them (`contents`, `read`),
    `title` as its settings page does. `only`: "" the App always needs it; "teams" only with
    team allow-lists (`ONDEMAND_ALLOWED_TEAMS`); "token" only a token user's (an App writes
    check runs instead)."""

    name: str
    level: str
    scope: Literal["repository", "organization"]
    title: str
    used_for: str
    without: str
    cannot: str  # "The App cannot …", in a reply to a command that needed it
    only: Literal["", "teams", "token"] = ""

    @property
    def key(self) -> str:
        """`contents:read`: how a parked delivery or outbox item names what it waits for."""
        return f"{self.name}:{self.level}"

    @property
    def label(self) -> str:
        """`Contents: read`, as people read it."""
        return f"{self.title}: {self.level}"

    @property
    def when(self) -> str:
        if self.only == "teams":
            return "with team allow-lists (`ONDEMAND_ALLOWED_TEAMS`)"
        if self.only == "token":
            return "a token user only (`ONDEMAND_GITHUB_TOKEN`); an App writes check runs"
        return "always"


@dataclass(frozen=True)
class Event:
    """A webhook event the App subscribes to: `name` as GitHub's API spells it."""

    name: str
    title: str
    used_for: str


PERMISSIONS: tuple[Permission, ...] = (
    Permission(
        "contents",
        "read",
        "repository",
        "Contents",
        used_for="`.github/ondemand.yml`, read on every `/test` and every push to the default "
        "branch; a pull request's or a push's tree for the operators it changes; each job's "
        "read token for its runner",
        without="a private repository's commands wait, and the pull request is told once",
        cannot="read this repository's contents",
    ),
    Permission(
        "merge_queues",
        "read",
        "repository",
        "Merge queues",
        used_for="the `merge_group` event, so a merge queue that requires `ondemand` gets it",
        without="a merge queue that requires `ondemand` waits for it until its time-out",
        cannot="hear of this repository's merge queue",
    ),
    Permission(
        "metadata",
        "read",
        "repository",
        "Metadata",
        used_for="a commenter's permission on the repository (who may start jobs)",
        without="nothing works; GitHub grants it to every App",
        cannot="read this repository",
    ),
    Permission(
        "pull_requests",
        "read",
        "repository",
        "Pull requests",
        used_for="a pull request's head, base and files (what a `/test` approves, `/test "
        "changed`); the pull request a push to the default branch merged",
        without="a private repository's commands wait, and the pull request is told once",
        cannot="read this pull request",
    ),
    Permission(
        "issues",
        "write",
        "repository",
        "Issues",
        used_for="the 👀 reaction, the replies and the result comments on pull requests; the "
        "default branch's regression alerts (a comment on the merged pull request, one issue "
        "per operator and backend)",
        without="nothing is said on pull requests or in issues: it waits, and the dashboard "
        "says why",
        cannot="comment on this pull request",
    ),
    Permission(
        "checks",
        "write",
        "repository",
        "Checks",
        used_for="one check run per job, with the report, and its Re-run button",
        without="check runs wait, and the dashboard says why",
        cannot="write check runs",
    ),
    Permission(
        "members",
        "read",
        "organization",
        "Members",
        used_for="team memberships, for `ONDEMAND_ALLOWED_TEAMS`",
        without="commands that need a team membership wait",
        cannot="read team memberships",
        only="teams",
    ),
    Permission(
        "statuses",
        "write",
        "repository",
        "Commit statuses",
        used_for="one commit status per job",
        without="statuses wait, and the dashboard says why",
        cannot="set commit statuses",
        only="token",
    ),
)

EVENTS: tuple[Event, ...] = (
    Event("issue_comment", "Issue comment", "the commands in pull request comments"),
    Event(
        "pull_request",
        "Pull request",
        "pushes (an approval binds to the head it saw), closes (cancel), runs on push",
    ),
    Event("check_run", "Check run", "the Re-run button of a job's check run"),
    Event(
        "push",
        "Push",
        "pushes to the default branch: its own runs (`main.on_push` in the settings), each "
        "compared with the last default-branch commit that ran the operator",
    ),
    Event(
        "merge_group",
        "Merge group",
        "a merge queue's group: what `merge_queue` in the settings runs, and the `ondemand` "
        "check on its head",
    ),
)

# Sent to every App without a subscription: `new_permissions_accepted` retries what waited.
INSTALLATION_EVENT = "installation"


def find(name: str, level: str | None = None) -> Permission | None:
    """The permission `name` the service uses (at `level`, when given), or None."""
    for permission in PERMISSIONS:
        if permission.name == name and level in (None, permission.level):
            return permission
    return None


def app_permissions(*, teams: bool = False) -> tuple[Permission, ...]:
    """What the App asks for: every permission but a token user's, and `members` only with
    team allow-lists."""
    return tuple(p for p in PERMISSIONS if p.only == "" or (p.only == "teams" and teams))


def missing(granted: Mapping[str, str] | None, *, teams: bool = False) -> list[Permission]:
    """What an installation lacks of what the App needs, given its granted `permissions` (the
    object of GitHub's `GET /app/installations`): absent, or below the level asked for."""
    have = granted or {}
    return [
        p
        for p in app_permissions(teams=teams)
        if RANK.get(str(have.get(p.name, "none")), 0) < RANK[p.level]
    ]


def accepted(header: str | None) -> list[tuple[str, str]]:
    """The (permission, level) pairs of GitHub's `X-Accepted-GitHub-Permissions` header, in
    its order: alternative sets are separated by `;`, a set's members by `,`
    (`issues=write; pull_requests=write`)."""
    pairs: list[tuple[str, str]] = []
    for alternative in (header or "").split(";"):
        for item in alternative.split(","):
            name, _, level = item.strip().partition("=")
            if name and level:
                pairs.append((name.strip(), level.strip()))
    return pairs


def manifest(name: str, public_url: str, *, teams: bool = False) -> dict[str, Any]:
    """The GitHub App manifest (GitHub's "register an App from a manifest" flow): its webhook
    at `public_url`/webhook, private, asking for `app_permissions` and subscribing to
    `EVENTS`."""
    url = public_url.rstrip("/")
    return {
        "name": name,
        "url": url,
        "hook_attributes": {"url": f"{url}/webhook", "active": True},
        "redirect_url": f"{url}/",
        "public": False,
        "default_permissions": {p.name: p.level for p in app_permissions(teams=teams)},
        "default_events": [e.name for e in EVENTS],
    }


def markdown() -> str:
    """The permissions and events as the docs show them (a test holds the docs to it)."""
    lines = [
        "| permission | access | needed | what for | without it |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {p.title} ({p.scope}) | {p.level} | {p.when} | {p.used_for} | {p.without} |"
        for p in PERMISSIONS
    ]
    lines += ["", "| event | what for |", "|---|---|"]
    lines += [f"| {e.title} (`{e.name}`) | {e.used_for} |" for e in EVENTS]
    return "\n".join(lines) + "\n"
