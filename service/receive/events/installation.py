"""`installation` new_permissions_accepted: an owner accepted the App's new permissions, so
what waited for a permission on a repository of that installation is tried again at once,
with new tokens (a token keeps the permissions it was minted with)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from service.db.leases import LeasedRows
from service.db.models import Delivery, OutboxItem
from service.github.client import InstallationInfo
from service.receive.context import Services
from service.receive.payloads import InstallationPayload


class InstallationHandler:
    def __init__(self, services: Services) -> None:
        self.services = services

    def handle(self, _delivery_id: str, payload: dict[str, Any], _received_at: datetime) -> str:
        data = InstallationPayload.model_validate(payload)
        if data.action != "new_permissions_accepted":
            return f"installation {data.action}: nothing to do"
        services = self.services
        if services.github_client is None:
            return "installation: no GitHub App credentials here: nothing to do"
        github = services.github_client
        inst = data.installation
        account = inst.account.login if inst.account is not None else ""
        still: list[str] = []
        if services.problems is not None:
            info = InstallationInfo(inst.id, account, dict(inst.permissions))
            still = [p.permission.label for p in services.problems.record(info)]
        deliveries = LeasedRows(services.db, Delivery)
        items = LeasedRows(services.db, OutboxItem)
        waiting = [(d.id, _delivery_repo(d)) for d in deliveries.parked()]
        held = [(i.id, str(i.payload.get("repo") or "")) for i in items.parked()]
        covered = {
            repo
            for repo in {r for _, r in waiting + held if r}
            if github.installation_of(repo) == inst.id  # before its tokens are dropped
        }
        github.forget_installation(inst.id)
        released = (
            deliveries.release([i for i, repo in waiting if repo in covered]),
            items.release([i for i, repo in held if repo in covered]),
        )
        if released[1]:
            services.kick_outbox()
        lacks = f"; still lacks {', '.join(still)}" if still else ""
        return (
            f"installation {inst.id} on {account or '?'} accepted new permissions: "
            f"{released[0]} delivery(ies) and {released[1]} outbox item(s) tried again{lacks}"
        )


def _delivery_repo(delivery: Delivery) -> str:
    """`owner/name` of a delivery's repository ("" when its payload has none)."""
    repository = (delivery.payload or {}).get("repository")
    return str(repository.get("full_name") or "") if isinstance(repository, dict) else ""
