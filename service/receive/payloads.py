"""The parts of GitHub's webhook payloads the service reads, as typed models: a delivery that
lacks one is refused at the door (400, one log line) instead of failing later in the inbox.
Everything else in a payload is ignored."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Account(_Model):
    login: str = Field(min_length=1, max_length=100)
    type: str = "User"


class Repository(_Model):
    full_name: str = Field(pattern=r"^[^/\s]+/[^/\s]+$", max_length=200)
    clone_url: str = ""
    private: bool = False
    default_branch: str = Field(default="main", max_length=255)


class Comment(_Model):
    id: int
    body: str
    created_at: datetime
    user: Account | None = None


class Issue(_Model):
    number: int
    pull_request: dict[str, Any] | None = None


class CommentPayload(_Model):
    """`issue_comment` on a pull request."""

    action: str
    issue: Issue
    comment: Comment
    repository: Repository
    sender: Account


class Ref(_Model):
    sha: str = Field(min_length=7, max_length=64)
    ref: str = ""


class PullRequest(_Model):
    number: int
    head: Ref
    updated_at: datetime
    user: Account | None = None  # its author


class PullRequestPayload(_Model):
    """`pull_request` opened, reopened, synchronize or closed."""

    action: str
    pull_request: PullRequest
    repository: Repository
    sender: Account | None = None


class CheckRun(_Model):
    id: int
    head_sha: str = Field(min_length=7, max_length=64)
    external_id: str | None = None


class CheckRunPayload(_Model):
    """`check_run` (rerequested: the Re-run button of one of the App's check runs)."""

    action: str
    check_run: CheckRun
    repository: Repository
    sender: Account


class Installation(_Model):
    id: int
    account: Account | None = None
    permissions: dict[str, str] = Field(default_factory=dict)


class InstallationPayload(_Model):
    """`installation` (new_permissions_accepted: an owner accepted the App's new permissions)."""

    action: str
    installation: Installation


class MergeGroup(_Model):
    head_sha: str = Field(min_length=7, max_length=64)
    head_ref: str = Field(max_length=1000)
    base_sha: str = Field(min_length=7, max_length=64)
    base_ref: str = Field(max_length=1000)


class MergeGroupPayload(_Model):
    """`merge_group` (checks_requested: a merge queue wants the required checks on the
    group's head; destroyed: the group is gone, merged or not)."""

    action: str
    merge_group: MergeGroup
    repository: Repository
    reason: str | None = None  # destroyed: merged, invalidated or dequeued


class PushPayload(_Model):
    """`push`: a branch moved from `before` to `after` (all zeros: created, or `deleted`)."""

    ref: str = Field(max_length=1000)
    before: str = Field(min_length=7, max_length=64)
    after: str = Field(min_length=7, max_length=64)
    deleted: bool = False
    repository: Repository
    sender: Account | None = None
    pusher: dict[str, Any] | None = None


MODELS: dict[str, type[_Model]] = {
    "issue_comment": CommentPayload,
    "pull_request": PullRequestPayload,
    "check_run": CheckRunPayload,
    "installation": InstallationPayload,
    "merge_group": MergeGroupPayload,
    "push": PushPayload,
}


def problem(event: str, payload: dict[str, Any]) -> str | None:
    """What a payload of `event` lacks that the service needs, or None when it is whole."""
    model = MODELS.get(event)
    if model is None:
        return None
    try:
        model.model_validate(payload)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "payload"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"{where}: {first['msg']}{more}"
    return None
