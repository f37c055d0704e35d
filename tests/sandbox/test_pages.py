"""The sandbox's pull-request page, at the `html_url` its REST API gives: the conversation with
comments rendered from Markdown (hidden comments hidden, HTML sanitized) and their reactions, the
changed files, and the head's statuses and check runs; a page view is no REST call."""

from __future__ import annotations

import httpx

from sandbox.markdown import render
from tests.sandbox.conftest import REPO, World


def test_markdown_hides_comments_drops_hostile_html_keeps_details() -> None:
    html = render(
        "<!-- ondemand:op:cpu -->\n### ✅ done\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n"
        "<details><summary>Earlier runs</summary>\n\n<script>alert(1)</script>\n\n</details>"
    )
    assert "ondemand:op:cpu" not in html
    assert "<h3>✅ done</h3>" in html and "<td>1</td>" in html
    assert "<script" not in html and "alert(1)" not in html
    assert "<details><summary>Earlier runs</summary>" in html and html.count("</details>") == 1


def test_pull_page_shows_the_conversation_and_statuses(world: World) -> None:
    sandbox = world.sandbox
    admin = sandbox.admin
    pr = world.pr
    command = admin.comment(REPO, pr["number"], "alice", "/test op:cpu <b>now</b>")
    gh = sandbox.github(world.bot_token)
    issue = gh.get_repo(REPO).get_issue(pr["number"])
    issue.get_comment(command["id"]).create_reaction("eyes")
    issue.create_comment("<!-- ondemand:op:cpu -->\n### ⏳ `op` on `cpu`: queued, position 1")
    gh.get_repo(REPO).get_commit(pr["head"]["sha"]).create_status(
        "pending", "http://ondemand.test/jobs/1", "queued", "ondemand/op:cpu"
    )
    state = sandbox.state
    repo = state.repos[REPO]
    run = state.add_check_run(
        repo, 1, pr["head"]["sha"], {"name": "ondemand/op:cpu", "status": "in_progress"}
    )
    output = {"title": "cancelled", "summary": "cancelled by @alice"}
    state.update_check_run(run, {"status": "completed", "conclusion": "neutral", "output": output})
    state.add_check_run(repo, 1, pr["head"]["sha"], {"name": "lint", "status": "queued"})
    calls = len(sandbox.state.api_calls)

    page = httpx.get(pr["html_url"])

    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    text = page.text
    assert "Add op" in text and f"#{pr['number']}" in text and "Open" in text
    assert "<b>now</b>" in text  # the comment's HTML, kept as GitHub keeps it
    assert "👀 1" in text
    assert "<h3>⏳ <code>op</code> on <code>cpu</code>: queued, position 1</h3>" in text
    assert "ondemand:op:cpu --&gt;" not in text and "<!-- ondemand" not in text
    assert "<code>op.py</code>" in text and "+2" in text  # the PR's change against main
    assert 'data-context="ondemand/op:cpu" data-state="pending"' in text
    assert "Some checks haven&#39;t completed yet" in text
    neutral = text.split('data-name="ondemand/op:cpu" data-state="neutral"', 1)[1]
    assert "neutral — cancelled" in neutral.split("</div>", 1)[0]
    assert 'data-name="lint" data-state="pending"' in text
    assert 'href="http://ondemand.test/jobs/1"' in text
    assert len(sandbox.state.api_calls) == calls  # a page is not a REST call

    missing = httpx.get(pr["html_url"].replace(f"/pull/{pr['number']}", "/pull/999"))
    assert missing.status_code == 404


def test_commit_page_shows_the_message_and_diff(world: World) -> None:
    base = world.sandbox.url
    page = httpx.get(f"{base}/{REPO}/commit/{world.repo.feature_sha}")
    assert page.status_code == 200
    assert "<h1>add op</h1>" in page.text
    assert '<span class="add">+def op():</span>' in page.text
    assert '<span class="file">+++ b/op.py</span>' in page.text
    assert httpx.get(f"{base}/{REPO}/commit/{'f' * 40}").status_code == 404
    assert httpx.get(f"{base}/{REPO}/commit/--output=x").status_code == 404
