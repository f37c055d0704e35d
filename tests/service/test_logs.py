"""Job logs on the service: capped when stored, served in pieces (ranges, a tail) and streamed
from the store in constant memory, whatever their size."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from service.web.ranges import ByteRange, Unsatisfiable, byte_range
from tests.service.helpers import LiveService, live_service, new_job, service_settings


@pytest.mark.parametrize(
    ("header", "size", "want"),
    [
        (None, 100, None),
        ("bytes=0-9", 100, ByteRange(0, 10)),
        ("bytes=90-", 100, ByteRange(90, 100)),
        ("bytes=95-200", 100, ByteRange(95, 100)),
        ("bytes=-10", 100, ByteRange(90, 100)),
        ("bytes=-500", 100, ByteRange(0, 100)),
        ("bytes = 5 - 6", 100, ByteRange(5, 7)),
        ("bytes=9-3", 100, None),  # invalid: the whole body (RFC 9110 lets a server ignore it)
        ("bytes=0-1,5-6", 100, None),  # several ranges: not served, the whole body
        ("items=0-1", 100, None),
        ("bytes=-", 100, None),
    ],
)
def test_byte_range(header: str | None, size: int, want: ByteRange | None) -> None:
    assert byte_range(header, size) == want


@pytest.mark.parametrize(
    ("header", "size"), [("bytes=100-", 100), ("bytes=-0", 100), ("bytes=0-", 0)]
)
def test_unsatisfiable_ranges(header: str, size: int) -> None:
    with pytest.raises(Unsatisfiable, match=f"bytes \\*/{size}"):
        byte_range(header, size)


@contextmanager
def _held_job(db_url: str, **settings: object) -> Iterator[tuple[LiveService, int, str, int]]:
    """A live service with one job claimed by a registered runner: (service, runner id,
    runner token, job id)."""
    with live_service(service_settings(db_url, **settings)) as live:
        job, _ = live.service.jobs.create_job(new_job())
        runner_id, token = live.register()
        claimed = httpx.post(
            f"{live.url}/api/v1/jobs/claim",
            json={"wait_s": 0},
            headers={"Authorization": f"Bearer {token}"},
        )
        assert claimed.status_code == 200 and claimed.json()["id"] == job.id
        yield live, runner_id, token, job.id


def test_the_log_page_serves_the_whole_log_ranges_and_a_tail(db_url: str) -> None:
    with _held_job(db_url) as (live, runner_id, _, job_id):
        text = "".join(f"line {n:03d} ✓\n" for n in range(200)).encode()
        for start in range(0, len(text), 700):  # chunks whose edges fall anywhere
            appended = live.service.logs.append(runner_id, job_id, start, text[start : start + 700])
            assert appended is not None and appended.accepted
        page = f"{live.url}/jobs/{job_id}/log"
        whole = httpx.get(page)
        assert whole.status_code == 200 and whole.content == text
        assert whole.headers["content-length"] == str(len(text))
        assert whole.headers["accept-ranges"] == "bytes"
        part = httpx.get(page, headers={"Range": "bytes=690-1409"})  # spans three chunks
        assert part.status_code == 206 and part.content == text[690:1410]
        assert part.headers["content-range"] == f"bytes 690-1409/{len(text)}"
        tail = httpx.get(page, headers={"Range": "bytes=-40"})
        assert tail.status_code == 206 and tail.content == text[-40:]
        assert httpx.get(page, params={"tail": 40}).content == text[-40:]
        past = httpx.get(page, headers={"Range": f"bytes={len(text)}-"})
        assert past.status_code == 416 and past.headers["content-range"] == f"bytes */{len(text)}"
        assert httpx.get(page, params={"tail": 0}).status_code == 422


def test_a_log_is_capped_at_a_whole_character(db_url: str) -> None:
    """Past `ONDEMAND_LOG_MAX_BYTES` nothing is stored; the chunk that crosses it keeps what
    fits up to a whole character, and the runner is told 413 with the end."""
    with _held_job(db_url, log_max_bytes=1024) as (live, runner_id, token, job_id):
        answer = httpx.post(
            f"{live.url}/api/v1/jobs/{job_id}/logs",
            json={"offset": 0, "data": "x" * 1022 + "✓✓"},  # the cap falls inside the first ✓
            headers={"Authorization": f"Bearer {token}"},
        )
        assert answer.status_code == 413
        assert answer.json()["offset"] == 1022 and answer.json()["limit"] == 1024
        assert live.service.logs.read(job_id) == b"x" * 1022
        fits = live.service.logs.append(runner_id, job_id, 1022, b"ab")  # exactly the cap
        assert fits is not None and fits.accepted and fits.offset == 1024
        more = live.service.logs.append(runner_id, job_id, 1024, b"c")
        assert more is not None and more.full and more.offset == 1024
        assert live.service.logs.size(job_id) == 1024


def test_a_large_log_streams_in_constant_memory(tmp_path: Path) -> None:
    """A 24 MiB log leaves the service a few chunks at a time: the service's Python memory
    (its uvicorn thread runs in this process) peaks far below the log's size."""
    url = f"sqlite:///{tmp_path}/logs.db"
    with _held_job(url, log_max_bytes=64 * 1024 * 1024) as (live, runner_id, _, job_id):
        chunk = b"0123456789abcdef" * 65536  # 1 MiB
        for n in range(24):
            appended = live.service.logs.append(runner_id, job_id, n * len(chunk), chunk)
            assert appended is not None and appended.accepted
        received = 0
        tracemalloc.start()
        try:
            with httpx.stream("GET", f"{live.url}/jobs/{job_id}/log", timeout=60) as answer:
                for piece in answer.iter_raw():
                    received += len(piece)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert received == 24 * len(chunk)
        assert peak < 8 * 1024 * 1024, f"peak {peak / 2**20:.1f} MiB for a 24 MiB log"
