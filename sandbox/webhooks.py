"""Webhook deliveries as GitHub makes them: GitHub's payload shapes, as JSON or form-encoded
(`payload=<json>`), HMAC-SHA256 signature of the raw body, `X-GitHub-Delivery` ids, sent from a
background thread in order, each attempt's response status recorded (redelivery keeps the
delivery id). On demand they are held back, then sent late, reversed or twice."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import queue
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import httpx

from sandbox import shapes
from sandbox.state import (
    Attempt,
    CheckRun,
    Comment,
    Delivery,
    Installation,
    Pull,
    Repo,
    SandboxState,
    now,
)

log = logging.getLogger(__name__)
HOOK_ID = 424242
USER_AGENT = "GitHub-Hookshot/sandbox"


def signature(secret: str, body: bytes) -> str:
    """The `X-Hub-Signature-256` value GitHub sends for `body`."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _envelope(base: str, state: SandboxState, repo: Repo, sender: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "repository": shapes.repo_json(base, state, repo),
        "sender": shapes.user_json(base, state.users[sender]),
    }
    inst = state.installation_for(repo)
    if inst is not None:
        data["installation"] = {"id": inst.id, "node_id": shapes.node_id("Installation", inst.id)}
    return data


def issue_comment_payload(
    base: str,
    state: SandboxState,
    repo: Repo,
    pull: Pull,
    comment: Comment,
    action: str,
    sender: str,
    old_body: str | None = None,
) -> dict[str, Any]:
    """`issue_comment` created/edited/deleted on a pull request (the issue has `pull_request`)."""
    data: dict[str, Any] = {
        "action": action,
        "issue": shapes.issue_json(base, state, repo, pull),
        "comment": shapes.comment_json(base, state, repo, comment),
    }
    if action == "edited":
        data["changes"] = {"body": {"from": old_body or ""}}
    data.update(_envelope(base, state, repo, sender))
    return data


def pull_request_payload(
    base: str,
    state: SandboxState,
    repo: Repo,
    pull: Pull,
    action: str,
    sender: str,
    before: str | None = None,
) -> dict[str, Any]:
    """`pull_request` opened/synchronize/closed; synchronize carries `before` and `after`."""
    data: dict[str, Any] = {
        "action": action,
        "number": pull.number,
        "pull_request": shapes.pull_json(base, state, repo, pull),
    }
    if action == "synchronize":
        data["before"] = before
        data["after"] = pull.head_sha
    data.update(_envelope(base, state, repo, sender))
    return data


def merge_group_payload(
    base: str,
    state: SandboxState,
    repo: Repo,
    group: dict[str, Any],
    action: str,
    sender: str,
) -> dict[str, Any]:
    """`merge_group` checks_requested (or destroyed): the group's head and base."""
    data: dict[str, Any] = {"action": action, "merge_group": group}
    data.update(_envelope(base, state, repo, sender))
    return data


def check_run_json(base: str, state: SandboxState, repo: Repo, run: CheckRun) -> dict[str, Any]:
    """A check run in GitHub's shape (the REST answer and the `check_run` event's object)."""
    app = state.apps.get(run.app_id)
    pulls = [
        {
            "number": p.number,
            "url": f"{base}/repos/{repo.full_name}/pulls/{p.number}",
            "head": {"sha": p.head_sha},
        }
        for (name, _), p in state.pulls.items()
        if name == repo.full_name and p.head_sha == run.head_sha
    ]
    return {
        "id": run.id,
        "node_id": shapes.node_id("CheckRun", run.id),
        "head_sha": run.head_sha,
        "external_id": run.external_id,
        "url": f"{base}/repos/{repo.full_name}/check-runs/{run.id}",
        "html_url": f"{base}/{repo.full_name}/runs/{run.id}",
        "details_url": run.details_url,
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": shapes.ts(run.started_at),
        "completed_at": shapes.ts(run.completed_at),
        "output": {
            **run.output,
            "annotations_count": 0,
            "annotations_url": f"{base}/repos/{repo.full_name}/check-runs/{run.id}/annotations",
        },
        "name": run.name,
        "check_suite": {"id": run.id},
        "app": shapes.app_json(base, state, app) if app is not None else None,
        "pull_requests": pulls,
    }


def check_run_payload(
    base: str, state: SandboxState, repo: Repo, run: CheckRun, action: str, sender: str
) -> dict[str, Any]:
    """`check_run` created, completed or rerequested (the Re-run button)."""
    data: dict[str, Any] = {
        "action": action,
        "check_run": check_run_json(base, state, repo, run),
    }
    data.update(_envelope(base, state, repo, sender))
    return data


def installation_payload(
    base: str, state: SandboxState, inst: Installation, action: str, sender: str
) -> dict[str, Any]:
    """`installation` (here `new_permissions_accepted`: an owner accepted the App's new
    permissions), sent to the App whatever it subscribed to, as GitHub does."""
    return {
        "action": action,
        "installation": shapes.installation_json(base, state, inst),
        "sender": shapes.user_json(base, state.users[sender]),
    }


class Deliverer:
    """Queues deliveries and posts them, one at a time and in order, from a daemon thread."""

    def __init__(self, state: SandboxState, timeout: float = 10.0) -> None:
        self.state = state
        self.timeout = timeout
        self._queue: queue.Queue[str] = queue.Queue()
        self._pending = 0
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._held: list[str] | None = None  # deliveries kept back while holding

    def hold(self) -> None:
        """Keep back new deliveries until `release`."""
        with self.state.lock:
            if self._held is None:
                self._held = []

    def release(self, *, reverse: bool = False, duplicate: bool = False) -> list[str]:
        """Send what was held: in the order made or reversed, each once or twice; returns the
        ids in the order they are sent."""
        with self.state.lock:
            held, self._held = self._held or [], None
        order = list(reversed(held)) if reverse else held
        sent = [d for d in order for _ in range(2 if duplicate else 1)]
        for delivery_id in sent:
            self._enqueue(delivery_id)
        return sent

    def emit(
        self, event: str, payload: dict[str, Any], *, repo: Repo | None = None
    ) -> Delivery | None:
        """Record and queue one delivery; None when no webhook is configured."""
        hook = self.state.webhook
        if hook is None:
            return None
        body = json.dumps(payload, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "X-GitHub-Event": event,
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-GitHub-Hook-ID": str(HOOK_ID),
        }
        if repo is not None:
            headers["X-GitHub-Hook-Installation-Target-ID"] = str(repo.id)
            headers["X-GitHub-Hook-Installation-Target-Type"] = "repository"
        delivery = Delivery(
            id=headers["X-GitHub-Delivery"],
            event=event,
            action=payload.get("action"),
            url=hook.url,
            body=body,
            headers=headers,
            created_at=now(),
        )
        self.state.record_delivery(delivery)
        with self.state.lock:
            if self._held is not None:
                self._held.append(delivery.id)
                return delivery
        self._enqueue(delivery.id)
        return delivery

    def redeliver(self, delivery_id: str) -> Delivery:
        """Send a recorded delivery again, with the same id and body."""
        delivery = self.state.delivery(delivery_id)
        self._enqueue(delivery.id)
        return delivery

    @property
    def pending(self) -> int:
        """Deliveries queued or in flight."""
        return self._pending

    def idle(self, timeout: float) -> bool:
        """Wait until every queued delivery has been attempted; False on timeout."""
        return bool(self.state.wait_for(lambda: self._pending == 0, timeout))

    def _enqueue(self, delivery_id: str) -> None:
        with self.state.lock:
            self._pending += 1
        self._ensure_thread()
        self._queue.put(delivery_id)

    def _ensure_thread(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="sandbox-webhooks", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        with httpx.Client(timeout=self.timeout, follow_redirects=False) as client:
            while True:
                delivery_id = self._queue.get()
                try:
                    self._attempt(client, delivery_id)
                except Exception:  # the worker must survive any one bad delivery
                    log.exception("webhook delivery %s failed", delivery_id)
                finally:
                    with self.state.lock:
                        self._pending -= 1
                        self.state.touch()

    def _attempt(self, client: httpx.Client, delivery_id: str) -> None:
        delivery = self.state.delivery(delivery_id)
        hook = self.state.webhook
        if hook is None:
            self.state.record_attempt(delivery_id, Attempt(now(), None, "no webhook configured", 0))
            return
        headers = dict(delivery.headers)
        body = delivery.body
        if hook.content_type == "form":
            body = urlencode({"payload": delivery.body.decode()}).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        if hook.secret:
            headers["X-Hub-Signature-256"] = signature(hook.secret, body)
            headers["X-Hub-Signature"] = (
                "sha1=" + hmac.new(hook.secret.encode(), body, hashlib.sha1).hexdigest()
            )
        started = time.monotonic()
        status: int | None = None
        error: str | None = None
        try:
            response = client.post(hook.url, content=body, headers=headers)
            status = response.status_code
        except httpx.HTTPError as exc:
            error = f"{type(exc).__name__}: {exc}"
        took = int((time.monotonic() - started) * 1000)
        self.state.record_attempt(delivery_id, Attempt(now(), status, error, took))
