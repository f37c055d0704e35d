"""The classification bar: jobs on a repository whose tests fail by design, run by the
runner's own code (`runner.job.execute`, as `ondemand run` and the daemon run them, with the
real cpu workflow), each failure's class counted, and a red verdict's time with and without
the re-runs.

The repository (`tests/runner/failrepo.py`, `flaky="random"`): a test failing one time in
three (os.urandom, fresh each run), one failing on the merge base too, one the pull request
breaks, one that passes. Each job runs twice, in turn: with the repository's defaults (the
re-runs classify) and with `failures.reruns: 0` (no re-run: today's red verdict).

    .venv/bin/python -m tools.failure_classes --jobs 30

Prints, per class, how often each failing test got the class it should, whether the gate
predicate fails each job exactly when a failure of the gate's classes is present (for a few
gates), and the median and worst extra seconds the re-runs cost a red verdict.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from report.gate import failures_fail_gate
from report.views import JobView
from runner.job.execute import JobContext, execute
from runner.job.workspace import Workspaces
from runner.local import job_view
from tests.runner.failrepo import OP, FailRepo, make_fail_repo
from workflows.models import FailureClass, JobResult, JobSpec
from workflows.repo_config import DEFAULTS
from workflows.spec import load_workflows

GATES: tuple[tuple[FailureClass, ...], ...] = (
    (FailureClass.new,),  # the default
    (FailureClass.flaky,),
    (FailureClass.already_failing,),
    (),
)
EXPECTED = {
    "test_flaky": FailureClass.flaky,
    "test_old": FailureClass.already_failing,
    "test_new": FailureClass.new,
}


def _job(repo: FailRepo, base_sha: str, cache: Path, work: Path, n: int) -> tuple[JobResult, float]:
    spec = JobSpec(
        id=n, repo="o/failops", clone_url=str(repo.path), pr_number=9, sha=repo.head_sha,
        base_sha=base_sha, op=OP, backend="cpu", options={"bench": False},
    )  # fmt: skip
    ctx = JobContext(
        workspaces=Workspaces(cache), env_cache=cache / "envs", job_dir=work / f"job-{n}",
        runner_name="bar", runner_version="0", cancel=threading.Event(), grace_s=1,
    )  # fmt: skip
    started = time.monotonic()
    result = execute(spec, load_workflows()["cpu"], ctx)
    return result, time.monotonic() - started


def _view(result: JobResult) -> JobView:
    """The job as the report sees it (the gate predicate's input)."""
    spec = JobSpec(id=0, repo="o/failops", clone_url="x", pr_number=9, sha=result.sha, op=OP,
                   backend="cpu")  # fmt: skip
    return job_view(spec, result, Path("job.log"), DEFAULTS.for_op(OP))


def _no_reruns_base(repo: FailRepo) -> str:
    """A merge base like the repository's whose settings turn the re-runs off: today's job."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "checkout", "-q", "-b", "no-reruns", repo.base_sha], cwd=repo.path,
                   check=True)  # fmt: skip
    (repo.path / ".github").mkdir(exist_ok=True)
    (repo.path / ".github" / "ondemand.yml").write_text("failures:\n  reruns: 0\n")
    subprocess.run([*git, "add", "-A"], cwd=repo.path, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "no re-runs"], cwd=repo.path, check=True)
    sha = subprocess.run([*git, "rev-parse", "HEAD"], cwd=repo.path, check=True,
                         capture_output=True, text=True).stdout.strip()  # fmt: skip
    subprocess.run([*git, "checkout", "-q", "main"], cwd=repo.path, check=True)
    return sha


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=30)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="failure-classes-"))
    repo = make_fail_repo(work / "origin" / "failops", flaky="random", crash=False, reruns=None)
    # The pull request is one commit on `main`'s base; the merge base of either base is it.
    plain_base = _no_reruns_base(repo)
    cache = work / "cache"
    seen: dict[str, list[FailureClass]] = {name: [] for name in EXPECTED}
    extra: list[float] = []
    gates: dict[tuple[FailureClass, ...], list[bool]] = {g: [] for g in GATES}
    _job(repo, repo.base_sha, cache, work, 0)  # the environments made once, as a runner's
    for n in range(1, args.jobs + 1):
        result, seconds = _job(repo, repo.base_sha, cache, work, 2 * n)
        _, plain_seconds = _job(repo, plain_base, cache, work, 2 * n + 1)
        extra.append(seconds - plain_seconds)
        found = result.failures
        assert found is not None, result.error_message
        for test in found.tests:
            name = test.test_id.rpartition("::")[2]
            seen[name].append(test.failure_class)
        for gate in GATES:
            judged = result.model_copy(
                update={"failures": found.model_copy(update={"gate": list(gate)})}
            )
            fails = failures_fail_gate(_view(judged))
            present = {t.failure_class for t in found.tests}
            gates[gate].append(fails == bool(present & set(gate)))
        print(
            f"job {n}: {seconds:.1f}s (without re-runs {plain_seconds:.1f}s): "
            + ", ".join(f"{t.test_id.rpartition('::')[2]} {t.failure_class}" for t in found.tests),
            flush=True,
        )
    print()
    for name, want in EXPECTED.items():
        got = seen[name]
        right = sum(c is want for c in got)
        print(f"{name}: {want.value} in {right} of {len(got)} jobs where it failed")
    for gate, right in gates.items():
        names = ", ".join(g.value for g in gate) or "nothing"
        print(f"gate [{names}]: fails exactly when a failure of its classes is present "
              f"in {sum(right)} of {len(right)} jobs")  # fmt: skip
    print(
        f"re-runs cost a red verdict: median {statistics.median(extra):+.1f}s, "
        f"worst {max(extra):+.1f}s over {len(extra)} jobs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
