"""Property: for any number of comments and any page size, PyGithub's PaginatedList walks the
sandbox's Link headers to exactly the comments, in order, and counts them right."""

from __future__ import annotations

from pathlib import Path

from github import Auth, Github
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sandbox.app import create_app
from sandbox.client import SandboxAdmin
from tests.sandbox.conftest import REPO, git
from tests.support.live import live_server


def test_any_page_size_lists_every_comment_once(tmp_path: Path) -> None:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "commit", "-q", "--allow-empty", "-m", "initial")
    with live_server(create_app()) as url, SandboxAdmin(url) as admin:
        admin.create_user("alice")
        admin.create_repo("acme", "kernels", str(path))
        token = admin.create_token("alice")

        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
        @given(n=st.integers(0, 11), per_page=st.integers(1, 5))
        def check(n: int, per_page: int) -> None:
            number = admin.open_issue(REPO, user="alice")["number"]
            bodies = [f"c{number}-{i}" for i in range(n)]
            for body in bodies:
                admin.comment(REPO, number, "alice", body)
            gh = Github(
                base_url=url,
                auth=Auth.Token(token),
                per_page=per_page,
                retry=None,
                seconds_between_requests=0,
                seconds_between_writes=0,
            )
            comments = gh.get_repo(REPO).get_issue(number).get_comments()
            assert [c.body for c in comments] == bodies
            assert comments.totalCount == n
            assert [c.body for c in comments.reversed] == bodies[::-1]

        check()
