"""Known secrets are cut out of a job's log and result, even split across writes."""

from __future__ import annotations

from runner.job.redact import MARK, Redactor, redact_text

TOKEN = "rt_0123456789abcdefghij"


def test_secrets_are_cut_even_when_a_write_splits_them() -> None:
    out = bytearray()
    redactor = Redactor(out.extend, lambda: [TOKEN, None, "short"])
    text = f"line one\nthe token is {TOKEN} and again {TOKEN}\nshort is kept\n".encode()
    for i in range(0, len(text), 5):  # five bytes at a time: the token spans writes
        redactor.write(text[i : i + 5])
    redactor.flush()
    got = out.decode()
    assert TOKEN not in got and got.count(MARK) == 2
    assert got.startswith("line one\n") and got.endswith("short is kept\n")


def test_a_complete_line_is_not_held_back() -> None:
    out = bytearray()
    redactor = Redactor(out.extend, lambda: [TOKEN])
    redactor.write(b"progress 10%\n")
    assert out == b"progress 10%\n"  # the live log is not delayed by the redaction


def test_redact_text() -> None:
    assert redact_text(f'{{"tail": "x {TOKEN} y"}}', [TOKEN]) == f'{{"tail": "x {MARK} y"}}'
