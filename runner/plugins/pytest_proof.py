"""A pytest plugin the runner adds to an accuracy step whose workflow names a proof log
(`-p pytest_proof`, from a copy in the job's directory): it counts the log records of
`$TEST_PROOF_LOGGER` (and its children) whose message starts with `$TEST_PROOF_PREFIX`, at
debug level whatever the logger was set to, and writes the counts to
`$TEST_PROOF_DIR/proof-<pid>.json` as the session ends (one file per process, so pytest-xdist
workers do not overwrite each other). It imports only pytest and the standard library."""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from typing import Any

_KEY_CHARS = 200  # a message is counted by its first characters
_DISTINCT = 50  # past this many distinct messages, the rest count as OTHER
OTHER = "(other lines)"


class ProofCounter(logging.Handler):
    """Counts the messages that start with `prefix`."""

    def __init__(self, prefix: str) -> None:
        super().__init__(logging.DEBUG)
        self.prefix = prefix
        self.counts: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format is not proof
            return
        if not message.startswith(self.prefix):
            return
        key = message[:_KEY_CHARS]
        if key not in self.counts and len(self.counts) >= _DISTINCT:
            key = OTHER
        self.counts[key] += 1


_counter: ProofCounter | None = None


def pytest_configure(config: Any) -> None:
    global _counter
    prefix = os.environ.get("TEST_PROOF_PREFIX")
    if not prefix or not os.environ.get("TEST_PROOF_DIR"):
        return
    logger = logging.getLogger(os.environ.get("TEST_PROOF_LOGGER") or None)
    _counter = ProofCounter(prefix)
    logger.addHandler(_counter)
    if logger.getEffectiveLevel() > logging.DEBUG:
        logger.setLevel(logging.DEBUG)


def pytest_unconfigure(config: Any) -> None:
    directory = os.environ.get("TEST_PROOF_DIR")
    if _counter is None or not directory:
        return
    path = os.path.join(directory, f"proof-{os.getpid()}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(dict(_counter.counts), handle)
