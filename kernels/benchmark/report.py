"""Rows, means and the two outputs: the markdown table (seed's form) and the runner's JSON.

The JSON schema is documented in docs/benchmark-json.md; keep the two in step.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "kernels.benchmark/v1"

# Top-level JSON keys beyond workflows.models.BenchmarkResult's fields: the runner drops
# exactly these (runner/results/results.py), so a new key must be added there too.
EXTRA_KEYS: tuple[str, ...] = ("schema", "impl", "vendor", "torch", "triton", "copy_bandwidth_gbps")

COLUMNS: tuple[str, ...] = (
    "dtype",
    "Size",
    "Torch Latency (ms)",
    "Kernel Latency (ms)",
    "Speedup",
    "Achieved (GB/s)",
    "Of Copy Bandwidth",
)

NOT_PERFORMANCE = (
    "Timed under the Triton interpreter on the CPU: these timings are not performance."
)


@dataclass(frozen=True)
class Row:
    """One measured case; the field names are workflows.models.BenchmarkRow's."""

    dtype: str
    size: list[int]
    output_size: list[int]
    reference_ms: float
    kernel_ms: float
    speedup: float
    gbps: float | None = None
    bandwidth_fraction: float | None = None
    reference_host_us: float | None = None  # host time per call, 1,000 calls synced once
    kernel_host_us: float | None = None
    reference_runs: int | None = None  # timed runs each latency is the median over
    kernel_runs: int | None = None
    reach_ms: float | None = None  # the fastest mover of the row's minimum traffic (--reach)
    reach_layout: str | None = None
    # With --baseline (rounds.py): the merge base's kernel beside ours, each side's per-round
    # latencies (paired by index) and their summaries (rounds, median, low, high).
    before_kernel_ms: float | None = None
    before_speedup: float | None = None
    reference_samples_ms: list[float] | None = None
    kernel_samples_ms: list[float] | None = None
    before_kernel_samples_ms: list[float] | None = None
    kernel_rounds: dict[str, Any] | None = None
    before_rounds: dict[str, Any] | None = None


HOST_COLUMNS: tuple[str, ...] = ("Torch Host (µs/call)", "Kernel Host (µs/call)")
REACH_COLUMNS: tuple[str, ...] = ("Reach (ms)", "Kernel / Reach")
BEFORE_COLUMNS: tuple[str, ...] = ("Before (ms)", "After / Before", "Rounds")


@dataclass(frozen=True)
class Environment:
    """Where and how a run measured."""

    impl: str  # what was asked: generic, mthreads or active
    implementation: str  # the dotted path of the function that ran
    device: str  # device name, e.g. "NVIDIA H200"
    vendor: str
    torch: str
    triton: str
    performance: bool  # False under the Triton interpreter
    timing: str
    copy_bandwidth_gbps: float | None = None


@dataclass(frozen=True)
class Report:
    op: str
    env: Environment
    rows: list[Row] = field(default_factory=list)
    compare_mode: str | None = None  # "in_process" when the rows carry a merge base's side

    def means(self) -> tuple[float | None, float | None]:
        return means([row.speedup for row in self.rows])

    def to_json(self) -> dict[str, Any]:
        """The JSON object the runner parses (schema kernels.benchmark/v1)."""
        arithmetic, geometric = self.means()
        env = self.env
        return {
            "schema": SCHEMA,
            "op": self.op,
            "impl": env.impl,
            "device": env.device,
            "vendor": env.vendor,
            "torch": env.torch,
            "triton": env.triton,
            "performance": env.performance,
            "copy_bandwidth_gbps": env.copy_bandwidth_gbps,
            "rows": [asdict(row) for row in self.rows],
            "arithmetic_mean_speedup": arithmetic,
            "geometric_mean_speedup": geometric,
            "compare_mode": self.compare_mode,
        }

    def to_markdown(self) -> str:
        """The seed's table plus bandwidth columns, then the means."""
        env = self.env
        copy = f"{env.copy_bandwidth_gbps:.1f} GB/s" if env.copy_bandwidth_gbps else "not measured"
        lines = [
            f"### {self.op}",
            "",
            f"Implementation `{env.impl}` (`{env.implementation}`) on {env.device} "
            f"(vendor {env.vendor}); torch {env.torch}, triton {env.triton}; "
            f"copy bandwidth {copy}; timing: {env.timing}.",
            "",
        ]
        if not env.performance:
            lines += [f"**{NOT_PERFORMANCE}**", ""]
        host = any(row.kernel_host_us is not None for row in self.rows)
        reach = any(row.reach_ms is not None for row in self.rows)
        before = any(row.kernel_samples_ms for row in self.rows)
        columns = (
            COLUMNS
            + (HOST_COLUMNS if host else ())
            + (REACH_COLUMNS if reach else ())
            + (BEFORE_COLUMNS if before else ())
        )
        lines.append(_table_line(columns))
        lines.append(_table_line(("---",) * 2 + ("---:",) * (len(columns) - 2)))
        lines += [
            _table_line(
                _cells(row)
                + (_host(row) if host else ())
                + (_reach(row) if reach else ())
                + (_before(row) if before else ())
            )
            for row in self.rows
        ]
        arithmetic, geometric = self.means()
        lines += [
            "",
            _table_line(("Operator", "Arithmetic Mean Speedup", "Geometric Mean Speedup")),
            _table_line(("---", "---:", "---:")),
            _table_line((self.op, _speedup(arithmetic, 2), _speedup(geometric, 2))),
        ]
        return "\n".join(lines) + "\n"


def means(speedups: list[float]) -> tuple[float | None, float | None]:
    """Arithmetic and geometric mean (None, None for no rows)."""
    if not speedups:
        return None, None
    arithmetic = sum(speedups) / len(speedups)
    geometric = math.exp(sum(math.log(s) for s in speedups) / len(speedups))
    return arithmetic, geometric


def shape_text(shape: list[int]) -> str:
    """The seed's way of writing a shape: "1, 1, 8, 8, 8"."""
    return ", ".join(str(n) for n in shape)


def _cells(row: Row) -> tuple[str, ...]:
    return (
        row.dtype,
        f"{shape_text(row.size)} → {shape_text(row.output_size)}",
        f"{row.reference_ms:.6f}",
        f"{row.kernel_ms:.6f}",
        _speedup(row.speedup, 3),
        _gbps(row.gbps),
        "—" if row.bandwidth_fraction is None else f"{row.bandwidth_fraction * 100:.1f}%",
    )


def _host(row: Row) -> tuple[str, str]:
    return tuple(  # type: ignore[return-value]
        "—" if v is None else f"{v:.1f}" for v in (row.reference_host_us, row.kernel_host_us)
    )


def _reach(row: Row) -> tuple[str, str]:
    if row.reach_ms is None:
        return "—", "—"
    return f"{row.reach_ms:.6f}", f"{row.kernel_ms / row.reach_ms:.2f}x"


def _before(row: Row) -> tuple[str, str, str]:
    rounds = str(len(row.kernel_samples_ms or ()))
    if row.before_kernel_ms is None:
        return "—", "—", rounds
    return f"{row.before_kernel_ms:.6f}", f"{row.kernel_ms / row.before_kernel_ms:.3f}", rounds


def _gbps(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.1f}" if value >= 1 else f"{value:.3g}"


def _speedup(value: float | None, digits: int) -> str:
    if value is None:
        return "—"
    # The seed's fixed decimals from 1 up; below, three significant digits (interpreter
    # timings can be thousands of times slower and would all read 0.000x).
    return f"{value:.{digits}f}x" if value >= 1 else f"{value:.3g}x"


def _table_line(cells: tuple[str, ...]) -> str:
    return "| " + " | ".join(cells) + " |"
