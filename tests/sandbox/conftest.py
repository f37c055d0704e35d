"""Fixtures: a real git repository, the sandbox under real uvicorn, PyGithub clients, and a
webhook receiver that checks signatures."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import pytest
from fastapi import FastAPI, Request, Response
from github import Auth, Github

from sandbox.app import create_app
from sandbox.client import SandboxAdmin
from sandbox.state import SandboxState
from tests.support.git import git
from tests.support.live import live_server

REPO = "acme/kernels"
SECRET = "s3cret-hook"


@dataclass
class GitRepo:
    path: Path
    main_sha: str
    feature_sha: str
    feature2_sha: str


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    """main with one commit; `feature` with two more (feature_sha is the first of them)."""
    path = tmp_path / "kernels"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("kernels\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "initial")
    main_sha = git(path, "rev-parse", "HEAD")
    git(path, "checkout", "-q", "-b", "feature")
    (path / "op.py").write_text("def op():\n    return 1\n")
    git(path, "add", "op.py")
    git(path, "commit", "-q", "-m", "add op")
    feature_sha = git(path, "rev-parse", "HEAD")
    (path / "op.py").write_text("def op():\n    return 2\n")
    git(path, "commit", "-q", "-am", "fix op")
    feature2_sha = git(path, "rev-parse", "HEAD")
    git(path, "reset", "-q", "--hard", feature_sha)
    git(path, "checkout", "-q", "main")
    return GitRepo(path, main_sha, feature_sha, feature2_sha)


@dataclass
class Sandbox:
    url: str
    state: SandboxState
    admin: SandboxAdmin

    def github(self, token: str | None = None, **kwargs: Any) -> Github:
        """PyGithub against the sandbox, unchanged but for speed: no client-side throttling
        and (unless asked) no retries, so faults surface at once."""
        kwargs.setdefault("retry", None)
        return Github(
            base_url=self.url,
            auth=Auth.Token(token) if token else kwargs.pop("auth", None),
            seconds_between_requests=0,
            seconds_between_writes=0,
            **kwargs,
        )


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    state = SandboxState()
    with live_server(create_app(state)) as url, SandboxAdmin(url) as admin:
        yield Sandbox(url, state, admin)


@dataclass
class World:
    """acme/kernels backed by `git_repo`, PR #1 from `feature` by alice (write), mallory
    (no permission), and a bot user with a token."""

    sandbox: Sandbox
    repo: GitRepo
    bot_token: str
    pr: dict[str, Any]


@pytest.fixture
def world(sandbox: Sandbox, git_repo: GitRepo) -> World:
    admin = sandbox.admin
    admin.create_user("acme", "Organization")
    for login in ("alice", "mallory"):
        admin.create_user(login)
    admin.create_user("ondemand-bot", "Bot")
    bot_token = admin.create_token("ondemand-bot")
    admin.create_repo("acme", "kernels", str(git_repo.path))
    admin.set_permission(REPO, "alice", "write")
    pr = admin.open_pull(REPO, head="feature", user="alice", title="Add op")
    return World(sandbox, git_repo, bot_token, pr)


@dataclass
class Received:
    event: str
    delivery: str
    signature_ok: bool
    headers: dict[str, str]
    payload: dict[str, Any]


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    status: int = 200
    cond: threading.Condition = field(default_factory=threading.Condition)

    def wait(self, n: int, timeout: float = 10.0) -> list[Received]:
        with self.cond:
            self.cond.wait_for(lambda: len(self.received) >= n, timeout)
            return list(self.received)


def _payload(raw: bytes, content_type: str) -> dict[str, Any]:
    """A delivery's payload, sent as JSON or form-encoded (`payload=<json>`)."""
    if content_type.startswith("application/x-www-form-urlencoded"):
        return dict(json.loads(parse_qs(raw.decode())["payload"][0]))
    return dict(json.loads(raw))


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A webhook endpoint that verifies `X-Hub-Signature-256` against SECRET (401 if wrong)
    and answers `receiver.status` otherwise."""
    app = FastAPI()
    box: list[Receiver] = []

    @app.post("/webhook")
    async def hook(request: Request) -> Response:
        raw = await request.body()
        expected = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
        given = request.headers.get("x-hub-signature-256", "")
        ok = hmac.compare_digest(expected, given)
        rec = box[0]
        with rec.cond:
            rec.received.append(
                Received(
                    request.headers.get("x-github-event", ""),
                    request.headers.get("x-github-delivery", ""),
                    ok,
                    dict(request.headers),
                    _payload(raw, request.headers.get("content-type", "")),
                )
            )
            rec.cond.notify_all()
        return Response(status_code=rec.status if ok else 401)

    with live_server(app) as url:
        box.append(Receiver(f"{url}/webhook"))
        yield box[0]


GithubFactory = Callable[..., Github]
