"""`POST /webhook`: verify, record, answer. The request only writes the delivery row (the
durable inbox) and wakes the command processor; it never calls GitHub."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool

from service.context import Context, get_context
from service.db import utcnow
from service.models import Delivery

log = logging.getLogger(__name__)
router = APIRouter()

HANDLED_PR_ACTIONS = frozenset({"synchronize", "closed"})


def signature_ok(body: bytes, header: str | None, secrets: Sequence[str]) -> bool:
    """Whether `header` is `sha256=<hex HMAC of body>` under one of `secrets` (constant-time)."""
    if not header or not header.startswith("sha256="):
        return False
    given = header.removeprefix("sha256=").strip().lower()
    ok = False
    for secret in secrets:
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        ok |= hmac.compare_digest(expected, given)
    return ok


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
        return Triage(True, "command candidate")
    if event == "pull_request":
        if action in HANDLED_PR_ACTIONS:
            return Triage(True, f"pull_request {action}")
        return Triage(False, f"pull_request {action}: not handled")
    return Triage(False, f"event {event}: not handled")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status)


def record_delivery(
    ctx: Context, delivery_id: str, event: str, payload: dict[str, Any], verdict: Triage
) -> bool:
    """Store the delivery; False when it was already recorded (a redelivery)."""
    now = utcnow()
    row = Delivery(
        delivery_id=delivery_id,
        event=event,
        action=str(payload.get("action")) if payload.get("action") is not None else None,
        payload=payload if verdict.handled else None,
        received_at=now,
        processed_at=None if verdict.handled else now,
        outcome=None if verdict.handled else f"ignored: {verdict.why}",
        attempts=0,
    )
    try:
        with ctx.writes() as session, session.begin():
            session.add(row)
    except IntegrityError:
        return False
    return True


Ctx = Annotated[Context, Depends(get_context)]


@router.post("/webhook")
async def webhook(request: Request, ctx: Ctx) -> JSONResponse:
    limit = ctx.settings.max_webhook_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return _error(413, f"payload over {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return _error(413, f"payload over {limit} bytes")
    raw = bytes(body)
    secrets = ctx.settings.webhook_secrets
    if not secrets:
        return _error(401, "no webhook secret configured (ONDEMAND_WEBHOOK_SECRETS)")
    if not signature_ok(raw, request.headers.get("x-hub-signature-256"), secrets):
        return _error(401, "missing or wrong X-Hub-Signature-256")
    event = request.headers.get("x-github-event", "").strip()
    delivery_id = request.headers.get("x-github-delivery", "").strip()
    if not event or not delivery_id:
        return _error(400, "missing X-GitHub-Event or X-GitHub-Delivery header")
    if len(delivery_id) > 100 or len(event) > 100:
        return _error(400, "X-GitHub-Event or X-GitHub-Delivery header too long")
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        return _error(415, "the webhook content type must be application/json")
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return _error(415, "the body is not JSON")
    if not isinstance(payload, dict):
        return _error(415, "the body is not a JSON object")
    verdict = triage(event, payload, ctx.settings.bot_login)
    new = await run_in_threadpool(record_delivery, ctx, delivery_id, event, payload, verdict)
    if not new:
        return JSONResponse({"delivery": delivery_id, "status": "duplicate"})
    log.info("delivery %s %s: %s", delivery_id, event, verdict.why)
    if verdict.handled and ctx.processor is not None:
        ctx.processor.kick()
        return JSONResponse({"delivery": delivery_id, "status": "accepted"}, status_code=202)
    return JSONResponse({"delivery": delivery_id, "status": "ignored", "why": verdict.why})
