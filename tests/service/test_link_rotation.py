"""Secrets rotate without breaking anything posted: the link of a private repository's job,
posted in a comment before the webhook secret is rotated as docs/deploy.md says, still opens
its page after each step, on the real service."""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
from pathlib import Path

import httpx
from pydantic import SecretStr

from ondemand.doctor import Level
from service.doctor import config_findings
from service.links import Links
from tests.service.helpers import live_service, new_job, service_settings
from workflows.spec import load_workflows


def _opens(url: str, link: str, public_url: str) -> int:
    return httpx.get(url + link.removeprefix(public_url)).status_code


def test_a_link_posted_before_a_rotation_opens_after_it(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'db'}"
    before = service_settings(database, webhook_secrets=["old"])
    with live_service(before) as svc:
        job, _ = svc.service.jobs.create_job(
            dataclasses.replace(new_job(), repo="octo/private", private=True)
        )
        posted = svc.service.links.job(job.id, private=True)
        assert "?key=" in posted and _opens(svc.url, posted, before.public_url) == 200
    # The new secret first, the old one still listed (GitHub may still sign with it): the
    # links signed before open, as do those signed now.
    rotating = service_settings(database, webhook_secrets=["new", "old"])
    with live_service(rotating) as svc:
        assert _opens(svc.url, posted, rotating.public_url) == 200
        assert httpx.get(f"{svc.url}/jobs/{job.id}").status_code == 404  # no key: no page
        during = svc.service.links.job(job.id, private=True)
    # The guide's end: the link secret pinned to the retired webhook secret, which is gone.
    after = service_settings(database, webhook_secrets=["new"], link_secret="old")
    with live_service(after) as svc:
        assert _opens(svc.url, posted, after.public_url) == 200
        assert _opens(svc.url, during, after.public_url) == 200
        assert _opens(svc.url, f"{posted}0", after.public_url) == 404


def test_which_keys_open_a_link(tmp_path: Path) -> None:
    """Every step of a rotation, and what happens when the guide's pin is skipped."""
    database = f"sqlite:///{tmp_path / 'db'}"

    def links(**values: object) -> Links:
        settings = service_settings(database, **values)
        return Links(settings.public_url, settings.link_keys())

    old = links(webhook_secrets=["old"])
    key = old.key(7)
    # Pinning the link secret to the webhook secret in use changes no link.
    assert links(webhook_secrets=["old"], link_secret="old").key(7) == key
    assert links(webhook_secrets=["new", "old"], link_secret="old").key(7) == key
    assert links(webhook_secrets=["new"], link_secret="old").opens(7, True, key)
    assert links(webhook_secrets=["new", "old"]).opens(7, True, key)
    # Dropping the old secret without the pin loses its links: the doctor (and the start-up)
    # warn while a rotation runs without one, naming the setting.
    assert not links(webhook_secrets=["new"]).opens(7, True, key)
    rotating = service_settings(database, webhook_secrets=["new", "old"])
    [warned] = [f for f in config_findings(rotating, load_workflows()) if f.check == "link secret"]
    assert warned.level is Level.warn and "ONDEMAND_LINK_SECRET" in warned.fix
    pinned = rotating.model_copy(update={"link_secret": SecretStr("old")})
    assert not [f for f in config_findings(pinned, load_workflows()) if f.check == "link secret"]
    # A link secret was once the key itself: those links still open.
    raw = hmac.new(b"pinned", b"job:7", hashlib.sha256).hexdigest()[:32]
    assert links(webhook_secrets=["s"], link_secret="pinned").opens(7, True, raw)
    assert not links(webhook_secrets=["s"], link_secret="pinned").opens(7, True, "0" * 32)
    assert links(webhook_secrets=["s"]).opens(7, False, None)  # a public job's: any
