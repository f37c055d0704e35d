"""runner.json: registering once, the token kept 0600, another service's token ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.link.credentials import CredentialFile, Credentials, Registration, load_or_register

URL = "http://service.test"
ME = Registration(name="r1", backends=["cpu"], labels=["cpu"], slots=2, version="1.0")


class FakeClient:
    def __init__(self) -> None:
        self.registered: list[tuple[str, dict[str, object]]] = []

    def register(self, registration_token: str, **fields: object) -> tuple[int, str]:
        self.registered.append((registration_token, fields))
        return 7, f"token-{len(self.registered)}"


def test_registers_once_then_loads(tmp_path: Path) -> None:
    client = FakeClient()
    file = CredentialFile(tmp_path / "state" / "runner.json", URL)
    creds = load_or_register(client, file, "reg", ME)
    assert creds == Credentials(7, "token-1")
    assert client.registered == [
        (
            "reg",
            {"name": "r1", "backends": ["cpu"], "labels": ["cpu"], "slots": 2, "version": "1.0"},
        )
    ]
    assert oct(file.path.stat().st_mode & 0o777) == "0o600"
    assert json.loads(file.path.read_text()) == {
        "service_url": URL,
        "runner_id": 7,
        "token": "token-1",
    }
    assert not file.path.with_suffix(".tmp").exists()
    # Saved: the next start does not register again, even without a registration token.
    assert load_or_register(client, file, None, ME) == creds
    assert len(client.registered) == 1


def test_another_services_token_or_a_forgotten_one_means_registering(tmp_path: Path) -> None:
    client = FakeClient()
    path = tmp_path / "runner.json"
    CredentialFile(path, "http://elsewhere.test").save(Credentials(1, "theirs"))
    file = CredentialFile(path, URL)
    assert file.load() is None
    assert load_or_register(client, file, "reg", ME).token == "token-1"
    file.forget()
    file.forget()  # nothing there: fine
    assert load_or_register(client, file, "reg", ME).token == "token-2"


def test_no_token_and_no_registration_token_exits(tmp_path: Path) -> None:
    file = CredentialFile(tmp_path / "runner.json", URL)
    with pytest.raises(SystemExit, match="ONDEMAND_REGISTRATION_TOKEN"):
        load_or_register(FakeClient(), file, None, ME)
