"""`ondemand doctor service`: each planted fault is found and named with the setting that fixes
it: no registration tokens, a loopback public URL, the database down, a wrong webhook secret
(GitHub's own delivery log shows the service's 401s), an App GitHub refuses."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ondemand.doctor import Finding, Level, exit_status
from service.doctor import config_findings, database_findings, github_findings, loopback
from service.github.client import GitHubClient
from tests.service.helpers import service_settings
from tests.service.test_flow import REPO, make_flow
from tests.support.keys import rsa_keypair
from tests.support.live import free_port
from workflows.spec import load_workflows

WORKFLOWS = load_workflows()


def named(findings: list[Finding], check: str) -> Finding:
    (found,) = [f for f in findings if f.check == check]
    return found


def test_a_configured_service_passes_its_settings_checks(tmp_path: Path) -> None:
    settings = service_settings(
        f"sqlite:///{tmp_path / 'db'}", public_url="https://ondemand.example.org",
        github_token="t", default_backends=["mthreads"], link_secret="links",
    )  # fmt: skip
    findings = config_findings(settings, WORKFLOWS)
    assert [f.level for f in findings] == [Level.ok] * len(findings), findings
    assert exit_status(findings) == 0


def test_no_registration_tokens_is_found_and_named(tmp_path: Path) -> None:
    settings = service_settings(f"sqlite:///{tmp_path / 'db'}", registration_tokens=[])
    found = named(config_findings(settings, WORKFLOWS), "registration tokens")
    assert found.level is Level.fail and "every runner's registration is refused" in found.detail
    assert "ONDEMAND_REGISTRATION_TOKENS" in found.fix


def test_a_loopback_public_url_fails_a_deployment_and_warns_a_trial(tmp_path: Path) -> None:
    for url in ("http://127.0.0.1:8000", "http://localhost:8000", "http://[::1]:80"):
        assert loopback(url), url
    assert not loopback("https://ondemand.example.org")
    settings = service_settings(f"sqlite:///{tmp_path / 'db'}", public_url="http://127.0.0.1:8000")
    found = named(config_findings(settings, WORKFLOWS), "public URL")
    assert found.level is Level.fail and "ONDEMAND_PUBLIC_URL" in found.fix
    trial = settings.model_copy(update={"local_trial": True})
    assert named(config_findings(trial, WORKFLOWS), "public URL").level is Level.warn


def test_the_default_backends_left_unset_are_a_warning_and_unknown_ones_fail(
    tmp_path: Path,
) -> None:
    from service.settings import Settings

    unset = Settings(database_url=f"sqlite:///{tmp_path / 'db'}")
    found = named(config_findings(unset, WORKFLOWS), "default backends")
    assert found.level is Level.warn and "ONDEMAND_DEFAULT_BACKENDS" in found.fix
    wrong = unset.model_copy(update={"default_backends": ["cuda9"]})
    assert named(config_findings(wrong, WORKFLOWS), "default backends").level is Level.fail


def test_the_database_down_is_found_and_named(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    settings = service_settings(f"postgresql+psycopg://postgres@127.0.0.1:{port}/test")
    (found,) = database_findings(settings)
    assert found.level is Level.fail and f"127.0.0.1:{port}/test does not answer" in found.detail
    assert "ONDEMAND_DATABASE_URL" in found.fix
    up = database_findings(service_settings(f"sqlite:///{tmp_path / 'fresh.db'}"))
    assert [f.level for f in up] == [Level.ok, Level.warn]  # answers; empty until it serves


def test_a_wrong_webhook_secret_shows_in_githubs_delivery_log(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True) as flow:
        settings = flow.svc.service.settings
        client = GitHubClient.from_settings(settings)
        assert client is not None
        flow.comment("/test add:cpu")
        flow.wait_until(lambda: flow.jobs())
        findings = github_findings(settings, client)
        assert named(findings, "GitHub App").level is Level.ok
        assert named(findings, "webhook secret").level is Level.ok
        # The App's secret is rotated on GitHub only: the service refuses what follows.
        flow.admin.set_webhook(f"{flow.svc.url}/webhook", "rotated-on-github-only")
        flow.comment("/test add:cpu again")
        flow.wait_until(lambda: flow.admin.deliveries()[-1]["status_code"] == 401)
        found = named(github_findings(settings, client), "webhook secret")
        assert found.level is Level.fail and "refused with 401" in found.detail
        assert "ONDEMAND_WEBHOOK_SECRETS" in found.fix
        # GitHub delivering somewhere else than the public URL says is a warning.
        assert named(findings, "webhook URL").level is Level.warn


def test_an_app_github_refuses_is_named(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True) as flow:
        settings = flow.svc.service.settings
        other, _ = rsa_keypair()  # a private key GitHub never saw
        wrong = GitHubClient(settings.github_api_url, app_id=settings.github_app_id,
                             private_key=other)  # fmt: skip
        (found,) = github_findings(settings, wrong)
        assert found.level is Level.fail and "id or private key is wrong" in found.detail
        assert REPO  # the world stays up for the check


def test_the_command_prints_every_finding_and_fails_on_one(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONDEMAND_")}
    env |= {
        "ONDEMAND_DATABASE_URL": f"sqlite:///{tmp_path / 'db'}",
        "ONDEMAND_WEBHOOK_SECRETS": "s",
        "ONDEMAND_GITHUB_TOKEN": "t",
        "ONDEMAND_GITHUB_API_URL": f"http://127.0.0.1:{free_port()}",
        "ONDEMAND_PUBLIC_URL": "https://ondemand.example.org",
        "ONDEMAND_DEFAULT_BACKENDS": "cpu",
    }
    done = subprocess.run(
        [sys.executable, "-m", "ondemand", "doctor", "service"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "✗ registration tokens" in out and "→ set ONDEMAND_REGISTRATION_TOKENS" in out
    assert "✓ webhook secret" in out and "✓ public URL" in out
    assert "✗ GitHub" in out  # nothing listens at that API URL
    assert out.rstrip().splitlines()[-1].startswith("2 failed")


@pytest.mark.parametrize("argv", [[], ["nurse"]])
def test_the_command_says_how_to_use_it(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ondemand", "doctor", *argv],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and "ondemand doctor service" in done.stderr


def test_a_missing_permission_is_named_with_its_installation(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True) as flow:
        settings = flow.svc.service.settings
        client = GitHubClient.from_settings(settings)
        assert client is not None
        assert named(github_findings(settings, client), "permissions").level is Level.ok
        installation = int(flow.admin.state()["installations"][0]["id"])
        granted = dict(flow.admin.state()["installations"][0]["permissions"])
        granted.pop("contents")
        flow.admin.set_installation_permissions(installation, granted)
        found = named(github_findings(settings, client), "permissions")
        assert found.level is Level.fail
        assert "lacks Contents: read (has none)" in found.detail
        assert "grant Contents: read" in found.fix
