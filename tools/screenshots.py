"""The README's screenshots, taken in headless Chromium (Debian's `/usr/bin/chromium`, through
Playwright) while `ondemand demo --keep` runs: the result comment on the sandbox's pull-request
page and the job page, each while the job runs and after the verdict, and the dashboard.

    .venv/bin/python tools/screenshots.py [--out docs/screenshots] [demo options...]

Options after the known ones go to `ondemand demo` (e.g. `--workflows DIR`)."""

from __future__ import annotations

import argparse
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from playwright.sync_api import Locator, Page, expect, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
BOT = "ondemand-bot"


class Demo:
    """`ondemand demo --keep` as a process, its output read line by line."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ondemand", "demo", "--keep", *argv],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "160"},
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            sys.stdout.write(line)
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if self.proc.poll() is not None:
                    raise RuntimeError("the demo exited") from None
                continue
            found = re.search(pattern, line)
            if found:
                return found
        raise TimeoutError(f"the demo never printed {pattern!r}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            self.proc.wait(timeout=60)


def shown(locator: Locator, text: re.Pattern[str], timeout_s: float) -> None:
    """Wait up to `timeout_s` for `locator` to contain `text`; go on without it after that."""
    try:
        expect(locator).to_contain_text(text, timeout=timeout_s * 1000)
    except AssertionError:
        print(f"(no {text.pattern!r} within {timeout_s:.0f}s; taking the shot anyway)")


def comment_shot(page: Page, path: Path) -> None:
    comment = page.locator(f'.comment[data-user="{BOT}"]').first
    comment.scroll_into_view_if_needed()
    comment.screenshot(path=str(path))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args, demo_argv = parser.parse_known_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    demo = Demo(demo_argv)
    try:
        pull_url = demo.wait_for(r"pull request page\s+(\S+)", 180).group(1)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=args.chromium, args=["--no-sandbox", "--disable-gpu"]
            )
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            pull = context.new_page()
            pull.goto(pull_url)
            details = pull.locator(".check.status a").first
            expect(details).to_be_visible(timeout=60_000)
            job_url = str(details.get_attribute("href"))
            job = context.new_page()
            job.set_viewport_size({"width": 1280, "height": 1100})
            job.goto(job_url)
            expect(job.locator('#timeline li[data-step="accuracy"]')).to_have_class(
                "running", timeout=300_000
            )
            shown(job.locator("#progress"), re.compile(r"[1-9]\d* of \d+ tests"), 60)
            job.screenshot(path=str(args.out / "job-page-running.png"))
            # The comment is edited at a bounded rate: wait for an edit that shows progress.
            shown(
                pull.locator(f'.comment[data-user="{BOT}"] .body'),
                re.compile(r"[1-9]\d*/\d+ tests"),
                60,
            )
            comment_shot(pull, args.out / "comment-running.png")

            dashboard_url = demo.wait_for(r"dashboard\s+(http://\S+)", 1800).group(1)
            demo.wait_for(r"Ctrl-C stops it", 60)
            pull.reload()
            comment_shot(pull, args.out / "comment.png")
            job.reload()
            expect(job.locator("#report")).to_be_visible()
            job.screenshot(path=str(args.out / "job-page.png"), full_page=True)
            board = context.new_page()
            board.goto(dashboard_url)
            board.screenshot(path=str(args.out / "dashboard.png"), full_page=True)
            browser.close()
    finally:
        demo.stop()
    for shot in sorted(args.out.glob("*.png")):
        print(f"{shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
