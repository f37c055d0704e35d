"""The one list of what the App needs: `missing` over an installation's granted permissions,
the manifest `ondemand app-manifest` prints, and the docs' tables, held to the list."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from ondemand.cli import main
from service.github.errors import missing_permission
from service.github.permissions import (
    EVENTS,
    PERMISSIONS,
    accepted,
    app_permissions,
    find,
    manifest,
    markdown,
    missing,
)

ROOT = Path(__file__).resolve().parents[2]
EVERYTHING = {"contents": "read", "merge_queues": "read", "metadata": "read",
              "pull_requests": "read", "issues": "write", "checks": "write"}  # fmt: skip


def test_missing_names_what_is_absent_or_too_weak() -> None:
    assert missing(EVERYTHING) == []
    assert missing({**EVERYTHING, "pull_requests": "write", "issues": "admin"}) == []
    without = {k: v for k, v in EVERYTHING.items() if k != "contents"}
    assert [p.key for p in missing(without)] == ["contents:read"]
    assert [p.key for p in missing({**EVERYTHING, "checks": "read"})] == ["checks:write"]
    assert [p.label for p in missing({**EVERYTHING, "issues": "none"})] == ["Issues: write"]
    assert len(missing(None)) == len(app_permissions())


def test_members_only_with_team_allow_lists_and_statuses_never_for_the_app() -> None:
    assert missing(EVERYTHING, teams=False) == []
    assert [p.key for p in missing(EVERYTHING, teams=True)] == ["members:read"]
    assert "statuses" not in {p.name for p in app_permissions(teams=True)}
    assert find("statuses", "write") is not None and find("statuses", "read") is None


def test_accepted_header_lists_every_alternative_in_order() -> None:
    assert accepted("contents=read") == [("contents", "read")]
    assert accepted("issues=write; pull_requests=write") == [
        ("issues", "write"),
        ("pull_requests", "write"),
    ]
    assert accepted("checks=write, metadata=read;") == [("checks", "write"), ("metadata", "read")]
    assert accepted(None) == [] and accepted("nonsense") == []


def test_a_refusal_names_the_permission_the_call_lacked() -> None:
    header = "X-Accepted-GitHub-Permissions"
    assert missing_permission({header: "contents=read"}, "contents:read") == ("contents", "read")
    assert missing_permission({}, "checks:write") == ("checks", "write")  # no header: the call's
    both = {header.lower(): "pull_requests=write; issues=write"}
    assert missing_permission(both, "issues:write") == ("issues", "write")
    assert missing_permission(both, None) == ("issues", "write")  # the one the App asks for
    assert missing_permission({header: "contents=read"}, "issues:read") == ("contents", "read")
    assert missing_permission({header: "pages=write"}, None) == ("pages", "write")
    assert missing_permission({}, None) == ("unknown", "read")


def test_the_manifest_asks_for_what_the_code_uses() -> None:
    made = manifest("kernels-ci", "https://ci.example.org/")
    assert made == {
        "name": "kernels-ci",
        "url": "https://ci.example.org",
        "hook_attributes": {"url": "https://ci.example.org/webhook", "active": True},
        "redirect_url": "https://ci.example.org/",
        "public": False,
        "default_permissions": EVERYTHING,
        "default_events": ["issue_comment", "pull_request", "check_run", "push", "merge_group"],
    }
    teams = manifest("x", "https://ci.example.org", teams=True)["default_permissions"]
    assert teams == {**EVERYTHING, "members": "read"}


def test_app_manifest_command(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONDEMAND_PUBLIC_URL", "https://ondemand.example.org")
    monkeypatch.setenv("ONDEMAND_ALLOWED_TEAMS", "acme/kernel-team")
    assert main(["app-manifest", "--name", "acme-ondemand"]) == 0
    out = capsys.readouterr()
    printed = json.loads(out.out)
    assert printed["name"] == "acme-ondemand"
    assert printed["hook_attributes"]["url"] == "https://ondemand.example.org/webhook"
    assert printed["default_permissions"]["contents"] == "read"
    assert printed["default_permissions"]["members"] == "read"  # team allow-lists are set
    assert out.err == ""

    monkeypatch.delenv("ONDEMAND_PUBLIC_URL")
    monkeypatch.delenv("ONDEMAND_ALLOWED_TEAMS")
    assert main(["app-manifest"]) == 0
    out = capsys.readouterr()
    assert "members" not in json.loads(out.out)["default_permissions"]
    assert "ONDEMAND_PUBLIC_URL is not set" in out.err  # a webhook GitHub cannot reach

    assert main(["app-manifest", "--public-url", "https://other.example.org"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["url"] == "https://other.example.org" and out.err == ""

    assert main(["app-manifest", "--markdown"]) == 0
    table = capsys.readouterr().out
    assert table == markdown()
    for p in PERMISSIONS:
        assert f"| {p.title} ({p.scope}) | {p.level} |" in table
    for e in EVENTS:
        assert f"(`{e.name}`)" in table


BLOCK = re.compile(r"<!-- app-permissions:.*?-->\n(.*?)<!-- /app-permissions -->", re.S)


def test_the_deployment_guide_shows_the_list_the_code_reads() -> None:
    blocks = BLOCK.findall((ROOT / "docs" / "deploy.md").read_text())
    assert len(blocks) == 1, "docs/deploy.md: one app-permissions block"
    assert textwrap.dedent(blocks[0]).strip() == markdown().strip()
    for other in ("README.md", "service/README.md"):  # one place: the others point to it
        assert not BLOCK.findall((ROOT / other).read_text()), other
