"""`/test changed` and a trusted author's push, against the GitHub sandbox and a real service:
the operators come from the pull request's files (GitHub's files API, every page) and its
tree at the approved commit (a mirror the service fetches), one reply says which and why,
one job per (operator, backend) follows; the limit, GitHub's 3,000-file cap, and pushes by
trusted and untrusted authors (a push supersedes the previous automatic jobs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.service.test_flow import BOT, REPO, Flow, make_flow
from tests.support.git import git
from workflows.models import JobStatus

ROOT = Path(__file__).resolve().parents[2]

BASE = {
    "kernels/__init__.py": "",
    "kernels/launch.py": "GRID = 1\n",
    "kernels/ops/__init__.py": "",
    "kernels/ops/pool/__init__.py": "from kernels import launch\n",
    "kernels/ops/solo/__init__.py": "X = 1\n",
    "tests/kernels/test_ops.py": (
        "import pytest\n\n"
        "@pytest.mark.pool\ndef test_pool():\n    assert True\n\n"
        "@pytest.mark.solo\ndef test_solo():\n    assert True\n"
    ),
}
HEAD = {"kernels/ops/pool/__init__.py": "from kernels import launch\nY = 2\n"}


def replies(flow: Flow, pr: int | None = None) -> list[dict[str, Any]]:
    return [c for c in flow.admin.comments(REPO, pr or flow.pr) if c["user"] == BOT]


def answer(flow: Flow, contains: str, pr: int | None = None) -> str:
    return str(
        flow.admin.wait_for_comment(REPO, pr or flow.pr, user=BOT, contains=contains)["body"]
    )


def push_note(flow: Flow) -> str:
    """The body of the pull request's one push note ("" before there is one)."""
    notes = [c["body"] for c in replies(flow) if "ondemand:note:changed-on-push" in c["body"]]
    assert len(notes) <= 1, notes
    return notes[0] if notes else ""


def targets(flow: Flow, sha: str, active_only: bool = False) -> set[tuple[str, str]]:
    active = (JobStatus.queued, JobStatus.running)
    return {
        (j.op, j.backend)
        for j in flow.jobs()
        if j.sha == sha and (not active_only or JobStatus(j.status) in active)
    }


def commit(repo: Path, branch: str, files: dict[str, str], message: str) -> str:
    """A commit on `branch` of the sandbox's repository, with `files` written."""
    git(repo, "checkout", "-q", branch)
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return sha


def test_changed_selects_from_the_diff_says_why_and_queues_one_job_each(
    tmp_path: Path, db_url: str
) -> None:
    with make_flow(tmp_path, db_url=db_url, base_files=BASE, head_files=HEAD) as flow:
        flow.comment("/test changed:cpu,nvidia")
        body = answer(flow, "operator")
        assert "`/test changed:cpu,nvidia`" in body and f"`{flow.head[:7]}`" in body
        assert "1 operator changed" in body and "2 jobs queued on `cpu`, `nvidia`" in body
        assert "| `pool` | `kernels/ops/pool/__init__.py`: its own file |" in body
        assert "`op.py`" in body  # the file that touches no operator, listed
        assert "`solo`" not in body
        assert targets(flow, flow.head) == {("pool", "cpu"), ("pool", "nvidia")}

        # shared code: the operators importing it; the same jobs are not queued twice
        flow.comment("/test")
        body = answer(flow, "already queued or running")
        assert "1 job of this commit was already queued or running" in body
        assert len([j for j in flow.jobs() if j.op == "pool"]) == 2


def test_shared_code_a_rule_and_the_limit(tmp_path: Path) -> None:
    config = (
        "changes:\n  limit: 1\n  rules:\n    - paths: ['tables/*.yaml']\n      operators: [solo]\n"
    )
    head = {"kernels/launch.py": "GRID = 2\n", "tables/solo.yaml": "a: 1\n"}
    base = {**BASE, ".github/ondemand.yml": config}
    with make_flow(tmp_path, base_files=base, head_files=head) as flow:
        flow.comment("/test changed")
        body = answer(flow, "limit of 1")
        assert "2 operators changed" in body and "nothing was queued" in body
        assert "`/test changed:cpu --all`" in body
        assert "`kernels/launch.py`: imported by `kernels/ops/pool/__init__.py`" in body
        assert "`tables/solo.yaml`: the repository's rule `tables/*.yaml`" in body
        assert flow.jobs() == []
        flow.comment("/test changed --all --no-bench")
        answer(flow, "2 jobs queued")
        jobs = flow.jobs()
        assert {(j.op, j.backend, j.bench) for j in jobs} == {
            ("pool", "cpu", False),
            ("solo", "cpu", False),
        }


def test_no_operator_changed_and_an_untrusted_commenter(tmp_path: Path) -> None:
    with make_flow(tmp_path, base_files=BASE) as flow:  # the head changes only op.py
        flow.comment("/test changed", user="mallory")
        assert "only people with write permission" in answer(flow, "@mallory")
        # GitHub failing the files list twice: the command waits it out, then is answered
        flow.admin.inject_fault(502, count=2, path_prefix=f"/repos/{REPO}/pulls/{flow.pr}/files")
        flow.comment("/test changed")
        body = answer(flow, "touches an operator")
        assert flow.admin.state()["faults"] == []  # both spent on the files list
        assert "none of the 1 changed file touches an operator" in body
        assert flow.jobs() == []


def test_past_githubs_file_cap_the_reply_asks_for_names(tmp_path: Path) -> None:
    head = {f"gen/f{i:04d}.txt": f"{i}\n" for i in range(3001)}
    with make_flow(tmp_path, base_files=BASE, head_files=head) as flow:
        flow.comment("/test changed")
        body = answer(flow, "3,000")
        assert "changes 3,002 files" in body and "`/test OP[,OP...]:cpu`" in body
        assert flow.jobs() == []


def test_a_trusted_authors_push_runs_the_changed_operators_and_supersedes_the_last(
    tmp_path: Path, db_url: str
) -> None:
    base = {**BASE, ".github/ondemand.yml": "changes:\n  on_push: [cpu]\n"}
    with make_flow(tmp_path, db_url=db_url, base_files=base, head_files=HEAD) as flow:
        repo = tmp_path / "kernels"
        flow.admin.push(REPO, flow.pr, flow.next_head, user="alice")
        flow.wait_until(lambda: targets(flow, flow.next_head) == {("pool", "cpu")})
        note = answer(flow, "A push to this pull request")
        assert "ondemand:note:changed-on-push" in note and "1 job queued on `cpu`" in note

        # the next push: the automatic jobs of the previous head are superseded, the note
        # is edited in place (one note per pull request); the settings, read for the first
        # push, are not read again (a failure armed on GitHub's contents API stays unspent)
        contents = f"/repos/{REPO}/contents/"
        flow.admin.inject_fault(500, path_prefix=contents)
        third = commit(repo, "feature", {"kernels/ops/solo/__init__.py": "X = 3\n"}, "solo")
        flow.admin.push(REPO, flow.pr, third, user="alice")
        flow.wait_until(lambda: targets(flow, third) == {("pool", "cpu"), ("solo", "cpu")})
        assert [f["remaining"] for f in flow.admin.state()["faults"]] == [1]
        flow.admin.clear_faults()
        assert targets(flow, flow.next_head, active_only=True) == set()
        flow.wait_until(lambda: f"`{third[:7]}`" in push_note(flow))
        assert "2 jobs queued on `cpu`" in push_note(flow)

        # a push that leaves no operator changed: nothing runs, and the note says so
        pool, solo = "kernels/ops/pool/__init__.py", "kernels/ops/solo/__init__.py"
        undone = commit(repo, "feature", {pool: BASE[pool], solo: BASE[solo]}, "undo")
        flow.admin.push(REPO, flow.pr, undone, user="alice")
        flow.wait_until(lambda: f"`{undone[:7]}`" in push_note(flow))
        assert "touches an operator, so nothing was queued" in push_note(flow)
        assert targets(flow, third, active_only=True) == set() and targets(flow, undone) == set()

        # an outsider's pull request: nothing runs and nothing is said, whatever the file says
        git(repo, "checkout", "-q", "-b", "outside", flow.head)
        (repo / "kernels/ops/solo/__init__.py").write_text("X = 4\n")
        git(repo, "commit", "-q", "-am", "outsider")
        outside = git(repo, "rev-parse", "HEAD")
        git(repo, "checkout", "-q", "main")
        pr = int(flow.admin.open_pull(REPO, head=outside, base="main", user="mallory")["number"])
        flow.wait_until(flow.quiet)
        assert [j for j in flow.jobs() if j.pr_number == pr] == []
        assert replies(flow, pr) == []

        # the same change opened by a trusted author runs by itself
        mine = int(flow.admin.open_pull(REPO, head=outside, base="main", user="alice")["number"])
        flow.wait_until(
            lambda: {(j.op, j.backend) for j in flow.jobs() if j.pr_number == mine}
            == {("pool", "cpu"), ("solo", "cpu")}
        )
        assert "This pull request, opened at" in answer(flow, "ondemand:note", pr=mine)


def test_each_backend_runs_the_operators_its_own_tests_name(tmp_path: Path) -> None:
    """Two backends whose accuracy steps read different test folders: an operator only one of
    them tests runs only there."""
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    cpu = yaml.safe_load((ROOT / "workflows" / "cpu.yaml").read_text())
    alt = {**cpu, "name": "alt", "aliases": [], "labels": ["alt"]}
    alt["steps"] = [
        {**step, "argv": [("tests/alt" if a == "tests/kernels" else a) for a in step["argv"]]}
        for step in cpu["steps"]
    ]
    for spec in (cpu, alt):
        (workflows / f"{spec['name']}.yaml").write_text(yaml.safe_dump(spec))
    base = {
        **BASE,
        "tests/alt/test_alt.py": "import pytest\n\n@pytest.mark.pool\ndef test_p():\n    pass\n",
    }
    head = {**HEAD, "kernels/ops/solo/__init__.py": "X = 2\n"}
    with make_flow(tmp_path, base_files=base, head_files=head, workflows_dir=workflows) as flow:
        flow.comment("/test changed:cpu,alt")
        body = answer(flow, "operators changed")
        assert "3 jobs queued on `cpu`, `alt`" in body
        assert targets(flow, flow.head) == {("pool", "cpu"), ("solo", "cpu"), ("pool", "alt")}
