"""Pages of the sandbox that look enough like GitHub's to watch the demo: a pull request's
conversation (its description, comments rendered from Markdown with their reactions), its
changed files, and the statuses and check runs of its head commit, at the `html_url` the REST
API gives (`/{owner}/{repo}/pull/{n}`), which reloads itself when the sandbox's state
changes; and a commit with its diff (`/{owner}/{repo}/commit/{sha}`)."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, datetime

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, JSONResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from sandbox import git, markdown
from sandbox.state import CheckRun, Comment, Pull, Repo, SandboxError, SandboxState, Status

EMOJI = {
    "+1": "👍",
    "-1": "👎",
    "laugh": "😄",
    "confused": "😕",
    "heart": "❤️",
    "hooray": "🎉",
    "rocket": "🚀",
    "eyes": "👀",
}
STATUS_ICON = {"success": "✓", "failure": "✗", "error": "✗", "pending": "●", "neutral": "◻"}
PAGE_PATH = re.compile(r"^/[^/_][^/]*/[^/]+/(pull/\d+|commit/[0-9A-Za-z]+)/?$")

templates = Environment(
    loader=PackageLoader("sandbox", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
router = APIRouter(include_in_schema=False)


def ago(moment: datetime, now: datetime) -> str:
    seconds = max(int((now - moment).total_seconds()), 0)
    if seconds < 60:
        return "now" if seconds < 5 else f"{seconds} seconds ago"
    if seconds < 3600:
        return f"{seconds // 60} minute{'s' if seconds >= 120 else ''} ago"
    return moment.strftime("%b %d, %Y %H:%M UTC")


def latest_statuses(statuses: list[Status]) -> list[Status]:
    """The newest status of each context (the list is newest first), by context."""
    seen: dict[str, Status] = {}
    for status in statuses:
        seen.setdefault(status.context, status)
    return sorted(seen.values(), key=lambda s: s.context)


def combined(statuses: list[Status], runs: list[CheckRun]) -> tuple[str, str]:
    """GitHub's summary of the checks box: (state, words)."""
    if not statuses and not runs:
        return "none", "No checks have been reported"
    states = {s.state for s in statuses} | {check_state(r) for r in runs}
    if states & {"failure", "error"}:
        return "failure", "Some checks were not successful"
    if "pending" in states:
        return "pending", "Some checks haven't completed yet"
    return "success", "All checks have passed"


def _comment(state: SandboxState, comment: Comment, now: datetime) -> dict[str, object]:
    reactions = Counter(r.content for r in state.reactions_on(comment.id))
    return {
        "id": comment.id,
        "user": comment.user,
        "bot": state.users[comment.user].type == "Bot",
        "when": ago(comment.created_at, now),
        "edited": bool(comment.history),
        "html": Markup(markdown.render(comment.body)),
        "reactions": [(EMOJI[c], n) for c, n in reactions.items() if c in EMOJI],
    }


def _files(repo: Repo, pull: Pull) -> list[git.FileChange]:
    """What the files API lists: the changes since the merge base, renames as renames."""
    try:
        return list(git.pull_files(repo.git_path, pull.base_sha, pull.head_sha))
    except (git.GitError, ValueError):
        return []


@router.get("/_sandbox/version")
def version(request: Request) -> JSONResponse:
    """The state's change counter: the pages poll it and reload when it moves."""
    state: SandboxState = request.app.state.sandbox
    return JSONResponse({"version": state.version}, headers={"Cache-Control": "no-store"})


@router.get("/{owner}/{name}/pull/{number}", response_class=HTMLResponse)
def pull_page(request: Request, owner: str, name: str, number: int) -> HTMLResponse:
    state: SandboxState = request.app.state.sandbox
    now = datetime.now(UTC)
    with state.lock:
        repo = state.repo(owner, name)
        pull = state.pull(repo, number)
        author = state.users[pull.user]
        comments = [_comment(state, c, now) for c in sorted(state.comments_on(pull),
                                                             key=lambda c: c.id)]  # fmt: skip
        statuses = latest_statuses(state.statuses_for(repo, pull.head_sha))
        checks = _check_runs(state, repo, pull.head_sha)
        version_now = state.version
    overall, words = combined(statuses, checks)
    page = templates.get_template("pull.html").render(
        repo=repo,
        pull=pull,
        author=author.login,
        opened=ago(pull.created_at, now),
        body=Markup(markdown.render(pull.body)) if pull.body else None,
        comments=comments,
        statuses=statuses,
        checks=[
            {
                "name": run.name,
                "state": check_state(run),
                "words": run.conclusion or run.status.replace("_", " "),
                "title": run.output.get("title") or "",
                "url": run.details_url,
            }
            for run in checks
        ],
        icons=STATUS_ICON,
        overall=overall,
        overall_words=words,
        files=_files(repo, pull),
        version=version_now,
    )
    return HTMLResponse(page, headers={"Cache-Control": "no-store"})


@router.get("/{owner}/{name}/commit/{sha}", response_class=HTMLResponse)
def commit_page(request: Request, owner: str, name: str, sha: str) -> HTMLResponse:
    """A commit: its message, author and diff against its first parent."""
    state: SandboxState = request.app.state.sandbox
    repo = state.repo(owner, name)
    try:
        full = git.resolve(repo.git_path, sha)
        info = git.commit_info(repo.git_path, full)
        text = git.diff(repo.git_path, info.parents[0], full) if info.parents else ""
    except git.GitError as exc:
        raise SandboxError(404, "Not Found") from exc
    subject, _, body = info.message.partition("\n")
    page = templates.get_template("commit.html").render(
        repo=repo, info=info, subject=subject, body=body.strip(), lines=diff_lines(text)
    )
    return HTMLResponse(page)


def diff_lines(text: str) -> list[tuple[str, str]]:
    """A unified diff's lines, each with its class: add, del, hunk, file or none."""
    out = []
    for line in text.splitlines():
        if line.startswith(("+++", "---", "diff --git")):
            kind = "file"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        elif line.startswith("@@"):
            kind = "hunk"
        else:
            kind = ""
        out.append((kind, line))
    return out


def _check_runs(state: SandboxState, repo: Repo, sha: str) -> list[CheckRun]:
    """The newest check run of each name on `sha`, by name."""
    seen: dict[str, CheckRun] = {}
    for run in state.check_runs_for(repo, sha):  # newest first
        seen.setdefault(run.name, run)
    return sorted(seen.values(), key=lambda r: r.name)


def check_state(run: CheckRun) -> str:
    """A check run as the checks box colours it: success, failure, neutral or pending."""
    if run.status != "completed":
        return "pending"
    if run.conclusion in ("success",):
        return "success"
    if run.conclusion in ("neutral", "skipped", "cancelled", "stale"):
        return "neutral"
    return "failure"


def is_page(path: str) -> bool:
    """Whether `path` is a page (not a REST call: no rate limit, no faults, no call log)."""
    return PAGE_PATH.match(path) is not None
