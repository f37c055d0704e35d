"""`GitHubClient.file_at` against the sandbox under real uvicorn: a file's text at a branch,
tag or SHA, None where there is no file, and GitHub's failures as the client's errors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbox.app import create_app as create_sandbox
from sandbox.client import SandboxAdmin
from service.github.client import GitHubClient, GitHubError
from service.github.errors import FileTooLarge
from tests.support.git import git
from tests.support.keys import rsa_keypair
from tests.support.live import live_server
from workflows.repo_config import CONFIG_PATH, parse_repo_config

REPO = "acme/kernels"
ON_MAIN = "compare:\n  threshold: 10%\n"
ON_PR = "compare:\n  threshold: 90%\n"  # what a pull request would like its gate to be


@dataclass
class World:
    admin: SandboxAdmin
    gh: GitHubClient
    path: Path
    main: str
    head: str


def commit(path: Path, name: str, data: bytes, message: str) -> str:
    (path / name).parent.mkdir(parents=True, exist_ok=True)
    (path / name).write_bytes(data)
    git(path, "add", name)
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    """main holds the settings; the pull request's head (`feature`) loosens them."""
    path = tmp_path / "kernels"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    main = commit(path, CONFIG_PATH, ON_MAIN.encode(), "settings")
    git(path, "checkout", "-q", "-b", "feature")
    head = commit(path, CONFIG_PATH, ON_PR.encode(), "loosen the gate")
    git(path, "checkout", "-q", "main")
    with live_server(create_sandbox()) as url, SandboxAdmin(url) as admin:
        admin.create_user("acme", "Organization")
        admin.create_user("alice")
        admin.create_user("bot", "Bot")
        admin.create_repo("acme", "kernels", str(path))
        admin.open_pull(REPO, head="feature", base="main", user="alice")
        yield World(admin, GitHubClient(url, token=admin.create_token("bot")), path, main, head)


def test_the_text_at_a_ref(world: World) -> None:
    pull = world.gh.pull(REPO, 1)
    assert world.gh.file_at(REPO, CONFIG_PATH, pull.base_ref) == ON_MAIN
    assert world.gh.file_at(REPO, CONFIG_PATH, pull.base_sha) == ON_MAIN
    assert world.gh.file_at(REPO, CONFIG_PATH, pull.head_sha) == ON_PR
    assert world.gh.file_at(REPO, CONFIG_PATH, "feature") == ON_PR
    reading = parse_repo_config(world.gh.file_at(REPO, CONFIG_PATH, "main") or "")
    assert reading.ok and reading.config.for_op("any").threshold == pytest.approx(0.10)


def test_none_where_there_is_no_file(world: World) -> None:
    assert world.gh.file_at(REPO, ".github/absent.yml", "main") is None
    assert world.gh.file_at(REPO, CONFIG_PATH, "no-such-branch") is None
    assert world.gh.file_at(REPO, ".github", "main") is None  # a directory
    assert world.gh.file_at("acme/unknown", CONFIG_PATH, "main") is None


def test_text_is_decoded_with_replacement_and_big_files_are_read_whole(world: World) -> None:
    commit(world.path, "odd.yml", b"compare: \xff\xfe\n# caf\xc3\xa9\n", "bytes")
    assert world.gh.file_at(REPO, "odd.yml", "main") == "compare: \ufffd\ufffd\n# café\n"
    big = b"# " + b"x" * 70_000 + b"\n"
    commit(world.path, "big.yml", big, "big")
    text = world.gh.file_at(REPO, "big.yml", "main")
    assert text is not None and len(text) == len(big)
    (problem,) = parse_repo_config(text).problems
    assert problem.line == 1 and "70,003 bytes" in problem.message


def test_a_file_over_1_mb_raises_file_too_large(world: World) -> None:
    commit(world.path, "huge.yml", b"#" * (1024 * 1024 + 10), "huge")
    with pytest.raises(FileTooLarge) as caught:
        world.gh.file_at(REPO, "huge.yml", "main")
    assert caught.value.size == 1024 * 1024 + 10
    assert caught.value.status == 413 and caught.value.permanent


def test_githubs_failures_propagate_as_github_errors(world: World) -> None:
    world.admin.inject_fault(503, 1, path_prefix=f"/repos/{REPO}/contents")
    with pytest.raises(GitHubError) as caught:
        world.gh.file_at(REPO, CONFIG_PATH, "main")
    assert caught.value.status == 503 and caught.value.unavailable


def test_as_a_github_app(world: World) -> None:
    private_pem, public_pem = rsa_keypair()
    world.admin.register_app(4242, public_pem, account="acme")
    app = GitHubClient(world.admin.base_url, app_id=4242, private_key=private_pem)
    assert app.file_at(REPO, CONFIG_PATH, "main") == ON_MAIN
    assert app.file_at(REPO, "nothing-here", "main") is None
