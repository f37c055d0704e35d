"""`POST /webhook`: verify, record, answer. The request only writes the delivery row (the
durable inbox) and wakes the inbox worker; it never calls GitHub."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from service.receive.payloads import problem
from service.receive.recorder import DeliveryRecorder
from service.receive.triage import triage
from service.settings import Settings

log = logging.getLogger(__name__)


def signature_ok(body: bytes, header: str | None, secrets: Sequence[str]) -> bool:
    """Whether `header` is `sha256=<hex HMAC of body>` under one of `secrets` (constant-time)."""
    if not header or not header.startswith("sha256="):
        return False
    given = header.removeprefix("sha256=").strip().lower()
    ok = False
    for secret in secrets:
        expected = hmac.digest(secret.encode(), body, hashlib.sha256).hex()
        ok |= hmac.compare_digest(expected, given)
    return ok


MAX_DEPTH = 64  # GitHub's payloads nest about 6 deep; storing a deeper one could overflow
UNSUPPORTED_MEDIA = (
    "the webhook content type must be application/json or application/x-www-form-urlencoded"
)


def parse_body(raw: bytes, media: str) -> tuple[dict[str, Any] | None, str]:
    """The delivery's payload from its raw body, JSON or form-encoded (`payload=<json>`, the
    default of repository and organization webhooks); (None, why) when it is not one."""
    if media == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(raw.decode(), strict_parsing=True, max_num_fields=100)
        except (ValueError, UnicodeDecodeError):
            return None, "the form body cannot be read"
        values = fields.get("payload")
        if not values or len(values) != 1:
            return None, "the form body has no single `payload` field"
        text: str | bytes = values[0]
    elif media == "application/json":
        text = raw
    else:
        return None, UNSUPPORTED_MEDIA
    try:
        payload = json.loads(text)
    except RecursionError:
        return None, "the JSON is nested too deeply"
    except (ValueError, UnicodeDecodeError):
        return None, "the body is not JSON"
    if not isinstance(payload, dict):
        return None, "the body is not a JSON object"
    if _may_nest(text, MAX_DEPTH) and _too_deep(payload, MAX_DEPTH):
        return None, f"the JSON is nested more than {MAX_DEPTH} levels deep"
    return payload, ""


def _may_nest(text: str | bytes, limit: int) -> bool:
    """Whether the JSON `text` has enough brackets to nest more than `limit` deep (each level
    needs one): counting them is cheap, walking every payload on a burst is not."""
    opening = ("{", "[") if isinstance(text, str) else (b"{", b"[")
    return sum(text.count(b) for b in opening) > limit  # type: ignore[arg-type]


def _too_deep(value: Any, limit: int) -> bool:
    """Whether `value` nests containers more than `limit` deep (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"detail": message}, status_code=status)


def webhook_router(
    settings: Settings, recorder: DeliveryRecorder, kick: Callable[[], None]
) -> APIRouter:
    """The webhook route; `kick` wakes the inbox worker after a delivery to process."""
    router = APIRouter()

    async def webhook(request: Request) -> JSONResponse:
        return await receive(request, settings, recorder, kick)

    # A plain route: the body is read and checked by hand, so FastAPI's parameter handling
    # would only cost the webhook time under a burst (and it stays out of the OpenAPI schema).
    router.add_route("/webhook", webhook, methods=["POST"], include_in_schema=False)
    return router


async def receive(
    request: Request, settings: Settings, recorder: DeliveryRecorder, kick: Callable[[], None]
) -> JSONResponse:
    limit = settings.max_webhook_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return _error(413, f"payload over {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return _error(413, f"payload over {limit} bytes")
    raw = bytes(body)
    secrets = settings.webhook_secrets
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
    payload, why = parse_body(raw, media)
    if payload is None:
        log.warning("delivery %s %s refused: %s", delivery_id, event, why)
        return _error(415 if why == UNSUPPORTED_MEDIA else 400, why)
    verdict = triage(event, payload, settings.bot_login)
    if verdict.handled:
        missing = problem(event, payload)
        if missing is not None:
            why = f"malformed {event} payload: {missing}"
            log.warning("delivery %s %s refused: %s", delivery_id, event, why)
            return _error(400, why)
    new = await recorder.record(delivery_id, event, payload, verdict)
    if not new:
        return JSONResponse({"delivery": delivery_id, "status": "duplicate"})
    log.info("delivery %s %s: %s", delivery_id, event, verdict.why)
    if verdict.handled:
        kick()
        return JSONResponse({"delivery": delivery_id, "status": "accepted"}, status_code=202)
    return JSONResponse({"delivery": delivery_id, "status": "ignored", "why": verdict.why})
