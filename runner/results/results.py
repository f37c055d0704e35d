"""Turn what the steps wrote into the result's typed parts: pytest's JUnit XML into an
`AccuracyResult`, the benchmark JSON into a `BenchmarkResult`, and the merge base's benchmark
into the rows' before columns. Pure functions over text and paths."""

from __future__ import annotations

import difflib
import errno
import json
import os
import re
import stat
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    Proof,
    ProofLine,
    SkipGroup,
    TestFailure,
)

BENCHMARK_SCHEMA = "kernels.benchmark/v1"
# Top-level keys of kernels.benchmark/v1 that BenchmarkResult does not carry.
BENCHMARK_EXTRA_KEYS = frozenset(
    {"schema", "impl", "vendor", "torch", "triton", "copy_bandwidth_gbps"}
)
TRACEBACK_LINES = 30
IMPLEMENTATION_PREFIX = "implementation."


class ResultsError(ValueError):
    """A results file that is missing or cannot be read as its format."""


def _test_id(classname: str, name: str, root: Path | None) -> str:
    """pytest's node id from JUnit's classname: `a.b.test_x.TestC` → `a/b/test_x.py::TestC`."""
    parts = [p for p in classname.split(".") if p]
    if not parts:
        return name
    split = len(parts)
    if root is not None:
        # The longest dotted prefix that is a file in the checkout is the module.
        for i in range(len(parts), 0, -1):
            if (root.joinpath(*parts[:i]).with_suffix(".py")).is_file():
                split = i
                break
    else:
        for i, part in enumerate(parts):
            if part.startswith("test_") or part.endswith("_test"):
                split = i + 1
                break
    module = "/".join(parts[:split]) + ".py"
    return "::".join([module, *parts[split:], name])


def _tail(text: str, lines: int = TRACEBACK_LINES) -> str:
    return "\n".join(text.strip("\n").splitlines()[-lines:])


def _skip_reason(elem: ET.Element) -> str:
    message = (elem.get("message") or "").strip()
    if not message:
        text = (elem.text or "").strip()
        # pytest writes "path:line: reason" as the text of a skip.
        message = re.sub(r"^\S+:\d+: ", "", text) or "no reason given"
    return message


def parse_junit(text: str, op: str | None = None, root: Path | None = None) -> AccuracyResult:
    """Counts, failures (test id, message, traceback tail) and skips grouped by reason.

    The implementation comes from the suite property `implementation.<op>` (or the only
    `implementation.*` property when `op` is not given).
    """
    try:
        tree = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ResultsError(f"JUnit XML does not parse: {exc}") from exc
    suites = [tree] if tree.tag == "testsuite" else tree.findall("testsuite")
    passed = failed = errors = skipped = 0
    failures: list[TestFailure] = []
    skips: Counter[str] = Counter()
    implementations: dict[str, str] = {}
    for suite in suites:
        for prop in suite.iter("property"):
            name = prop.get("name") or ""
            if name.startswith(IMPLEMENTATION_PREFIX):
                implementations[name[len(IMPLEMENTATION_PREFIX) :]] = prop.get("value") or ""
        for case in suite.iter("testcase"):
            test_id = _test_id(case.get("classname") or "", case.get("name") or "?", root)
            failure = case.find("failure")
            error = case.find("error")
            skip = case.find("skipped")
            if failure is not None or error is not None:
                elem = failure if failure is not None else error
                assert elem is not None
                if failure is not None:
                    failed += 1
                else:
                    errors += 1
                message = (elem.get("message") or "").strip() or (elem.text or "").strip()
                failures.append(
                    TestFailure(
                        test_id=test_id,
                        message=message.splitlines()[0][:500] if message else "",
                        traceback_tail=_tail(elem.text or ""),
                    )
                )
            elif skip is not None:
                skipped += 1
                skips[_skip_reason(skip)] += 1
            else:
                passed += 1
    implementation = None
    if op is not None and op in implementations:
        implementation = implementations[op]
    elif len(set(implementations.values())) == 1:
        implementation = next(iter(implementations.values()))
    return AccuracyResult(
        passed=passed,
        failed=failed,
        errors=errors,
        skipped=skipped,
        failures=failures,
        skips=[SkipGroup(reason=r, count=c) for r, c in skips.most_common()],
        implementation=implementation,
    )


def parse_outcomes(text: str, root: Path | None = None) -> dict[str, str]:
    """Each test case's node id and outcome in a JUnit report: `passed`, `failed` (a
    failure or an error) or `skipped` (what a re-run by node id is read with)."""
    try:
        tree = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ResultsError(f"JUnit XML does not parse: {exc}") from exc
    outcomes: dict[str, str] = {}
    for case in tree.iter("testcase"):
        test_id = _test_id(case.get("classname") or "", case.get("name") or "?", root)
        if case.find("failure") is not None or case.find("error") is not None:
            outcomes[test_id] = "failed"  # an error in teardown follows a passed call
        elif case.find("skipped") is not None:
            outcomes.setdefault(test_id, "skipped")
        else:
            outcomes.setdefault(test_id, "passed")
    return outcomes


MAX_ARTIFACT_BYTES = 64 * 1024 * 1024


def read_artifact(path: Path, limit: int = MAX_ARTIFACT_BYTES) -> str:
    """A file a job wrote, as text: a regular file reached without following a symbolic link
    at its own name (the runner reads as root; a job could point a link at the runner's
    token), at most `limit` bytes. OSError when it is not one."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
    return data.decode("utf-8", errors="replace")


def read_junit(path: Path, op: str | None = None, root: Path | None = None) -> AccuracyResult:
    try:
        text = read_artifact(path)
    except OSError as exc:
        raise ResultsError(f"no JUnit XML at {path}: {exc.strerror}") from exc
    return parse_junit(text, op, root)


PROOF_FILES = "proof-*.json"
_PROOF_LINES = 20


def read_proof(directory: Path, prefix: str) -> Proof:
    """The proof-log counts the accuracy step's processes wrote (runner/plugins/pytest_proof.py),
    summed over its files; each file is the pull request's to write, so only strings that start with
    `prefix` and non-negative integer counts are taken, and a file that is not a small regular
    JSON object is skipped."""
    counts: Counter[str] = Counter()
    for path in sorted(directory.glob(PROOF_FILES))[:256]:
        try:
            doc = json.loads(read_artifact(path, limit=256 * 1024))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict):
            continue
        for message, count in doc.items():
            ok = isinstance(count, int) and not isinstance(count, bool) and 0 < count < 2**53
            if ok and isinstance(message, str) and message.startswith(prefix):
                counts[message[:200]] += count
    return Proof(
        prefix=prefix,
        lines=[ProofLine(message=m, count=c) for m, c in counts.most_common(_PROOF_LINES)],
    )


def benchmark_from_document(doc: Any) -> BenchmarkResult:
    """A kernels.benchmark/v1 document (see docs/benchmark-json.md) as a BenchmarkResult;
    means are recomputed from the rows when the document lacks them."""
    if not isinstance(doc, dict):
        raise ResultsError("benchmark JSON: expected an object at the top level")
    schema = doc.get("schema", BENCHMARK_SCHEMA)
    if schema != BENCHMARK_SCHEMA:
        raise ResultsError(f"benchmark JSON: schema {schema!r}, expected {BENCHMARK_SCHEMA!r}")
    fields = {k: v for k, v in doc.items() if k not in BENCHMARK_EXTRA_KEYS}
    try:
        result = BenchmarkResult.model_validate(fields)
    except ValueError as exc:
        raise ResultsError(f"benchmark JSON does not match the schema: {exc}") from exc
    if result.arithmetic_mean_speedup is None and result.rows:
        mean, geo = BenchmarkResult.means([r.speedup for r in result.rows])
        result = result.model_copy(
            update={"arithmetic_mean_speedup": mean, "geometric_mean_speedup": geo}
        )
    return result


def read_benchmark(path: Path) -> BenchmarkResult:
    try:
        doc = json.loads(read_artifact(path))
    except OSError as exc:
        raise ResultsError(f"no benchmark JSON at {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ResultsError(f"benchmark JSON does not parse: {exc}") from exc
    return benchmark_from_document(doc)


def close_matches(op: str, known: list[str], n: int = 5) -> list[str]:
    """Registered operator names that look like `op`."""
    return difflib.get_close_matches(op, known, n=n, cutoff=0.6)


_MARKER_LINE = re.compile(r"^@pytest\.mark\.([A-Za-z_][A-Za-z0-9_]*)(?:\(|:)")


def markers_from_pytest_output(text: str) -> list[str]:
    """Marker names from `pytest --markers` output."""
    names = []
    for line in text.splitlines():
        match = _MARKER_LINE.match(line.strip())
        if match:
            names.append(match.group(1))
    return names
