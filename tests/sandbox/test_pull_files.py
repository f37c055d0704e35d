"""GitHub's pull-request files (`GET /repos/{o}/{r}/pulls/{n}/files`) through PyGithub,
unchanged: each file's status since the merge base (added, modified, removed, renamed with its
`previous_filename`), its line counts, pages of 30 (or `per_page`, at most 100), and the list
cut at 3,000 files while the pull request's `changed_files` counts them all."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.sandbox.conftest import REPO, World, git

RENAMED = "".join(f"line {i}\n" for i in range(40))  # enough text for git to see a rename


def _branch_from_main(path: Path, name: str) -> None:
    git(path, "checkout", "-q", "-b", name, "main")


def _open(world: World, head: str, title: str) -> int:
    pr = world.sandbox.admin.open_pull(REPO, head=head, user="alice", title=title)
    return int(pr["number"])


def test_each_file_with_its_status_counts_and_rename(world: World) -> None:
    path = world.repo.path
    git(path, "checkout", "-q", "main")
    (path / "kernels").mkdir()
    (path / "kernels" / "old_name.py").write_text(RENAMED)
    (path / "gone.txt").write_text("bye\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base files")
    _branch_from_main(path, "mixed")
    git(path, "mv", "kernels/old_name.py", "kernels/new_name.py")
    git(path, "rm", "-q", "gone.txt")
    (path / "README.md").write_text("kernels\nand more\n")
    (path / "added.py").write_text("a = 1\nb = 2\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "mixed change")
    git(path, "checkout", "-q", "main")
    # main moves on after the branch point: the files are the pull request's own, not main's.
    (path / "later_on_main.txt").write_text("not in the pull request\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "later")
    number = _open(world, "mixed", "Mixed")

    pull = world.sandbox.github(world.bot_token).get_repo(REPO).get_pull(number)
    files = {f.filename: f for f in pull.get_files()}
    assert set(files) == {"README.md", "added.py", "gone.txt", "kernels/new_name.py"}
    assert files["README.md"].status == "modified"
    assert (files["README.md"].additions, files["README.md"].deletions) == (1, 0)
    assert files["added.py"].status == "added" and files["added.py"].changes == 2
    assert files["gone.txt"].status == "removed" and files["gone.txt"].deletions == 1
    renamed = files["kernels/new_name.py"]
    assert renamed.status == "renamed" and renamed.previous_filename == "kernels/old_name.py"
    head = git(path, "rev-parse", "mixed")
    assert renamed.sha == git(path, "rev-parse", f"{head}:kernels/new_name.py")
    assert pull.changed_files == 4 and pull.additions == 3 and pull.deletions == 1
    # Each file's patch, as GitHub gives it: the hunks with context, no header.
    assert files["README.md"].patch == "@@ -1 +1,2 @@\n kernels\n+and more"
    assert files["gone.txt"].patch == "@@ -1 +0,0 @@\n-bye"
    assert renamed.patch is None  # a rename with no change has no hunk
    # The pull request's page lists them too, the rename as old → new.
    page = httpx.get(f"{world.sandbox.url}/{REPO}/pull/{number}").text
    assert "kernels/old_name.py → kernels/new_name.py" in page
    assert 'data-status="removed"' in page and "later_on_main.txt" not in page


def test_pages_and_the_three_thousand_file_cap(world: World) -> None:
    path = world.repo.path
    _branch_from_main(path, "huge")
    many = path / "many"
    many.mkdir()
    for i in range(3100):
        (many / f"f{i:04}.txt").write_text(f"{i}\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "3,100 files")
    git(path, "checkout", "-q", "main")
    number = _open(world, "huge", "Huge")

    url = f"{world.sandbox.url}/repos/{REPO}/pulls/{number}/files"
    auth = {"Authorization": f"token {world.bot_token}"}
    first = httpx.get(url, headers=auth)
    assert first.status_code == 200 and len(first.json()) == 30  # GitHub's default page
    assert 'rel="next"' in first.headers["Link"] and "page=100" in first.headers["Link"]
    last = httpx.get(url, params={"per_page": 100, "page": 30}, headers=auth).json()
    assert len(last) == 100 and last[-1]["filename"] == "many/f2999.txt"
    assert httpx.get(url, params={"per_page": 100, "page": 31}, headers=auth).json() == []

    pull = world.sandbox.github(world.bot_token, per_page=100).get_repo(REPO).get_pull(number)
    listed = [f.filename for f in pull.get_files()]
    assert len(listed) == 3000 and len(set(listed)) == 3000  # the cap, every page walked
    assert pull.changed_files == 3100  # ... while the pull request counts them all
