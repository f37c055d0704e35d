"""A job watched in a browser from queued to verdict, as a maintainer would: the sandbox's pull
request page and the service's job page side by side, with the GitHub sandbox, the service and
a real runner daemon (a subprocess) on a real git repository. The runner starts only once both
pages show the job queued; the job page then shows it running (its step and log tail) and both
pages the tests done of the total as they pass, with no reload by the test; both end on the
verdict."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sandbox.app import create_app as create_sandbox
from sandbox.client import SandboxAdmin
from service.app import create_app
from tests.runner.tinyrepo import make_tiny_repo
from tests.service.helpers import service_settings, sqlite_at_head
from tests.support.live import free_port, live_server
from workflows.spec import WORKFLOWS_DIR

pytestmark = pytest.mark.timeout(240)
REPO, BOT, SECRET, REGISTRATION = "acme/tinyops", "ondemand-bot", "hook-secret", "reg-token"
ROOT = Path(__file__).resolve().parents[2]


def _workflows(directory: Path) -> Path:
    """The cpu workflow with a device check that passes at once, a first step that takes a
    few seconds, so the job is seen running, and paced tests of a second each (five seconds
    of progress to watch: the runner reports it every 2 s, the comment shows it in 0.5)."""
    cpu = yaml.safe_load((WORKFLOWS_DIR / "cpu.yaml").read_text())
    cpu["device_check"] = ["{python}", "-c", "pass"]
    cpu["env"]["PACED_S"] = "1"
    warm_up = "import time; print('warming up', flush=True); time.sleep(4); print('warm')"
    cpu["steps"].insert(0, {"name": "warm-up", "argv": ["{python}", "-c", warm_up]})
    directory.mkdir()
    (directory / "cpu.yaml").write_text(yaml.safe_dump(cpu))
    return directory


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(url: str) -> subprocess.Popen[bytes]:
        state = tmp_path / "runner"
        argv = [
            sys.executable, "-m", "ondemand", "runner", "--service", url, "--backend", "cpu",
            "--name", "runner-web", "--state-dir", str(state),
            "--workflows", str(_workflows(tmp_path / "workflows")), "--poll-seconds", "1",
            "--check-interval", "300", "--grace-seconds", "2", "--no-job-user",
        ]  # fmt: skip
        log = (tmp_path / "runner.log").open("ab")
        env = {**os.environ, "ONDEMAND_REGISTRATION_TOKEN": REGISTRATION}
        procs.append(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=log))
        return procs[-1]

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def bot_comment(page: Any) -> str:
    return str(page.locator(f'.comment[data-user="{BOT}"] .body').first.inner_text())


def test_watch_a_job_from_queued_to_verdict(tmp_path: Path, browser: Any, runner: Any) -> None:
    from playwright.sync_api import expect

    tiny = make_tiny_repo(tmp_path / "tinyops")
    port = free_port()
    service_url = f"http://127.0.0.1:{port}"
    with live_server(create_sandbox()) as gh_url, SandboxAdmin(gh_url) as admin:
        admin.create_user("acme", "Organization")
        admin.create_user("alice")
        admin.create_user(BOT, "Bot")
        token = admin.create_token(BOT)
        admin.create_repo("acme", "tinyops", str(tiny.path))
        admin.set_permission(REPO, "alice", "write")
        pr = admin.open_pull(REPO, head="pr", base="main", user="alice", title="Faster good_op")
        settings = service_settings(
            sqlite_at_head(tmp_path / "svc.db"),
            github_api_url=gh_url,
            github_token=token,
            bot_login=BOT,
            webhook_secrets=[SECRET],
            registration_tokens=[REGISTRATION],
            public_url=service_url,
            head_wait_s=1.0,
            progress_edit_interval_s=0.5,  # GitHub's pace is 20 s; compressed here
        )
        with live_server(create_app(settings), port=port):
            admin.set_webhook(f"{service_url}/webhook", SECRET)
            admin.comment(REPO, int(pr["number"]), "alice", "/test paced_op:cpu")
            admin.wait_for_comment(REPO, int(pr["number"]), user=BOT, contains="paced_op")

            context = browser.new_context(viewport={"width": 1280, "height": 1000})
            pull = context.new_page()
            pull.goto(pr["html_url"])
            expect(pull.locator(f'.comment[data-user="{BOT}"]')).to_have_count(1)
            assert "queued" in bot_comment(pull).lower() or "no runner" in bot_comment(pull)
            status = pull.locator('.check.status[data-context="ondemand/paced_op:cpu"]')
            expect(status).to_have_attribute("data-state", "pending", timeout=15_000)
            job_url = status.locator("a").get_attribute("href")
            assert job_url and job_url.startswith(f"{service_url}/jobs/")
            job = context.new_page()
            job.goto(job_url)
            expect(job.locator("#state")).to_have_text("queued")

            runner(service_url)
            # Progress, seen without reloading: the job runs its first step, its log grows.
            expect(job.locator("#state")).to_have_text("running", timeout=60_000)
            expect(job.locator('#timeline li[data-step="warm-up"]')).to_have_class(
                "running", timeout=60_000
            )
            expect(job.locator("#log")).to_contain_text("warming up", timeout=15_000)
            expect(pull.locator(f'.comment[data-user="{BOT}"] .body')).to_contain_text(
                "running", timeout=30_000
            )
            # The tests' progress, as it happens: on the job page and in the comment.
            progress = re.compile(r"[0-4](/| of )5 tests")  # the comment: 2/5, the page: 2 of 5
            expect(job.locator("#progress")).to_contain_text(progress, timeout=30_000)
            comment = pull.locator(f'.comment[data-user="{BOT}"] .body')
            expect(comment).to_contain_text(progress, timeout=15_000)

            expect(job.locator("#state")).to_have_text("succeeded", timeout=120_000)
            expect(job.locator("#report h3")).to_contain_text("paced_op")
            expect(job.locator('#timeline li[data-step="accuracy"]')).to_have_class("succeeded")
            verdict = pull.locator(f'.comment[data-user="{BOT}"] .body h3')
            expect(verdict).to_contain_text("✅", timeout=30_000)
            expect(verdict).to_contain_text("5 passed")
            expect(status).to_have_attribute("data-state", "success", timeout=30_000)
            expect(pull.locator(f'.comment[data-user="{BOT}"]')).to_have_count(1)  # in place
            expect(pull.locator(".reaction")).to_contain_text("👀")
            context.close()
