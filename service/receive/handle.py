"""What a recorded delivery means: the inbox worker (never the webhook request) hands it to the
handler of its event kind (`service/receive/events/`), which reads GitHub, writes jobs and puts
every answer in the outbox. GitHubError propagates (the inbox retries); `RetryLater` asks for
another try a little later."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from service.github.client import MissingPermission
from service.receive.context import NoCredentials, RetryLater

__all__ = ["DeliveryHandler", "EventHandler", "NoCredentials", "RetryLater"]


class EventHandler(Protocol):
    def handle(self, delivery_id: str, payload: dict[str, Any], received_at: datetime) -> str:
        """Process one delivery recorded at `received_at`; returns what was done."""
        ...


class DeliveryHandler:
    """Dispatches each delivery to the handler of its event."""

    def __init__(self, events: Mapping[str, EventHandler]) -> None:
        self.events = dict(events)

    def handle(
        self, delivery_id: str, event: str, payload: dict[str, Any], received_at: datetime
    ) -> str:
        handler = self.events.get(event)
        if handler is None:
            return f"{event}: nothing to do"
        return handler.handle(delivery_id, payload, received_at)

    def permission_missing(
        self, delivery_id: str, event: str, payload: dict[str, Any], missing: MissingPermission
    ) -> None:
        """Tell whoever asked, once, that their delivery waits for a permission GitHub refused
        (the inbox parks it); only events whose handler knows whom to tell say anything (a
        command's pull request; a push or a Re-run press is told nothing)."""
        tell = getattr(self.events.get(event), "permission_missing", None)
        if tell is not None:
            tell(delivery_id, payload, missing)
