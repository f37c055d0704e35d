"""The default branch's trend pages:

- `GET /trends/{owner}/{name}`: the repository's operators with default-branch history (rows,
  commits, the last run, an open regression issue);
- `GET /trends/{owner}/{name}/{op}/{backend}`: each row of the operator (dtype × shape,
  metric) over the default branch's commits, its pull requests' runs beside them and the
  regressions marked, drawn as inline SVG with its numbers in a table under each chart.

A private repository's pages open only with its key (`Links.repo_key`, which its job pages'
links carry), else the same 404 as a repository without history. I/O is here; what the pages
show is `trend_views.py` and `trend_chart.py`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from report.markdown import utc
from service.db.engine import Database
from service.links import Links
from service.web import trend_reads, trend_views
from service.web.templating import templates
from service.web.trend_chart import trend_svg

NO_STORE = {"Cache-Control": "no-store"}


def trends_router(db: Database, links: Links, github_html_url: str) -> APIRouter:
    """The trend pages over the history the default branch's runs keep."""
    router = APIRouter()

    @router.get("/trends/{owner}/{name}", response_class=HTMLResponse)
    def repo_trends(owner: str, name: str, key: str | None = None) -> HTMLResponse:
        repo = f"{owner}/{name}"
        with db.reads() as session:
            hidden = trend_reads.private(session, repo)
            opened = links.opens_repo(repo, hidden, key)
            found = trend_reads.operators(session, repo) if opened else []
        if not found:
            return _missing(repo)
        repo_url = f"{github_html_url}/{repo}"
        operators = [
            {
                "op": o.op,
                "backend": o.backend,
                "rows": o.rows,
                "commits": o.commits,
                "last": utc(o.last_at),
                "url": links.trends_path(repo, hidden, o.op, o.backend),
                "issue_open": o.issue_open,
                "issue_number": o.issue_number,
                "issue_url": f"{repo_url}/issues/{o.issue_number}" if o.issue_number else None,
            }
            for o in found
        ]
        page = templates.get_template("trends.html").render(
            repo=repo, repo_url=repo_url, operators=operators, private=hidden
        )
        return HTMLResponse(page, headers=NO_STORE)

    @router.get("/trends/{owner}/{name}/{op}/{backend}", response_class=HTMLResponse)
    def operator_trend(
        owner: str, name: str, op: str, backend: str, key: str | None = None
    ) -> HTMLResponse:
        repo = f"{owner}/{name}"
        with db.reads() as session:
            hidden = trend_reads.private(session, repo)
            if not links.opens_repo(repo, hidden, key):
                return _missing(repo, op, backend)
            data = trend_reads.operator_data(session, repo, op, backend)
        if not data.records:
            return _missing(repo, op, backend)
        repo_url = f"{github_html_url}/{repo}"
        return HTMLResponse(
            _operator_page(data, repo, op, backend, repo_url, links, hidden), headers=NO_STORE
        )

    return router


def _operator_page(
    data: trend_reads.OperatorData,
    repo: str,
    op: str,
    backend: str,
    repo_url: str,
    links: Links,
    hidden: bool,
) -> str:
    """The operator's page from what was read."""
    issue = None
    if data.issue_open:
        url = f"{repo_url}/issues/{data.issue_number}" if data.issue_number else None
        issue = trend_views.OpenIssue(data.issue_number, url, tuple(data.issue_rows))
    shown = trend_views.trend(
        data.records, data.runs, data.pulls, issue, lambda job_id: links.job_path(job_id, hidden)
    )
    rows = [_row(row, i, len(shown.commits)) for i, row in enumerate(shown.rows)]
    return templates.get_template("trend.html").render(
        repo=repo,
        op=op,
        backend=backend,
        repo_url=repo_url,
        index_url=links.trends_path(repo, hidden),
        commits=shown.commits,
        older=shown.older,
        rows=rows,
        issue=issue,
        pulls=len(data.pulls),
        times=trend_views.time_text,
    )


def _row(row: trend_views.RowTrend, index: int, commits: int) -> dict[str, Any]:
    """A row as the template lays it out: its chart where it has enough history, and its
    numbers (the default branch's points, then the pull requests' runs) for the table."""
    return {
        "row": row,
        "id": f"row-{index}",
        "svg": Markup(trend_svg(row, commits, index)) if row.enough else None,
    }


def _missing(repo: str, op: str | None = None, backend: str | None = None) -> HTMLResponse:
    """The 404 of a repository (or operator) without history, or a private one's without its
    key: one sentence, the same either way."""
    what = f"{op} on {backend} in {repo}" if op else repo
    sentence = (
        f"There is no default-branch history of {what} here. Its default branch's own runs "
        "(a push, or the nightly schedule) record it as their jobs end; a private "
        "repository's trends open only through a link from one of its job pages."
    )
    page = templates.get_template("trend_missing.html").render(what=what, sentence=sentence)
    return HTMLResponse(page, status_code=404, headers=NO_STORE)
