"""The job log: valid UTF-8 by construction, offsets in bytes, continued after an earlier
attempt's log, against the real service."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ondemand.utf8 import whole_characters
from runner.job.logstream import LogStream
from runner.link.client import ServiceClient
from service.app import Service as Parts
from service.app import create_app
from service.queue.jobs import NewJob
from tests.service.helpers import service_settings, sqlite_at_head
from tests.support.live import live_server


def test_utf8_prefix_never_splits_a_character() -> None:
    data = "aé€𝄞".encode()
    assert [len(whole_characters(data[:n])) for n in range(len(data) + 1)] == [
        0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10,
    ]  # fmt: skip


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, Parts]]:
    settings = service_settings(
        sqlite_at_head(tmp_path / "svc.db"),
        registration_tokens=["reg"],
    )
    app = create_app(settings)
    with live_server(app) as url:
        yield url, app.state.service


def test_stream_splits_bytes_and_resumes_after_an_earlier_log(
    service: tuple[str, Parts], tmp_path: Path
) -> None:
    url, parts = service
    client, job_id = _claimed(url, parts)
    # An earlier attempt left something in the job's log.
    assert client.append_log(job_id, 0, "attempt 1 said hello\n") == (True, 21)
    stream = LogStream(tmp_path / "job.log", client, job_id, interval_s=0.05).start()
    text = "naïve ✓ 𝄞 done\n" * 3
    raw = text.encode()
    for i in range(0, len(raw), 3):  # chunks that cut through multibyte characters
        stream.write(raw[i : i + 3])
    stream.write(b"bad byte: \xff\n")
    stream.close()
    log = parts.logs.read(job_id).decode()
    assert log == "attempt 1 said hello\n" + text + "bad byte: \ufffd\n"
    assert (tmp_path / "job.log").read_text() == text + "bad byte: \ufffd\n"
    client.close()


def _claimed(url: str, parts: Parts) -> tuple[ServiceClient, int]:
    parts.jobs.create_job(NewJob("o/r", "/x", 1, "b" * 40, "add", "cpu"))
    client = ServiceClient(url)
    _, client.token = client.register(
        "reg", name="r", backends=["cpu"], labels=[], slots=1, version="t"
    )
    spec = client.claim(0)
    assert spec is not None
    return client, spec.id


def test_a_runaway_log_keeps_its_head_and_tail(service: tuple[str, Parts], tmp_path: Path) -> None:
    """A step printing 4 MiB leaves a 64 KiB log: the head as it came, a note of the cut, and
    the last lines; the same bytes on the service; valid UTF-8 however the cut fell."""
    url, parts = service
    client, job_id = _claimed(url, parts)
    limit = 64 * 1024
    stream = LogStream(tmp_path / "job.log", client, job_id, interval_s=0.05, limit=limit).start()
    stream.write(b"FIRST LINE\n")
    line = "naïve ✓ 𝄞 noise\n".encode()
    written = len(b"FIRST LINE\n")
    for _ in range(4 * 1024 * 1024 // len(line)):
        stream.write(line[:5])  # pieces that cut through characters
        stream.write(line[5:])
        written += len(line)
    stream.write(b"LAST LINE\n")
    written += len(b"LAST LINE\n")
    stream.close()
    local = (tmp_path / "job.log").read_bytes()
    assert len(local) <= limit < written
    text = local.decode("utf-8")  # strict: never a broken character
    assert text.startswith("FIRST LINE\nnaïve ✓ 𝄞 noise\n")
    assert text.endswith("noise\nLAST LINE\n")
    assert "the middle is cut" in text
    cut = int(text.split("[ondemand] ")[2].split(" bytes cut here")[0])
    notes = sum(len(n.encode()) for n in text.splitlines(keepends=True) if "[ondemand]" in n)
    assert len(local) - notes + cut == written + 1  # everything is either kept or counted cut
    assert parts.logs.read(job_id) == local
    client.close()


def test_the_service_cap_stops_the_stream_without_spinning(tmp_path: Path) -> None:
    """A runner whose limit is larger than the service's: the service keeps its cap, says
    413, and the stream stops sending at once (its file keeps the rest)."""
    settings = service_settings(
        sqlite_at_head(tmp_path / "svc.db"),
        registration_tokens=["reg"],
        log_max_bytes=8 * 1024,
    )
    app = create_app(settings)
    with live_server(app) as url:
        parts = app.state.service
        client, job_id = _claimed(url, parts)
        stream = LogStream(tmp_path / "job.log", client, job_id, interval_s=0.05).start()
        for n in range(2000):
            stream.write(f"line {n}\n".encode())
        started = time.monotonic()
        stream.close()
        assert time.monotonic() - started < 5  # no retry loop against the 413
        stored = parts.logs.read(job_id)
        assert 0 < len(stored) <= 8 * 1024
        assert (tmp_path / "job.log").read_bytes().startswith(stored)
        assert (tmp_path / "job.log").read_bytes().endswith(b"line 1999\n")
        client.close()
