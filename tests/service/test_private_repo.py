"""A private repository, which git fetches only with a token, against the GitHub sandbox
(smart HTTP that asks for credentials, as GitHub does) and a real service: `/test changed`
reads its tree, and a runner's claim carries a read token for that repository alone (an App
installation token, `contents: read`) with which the runner's mirror fetches the commit; a
service with a token user's token hands runners none. GitHub failing to mint the token keeps
the job queued, not errored."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from github import Auth, Github, GithubException

from ondemand.git import GitError, Mirrors
from runner.link.client import ServiceClient
from tests.service.test_changed import BASE, HEAD, targets
from tests.service.test_flow import BOT, REPO, Flow, make_flow
from workflows.models import JobStatus


def claim(flow: Flow, wait_s: float = 5.0) -> tuple[ServiceClient, object]:
    _, token = flow.svc.register("r1", ["cpu"])
    client = ServiceClient(flow.svc.url, token)
    return client, client.claim(wait_s)


@pytest.mark.parametrize("app", [True, False], ids=["app", "token"])
def test_changed_reads_a_private_repositorys_tree(tmp_path: Path, app: bool) -> None:
    with make_flow(tmp_path, app=app, private=True, base_files=BASE, head_files=HEAD) as flow:
        flow.comment("/test changed:cpu")
        bot = "ondemand[bot]" if app else BOT
        body = flow.admin.wait_for_comment(REPO, flow.pr, user=bot, contains="operator")["body"]
        assert "could not be read" not in body
        assert "`pool`" in body and "`solo`" not in body
        flow.wait_until(lambda: targets(flow, flow.head) == {("pool", "cpu")})


def test_a_runner_gets_a_read_token_for_the_private_repository_alone(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True, private=True) as flow:
        flow.comment("/test add:cpu")
        flow.wait_until(lambda: [j.status for j in flow.jobs()] == [JobStatus.queued])
        client, spec = claim(flow)
        assert spec is not None and spec.git_token and spec.git_token.startswith("ghs_")
        token = spec.git_token
        assert token not in repr(spec)
        url = f"{flow.admin.base_url}/{REPO}.git"
        assert spec.clone_url == url

        mirrors = Mirrors(tmp_path / "runner")
        with pytest.raises(GitError, match="uthentication failed"):
            mirrors.fetch(url, spec.sha, spec.pr_number)
        mirror = mirrors.fetch(url, spec.sha, spec.pr_number, token=token)
        assert mirrors.has_commit(mirror, spec.sha)
        assert token not in (mirror / "config").read_text()

        # What a job could do with it, were it to leak: read this repository, and no more.
        gh = Github(base_url=flow.admin.base_url, auth=Auth.Token(token), retry=None)
        with pytest.raises(GithubException) as err:
            gh.get_repo(REPO).get_issue(flow.pr).create_comment("pwned")
        assert err.value.status == 403
        client.close()


def test_a_token_user_hands_runners_no_token(tmp_path: Path) -> None:
    with make_flow(tmp_path, private=True) as flow:
        flow.comment("/test add:cpu")
        flow.wait_until(lambda: len(flow.jobs()) == 1)
        _, token = flow.svc.register("r1", ["cpu"])
        answer_ = httpx.post(
            f"{flow.svc.url}/api/v1/jobs/claim",
            json={"wait_s": 5},
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert answer_.status_code == 200
        assert "git_token" not in answer_.json()  # a claim as runners before tokens read it


def test_no_token_from_github_keeps_the_job_queued(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True, private=True) as flow:
        flow.comment("/test add:cpu")
        flow.wait_until(lambda: [j.status for j in flow.jobs()] == [JobStatus.queued])
        flow.admin.inject_fault(503, 100, path_prefix="/app/installations", method="POST")
        client, spec = claim(flow, wait_s=2.0)
        assert spec is None
        assert [j.status for j in flow.jobs()] == [JobStatus.queued]
        flow.admin.clear_faults()
        spec = client.claim(10.0)
        assert spec is not None and spec.git_token
        assert [(j.status, j.attempt) for j in flow.jobs()] == [(JobStatus.running, 1)]
        client.close()
