"""The runner's identity with the service: its id and token, kept in `STATE_DIR/runner.json`
(mode 0600, so only the runner's user can read the token) and obtained by registering with a
registration token when the file has none for this service."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

log = logging.getLogger("ondemand.runner")


@dataclass(frozen=True)
class Credentials:
    runner_id: int
    token: str


class Registrar(Protocol):
    """The one call registering needs (runner.link.client.ServiceClient has it)."""

    def register(
        self,
        registration_token: str,
        *,
        name: str,
        backends: list[str],
        labels: list[str],
        slots: int,
        version: str,
    ) -> tuple[int, str]: ...


@dataclass(frozen=True)
class Registration:
    """What the runner tells the service about itself when it registers."""

    name: str
    backends: list[str]
    labels: list[str]
    slots: int
    version: str


class CredentialFile:
    """`runner.json`: the credentials for one service URL (another URL's are ignored)."""

    def __init__(self, path: Path, service_url: str) -> None:
        self.path = path
        self.service_url = service_url

    def load(self) -> Credentials | None:
        """The saved credentials, or None when there are none for this service; ValueError
        when the file is not credentials (or cannot be read), in a few words."""
        if not self.path.exists():
            return None
        try:
            data = json.loads(self.path.read_text())
            if data.get("service_url") == self.service_url and data.get("token"):
                return Credentials(int(data["runner_id"]), str(data["token"]))
        except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not the runner's credentials"
            raise ValueError(f"{why} ({type(exc).__name__})") from None
        return None

    def save(self, creds: Credentials) -> None:
        """Write atomically, created 0600: the token is never readable by others."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            saved = {
                "service_url": self.service_url,
                "runner_id": creds.runner_id,
                "token": creds.token,
            }
            json.dump(saved, handle)
        os.replace(tmp, self.path)

    def forget(self) -> None:
        """Drop the saved token (the service refused it), so the next load registers."""
        self.path.unlink(missing_ok=True)


def load_or_register(
    client: Registrar,
    file: CredentialFile,
    registration_token: str | None,
    registration: Registration,
) -> Credentials:
    """The saved credentials, else register and save them.

    Raises SystemExit when there are none and no registration token to get them with; the
    client's errors (ServiceUnavailable, Rejected, NotHeld) when registering fails.
    """
    creds = file.load()
    if creds is not None:
        return creds
    if not registration_token:
        raise SystemExit(
            f"no runner token in {file.path} and no registration token: set "
            "ONDEMAND_REGISTRATION_TOKEN or --registration-token-file"
        )
    runner_id, token = client.register(
        registration_token,
        name=registration.name,
        backends=registration.backends,
        labels=registration.labels,
        slots=registration.slots,
        version=registration.version,
    )
    creds = Credentials(runner_id, token)
    file.save(creds)
    log.info(
        "registered as runner %s (%s); token kept in %s", runner_id, registration.name, file.path
    )
    return creds
