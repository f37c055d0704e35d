"""The shared compile cache: only trusted builds fill it, no job can write it, and what one job
compiles (or plants) in its private layer is never read by another job. Real files, real
jobs on the tiny repository, and, as root, real steps as the job user in their jail."""

from __future__ import annotations

import json
import os
import pwd
import stat
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from runner.daemon.warmup import trusted_commit, warm
from runner.environment.compile_cache import (
    DURATIONS,
    CompileCache,
    publish,
    record_durations,
    seed,
)
from runner.environment.parallel import may_compile_anew, xdist_args
from runner.job.execute import JobContext, execute
from runner.job.sandboxing import Jail, jail_for_host
from runner.job.workspace import Workspaces
from runner.plugins import PLUGINS, pytest_order
from tests.runner import tinyrepo
from tests.runner.tinyrepo import TinyRepo, make_tiny_repo
from workflows.models import JobOptions, JobResult, JobSpec, JobStatus
from workflows.spec import Step, StepKind, WorkflowSpec, load_workflows

JOB_USER = "ondemand-job"
CPU = load_workflows()["cpu"]
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="changing user needs root")

# A step that reads its cache, tries to overwrite a trusted entry, and plants an entry of its
# own under a key another job's kernel could have.
POKE = """\
import json, os, sys
from pathlib import Path
cache = Path(os.environ["TRITON_CACHE_DIR"])
seen = {p.name: (p / "k.cubin").read_text() for p in sorted(cache.iterdir()) if p.is_dir()}
print("SEEN " + json.dumps(seen), flush=True)
tries = {}
for name, action in [
    ("write", lambda: (cache / "TRUSTED" / "k.cubin").write_text("poison")),
    ("chmod", lambda: os.chmod(cache / "TRUSTED" / "k.cubin", 0o666)),
    ("truncate", lambda: os.truncate(cache / "TRUSTED" / "k.cubin", 0)),
]:
    try:
        action()
        tries[name] = "succeeded"
    except OSError as exc:
        tries[name] = type(exc).__name__
print("TRIES " + json.dumps(tries), flush=True)
(cache / sys.argv[1]).mkdir(exist_ok=True)
(cache / sys.argv[1] / "k.cubin").write_text(sys.argv[2])
"""


def _workflow(plant: str, content: str) -> WorkflowSpec:
    step = Step(name="poke", kind=StepKind.command, argv=["{python}", "-c", POKE, plant, content])
    return CPU.model_copy(update={"steps": [step], "layouts": {}})


def _spec(repo: TinyRepo, sha: str, job_id: int, **kw: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "id": job_id,
            "repo": "o/tinyops",
            "clone_url": str(repo.path),
            "pr_number": 7,
            "sha": sha,
            "op": "good_op",
            "backend": "cpu",
            **kw,
        }
    )


def _context(cache: Path, job_dir: Path, compiled: CompileCache, jail: Jail | None) -> JobContext:
    log = bytearray()
    return JobContext(
        workspaces=Workspaces(cache),
        env_cache=cache / "envs",
        job_dir=job_dir,
        runner_name="test-runner",
        runner_version="0",
        on_output=log.extend,
        cancel=threading.Event(),
        jail=jail,
        grace_s=1,
        compile_cache=compiled,
    )


def _said(result: JobResult, ctx: JobContext, word: str) -> dict[str, str]:
    assert result.status is JobStatus.succeeded, (result, ctx.on_output)
    log = ctx.on_output.__self__.decode()  # type: ignore[attr-defined]
    line = next(x for x in log.splitlines() if x.startswith(word + " "))
    return json.loads(line.split(" ", 1)[1])


def _entry(root: Path, name: str, content: str) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "k.cubin").write_text(content)


# -- the layers, file by file -------------------------------------------------------------------


def test_publish_takes_plain_entries_whole_and_keeps_what_is_there(tmp_path: Path) -> None:
    private, layer = tmp_path / "private", tmp_path / "layer"
    _entry(private, "AAAA", "first")
    _entry(private, "BBBB", "b")
    (private / "BBBB" / "link.so").symlink_to("/etc/passwd")  # a link is never followed
    (private / "CCCC").symlink_to(private / "AAAA")  # nor an entry that is a link
    _entry(private, "bad name", "x")  # not a name Triton writes
    assert publish(private, layer, "sha1") == 2
    shared = layer / "triton"
    assert sorted(p.name for p in shared.iterdir()) == ["AAAA", "BBBB"]
    assert sorted(p.name for p in (shared / "BBBB").iterdir()) == ["k.cubin"]
    assert stat.S_IMODE((shared / "AAAA" / "k.cubin").stat().st_mode) == 0o644
    # A later build never replaces an entry that is there: the first trusted build wins.
    (private / "AAAA" / "k.cubin").write_text("second")
    _entry(private, "DDDD", "d")
    assert publish(private, layer, "sha2") == 1
    assert (shared / "AAAA" / "k.cubin").read_text() == "first"
    assert CompileCache(tmp_path).built(layer) == ["sha1", "sha2"]


def test_seed_copies_where_steps_run_as_the_runner(tmp_path: Path) -> None:
    layer, private = tmp_path / "layer", tmp_path / "job" / "triton"
    _entry(tmp_path / "from", "AAAA", "trusted")
    publish(tmp_path / "from", layer, "sha1")
    assert seed(layer, private, None) == 1
    copied = private / "AAAA" / "k.cubin"
    copied.write_text("changed")  # the job's copy, not the runner's file
    assert (layer / "triton" / "AAAA" / "k.cubin").read_text() == "trusted"
    assert seed(tmp_path / "no-layer", tmp_path / "other", None) == 0


def test_trusted_commit_is_the_base_never_the_pull_request() -> None:
    spec = JobSpec(id=1, repo="o/r", clone_url="u", pr_number=1, sha="head", op="x", backend="b")
    assert trusted_commit(spec) is None
    assert trusted_commit(spec.model_copy(update={"base_sha": "base"})) == "base"
    assert trusted_commit(spec, local=True) == "head"  # `ondemand run`: the caller's own commit


def test_a_commit_a_comment_named_is_never_a_trusted_build() -> None:
    """`/test OP vs REF`: GitHub resolves a fork's SHA too, so REF's commit builds nothing."""
    spec = JobSpec(
        id=1, repo="o/r", clone_url="u", pr_number=1, sha="head", op="x", backend="b",
        base_sha="named", options=JobOptions(exact_base=True),
    )  # fmt: skip
    assert trusted_commit(spec) is None


def test_xdist_workers_only_where_they_help() -> None:
    assert xdist_args(1) == []
    # pytest-xdist is in the test extra; tests go out one at a time (pytest_order.py)
    assert xdist_args(4) == ["-n", "4", "--maxschedchunk", "1"]
    step = CPU.steps[0].model_copy(update={"argv": ["pytest", "{xdist}", "-q"]})
    assert step.render({}, {"xdist": ["-n", "3"]}) == ["pytest", "-n", "3", "-q"]
    assert step.render({}, {"xdist": []}) == ["pytest", "-q"]


def test_what_a_change_may_compile_anew() -> None:
    """Sources outside tests, docs and benchmarks may change what compiles; nothing else."""
    assert not may_compile_anew([])
    assert not may_compile_anew(["tests/kernels/test_x.py", "docs/a.md", "README.md"])
    assert not may_compile_anew(["benchmark/test_op.py", "src/pkg/tests/test_y.py", "NOTE"])
    assert may_compile_anew(["README.md", "src/flag_gems/ops/pool.py"])
    assert may_compile_anew(["kernels/ops/_adaptive.py"])
    assert may_compile_anew(["csrc/pool.cu"])
    assert may_compile_anew(["conftest.py"])  # outside the test folders: counts


def test_changed_paths_between_commits(tiny_repo: TinyRepo, runner_cache: Path) -> None:
    workspaces = Workspaces(runner_cache)
    mirror = workspaces.fetch(str(tiny_repo.path), tiny_repo.head_sha, 7)
    changed = workspaces.changed_paths(mirror, tiny_repo.base_sha, tiny_repo.head_sha)
    assert changed == ["kernels/benchmark/__main__.py"] and not may_compile_anew(changed)
    assert workspaces.changed_paths(mirror, tiny_repo.head_sha, tiny_repo.head_sha) == []
    assert workspaces.changed_paths(mirror, "f" * 40, tiny_repo.head_sha) is None
    assert workspaces.changed_paths(mirror, "not a sha", tiny_repo.head_sha) is None


# -- whole jobs -----------------------------------------------------------------------------------


@ROOT_ONLY
def test_jobs_as_the_job_user_read_trusted_builds_and_nothing_else(
    job_user: pwd.struct_passwd, reachable_python: None, base: Path, tiny_repo: TinyRepo
) -> None:
    """A trusted build publishes; a pull request's job reads it but can neither change the
    runner's files nor publish what it plants; the next job sees only the trusted entries."""
    cache, work = base / "cache", base / "work"
    cache.mkdir(mode=0o711)
    work.mkdir(mode=0o711)
    (cache / "envs").mkdir(mode=0o755)
    compiled = CompileCache(base / "compile")
    jail = jail_for_host(JOB_USER, network=True)
    assert jail is not None and jail.user == JOB_USER
    jail = jail.hiding(compiled.root)  # as the daemon hides its cache directory
    pr = _spec(tiny_repo, tiny_repo.head_sha, 1, base_sha=tiny_repo.base_sha)

    # The trusted build: the base commit, its step's entry published as the runner's files.
    ctx = _context(cache, work / "trusted", compiled, jail)
    built = warm(pr, _workflow("TRUSTED", "trusted"), ctx)
    assert built is not None and built.status is JobStatus.succeeded, ctx.on_output
    layer = compiled.layer(pr.clone_url, pr.backend)
    shared = layer / "triton" / "TRUSTED" / "k.cubin"
    assert shared.read_text() == "trusted" and shared.stat().st_uid == 0
    assert compiled.built(layer) == [tiny_repo.base_sha]
    assert warm(pr, _workflow("TRUSTED", "again"), ctx) is None  # once per base commit

    # The pull request's job, as the job user: it sees the trusted entry, cannot change it,
    # and plants an entry of its own.
    ctx = _context(cache, work / "job1", compiled, jail)
    result = execute(pr, _workflow("POISON", "poison"), ctx)
    assert _said(result, ctx, "SEEN") == {"TRUSTED": "trusted"}
    assert _said(result, ctx, "TRIES") == {
        "write": "PermissionError",
        "chmod": "PermissionError",
        "truncate": "PermissionError",
    }
    assert shared.read_text() == "trusted" and stat.S_IMODE(shared.stat().st_mode) == 0o644
    assert sorted(p.name for p in (layer / "triton").iterdir()) == ["TRUSTED"]
    assert not (work / "job1" / "compile").exists()  # the private layer went with the job

    # The next job of the same repository: the trusted entry, not the planted one.
    ctx = _context(cache, work / "job2", compiled, jail)
    result = execute(pr.model_copy(update={"id": 2}), _workflow("OTHER", "x"), ctx)
    assert _said(result, ctx, "SEEN") == {"TRUSTED": "trusted"}


def test_an_unconfined_job_plants_nothing_for_the_next(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    """As the runner's own user (`ondemand run`): the private layer is a copy, and still only
    a trusted build publishes."""
    compiled = CompileCache(tmp_path / "compile")
    pr = _spec(tiny_repo, tiny_repo.head_sha, 1, base_sha=tiny_repo.base_sha)
    ctx = _context(runner_cache, tmp_path / "trusted", compiled, None)
    assert warm(pr, _workflow("TRUSTED", "trusted"), ctx) is not None
    ctx = _context(runner_cache, tmp_path / "job1", compiled, None)
    result = execute(pr, _workflow("POISON", "poison"), ctx)
    assert _said(result, ctx, "TRIES")["write"] == "succeeded"  # its own copy
    ctx = _context(runner_cache, tmp_path / "job2", compiled, None)
    result = execute(pr, _workflow("OTHER", "x"), ctx)
    assert _said(result, ctx, "SEEN") == {"TRUSTED": "trusted"}


def test_accuracy_under_xdist_counts_every_test(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    """The accuracy step with `{xdist}` (two workers): the same verdict and counts, and the
    operators the plugin writes from the workers."""
    step = CPU.steps[0]
    argv = [*step.argv[:6], "{xdist}", *step.argv[6:]]
    workflow = CPU.model_copy(update={"steps": [step.model_copy(update={"argv": argv})]})
    ctx = _context(runner_cache, tmp_path / "job", CompileCache(tmp_path / "compile"), None)
    ctx.workers = 2
    result = execute(_spec(tiny_repo, tiny_repo.head_sha, 1), workflow, ctx)
    log = ctx.on_output.__self__.decode()  # type: ignore[attr-defined]
    assert " -n 2 " in log, log
    assert result.status is JobStatus.succeeded, log
    acc = result.accuracy
    assert acc is not None and (acc.passed, acc.failed, acc.skipped) == (3, 0, 2)
    assert "good_op" in result.operators
    assert acc.implementation == "kernels.ops.good_op.good_op"  # suite properties survive


def test_a_warm_job_runs_in_one_process_unless_it_changes_sources(
    runner_cache: Path, tmp_path: Path
) -> None:
    """After the trusted build of the base (here one planted cache entry: the interpreter
    compiles nothing), a job of the base runs its accuracy step in one process, and so does one
    that changes only tests; one that changes a source file gets the cold width and says why."""
    repo = make_tiny_repo(tmp_path / "origin" / "tinyops")
    commits = {"base": repo.base_sha}
    for name, path in (("tests", "tests/kernels/test_more.py"), ("source", "kernels/extra.py")):
        tinyrepo._git(repo.path, "checkout", "-q", "--detach", repo.base_sha)
        (repo.path / path).write_text("X = 1\n")
        tinyrepo._git(repo.path, "add", "-A")
        tinyrepo._git(repo.path, "commit", "-q", "-m", name)
        commits[name] = tinyrepo._git(repo.path, "rev-parse", "HEAD")
        tinyrepo._git(repo.path, "branch", "-q", name, commits[name])
    tinyrepo._git(repo.path, "checkout", "-q", "main")
    step = CPU.steps[0]
    argv = [*step.argv[:6], "{xdist}", *step.argv[6:]]
    workflow = CPU.model_copy(update={"steps": [step.model_copy(update={"argv": argv})]})
    compiled = CompileCache(tmp_path / "compile")
    pr = _spec(repo, repo.head_sha, 1, base_sha=repo.base_sha)
    ctx = _context(runner_cache, tmp_path / "trusted", compiled, None)
    assert warm(pr, workflow, ctx) is not None
    _entry(compiled.layer(pr.clone_url, pr.backend) / "triton", "AAAA", "trusted")
    logs = {}
    for name, sha in commits.items():
        ctx = _context(runner_cache, tmp_path / name, compiled, None)
        ctx.workers = 2
        result = execute(_spec(repo, sha, 2, base_sha=repo.base_sha), workflow, ctx)
        logs[name] = ctx.on_output.__self__.decode()  # type: ignore[attr-defined]
        assert result.status is JobStatus.succeeded, logs[name]
        assert "compile cache: 1 kernels from trusted builds" in logs[name]
    for name in ("base", "tests"):
        assert " -n " not in logs[name] and "sources differ" not in logs[name]
    assert " -n 2 " in logs["source"]
    assert f"sources differ from trusted build {repo.base_sha[:10]}" in logs["source"]


def test_group_files_name_the_layer_they_are_read_in(tmp_path: Path) -> None:
    """Triton's group files hold absolute paths: published, they name the shared layer's
    files; seeded, the job's own; one that names a file outside its entry is dropped."""
    build, layer, private = tmp_path / "build", tmp_path / "layer", tmp_path / "job"
    _entry(build, "AAAA", "cubin")
    group = {"child_paths": {"k.cubin": str(build / "AAAA" / "k.cubin")}}
    (build / "AAAA" / "__grp__k.json").write_text(json.dumps(group))
    _entry(build, "BBBB", "cubin")
    evil = {"child_paths": {"k.cubin": "/etc/passwd"}}  # not a file of its entry
    (build / "BBBB" / "__grp__k.json").write_text(json.dumps(evil))
    publish(build, layer, "sha1")
    shared = layer / "triton"
    published = json.loads((shared / "AAAA" / "__grp__k.json").read_text())
    assert published == {"child_paths": {"k.cubin": str(shared / "AAAA" / "k.cubin")}}
    assert not (shared / "BBBB" / "__grp__k.json").exists()
    seed(layer, private, None)
    seeded = json.loads((private / "AAAA" / "__grp__k.json").read_text())
    assert seeded == {"child_paths": {"k.cubin": str(private / "AAAA" / "k.cubin")}}


JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.test_t" name="test_fast" time="0.010"/>
<testcase classname="tests.test_t" name="test_slow[2]" time="7.5"/>
<testcase classname="tests.test_t" name="test_mid" time="3.25"/>
</testsuite></testsuites>"""

ORDERED = """\
import pytest
@pytest.mark.parametrize("n", [1, 2])
def test_slow(n): pass
def test_fast(): pass
def test_mid(): pass
def test_new(): pass
"""


def test_slow_tests_first_from_the_trusted_builds_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A trusted build's JUnit times, kept in the layer, order a later run's tests in each
    xdist worker: longest, shortest, next longest, ... (unknown tests count as instant). In one
    process pytest's own order stays."""
    (tmp_path / "junit.xml").write_text(JUNIT)
    layer = tmp_path / "layer"
    layer.mkdir()
    assert record_durations(tmp_path / "junit.xml", layer) == 3
    times = json.loads((layer / DURATIONS).read_text())
    assert times["tests.test_t.test_slow[2]"] == 7.5
    monkeypatch.setenv("TEST_DURATIONS_FILE", str(layer / DURATIONS))
    names = ["test_slow[1]", "test_slow[2]", "test_fast", "test_mid", "test_new"]
    items = [SimpleNamespace(nodeid=f"tests/test_t.py::{name}") for name in names]
    in_worker = list(items)
    pytest_order.pytest_collection_modifyitems(SimpleNamespace(workerinput={}), in_worker)
    ids = [item.nodeid.split("::")[-1] for item in in_worker]
    assert ids == ["test_slow[2]", "test_new", "test_mid", "test_slow[1]", "test_fast"]

    # Loaded as the runner loads it, in one process (a warm job): the file's order.
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_t.py").write_text(ORDERED)
    runner_dir = PLUGINS
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "pytest_order", "tests"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(runner_dir)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ids = [line.split("::")[-1] for line in done.stdout.splitlines() if "::" in line]
    assert ids == ["test_slow[1]", "test_slow[2]", "test_fast", "test_mid", "test_new"]
