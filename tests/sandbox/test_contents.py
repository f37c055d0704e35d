"""GitHub's contents API (`GET /repos/{o}/{r}/contents/{path}?ref=`) through PyGithub,
unchanged: a file at the default branch, at another branch, tag or SHA; 404 for a missing
path or ref; directories, symlinks, submodules, files past 1 MB; visibility and faults."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from github import GithubException, UnknownObjectException
from github.ContentFile import ContentFile

from sandbox import git as git_module
from tests.sandbox.conftest import REPO, World, git

CONFIG = ".github/ondemand.yml"
ON_MAIN = "compare:\n  threshold: 10%\n"
ON_TUNED = "compare:\n  threshold: 25%\n  gate: fail\n"


def commit_file(path: Path, name: str, text: str, message: str) -> str:
    """Write and commit `name` on the checked-out branch; the new commit's SHA."""
    (path / name).parent.mkdir(parents=True, exist_ok=True)
    (path / name).write_text(text)
    git(path, "add", name)
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")


@pytest.fixture
def configured(world: World) -> World:
    """main holds CONFIG (ON_MAIN); branch `tuned` changes it (ON_TUNED); tag v1 is main."""
    path = world.repo.path
    commit_file(path, CONFIG, ON_MAIN, "settings")
    commit_file(path, ".github/CODEOWNERS", "* @acme\n", "owners")
    git(path, "tag", "v1")
    git(path, "checkout", "-q", "-b", "tuned")
    commit_file(path, CONFIG, ON_TUNED, "tune")
    git(path, "checkout", "-q", "main")
    return world


def test_a_file_on_the_default_branch(configured: World) -> None:
    gh = configured.sandbox.github(configured.bot_token)
    found = gh.get_repo(REPO).get_contents(CONFIG)
    assert isinstance(found, ContentFile)
    assert found.type == "file" and found.encoding == "base64"
    assert found.decoded_content.decode() == ON_MAIN
    assert found.name == "ondemand.yml" and found.path == CONFIG
    assert found.size == len(ON_MAIN)
    assert found.sha == git(configured.repo.path, "rev-parse", f"main:{CONFIG}")  # the blob
    url = f"{configured.sandbox.url}/repos/{REPO}/contents/{CONFIG}?ref=main"
    assert found.url == url
    assert found.html_url == f"{configured.sandbox.url}/{REPO}/blob/main/{CONFIG}"
    assert found.git_url == f"{configured.sandbox.url}/repos/{REPO}/git/blobs/{found.sha}"
    assert found.download_url.endswith(f"/{REPO}/raw/main/{CONFIG}")
    assert found._links == {"self": url, "git": found.git_url, "html": found.html_url}


def test_the_same_path_at_another_branch_tag_or_sha(configured: World) -> None:
    repo = configured.sandbox.github(configured.bot_token).get_repo(REPO)
    path = configured.repo.path

    def text(ref: str) -> str:
        found = repo.get_contents(CONFIG, ref=ref)
        assert isinstance(found, ContentFile)
        return found.decoded_content.decode()

    assert text("tuned") == ON_TUNED
    assert text("main") == ON_MAIN
    assert text("v1") == ON_MAIN
    assert text(git(path, "rev-parse", "tuned")) == ON_TUNED
    assert text(git(path, "rev-parse", "main")) == ON_MAIN
    tuned = repo.get_contents(CONFIG, ref="tuned")
    assert isinstance(tuned, ContentFile) and tuned.url.endswith("?ref=tuned")
    assert tuned.sha == git(path, "rev-parse", f"tuned:{CONFIG}")


def test_a_missing_path_or_ref_is_404(configured: World) -> None:
    repo = configured.sandbox.github(configured.bot_token).get_repo(REPO)
    for path, ref in [
        ("nope.yml", "main"),
        (".github/nope.yml", "tuned"),
        (CONFIG, configured.repo.main_sha),  # the first commit had no settings yet
        ("README.md/inside", "main"),  # a file is not a directory
    ]:
        with pytest.raises(UnknownObjectException) as caught:
            repo.get_contents(path, ref=ref)
        assert caught.value.data["message"] == "Not Found", path
        assert "documentation_url" in caught.value.data
    with pytest.raises(GithubException) as unknown:  # GitHub's words, so not UnknownObject
        repo.get_contents(CONFIG, ref="no-such-branch")
    assert unknown.value.status == 404
    assert unknown.value.data["message"] == "No commit found for the ref no-such-branch"
    # Clients resolve `.` and `..` in a URL before sending it; the sandbox refuses them too.
    main = configured.repo.main_sha
    for dotted in ("../kernels/README.md", "./README.md", "a/../README.md"):
        assert git_module.entry_at(configured.repo.path, main, dotted) is None
    assert git_module.entry_at(configured.repo.path, main, "README.md") is not None


def test_directories_list_their_entries(configured: World) -> None:
    repo = configured.sandbox.github(configured.bot_token).get_repo(REPO)
    listed = repo.get_contents(".github")
    assert isinstance(listed, list)
    assert sorted((c.name, c.path, c.type) for c in listed) == [
        ("CODEOWNERS", ".github/CODEOWNERS", "file"),
        ("ondemand.yml", ".github/ondemand.yml", "file"),
    ]
    config = next(c for c in listed if c.name == "ondemand.yml")
    assert config.decoded_content.decode() == ON_MAIN  # PyGithub completes it lazily
    root = repo.get_contents("")
    assert isinstance(root, list)
    entries = {c.name: c for c in root}
    assert entries[".github"].type == "dir"
    assert entries[".github"].size == 0 and entries[".github"].download_url is None
    assert entries[".github"].sha == git(configured.repo.path, "rev-parse", "main:.github")
    assert entries["README.md"].type == "file"
    assert "op.py" not in entries  # on `feature` only
    feature = repo.get_contents("/", ref="feature")
    assert isinstance(feature, list) and "op.py" in {c.name for c in feature}


def test_symlinks_and_submodules(world: World) -> None:
    path = world.repo.path
    (path / "docs").mkdir()
    (path / "docs" / "readme").symlink_to("../README.md")
    (path / "outside").symlink_to("/etc/passwd")
    (path / "folder").symlink_to("docs")
    git(path, "add", "docs/readme", "outside", "folder")
    gitlink = world.repo.feature_sha  # any commit: a submodule is a commit in the tree
    git(path, "update-index", "--add", "--cacheinfo", f"160000,{gitlink},vendor")
    git(path, "commit", "-q", "-m", "links")
    repo = world.sandbox.github(world.bot_token).get_repo(REPO)

    readme = repo.get_contents("docs/readme")  # a link to a file reads as the file
    assert isinstance(readme, ContentFile)
    assert readme.type == "file" and readme.path == "README.md"
    assert readme.decoded_content == b"kernels\n"
    for name, target in [("outside", "/etc/passwd"), ("folder", "docs")]:
        link = repo.get_contents(name)
        assert isinstance(link, ContentFile) and link.type == "symlink"
        assert link.raw_data["target"] == target
    vendor = repo.get_contents("vendor")
    assert isinstance(vendor, ContentFile) and vendor.type == "submodule"
    assert vendor.sha == gitlink
    listed = {c.name: c.type for c in repo.get_contents("")}  # type: ignore[union-attr]
    assert listed["vendor"] == "file"  # GitHub's listing calls a submodule a file
    assert listed["outside"] == "symlink" and listed["docs"] == "dir"


def test_past_1_mb_the_content_is_left_out(world: World) -> None:
    big = "x" * (1024 * 1024 + 1)
    commit_file(world.repo.path, "big.txt", big, "big")
    commit_file(world.repo.path, "small.bin", "", "empty")
    repo = world.sandbox.github(world.bot_token).get_repo(REPO)
    found = repo.get_contents("big.txt")
    assert isinstance(found, ContentFile)
    assert found.size == len(big) and found.encoding == "none" and found.content == ""
    empty = repo.get_contents("small.bin")
    assert isinstance(empty, ContentFile) and empty.decoded_content == b""


def test_binary_and_non_ascii_content_round_trips(world: World) -> None:
    data = bytes(range(256)) * 3
    (world.repo.path / "blob.bin").write_bytes(data)
    git(world.repo.path, "add", "blob.bin")
    git(world.repo.path, "commit", "-q", "-m", "binary")
    commit_file(world.repo.path, "sp ace/naïve #1.txt", "héllo\n", "names")
    repo = world.sandbox.github(world.bot_token).get_repo(REPO)
    blob = repo.get_contents("blob.bin")
    assert isinstance(blob, ContentFile) and blob.decoded_content == data
    assert all(len(line) <= 60 for line in blob.content.splitlines())  # GitHub's wrapping
    assert base64.b64decode(blob.content) == data
    named = repo.get_contents("sp ace/naïve #1.txt")
    assert isinstance(named, ContentFile) and named.decoded_content.decode() == "héllo\n"
    assert named.name == "naïve #1.txt"


def test_private_repositories_faults_and_rate_limits_apply(world: World) -> None:
    admin = world.sandbox.admin
    admin.create_repo("acme", "secret", str(world.repo.path), private=True)
    mallory = world.sandbox.github(admin.create_token("mallory"), lazy=True)
    with pytest.raises(UnknownObjectException):
        mallory.get_repo("acme/secret").get_contents("README.md")
    admin.set_permission("acme/secret", "mallory", "read")
    found = mallory.get_repo("acme/secret").get_contents("README.md")
    assert isinstance(found, ContentFile) and found.decoded_content == b"kernels\n"

    admin.inject_fault(502, 1, path_prefix=f"/repos/{REPO}/contents")
    repo = world.sandbox.github(world.bot_token).get_repo(REPO)
    with pytest.raises(GithubException) as caught:
        repo.get_contents("README.md")
    assert caught.value.status == 502
    assert repo.get_contents("README.md").decoded_content == b"kernels\n"  # type: ignore[union-attr]
    calls = [c for c in admin.state()["api_calls"] if "/contents/" in c["path"]]
    assert [c["status"] for c in calls][-3:] == [200, 502, 200]
    remaining, limit = world.sandbox.github(world.bot_token).rate_limiting
    assert remaining < limit  # the contents calls counted against the bot's rate limit
