"""The benchmark harness, run as the runner runs it: `python -m kernels.benchmark` on this
machine (Triton interpreter), then its JSON and markdown checked.

Every command line runs in one fresh process (a driver that runs the module as `python -m`
does, once per command line): a process start costs more than a tiny run.
"""

from __future__ import annotations

import copy
import json
import math
import os
import pickle
import re
import statistics
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from kernels.benchmark.bandwidth import gbps, pool3d_traffic_bytes
from kernels.benchmark.report import COLUMNS, EXTRA_KEYS, SCHEMA, Environment, Report, Row
from kernels.benchmark.sizes import TINY, parse_dtypes
from tests.kernels.support import bot_module, needs_bot

models = bot_module("workflows.models")
results = bot_module("runner.results.results")
bot = needs_bot(models, results)

ROOT = Path(__file__).resolve().parents[2]
OPS = ("adaptive_max_pool3d", "adaptive_max_pool3d_backward")


def _env() -> dict[str, str]:
    """The CLI's environment: the Triton interpreter on the CPU, on a GPU host too."""
    env = dict(os.environ)
    env["KERNELS_VENDOR"] = "cpu"
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["MUSA_VISIBLE_DEVICES"] = ""
    env["PYTHONPATH"] = str(ROOT)
    return env


# Runs `python -m kernels.benchmark ARGS` for each named command line in one process: stdout,
# stderr and exit status each, as JSON on the last line. `wrong` replaces the kernel with one
# that drops every gradient; `mthreads` runs after the others (it forces the vendor).
DRIVER = r"""
import contextlib, io, json, runpy, sys
import torch
from kernels.benchmark import implementations

def wrong(grad_output, input, indices):
    return torch.zeros_like(input)

results = {}
for name, argv in json.loads(sys.argv[1]).items():
    out, err = io.StringIO(), io.StringIO()
    select = implementations.select
    if name == "wrong":
        implementations.select = lambda op, impl: (wrong, "tests.wrong")
    sys.argv = ["kernels.benchmark", *argv]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_module("kernels.benchmark", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
    implementations.select = select
    results[name] = {"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every command line the tests check, run once."""
    out = tmp_path_factory.mktemp("bench")
    tiny = ["--sizes", "tiny", "--dtypes", "float32", "--host-reps", "1"]
    argv: dict[str, list[str]] = {
        op: ["--op", op, *tiny, "--json", f"{out}/{op}.json", "--markdown", f"{out}/{op}.md"]
        for op in OPS
    }
    argv["reach"] = ["--op", OPS[0], *tiny, "--reach", "--json", f"{out}/reach.json",
                     "--markdown", f"{out}/reach.md"]  # fmt: skip
    argv["large"] = ["--op", OPS[0], "--sizes", "large", "--json", str(out / "large.json")]
    argv["bad_dtype"] = ["--op", OPS[0], "--dtypes", "float8"]
    argv["bad_op"] = ["--op", "| adaptive_max_pool3d"]
    argv["bad_precision"] = ["--op", OPS[0], "--precision", "1.5"]
    argv["wrong"] = ["--op", OPS[1], "--dtypes", "float32", "--json", str(out / "wrong.json")]
    argv["mthreads"] = ["--op", OPS[1], "--impl", "mthreads", "--dtypes", "float16",
                        "--host-reps", "1", "--json", str(out / "mthreads.json")]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, json.dumps(argv)],
        cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    for name, result in results.items():
        path = out / f"{name}.json"
        result["json"] = json.loads(path.read_text()) if path.exists() else None
        markdown = out / f"{name}.md"
        result["markdown"] = markdown.read_text() if markdown.exists() else None
    return results


@pytest.fixture(params=OPS)
def cli_run(request: pytest.FixtureRequest, runs: dict[str, Any]) -> Any:
    """One CPU run per operator: tiny sizes, one dtype, JSON and markdown files."""
    op = request.param
    run = runs[op]
    assert run["returncode"] == 0, run["stderr"]
    return op, run, run["json"], run["markdown"]


def _table_rows(markdown: str, first_header: str) -> list[list[str]]:
    """The body rows of the markdown table whose header starts with `first_header`."""
    lines = markdown.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_json_has_the_tiny_rows_and_the_environment(cli_run: Any) -> None:
    op, _, data, _ = cli_run
    assert data["schema"] == SCHEMA
    assert data["op"] == op
    assert data["impl"] == "active"
    assert data["performance"] is False
    assert data["copy_bandwidth_gbps"] is None
    assert data["vendor"] == "cpu"
    assert "interpreter" in data["device"].lower()
    import torch
    import triton

    assert data["torch"] == torch.__version__
    assert data["triton"] == triton.__version__
    assert [(tuple(r["size"]), tuple(r["output_size"])) for r in data["rows"]] == list(TINY)
    for row in data["rows"]:
        assert row["dtype"] == "float32"
        assert row["reference_ms"] > 0 and row["kernel_ms"] > 0
        assert row["speedup"] == pytest.approx(row["reference_ms"] / row["kernel_ms"], rel=1e-12)
        numel_in = math.prod(row["size"])
        numel_out = math.prod(row["size"][:2]) * math.prod(row["output_size"])
        traffic = numel_in * 4 + numel_out * (4 + 8)
        assert row["gbps"] == pytest.approx(traffic / (row["kernel_ms"] * 1e-3) / 1e9, rel=1e-9)
        assert row["bandwidth_fraction"] is None
        assert row["reference_runs"] == row["kernel_runs"] == 1  # --host-reps: the clock's calls
        assert row["reach_ms"] is None and row["reach_layout"] is None  # no --reach


@bot
def test_json_means_are_the_means_of_the_rows(cli_run: Any) -> None:
    _, _, data, _ = cli_run
    speedups = [row["speedup"] for row in data["rows"]]
    arithmetic = sum(speedups) / len(speedups)
    geometric = math.prod(speedups) ** (1 / len(speedups))
    assert data["arithmetic_mean_speedup"] == pytest.approx(arithmetic, rel=1e-9)
    assert data["geometric_mean_speedup"] == pytest.approx(geometric, rel=1e-9)
    means = models.BenchmarkResult.means(speedups)
    assert means == pytest.approx((arithmetic, geometric), rel=1e-9)


@bot
def test_json_validates_as_benchmark_result_once_the_extra_keys_are_dropped(
    cli_run: Any,
) -> None:
    _, _, data, _ = cli_run
    assert set(data) - set(models.BenchmarkResult.model_fields) == set(EXTRA_KEYS)
    kept = {k: v for k, v in data.items() if k not in EXTRA_KEYS}
    result = models.BenchmarkResult.model_validate(kept)
    assert result.performance is False
    assert len(result.rows) == len(TINY)
    assert set(data["rows"][0]) <= set(models.BenchmarkRow.model_fields)
    assert result.rows[2].size == [1, 1, 32, 32, 32]
    assert result.rows[2].output_size == [16, 16, 16]


@bot
def test_runner_drops_exactly_our_extra_keys(cli_run: Any) -> None:
    _, _, data, _ = cli_run
    assert set(EXTRA_KEYS) == set(results.BENCHMARK_EXTRA_KEYS)
    result = results.benchmark_from_document(data)
    assert [row.kernel_ms for row in result.rows] == [row["kernel_ms"] for row in data["rows"]]


def test_markdown_table_matches_the_json(cli_run: Any) -> None:
    op, run, data, markdown = cli_run
    assert run["stdout"] == markdown  # the same table goes to stdout
    assert "not performance" in markdown
    assert re.search(rf"`kernels\.ops\.{op}\.{op}`", markdown)  # the function that ran
    header = next(line for line in markdown.splitlines() if line.startswith("| dtype |"))
    assert [c.strip() for c in header.strip("|").split("|")] == list(COLUMNS)
    body = _table_rows(markdown, "dtype")
    assert len(body) == len(data["rows"])
    for cells, row in zip(body, data["rows"], strict=True):
        assert cells[0] == row["dtype"]
        size = ", ".join(map(str, row["size"]))
        out = ", ".join(map(str, row["output_size"]))
        assert cells[1] == f"{size} → {out}"
        assert float(cells[2]) == pytest.approx(row["reference_ms"], abs=1e-6)
        assert float(cells[3]) == pytest.approx(row["kernel_ms"], abs=1e-6)
        assert float(cells[4].removesuffix("x")) == pytest.approx(row["speedup"], rel=1e-2)
        assert cells[6] == "—"  # no copy bandwidth on the CPU
    (means,) = _table_rows(markdown, "Operator")
    assert means[0] == op
    assert float(means[1].removesuffix("x")) == pytest.approx(
        data["arithmetic_mean_speedup"], rel=1e-2
    )
    assert float(means[2].removesuffix("x")) == pytest.approx(
        data["geometric_mean_speedup"], rel=1e-2
    )


def test_cpu_run_says_its_timings_are_not_performance_and_draws_no_bar(cli_run: Any) -> None:
    _, run, _, _ = cli_run
    assert "not performance" in run["stderr"]
    assert "━" not in run["stderr"]  # stderr is not a terminal here: no progress bar


def test_large_sizes_are_refused_under_the_interpreter(runs: dict[str, Any]) -> None:
    run = runs["large"]
    assert run["returncode"] == 2
    assert "--sizes large needs a GPU" in run["stderr"]
    assert run["json"] is None


def test_bad_arguments_get_a_clear_error(runs: dict[str, Any]) -> None:
    assert runs["bad_dtype"]["returncode"] == 2
    assert "unknown dtype 'float8'" in runs["bad_dtype"]["stderr"]
    assert runs["bad_op"]["returncode"] == 2
    assert "invalid choice" in runs["bad_op"]["stderr"]
    assert runs["bad_precision"]["returncode"] == 2
    assert "must be at least 0 and below 1: 1.5" in runs["bad_precision"]["stderr"]


def test_a_wrong_kernel_fails_the_run_before_any_timing(runs: dict[str, Any]) -> None:
    run = runs["wrong"]
    assert run["returncode"] == 1
    assert "kernel result differs from PyTorch's" in run["stderr"]
    assert "(1, 1, 8, 8, 8) → (4, 4, 4)" in run["stderr"]
    assert run["json"] is None
    assert run["stdout"] == ""


def test_impl_mthreads_runs_the_moore_threads_kernel(runs: dict[str, Any]) -> None:
    run = runs["mthreads"]
    assert run["returncode"] == 0, run["stderr"]
    data = run["json"]
    assert (data["impl"], data["vendor"]) == ("mthreads", "mthreads")
    assert len(data["rows"]) == len(TINY)
    assert "`kernels.backends._mthreads.ops.adaptive_max_pool3d_backward." in run["stdout"]


def test_mthreads_is_selected_through_the_runtime() -> None:
    from kernels import runtime
    from kernels.benchmark import implementations

    previous = runtime.vendor()
    try:
        fn, dotted = implementations.select("adaptive_max_pool3d_backward", "mthreads")
        assert runtime.vendor() == "mthreads"
        assert "_mthreads" in dotted
        generic, generic_dotted = implementations.select("adaptive_max_pool3d_backward", "generic")
        assert generic is not fn
        assert generic_dotted.startswith("kernels.ops.")
    finally:
        runtime.set_vendor(previous)


def test_traffic_and_bandwidth_arithmetic() -> None:
    # (2,3,16,16,16) fp16 pooled to (8,8,8): input 24576·2 + output 3072·(2+8)
    assert pool3d_traffic_bytes(24576, 3072, 2) == 24576 * 2 + 3072 * 10
    assert gbps(2_000_000_000, 1000.0) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="positive"):
        gbps(1, 0.0)


def test_report_shows_bandwidth_fraction_and_means_when_measured() -> None:
    env = Environment(
        impl="generic", implementation="kernels.ops.x.x", device="NVIDIA H200", vendor="nvidia",
        torch="2.11.0", triton="3.6.0", performance=True, timing="do_bench",
        copy_bandwidth_gbps=4000.0,
    )  # fmt: skip
    rows = [
        Row("float16", [1, 1, 8, 8, 8], [4, 4, 4], 0.008, 0.004, 2.0, 100.0, 0.025),
        Row("float16", [2, 3, 16, 16, 16], [8, 8, 8], 0.008, 0.001, 8.0, 400.0, 0.1),
    ]
    report = Report("adaptive_max_pool3d_backward", env, rows)
    assert report.means() == pytest.approx((5.0, 4.0))
    markdown = report.to_markdown()
    assert "not performance" not in markdown
    assert (
        "| float16 | 2, 3, 16, 16, 16 → 8, 8, 8 | 0.008000 | 0.001000 | 8.000x | 400.0 | 10.0% |"
        in (markdown)
    )
    assert "| adaptive_max_pool3d_backward | 5.00x | 4.00x |" in markdown
    assert re.search(r"copy bandwidth 4000\.0 GB/s", markdown)
    assert Report("x", env, []).means() == (None, None)


def test_dtype_names_and_aliases() -> None:
    assert parse_dtypes(["fp16,bf16", "float32", "fp16"]) == ["float16", "bfloat16", "float32"]
    with pytest.raises(ValueError, match="unknown dtype 'int8'"):
        parse_dtypes(["int8"])


def test_the_schema_document_names_every_key(cli_run: Any) -> None:
    _, _, data, _ = cli_run
    doc = (ROOT / "docs" / "benchmark-json.md").read_text()
    assert SCHEMA in doc
    for key in [*data, *data["rows"][0]]:
        assert f"`{key}`" in doc, key
    for key in EXTRA_KEYS:
        assert f"`{key}`" in doc, key


def test_refuses_while_our_kernels_replace_pytorchs_operators() -> None:
    import kernels
    from kernels.benchmark import implementations

    with kernels.use_kernels(), pytest.raises(RuntimeError, match="cannot be the reference"):
        implementations.check_reference_is_pytorch()
    implementations.check_reference_is_pytorch()  # undone on exit


def _gpu_available() -> bool:
    from kernels import runtime

    return runtime.device in ("cuda", "musa") and not runtime.interpreted


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_available(), reason="needs a CUDA or MUSA device")
def test_gpu_run_measures_copy_bandwidth_and_bandwidth_fractions(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("KERNELS_VENDOR", None)  # the device's own vendor
    target = tmp_path / "bench.json"
    proc = subprocess.run(
        [sys.executable, "-m", "kernels.benchmark", "--op", "adaptive_max_pool3d_backward",
         "--dtypes", "float16", "--sizes", "tiny", "--rep-ms", "20", "--warmup-ms", "5",
         "--json", str(target), "--markdown", str(target.with_suffix(".md"))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(target.read_text())
    assert data["performance"] is True
    assert "device events" in target.with_suffix(".md").read_text()  # the table says how it timed
    assert "not performance" not in proc.stdout
    assert data["copy_bandwidth_gbps"] > 10
    for row in data["rows"]:
        assert 0 < row["kernel_ms"] < 100 and 0 < row["reference_ms"] < 100
        fraction = row["gbps"] / data["copy_bandwidth_gbps"]
        assert row["bandwidth_fraction"] == pytest.approx(fraction, rel=1e-9)


def test_copy_bandwidth_counts_bytes_read_and_written() -> None:
    from kernels.benchmark.bandwidth import copy_bandwidth_gbps

    calls: list[object] = []

    def timer(fn: Any) -> float:
        calls.append(fn())
        return 2.0  # ms

    size = 1 << 20
    assert copy_bandwidth_gbps("cpu", timer, size=size) == pytest.approx(2 * size / 2e-3 / 1e9)
    (copied,) = calls
    assert copied.numel() == size and bool((copied == 1).all())  # the copy really ran


def test_host_time_per_call_is_one_loop_synchronized_once() -> None:
    from kernels.benchmark.harness import host_us_per_call

    calls: list[int] = []
    syncs: list[int] = []
    per_call = host_us_per_call(
        lambda: calls.append(1), lambda: syncs.append(len(calls)), calls=1000
    )
    # One call and a sync before the clock starts; then 1,000 calls and one sync.
    assert len(calls) == 1001 and syncs == [1, 1001]
    assert 0 < per_call < 1000  # appending to a list takes well under a millisecond


def test_host_time_rounds_go_over_every_row_and_keep_each_sides_least() -> None:
    """A round measures every row, PyTorch's side then ours; the next round starts only after
    the last row, and each side's number is its own fastest round: a slow stretch that covers
    all but one of a side's rounds does not count against it."""
    import time

    from kernels.benchmark.harness import HOST_ROUNDS, host_us_rounds

    order: list[str] = []

    def side(name: str, slow_until: int) -> Any:
        def call() -> None:
            order.append(name)
            if order.count(name) < slow_until:
                time.sleep(0.004)

        return call

    # Row a: PyTorch's side fast from its last round on, ours always slow; row b: both fast.
    sides = [
        (side("torch a", 2 * HOST_ROUNDS - 1), side("ours a", 10**6)),
        (side("torch b", 0), side("ours b", 0)),
    ]
    (torch_a, ours_a), (torch_b, ours_b) = host_us_rounds(sides, lambda: None, calls=1)
    # Each round: one untimed call and one timed call of each side, row after row.
    row = ["torch a"] * 2 + ["ours a"] * 2 + ["torch b"] * 2 + ["ours b"] * 2
    assert order == row * HOST_ROUNDS
    assert torch_a < 2000 and ours_a >= 4000
    assert torch_b < 2000 and ours_b < 2000


def test_host_times_are_measured_after_every_row_is_timed_and_only_where_host_bound() -> None:
    """`run_cases` times each row, then measures the host-bound rows' host times in rounds;
    a row the device keeps busy past HOST_BOUND_MS gets none."""
    from kernels.benchmark.bandwidth import Split
    from kernels.benchmark.definition import Case, OpBenchmark, Prepared
    from kernels.benchmark.harness import HOST_BOUND_MS, HOST_ROUNDS, run_cases

    events: list[str] = []
    latency = {"1": HOST_BOUND_MS / 2, "2": HOST_BOUND_MS * 2, "3": HOST_BOUND_MS / 2}

    def prepare(case: Case, device: str, kernel_fn: Any) -> Prepared:
        name = str(case.size[0])  # rows 1 and 3 host-bound, row 2 not
        return Prepared(
            reference=lambda: events.append(f"torch {name}"),
            kernel=lambda: events.append(f"ours {name}"),
            verify=lambda: None,
            split=Split(read_bytes=8, write_bytes=8),
        )

    def timer(fn: Any) -> float:
        fn()
        events.append("timed")
        return latency[events[-2].split()[-1]]

    cases = [Case("float32", (n, 1, 4, 4, 4), (2, 2, 2)) for n in (1, 2, 3)]
    bench = OpBenchmark(name="synthetic", prepare=prepare)
    rows = run_cases(bench, cases, None, "cpu", timer, None, host_calls=3)
    timings = 2 * len(cases) * 2  # a call and "timed" for each side of each row
    assert events[:timings].count("timed") == 2 * len(cases) and "timed" not in events[timings:]
    # Then the host times: rounds over rows 1 and 3 (4 calls a side: 1 untimed, 3 timed).
    a_round = [f"{side} {n}" for n in "13" for side in ("torch", "ours") for _ in range(4)]
    assert events[timings:] == a_round * HOST_ROUNDS
    assert [r.kernel_host_us is not None for r in rows] == [True, False, True]
    assert all((r.reference_host_us is None) == (r.kernel_host_us is None) for r in rows)


@bot
def test_host_time_columns_appear_where_measured() -> None:
    from kernels.benchmark.report import HOST_COLUMNS

    env = Environment(
        impl="active", implementation="kernels.ops.x.x", device="NVIDIA H200", vendor="nvidia",
        torch="2.11.0", triton="3.6.0", performance=True, timing="do_bench",
    )  # fmt: skip
    row = Row("float32", [1, 1, 8, 8, 8], [4, 4, 4], 0.008, 0.004, 2.0, None, None, 14.25, 9.5)
    report = Report("adaptive_max_pool3d_backward", env, [row])
    header, _, cells = [line for line in report.to_markdown().splitlines() if "|" in line][:3]
    assert header.strip("| ").split(" | ")[-2:] == list(HOST_COLUMNS)
    assert cells.strip("| ").split(" | ")[-2:] == ["14.2", "9.5"]
    (json_row,) = report.to_json()["rows"]
    assert models.BenchmarkRow.model_validate(json_row).kernel_host_us == 9.5
    unmeasured = Report("x", env, [Row("float32", [1], [1], 1.0, 1.0, 1.0)]).to_markdown()
    assert "Host" not in unmeasured


def test_the_median_interval_is_the_order_statistics_of_a_binomial_95_percent() -> None:
    from kernels.benchmark.harness import median_interval

    # n = 64: ranks 24 and 41 (from 1) hold the median with 95 % probability.
    assert median_interval([float(i) for i in range(64, 0, -1)]) == (24.0, 41.0)
    assert median_interval([3.0]) == (3.0, 3.0)


def test_timing_stops_early_only_where_the_median_is_settled() -> None:
    from kernels.benchmark.harness import median_settled, pair_means

    steady = [10.0 + 0.001 * (i % 7) for i in range(64)]
    assert median_settled(steady, 0.005)
    assert not median_settled(steady[:10], 0.005)  # too few runs to say
    assert not median_settled(steady, 0.0)  # 0: the whole budget, always
    # A one-kernel op's two launch-parity states, 10 % apart, one run each in turn: the median
    # lies between them and never settles, so the timer takes its whole budget.
    parity = [4.0 if i % 2 else 4.45 for i in range(400)]
    assert not median_settled(parity, 0.005)
    # Taken two runs at a time, one of each state, it settles at once, at their mean.
    pairs = pair_means(parity[:64])
    assert median_settled(pairs, 0.005) and statistics.median(pairs) == pytest.approx(4.225)
    noisy = [10.0 * (1 + 0.01 * math.sin(i)) for i in range(256)]  # ±1 %: more runs settle it
    assert not median_settled(noisy[:64], 0.005) and median_settled(noisy, 0.005)


@bot
def test_reach_is_the_fastest_mover_of_each_row_timed_the_same_way(runs: dict[str, Any]) -> None:
    from kernels.benchmark.reach import CONFIGS

    run = runs["reach"]
    assert run["returncode"] == 0, run["stderr"]
    rows = run["json"]["rows"]
    assert len(rows) == len(TINY)
    assert all(r["reach_ms"] > 0 and r["reach_layout"] in {c.name for c in CONFIGS} for r in rows)
    lines = run["markdown"].splitlines()
    header = next(line for line in lines if line.startswith("| dtype |")).strip("| ").split(" | ")
    assert header[-2:] == ["Reach (ms)", "Kernel / Reach"]
    for row, cells in zip(rows, _table_rows(run["markdown"], "dtype"), strict=True):
        assert cells[-2] == f"{row['reach_ms']:.6f}"
        assert cells[-1] == f"{row['kernel_ms'] / row['reach_ms']:.2f}x"
    assert models.BenchmarkRow.model_validate(rows[0]).reach_layout == rows[0]["reach_layout"]


@bot
def test_rows_say_how_many_runs_each_latency_is_the_median_over() -> None:
    from kernels.benchmark.definition import Case
    from kernels.benchmark.harness import HostTimer, Timing, make_row

    timed = HostTimer(reps=5)(lambda: None)
    assert isinstance(timed, Timing) and timed.runs == 5 and timed > 0
    again = pickle.loads(pickle.dumps(timed))  # tools send timings between processes
    assert again == timed and again.runs == 5 and copy.deepcopy(timed).runs == 5
    case = Case(dtype="float32", size=(1, 1, 8, 8, 8), output_size=(4, 4, 4))
    row = make_row(case, Timing(0.010, 400), Timing(0.004, 96), 1000, None)
    assert (row.reference_runs, row.kernel_runs) == (400, 96)
    assert row.speedup == pytest.approx(2.5) and type(row.kernel_ms) is float
    assert models.BenchmarkRow.model_validate(asdict(row)).kernel_runs == 96
    plain = make_row(case, 0.010, 0.004, 1000, None)  # a timer that does not count
    assert (plain.reference_runs, plain.kernel_runs) == (None, None)


def test_pair_means_take_two_runs_in_turn_and_leave_a_last_odd_one_out() -> None:
    from kernels.benchmark.harness import pair_means

    assert pair_means([1.0, 3.0, 5.0, 9.0, 100.0]) == [2.0, 7.0]
    assert pair_means([4.0]) == [4.0] and pair_means([]) == []


def test_the_timing_description_says_when_it_stops_early() -> None:
    from kernels.benchmark.harness import PRECISION, DeviceTimer

    assert "rep 100 ms," in DeviceTimer().description  # the tools' probes: the whole budget
    early = DeviceTimer(precision=PRECISION).description
    assert "rep up to 100 ms, stopped once the median's 95 % interval is within 0.5 %" in early
