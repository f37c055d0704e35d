"""Results parsing: JUnit XML → AccuracyResult, benchmark JSON → BenchmarkResult, before/after."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.job.layouts import parse_flaggems_records
from runner.results.results import (
    ResultsError,
    benchmark_from_document,
    close_matches,
    markers_from_pytest_output,
    parse_junit,
    read_benchmark,
    read_proof,
)

JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="1" failures="1" skipped="3"
 tests="7" time="1.0">
<properties>
  <property name="implementation.adaptive_max_pool3d_backward"
   value="kernels.backends._mthreads.ops.adaptive_max_pool3d_backward"/>
  <property name="implementation.adaptive_max_pool3d" value="kernels.ops.pool.adaptive_max_pool3d"/>
</properties>
<testcase classname="tests.kernels.test_pool" name="test_backward[float16-shape0]" time="0.1"/>
<testcase classname="tests.kernels.test_pool" name="test_backward[float32-shape0]" time="0.1"/>
<testcase classname="tests.kernels.test_pool.TestGrad" name="test_grad[bfloat16]" time="0.1">
  <failure message="AssertionError: Tensor-likes are not close!&#10;Mismatched elements: 3">
Traceback line 1
tests/kernels/test_pool.py:42: in test_grad
    assert_close(a, b)
E   AssertionError: Tensor-likes are not close!</failure>
</testcase>
<testcase classname="tests.kernels.test_pool" name="test_setup" time="0.0">
  <error message="failed on setup with &quot;fixture 'x' not found&quot;">no x</error>
</testcase>
<testcase classname="tests.kernels.test_pool" name="test_big[a]" time="0.0">
  <skipped type="pytest.skip" message="output_size &gt; input">t.py:9: output_size</skipped>
</testcase>
<testcase classname="tests.kernels.test_pool" name="test_big[b]" time="0.0">
  <skipped type="pytest.skip" message="output_size &gt; input">x</skipped>
</testcase>
<testcase classname="tests.kernels.test_pool" name="test_fp64" time="0.0">
  <skipped type="pytest.skip" message="fp64 not supported on MUSA">x</skipped>
</testcase>
</testsuite></testsuites>
"""


def test_junit_counts_failures_skips_and_implementation() -> None:
    acc = parse_junit(JUNIT, op="adaptive_max_pool3d_backward")
    assert (acc.passed, acc.failed, acc.errors, acc.skipped) == (2, 1, 1, 3)
    assert acc.total == 7
    assert acc.implementation == "kernels.backends._mthreads.ops.adaptive_max_pool3d_backward"
    first = acc.failures[0]
    assert first.test_id == "tests/kernels/test_pool.py::TestGrad::test_grad[bfloat16]"
    assert first.message == "AssertionError: Tensor-likes are not close!"
    assert first.traceback_tail.endswith("E   AssertionError: Tensor-likes are not close!")
    assert acc.failures[1].test_id == "tests/kernels/test_pool.py::test_setup"
    assert [(s.reason, s.count) for s in acc.skips] == [
        ("output_size > input", 2),
        ("fp64 not supported on MUSA", 1),
    ]


def test_junit_other_op_and_ambiguous_implementation() -> None:
    assert parse_junit(JUNIT, op="adaptive_max_pool3d").implementation == (
        "kernels.ops.pool.adaptive_max_pool3d"
    )
    assert parse_junit(JUNIT).implementation is None  # two different ones, no op given


def test_junit_test_ids_resolved_against_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "tests" / "kernels").mkdir(parents=True)
    (tmp_path / "tests" / "kernels" / "test_pool.py").write_text("")
    acc = parse_junit(JUNIT, root=tmp_path)
    assert acc.failures[0].test_id == "tests/kernels/test_pool.py::TestGrad::test_grad[bfloat16]"


def test_junit_bare_testsuite_and_skip_without_message() -> None:
    xml = (
        '<testsuite><testcase classname="test_a" name="t1"><skipped>test_a.py:3: because</skipped>'
        '</testcase><testcase classname="test_a" name="t2"/></testsuite>'
    )
    acc = parse_junit(xml)
    assert (acc.passed, acc.skipped) == (1, 1)
    assert acc.skips[0].reason == "because"


def test_junit_garbage_is_a_results_error() -> None:
    with pytest.raises(ResultsError, match="does not parse"):
        parse_junit("<testsuites><testsuite>")


def _doc(speedups: list[float], **extra: object) -> dict[str, object]:
    rows = [
        {
            "dtype": "float16",
            "size": [1, 1, 8 * (i + 1), 8, 8],
            "output_size": [4, 4, 4],
            "reference_ms": 0.01 * s,
            "kernel_ms": 0.01,
            "speedup": s,
            "gbps": 100.0,
            "bandwidth_fraction": 0.05,
        }
        for i, s in enumerate(speedups)
    ]
    return {
        "schema": "kernels.benchmark/v1",
        "op": "adaptive_max_pool3d_backward",
        "impl": "active",
        "device": "NVIDIA H200",
        "vendor": "nvidia",
        "torch": "2.11",
        "triton": "3.6",
        "performance": True,
        "copy_bandwidth_gbps": 3900.0,
        "rows": rows,
        **extra,
    }


def test_benchmark_document_drops_extra_keys_and_computes_means(tmp_path: Path) -> None:
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_doc([2.0, 8.0])))
    result = read_benchmark(path)
    assert result.device == "NVIDIA H200"
    assert len(result.rows) == 2
    assert result.arithmetic_mean_speedup == pytest.approx(5.0)
    assert result.geometric_mean_speedup == pytest.approx(4.0)


def test_benchmark_document_keeps_given_means() -> None:
    result = benchmark_from_document(
        _doc([2.0], arithmetic_mean_speedup=9.0, geometric_mean_speedup=9.0)
    )
    assert result.arithmetic_mean_speedup == 9.0


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "expected an object"),
        ({"schema": "other/v2", "op": "x"}, "schema"),
        ({"schema": "kernels.benchmark/v1", "op": "x", "rows": [{"dtype": 1}]}, "does not match"),
        ({"schema": "kernels.benchmark/v1", "op": "x", "surprise": 1}, "does not match"),
    ],
)
def test_benchmark_document_errors(doc: object, message: str) -> None:
    with pytest.raises(ResultsError, match=message):
        benchmark_from_document(doc)


def test_benchmark_missing_or_bad_file(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="no benchmark JSON"):
        read_benchmark(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ResultsError, match="does not parse"):
        read_benchmark(tmp_path / "bad.json")


def test_markers_and_close_matches() -> None:
    text = (
        "@pytest.mark.adaptive_max_pool3d: accuracy tests\n\n"
        "@pytest.mark.adaptive_max_pool3d_backward: accuracy tests\n\n"
        "@pytest.mark.skipif(condition, ..., *, reason=...): skip ...\n"
    )
    markers = markers_from_pytest_output(text)
    assert markers == ["adaptive_max_pool3d", "adaptive_max_pool3d_backward", "skipif"]
    assert close_matches("adaptive_max_pool3d_backwrd", markers)[0] == (
        "adaptive_max_pool3d_backward"
    )
    assert close_matches("zzz", markers) == []


def test_flaggems_records() -> None:
    lines = [
        "[INFO] some unrelated line",
        '[INFO] {"op_name": "abs", "dtype": "torch.float16", "mode": "cuda", "level": "core", '
        '"result": [{"legacy_shape": null, "shape_detail": [[1024, 1024]], "latency_base": 0.02, '
        '"latency": 0.01, "speedup": 2.0, "accuracy": null}, {"shape_detail": [[64]], '
        '"latency_base": 0.03, "latency": 0.01}]}',
        '[INFO] {"op_name": "other", "dtype": "torch.float32", "result": [{"shape_detail": [[1]],'
        ' "latency_base": 1, "latency": 1, "speedup": 1.0}]}',
        "[INFO] {not json",
    ]
    result = parse_flaggems_records(lines, "abs")
    assert [(r.dtype, r.size, r.speedup) for r in result.rows] == [
        ("float16", [1024, 1024], 2.0),
        ("float16", [64], pytest.approx(3.0)),
    ]
    assert result.arithmetic_mean_speedup == pytest.approx(2.5)


def test_proof_files_are_summed_and_read_as_hostile(tmp_path: Path) -> None:
    """The files are the pull request's to write: only prefixed messages with positive integer
    counts are taken, and a link (to the runner's secrets) or a non-object is skipped."""
    secret = tmp_path / "token"
    secret.write_text('{"P path=secret": 1}')
    art = tmp_path / "artifacts"
    art.mkdir()
    (art / "proof-1.json").write_text(json.dumps({"P path=a": 3, "P path=b": 1}))
    (art / "proof-2.json").write_text(
        json.dumps({"P path=a": 2, "other": 9, "P bool": True, "P neg": -4, "P str": "7"})
    )
    (art / "proof-3.json").write_text("[1, 2]")
    (art / "proof-4.json").write_text("{not json")
    (art / "proof-5.json").symlink_to(secret)
    proof = read_proof(art, "P ")
    assert [(p.message, p.count) for p in proof.lines] == [("P path=a", 5), ("P path=b", 1)]
    assert read_proof(tmp_path / "missing", "P ").lines == []
