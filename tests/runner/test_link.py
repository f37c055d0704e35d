"""The runner's link to the service, against a service newer than the runner: a claim with a
field this runner does not know, at any depth, is still the job (the field is ignored and
said so)."""

from __future__ import annotations

import logging

import pytest
from fastapi import FastAPI

from runner.link.client import ServiceClient
from tests.support.live import live_server

SPEC = {
    "id": 9,
    "repo": "o/r",
    "clone_url": "/x",
    "pr_number": 1,
    "sha": "c" * 40,
    "op": "add",
    "backend": "cpu",
}


def test_a_claim_with_fields_from_a_newer_service_is_still_the_job(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = FastAPI()

    @app.post("/api/v1/jobs/claim")
    def claim() -> dict[str, object]:
        return {**SPEC, "priority": 3, "artifacts_url": "https://x",
                "options": {"bench": False, "sanitizer": True}}  # fmt: skip

    with live_server(app) as url:
        client = ServiceClient(url, "t")
        with caplog.at_level(logging.WARNING):
            spec = client.claim(0)
        client.close()
    assert spec is not None and (spec.id, spec.op, spec.sha) == (9, "add", "c" * 40)
    assert spec.options.bench is False  # what it knows of a part is kept
    assert (
        "ignoring fields this runner does not know: artifacts_url, options.sanitizer, priority"
    ) in caplog.text
