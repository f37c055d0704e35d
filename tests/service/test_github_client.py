"""GitHubClient (PyGithub) against the sandbox: reads, writes, and errors mapped to retry advice."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox.app import create_app as create_sandbox
from sandbox.client import SandboxAdmin
from service.github.client import GitHubClient, GitHubError
from service.github.errors import classify
from tests.support.git import git
from tests.support.keys import rsa_keypair
from tests.support.live import live_server

REPO = "acme/kernels"


@dataclass
class World:
    admin: SandboxAdmin
    gh: GitHubClient
    head: str


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    repo = tmp_path / "kernels"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "commit", "-q", "--allow-empty", "-m", "initial")
    git(repo, "checkout", "-q", "-b", "feature")
    git(repo, "commit", "-q", "--allow-empty", "-m", "change")
    head = git(repo, "rev-parse", "HEAD")
    with live_server(create_sandbox()) as url, SandboxAdmin(url) as admin:
        admin.create_user("acme", "Organization")
        admin.create_user("alice")
        admin.create_user("bot", "Bot")
        admin.create_repo("acme", "kernels", str(repo))
        admin.set_permission(REPO, "alice", "maintain")
        admin.create_team("acme", "kernel-team", ["alice"])
        admin.open_pull(REPO, head="feature", base="main", user="alice")
        yield World(admin, GitHubClient(url, token=admin.create_token("bot")), head)


def test_reads(world: World) -> None:
    pull = world.gh.pull(REPO, 1)
    assert pull.head_sha == world.head and pull.base_ref == "main" and pull.state == "open"
    assert pull.clone_url
    assert world.gh.permission(REPO, "alice") == "write"  # legacy field: maintain -> write
    assert world.gh.permission(REPO, "bot") in ("none", "read")
    assert world.gh.team_member("acme", "kernel-team", "alice")
    assert not world.gh.team_member("acme", "kernel-team", "bot")
    assert world.gh.login() == "bot"


def test_writes_and_find_by_marker(world: World) -> None:
    comment_id = world.gh.create_comment(REPO, 1, "<!-- ondemand:add:cpu -->\nqueued")
    world.gh.edit_comment(REPO, comment_id, "<!-- ondemand:add:cpu -->\nrunning")
    world.gh.add_reaction(REPO, comment_id, "eyes")
    world.gh.create_status(REPO, world.head, "pending", "queued", "ondemand/add:cpu", "http://x/1")
    assert world.gh.find_comment(REPO, 1, "<!-- ondemand:add:cpu -->") == comment_id
    assert world.gh.find_comment(REPO, 1, "<!-- ondemand:mul:cpu -->") is None
    (posted,) = world.admin.comments(REPO, 1)
    assert posted["body"].endswith("running") and posted["user"] == "bot"
    assert [s["state"] for s in world.admin.statuses(REPO, world.head)] == ["pending"]


def test_past_the_hours_budget_every_call_waits_for_the_reset_and_none_goes_out(
    world: World,
) -> None:
    """A sandbox that enforces GitHub's primary limit (as GitHub does): the call past the
    budget gets 403 with no requests left; the client pauses every call until the window's
    reset, and while paused no call reaches GitHub."""
    world.gh.login()  # the budget counts from here: one call spent
    limits = world.admin.set_rate_limit(len(_service_calls(world)) + 2)
    world.gh.pull(REPO, 1)
    world.gh.permission(REPO, "alice")  # the budget's last call
    with pytest.raises(GitHubError) as caught:
        world.gh.pull(REPO, 1)
    assert caught.value.status == 403 and caught.value.rate_limited
    until_reset = limits["reset"] - time.time()
    assert caught.value.retry_after == pytest.approx(until_reset, abs=5)
    assert world.gh.paused_for() == pytest.approx(until_reset, abs=5) and until_reset > 60
    spent = len(_service_calls(world))
    for _ in range(5):
        with pytest.raises(GitHubError, match="rate limited"):
            world.gh.permission(REPO, "alice")
    assert len(_service_calls(world)) == spent


def _service_calls(world: World) -> list[dict]:
    return [c for c in world.admin.state()["api_calls"] if c["login"] == "bot"]


@pytest.mark.parametrize(
    ("status", "retry_after", "expect_wait"),
    [(502, None, None), (503, None, None), (429, 7, 7.0), (403, 9, 9.0)],
)
def test_errors_carry_retry_advice(
    world: World, status: int, retry_after: int | None, expect_wait: float | None
) -> None:
    world.admin.inject_fault(status, 1, retry_after=retry_after)  # type: ignore[arg-type]
    with pytest.raises(GitHubError) as caught:
        world.gh.create_comment(REPO, 1, "hello")
    assert caught.value.status == status and not caught.value.permanent
    if expect_wait is None:  # GitHub failing: every call waits for the next try
        assert caught.value.unavailable and 0 < (caught.value.retry_after or 0) <= 0.5
    else:
        assert caught.value.retry_after == pytest.approx(expect_wait, abs=1)
    assert world.admin.comments(REPO, 1) == []  # the fault answered; nothing was posted


def test_while_github_is_down_calls_wait_for_one_try_every_few_seconds(tmp_path: Path) -> None:
    """An outage: the first failure pauses every call; while it lasts, calls fail at once
    without going out, but for one try per pause (which grows to `probe_max_s`); the first
    try after GitHub is back goes through, at most `probe_max_s` later."""
    with live_server(create_sandbox()) as url, SandboxAdmin(url) as admin:
        admin.create_user("bot", "Bot")
        gh = GitHubClient(url, token=admin.create_token("bot"), probe_max_s=1.0)
        admin.inject_fault(503, 10_000)
        failed = tried = 0
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            try:
                gh.login()
            except GitHubError as exc:
                assert exc.unavailable and not exc.permanent and 0 < (exc.retry_after or 0) <= 1
                failed += 1
            time.sleep(0.01)
        tried = len(admin.state()["api_calls"])
        assert failed > 100 and 2 <= tried <= 8  # 0.25-0.5, 0.5-1, then 0.5-1 s apart
        admin.clear_faults()
        back = time.monotonic()
        left = gh.paused_for()
        assert left <= 1.0  # the pause never grows past probe_max_s
        while True:
            try:
                assert gh.login() == "bot"
                break
            except GitHubError:
                time.sleep(0.01)
        # the first try after the pause goes through: one call went out, and it went out when
        # the pause ended (the bound is loose: a 2-core machine under the whole suite once took
        # 1.9 s past the pause to answer; a pause that kept growing would take far longer)
        assert len(admin.state()["api_calls"]) == tried + 1
        assert time.monotonic() - back <= left + 5
        assert gh.paused_for() == 0


def test_a_secondary_limit_named_only_in_its_message_waits_a_minute_and_pauses_all_calls(
    world: World,
) -> None:
    """A 403 with requests remaining and no `Retry-After` is not "no permission" when its
    message names a secondary limit: wait at least a minute, and call nothing meanwhile."""
    world.admin.inject_fault(403, 1, kind="secondary")
    with pytest.raises(GitHubError) as caught:
        world.gh.create_comment(REPO, 1, "hello")
    error = caught.value
    assert error.status == 403 and error.rate_limited and not error.permanent
    assert error.retry_after == 60
    calls = len(world.admin.state()["api_calls"])
    with pytest.raises(GitHubError) as paused:
        world.gh.pull(REPO, 1)  # another kind of call: paused too, GitHub not asked
    assert paused.value.rate_limited and 0 < (paused.value.retry_after or 0) <= 60
    assert len(world.admin.state()["api_calls"]) == calls
    assert 0 < world.gh.paused_for() <= 60


@pytest.mark.parametrize(
    ("status", "message", "headers", "limited", "wait"),
    [
        (403, "Resource not accessible by integration", {}, False, None),
        (403, "You have exceeded a secondary rate limit.", {}, True, 60.0),
        (403, "You have triggered an abuse detection mechanism.", {}, True, 60.0),
        (403, "API rate limit exceeded", {"X-RateLimit-Remaining": "0",
                                          "X-RateLimit-Reset": "1030"}, True, 30.0),
        (429, "Too many requests", {}, True, 60.0),
        (429, "Too many requests", {"Retry-After": "5"}, True, 5.0),
        (503, "Service Unavailable", {"Retry-After": "3"}, False, 3.0),
        (422, "Validation Failed", {}, False, None),
    ],
)  # fmt: skip
def test_classify_follows_githubs_rate_limit_rules(
    status: int, message: str, headers: dict[str, str], limited: bool, wait: float | None
) -> None:
    assert classify(status, message, headers, now=1000.0) == (limited, wait)


def test_missing_things_are_permanent_errors(world: World) -> None:
    with pytest.raises(GitHubError) as caught:
        world.gh.pull(REPO, 99)
    assert caught.value.status == 404 and caught.value.permanent


def test_needs_credentials() -> None:
    with pytest.raises(ValueError, match="token"):
        GitHubClient("http://127.0.0.1:1")


def test_app_team_lookup_finds_the_organization_installation(world: World) -> None:
    """As an App, a team check may be the first call for an organization: it must find the
    org's installation, not guess a repository."""
    private_pem, public_pem = rsa_keypair()
    world.admin.register_app(4242, public_pem, account="acme")
    app = GitHubClient(world.admin.base_url, app_id=4242, private_key=private_pem)
    assert app.team_member("acme", "kernel-team", "alice")
    assert not app.team_member("acme", "kernel-team", "bot")


def test_the_apps_key_is_parsed_once_for_all_its_jwts(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every call made as the App carries a new JWT; parsing the PEM for each cost 35 ms of
    CPU a call. The key is parsed on the first and reused; the JWTs still verify with the
    public key GitHub keeps, and the App's calls still work."""
    import jwt
    from cryptography.hazmat.primitives import serialization

    from service.github import client as github_module

    private_pem, public_pem = rsa_keypair()
    parsed: list[int] = []
    real = serialization.load_pem_private_key

    def counting(data: bytes, password: bytes | None = None, **kw: object) -> object:
        parsed.append(1)
        return real(data, password, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(github_module.serialization, "load_pem_private_key", counting)
    sign = github_module.app_signer(private_pem)
    tokens = [sign({"iss": "4242", "iat": int(time.time()) - 60, "exp": int(time.time()) + 60})
              for _ in range(3)]  # fmt: skip
    assert len(parsed) == 1
    for token in tokens:
        assert jwt.decode(token, public_pem, algorithms=["RS256"])["iss"] == "4242"
    world.admin.register_app(4242, public_pem, account="acme")
    app = GitHubClient(world.admin.base_url, app_id=4242, private_key=private_pem)
    assert app.team_member("acme", "kernel-team", "alice")
    assert not app.team_member("acme", "kernel-team", "bot")
    assert len(parsed) == 2  # one for `sign`, one for the client, however many calls it made
    with pytest.raises(ValueError, match="private key"):
        GitHubClient(world.admin.base_url, app_id=4242, private_key="")
