"""`/test OP:BACKEND vs REF`: the job compares with the commit `REF` names (a tag such as a
release, a branch, a SHA) itself, resolved through GitHub when the command is handled; a name
GitHub knows no commit by is answered at once and queues nothing."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.service.test_flow import BOT, REPO, Flow, auth, make_flow
from tests.support.git import git
from workflows.models import JobResult, JobStatus


def _test_vs_a_release(flow: Flow, tmp_path: Path) -> str:
    """Main tagged `v1.0` and `/test add:cpu vs v1.0` commented, its one job queued; the
    tagged commit."""
    repo = tmp_path / "kernels"
    release = git(repo, "rev-parse", "main")
    git(repo, "tag", "v1.0", release)
    flow.comment("/test add:cpu vs v1.0")
    flow.wait_until(lambda: len(flow.jobs()) == 1)
    return release


def test_vs_a_tag_compares_with_it_and_an_unknown_ref_is_answered(tmp_path: Path) -> None:
    with make_flow(tmp_path) as flow:
        release = _test_vs_a_release(flow, tmp_path)
        (job,) = flow.jobs()
        assert (job.base_ref, job.base_sha, job.exact_base) == ("v1.0", release, True)
        _, token = flow.svc.register("cpu-1", ["cpu"])
        claim = f"{flow.svc.url}/api/v1/jobs/claim"
        spec = httpx.post(claim, json={}, headers=auth(token)).json()
        assert (spec["base_sha"], spec["options"]["exact_base"]) == (release, True)

        flow.comment("/test mul:cpu vs v9.9")
        reply = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="v9.9")
        assert "`v9.9` names no branch, tag or commit of this repository" in reply["body"]
        assert "nothing was queued" in reply["body"] and len(flow.jobs()) == 1


def test_retest_runs_a_vs_job_against_the_same_commit(tmp_path: Path) -> None:
    """`/retest` runs a failed `vs REF` job as it ran: against that commit, not the merge base."""
    with make_flow(tmp_path) as flow:
        release = _test_vs_a_release(flow, tmp_path)
        _, token = flow.svc.register("cpu-1", ["cpu"])
        api = f"{flow.svc.url}/api/v1/jobs"
        spec = httpx.post(f"{api}/claim", json={}, headers=auth(token)).json()
        failed = JobResult(status=JobStatus.failed, sha=spec["sha"]).model_dump(mode="json")
        httpx.post(f"{api}/{spec['id']}/complete", json=failed, headers=auth(token))
        flow.comment("/retest")
        flow.wait_until(lambda: len(flow.jobs()) == 2)
        again = flow.jobs()[-1]
        assert (again.base_ref, again.base_sha, again.exact_base) == ("v1.0", release, True)
