"""The trend pages over HTTP, on SQLite and PostgreSQL, from history written through the models:
a repository's operators, an operator's rows over its default branch (points linking to their
jobs, bands, the pull requests' runs, the marks and the open issue's link, a row measured once
saying so), the dashboard's and a job page's links to them, a private repository's pages behind
its key, and the security headers every page has."""

from __future__ import annotations

import re

import httpx

from service.web.headers import HEADERS
from tests.service.helpers import live_service, service_settings
from tests.web.support import new_job
from tests.web.trend_seed import BIG, COMMITS, SMALL, seed_history


def _get(url: str, status: int = 200) -> str:
    answer = httpx.get(url)
    assert answer.status_code == status, (url, answer.status_code)
    for name, value in HEADERS.items():
        assert answer.headers[name] == value, name
    assert answer.headers["cache-control"] == "no-store"
    return answer.text


def test_trend_pages_over_http(db_url: str) -> None:
    settings = service_settings(db_url, process_workers=False)
    with live_service(settings) as live:
        public = seed_history(live.service.db)
        secret = seed_history(live.service.db, "octo/secret", private=True)
        links = live.service.links
        base = f"{live.url}/trends"

        index = _get(f"{base}/octo/kernels")
        assert '<a href="/trends/octo/kernels/add/cpu"><code>add</code></a>' in index
        assert "<td>3</td><td>5</td>" in index  # three rows over five commits
        assert 'href="https://github.com/octo/kernels/issues/77">issue #77 open' in index

        page = _get(f"{base}/octo/kernels/add/cpu")
        for sha, job_id in public.main_jobs.items():
            assert f'data-job="{job_id}" data-sha="{sha}"' in page
            assert f'<a href="/jobs/{job_id}">' in page
        assert page.count('class="point main') == 10  # two rows of five; the host row's one
        assert page.count('<rect class="band"') == 9  # the first row's c3 had too few rounds
        assert page.count('class="band-area"') == 2  # the first row's: c4 to c6 (c2 alone)
        assert page.count('class="point pull"') == 4
        for job_id in public.pull_jobs:
            linked = (
                f'<a href="/jobs/{job_id}" aria-label="pull request #[^"]+"><g class="point pull"'
            )
            assert len(re.findall(linked, page)) == 2  # in both rows
        slower = public.points[(BIG, "device", COMMITS[3])]
        drift = public.points[(SMALL, "device", COMMITS[5])]
        assert f'<g class="marker slower" data-point="{slower}">' in page
        assert f'<g class="marker drift" data-point="{drift}">' in page
        issue = "https://github.com/octo/kernels/issues/77"
        linked = f'<a href="{issue}" aria-label="issue #77: slower counted from 4444444">'
        assert f'{linked}<g class="marker issue" data-point="{slower}">' in page
        assert f'<a href="{issue}" id="issue-link">Issue #77</a>' in page
        assert page.count("Not enough history") == 1  # the host-time row, measured once
        assert "35.5 µs" in page and "push, merged #15" in page
        assert '<a href="/trends/octo/kernels" id="index-link">' in page

        for missing in (
            "octo/kernels/mul/cpu",
            "octo/nothing",
            "octo/secret",
            "octo/secret/add/cpu",
        ):
            assert "no default-branch history" in _get(f"{base}/{missing}", 404)
        wrong = links.trends_path("octo/kernels", True, "add", "cpu").split("?")[1]
        _get(f"{base}/octo/secret/add/cpu?{wrong}", 404)  # another repository's key

        keyed = _get(f"{live.url}{links.trends_path('octo/secret', True, 'add', 'cpu')}")
        for job_id in [*secret.main_jobs.values(), *secret.pull_jobs]:
            assert f'<a href="/jobs/{job_id}?key={links.key(job_id)}">' in keyed
        assert f'href="{links.trends_path("octo/secret", True)}" id="index-link"' in keyed
        secret_index = _get(f"{live.url}{links.trends_path('octo/secret', True)}")
        assert links.trends_path("octo/secret", True, "add", "cpu") in secret_index

        dashboard = _get(f"{live.url}/")
        assert '<a href="/trends/octo/kernels/add/cpu" data-target="add:cpu">' in dashboard
        assert "octo/secret" not in dashboard

        job = _get(f"{live.url}/jobs/{public.queued_job}")
        assert '<a href="/trends/octo/kernels/add/cpu" id="trend-link">' in job
        private_job = secret.queued_job
        job = _get(f"{live.url}{links.job_path(private_job, True)}")
        trend_link = links.trends_path("octo/secret", True, "add", "cpu")
        assert f'<a href="{trend_link}" id="trend-link">' in job
        other, _ = live.service.jobs.create_job(new_job(op="mul", sha="9" * 40))
        assert 'id="trend-link"' not in _get(f"{live.url}/jobs/{other.id}")  # no history
