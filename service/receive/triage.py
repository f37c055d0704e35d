"""Which deliveries need processing, decided from the payload alone (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from service.receive.commands.scan import may_hold_commands

HANDLED_PR_ACTIONS = frozenset({"opened", "reopened", "synchronize", "closed"})


@dataclass(frozen=True)
class Triage:
    handled: bool
    why: str


def is_bot_sender(sender: Any, bot_login: str | None) -> bool:
    if not isinstance(sender, dict):
        return False
    login = str(sender.get("login") or "")
    return sender.get("type") == "Bot" or login.endswith("[bot]") or login == bot_login


def triage(event: str, payload: dict[str, Any], bot_login: str | None) -> Triage:
    """Whether a delivery needs processing, and why not when it does not."""
    action = payload.get("action")
    if event == "ping":
        return Triage(False, "pong")
    if event == "issue_comment":
        if action != "created":
            return Triage(False, f"issue_comment {action}: only created comments are commands")
        issue = payload.get("issue")
        if not isinstance(issue, dict) or not issue.get("pull_request"):
            return Triage(False, "comment on an issue, not a pull request")
        if is_bot_sender(payload.get("sender"), bot_login):
            return Triage(False, "comment by a bot")
        comment = payload.get("comment")
        if not isinstance(comment, dict) or not isinstance(comment.get("body"), str):
            return Triage(False, "comment without a body")
        if not may_hold_commands(comment["body"]):
            return Triage(False, "no command line in the comment")
        return Triage(True, "command candidate")
    if event == "pull_request":
        if action in HANDLED_PR_ACTIONS:
            return Triage(True, f"pull_request {action}")
        return Triage(False, f"pull_request {action}: not handled")
    if event == "installation":
        if action == "new_permissions_accepted":
            return Triage(True, "installation new_permissions_accepted: what waited runs")
        return Triage(False, f"installation {action}: not handled")
    if event == "check_run":
        if action == "rerequested":
            return Triage(True, "check_run rerequested: the Re-run button")
        return Triage(False, f"check_run {action}: not handled")
    if event == "merge_group":
        if action == "checks_requested":
            return Triage(True, "merge_group checks_requested: the queue waits for `ondemand`")
        if action == "destroyed":
            return Triage(True, "merge_group destroyed: its jobs still on their way stop")
        return Triage(False, f"merge_group {action}: not handled")
    if event == "push":
        return _push(payload)
    return Triage(False, f"event {event}: not handled")


def _push(payload: dict[str, Any]) -> Triage:
    """A push to the default branch may start its own runs; any other push says nothing the
    service keeps (a pull request's pushes come as `pull_request` `synchronize`)."""
    repository = payload.get("repository")
    default = repository.get("default_branch") if isinstance(repository, dict) else None
    ref = payload.get("ref")
    if not default or ref != f"refs/heads/{default}":
        return Triage(False, f"push to {ref}: not the default branch")
    if payload.get("deleted"):
        return Triage(False, "the default branch was deleted")
    return Triage(True, "push to the default branch: its own runs, where configured")
