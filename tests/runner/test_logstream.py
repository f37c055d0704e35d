"""The job log: valid UTF-8 by construction, offsets in bytes, continued after an earlier
attempt's log, against the real service."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.client import ServiceClient
from runner.logstream import LogStream, _utf8_prefix
from service.app import Service as Parts
from service.app import create_app
from service.queue.jobs import NewJob
from service.settings import Settings
from tests.support.live import live_server


def test_utf8_prefix_never_splits_a_character() -> None:
    data = "aé€𝄞".encode()
    assert [len(_utf8_prefix(data[:n])) for n in range(len(data) + 1)] == [
        0, 1, 1, 3, 3, 3, 6, 6, 6, 6, 10,
    ]  # fmt: skip


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, Parts]]:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'svc.db'}",
        registration_tokens=["reg"],
        webhook_secrets=["s"],
        default_backends=["cpu"],
    )
    app = create_app(settings)
    with live_server(app) as url:
        yield url, app.state.service


def test_stream_splits_bytes_and_resumes_after_an_earlier_log(
    service: tuple[str, Parts], tmp_path: Path
) -> None:
    url, parts = service
    parts.jobs.create_job(NewJob("o/r", "/x", 1, "a" * 40, "add", "cpu"))
    client = ServiceClient(url)
    _, client.token = client.register(
        "reg", name="r", backends=["cpu"], labels=[], slots=1, version="t"
    )
    spec = client.claim(0)
    assert spec is not None
    # An earlier attempt left something in the job's log.
    assert client.append_log(spec.id, 0, "attempt 1 said hello\n") == (True, 21)
    stream = LogStream(tmp_path / "job.log", client, spec.id, interval_s=0.05).start()
    text = "naïve ✓ 𝄞 done\n" * 3
    raw = text.encode()
    for i in range(0, len(raw), 3):  # chunks that cut through multibyte characters
        stream.write(raw[i : i + 3])
    stream.write(b"bad byte: \xff\n")
    stream.close()
    log = parts.logs.read(spec.id).decode()
    assert log == "attempt 1 said hello\n" + text + "bad byte: \ufffd\n"
    assert (tmp_path / "job.log").read_text() == text + "bad byte: \ufffd\n"
    client.close()
