"""POST /webhook over HTTP against the real service: signatures, headers, sizes, redelivery,
ignored events, and an answer in milliseconds while GitHub is unreachable."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from sqlalchemy import func, select

from service.db.models import Delivery
from service.github.client import GitHubClient
from service.settings import MAX_WEBHOOK_BYTES, Settings
from tests.service.helpers import LiveService, live_service, service_settings, sqlite_at_head


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def comment_payload(body: str = "/test help", sender_type: str = "User") -> dict[str, Any]:
    return {
        "action": "created",
        "issue": {"number": 7, "pull_request": {"url": "x"}},
        "comment": {
            "id": 99,
            "body": body,
            "created_at": "2026-12-01T10:00:00Z",
            "user": {"login": "alice", "type": sender_type},
        },
        "repository": {"full_name": "octo/kernels", "clone_url": "/tmp/x.git"},
        "sender": {"login": "alice", "type": sender_type},
    }


def post(
    svc: LiveService,
    payload: Any,
    *,
    event: str | None = "issue_comment",
    delivery: str | None = None,
    secret: str | None = "new-secret",
    signature: str | None = None,
    content_type: str = "application/json",
    raw: bytes | None = None,
) -> httpx.Response:
    body = raw if raw is not None else json.dumps(payload).encode()
    headers = {"Content-Type": content_type}
    if event is not None:
        headers["X-GitHub-Event"] = event
    headers["X-GitHub-Delivery"] = delivery or str(uuid.uuid4())
    if delivery == "":
        del headers["X-GitHub-Delivery"]
    if signature is not None:
        headers["X-Hub-Signature-256"] = signature
    elif secret is not None:
        headers["X-Hub-Signature-256"] = sign(body, secret)
    return httpx.post(f"{svc.url}/webhook", content=body, headers=headers)


def deliveries(svc: LiveService) -> int:
    with svc.service.db.reads() as session:
        return int(session.scalar(select(func.count(Delivery.id))) or 0)


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[LiveService]:
    settings = service_settings(sqlite_at_head(tmp_path / "hook.db"), max_webhook_bytes=4096)
    with live_service(settings) as live:
        yield live


@pytest.mark.parametrize(
    ("secret", "signature", "expected"),
    [
        ("new-secret", None, 202),
        ("old-secret", None, 202),  # rotation: both accepted
        (None, None, 401),  # missing
        ("wrong", None, 401),
        (None, "sha256=", 401),
        (None, "sha1=0123", 401),
        (None, "sha256=" + "0" * 64, 401),
    ],
)
def test_signature_matrix(
    svc: LiveService, secret: str | None, signature: str | None, expected: int
) -> None:
    answer = post(svc, comment_payload(), secret=secret, signature=signature)
    assert answer.status_code == expected, answer.text
    assert deliveries(svc) == (1 if expected == 202 else 0)  # 401: nothing written


def test_signature_is_over_the_raw_body(svc: LiveService) -> None:
    body = json.dumps(comment_payload()).encode()
    tampered = body.replace(b"help", b"HELP")
    answer = post(svc, None, raw=tampered, signature=sign(body, "new-secret"))
    assert answer.status_code == 401 and deliveries(svc) == 0


def test_header_type_and_size_errors(svc: LiveService) -> None:
    assert post(svc, comment_payload(), event=None).status_code == 400
    assert post(svc, comment_payload(), delivery="").status_code == 400
    assert post(svc, None, raw=b"x=1", content_type="text/plain").status_code == 415
    assert post(svc, None, raw=b"{not json").status_code == 400
    assert post(svc, None, raw=b"[1, 2]").status_code == 400
    big = post(svc, None, raw=b'{"x": "' + b"a" * 5000 + b'"}')
    assert big.status_code == 413
    assert deliveries(svc) == 0


def test_default_limit_is_25_mb() -> None:
    assert Settings().max_webhook_bytes == MAX_WEBHOOK_BYTES == 25 * 1024 * 1024


def test_redelivery_is_a_no_op(svc: LiveService) -> None:
    delivery = str(uuid.uuid4())
    first = post(svc, comment_payload(), delivery=delivery)
    second = post(svc, comment_payload(), delivery=delivery)
    assert first.status_code == 202 and first.json()["status"] == "accepted"
    assert second.status_code == 200 and second.json()["status"] == "duplicate"
    assert deliveries(svc) == 1


@pytest.mark.parametrize(
    ("event", "payload", "why"),
    [
        ("ping", {"zen": "Keep it logically awesome."}, "pong"),
        ("star", {"action": "created"}, "not handled"),
        (
            "push",
            {"ref": "refs/heads/feature", "repository": {"default_branch": "main"}},
            "not the default branch",
        ),
        ("issue_comment", {**comment_payload(), "action": "edited"}, "only created"),
        ("issue_comment", {**comment_payload(), "action": "deleted"}, "only created"),
        ("issue_comment", comment_payload("/test add:cpu", "Bot"), "bot"),
        (
            "issue_comment",
            {**comment_payload("/test add:cpu"), "issue": {"number": 3}},
            "not a pull request",
        ),
        ("pull_request", {"action": "labeled", "pull_request": {"number": 1}}, "not handled"),
    ],
)
def test_ignored_events_are_recorded_and_answered(
    svc: LiveService, event: str, payload: dict[str, Any], why: str
) -> None:
    answer = post(svc, payload, event=event)
    assert answer.status_code == 200
    assert answer.json()["status"] == "ignored" and why in answer.json()["why"]
    with svc.service.db.reads() as session:
        row = session.scalars(select(Delivery)).one()
    assert row.done_at is not None and row.payload is None


@pytest.fixture
def hanging_github() -> Iterator[str]:
    """A "GitHub" that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_answers_fast_while_github_hangs(tmp_path: Path, hanging_github: str) -> None:
    hung = GitHubClient(hanging_github, token="t", timeout=1)
    settings = service_settings(sqlite_at_head(tmp_path / "down.db"))
    with live_service(settings, github=hung) as svc:
        post(svc, comment_payload("warm-up"))
        timings = []
        for _ in range(5):
            start = time.monotonic()
            answer = post(svc, comment_payload("/test add:cpu"))
            timings.append(time.monotonic() - start)
            assert answer.status_code == 202
        assert max(timings) < 0.9, timings  # a GitHub call would take its 1 s timeout
        # processing is retried later, not lost
        deadline = time.monotonic() + 15
        while True:
            with svc.service.db.reads() as session:
                rows = session.scalars(select(Delivery).where(Delivery.payload.is_not(None))).all()
            retrying = [r for r in rows if r.done_at is None and r.last_error]
            if len(retrying) == 5 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert len(retrying) == 5
        assert all("unreachable" in (r.last_error or "") for r in retrying)


def form(payload: dict[str, Any]) -> bytes:
    return urlencode({"payload": json.dumps(payload)}).encode()


def test_form_encoded_deliveries_are_understood(svc: LiveService) -> None:
    """GitHub's default content type for repository and organization webhooks."""
    body = form(comment_payload("/test add:cpu"))
    answer = post(svc, None, raw=body, content_type="application/x-www-form-urlencoded")
    assert answer.status_code == 202, answer.text
    with svc.service.db.reads() as session:
        row = session.scalars(select(Delivery)).one()
    assert row.payload is not None and row.payload["comment"]["body"] == "/test add:cpu"
    # the signature covers the form body as sent, not the JSON inside it
    inner = json.dumps(comment_payload("/test add:cpu")).encode()
    wrong = post(
        svc,
        None,
        raw=body,
        content_type="application/x-www-form-urlencoded",
        signature=sign(inner, "new-secret"),
    )
    assert wrong.status_code == 401


@pytest.mark.parametrize(
    ("raw", "content_type", "fragment"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "application/json", "nested too deeply"),
        (b'{"a":' * 100 + b"1" + b"}" * 100, "application/json", "nested more than"),
        (b"payload=%7B&payload=%7B", "application/x-www-form-urlencoded", "single `payload`"),
        (b"other=1", "application/x-www-form-urlencoded", "single `payload`"),
        (b"payload=%ff%fe", "application/x-www-form-urlencoded", "not JSON"),
        (b"\xff\xfe", "application/json", "not JSON"),
    ],
)
def test_malformed_bodies_get_4xx_and_nothing_is_stored(
    tmp_path: Path, raw: bytes, content_type: str, fragment: str
) -> None:
    settings = service_settings(sqlite_at_head(tmp_path / "bad.db"))
    with live_service(settings) as svc:
        answer = post(svc, None, raw=raw, content_type=content_type)
        assert answer.status_code == 400 and fragment in answer.json()["detail"], answer.text
        assert deliveries(svc) == 0


@pytest.mark.parametrize(
    ("event", "payload", "fragment"),
    [
        ("issue_comment", {**comment_payload("/test x:cpu"), "repository": {}}, "repository"),
        (
            "issue_comment",
            {**comment_payload("/test x:cpu"), "comment": {"body": "/test x:cpu"}},
            "comment.id",
        ),
        (
            "issue_comment",
            {**comment_payload("/test x:cpu"), "sender": {"login": ""}},
            "sender.login",
        ),
        (
            "pull_request",
            {"action": "synchronize", "pull_request": {"number": 1}, "repository": {}},
            "pull_request.head",
        ),
    ],
)
def test_payloads_missing_what_the_service_reads_are_refused_at_once(
    svc: LiveService, event: str, payload: dict[str, Any], fragment: str
) -> None:
    answer = post(svc, payload, event=event)
    assert answer.status_code == 400 and fragment in answer.json()["detail"], answer.text
    assert deliveries(svc) == 0  # never stored, so never retried with tracebacks
