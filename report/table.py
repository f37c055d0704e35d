"""The result table of a benchmark, built from column specifications: each column is one entry
of `COLUMNS` (its header, when the table has it, and its cell), so a new column is one entry.

The seed's columns (`dtype | Size | Torch Latency (ms) | Kernel Latency (ms) | Speedup`, the
output size in the Size cell as `in → out`), then GB/s and % of copy bandwidth when measured
on a device; with the merge base compared, the kernel latency before → after and, on a
device, the change with its noise band (📉 slower, 📈 faster beyond it, 〰️ too noisy to
judge) and the rounds it took. Under the interpreter the speedup column is left out: its
latencies say nothing of a device.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from report.limits import Limits
from report.markdown import ELLIPSIS, escape_text
from report.text import FASTER, NOISY, SLOWER, arrow, millis, size_text, times
from report.verdicts import Judged, Verdict, band_text, percent
from workflows.models import BenchmarkRow


@dataclass(frozen=True)
class Table:
    """What the columns' conditions and cells read: the rows, whether the merge base was
    compared, whether the timings are a device's (not the interpreter's), and each row's
    verdict by the row's `id`."""

    rows: Sequence[BenchmarkRow]
    compare: bool
    performance: bool = True
    verdicts: Mapping[int, Judged] = field(default_factory=dict)

    @property
    def before(self) -> bool:
        """The merge base's kernel latency is shown beside this commit's."""
        return self.compare and any(r.before_kernel_ms is not None for r in self.rows)

    @property
    def change(self) -> bool:
        """Each row's change is shown with its noise band and rounds."""
        return self.before and bool(self.verdicts)

    @property
    def gbps(self) -> bool:
        return self.performance and any(r.gbps is not None for r in self.rows)

    @property
    def bandwidth(self) -> bool:
        return self.performance and any(r.bandwidth_fraction is not None for r in self.rows)

    def judged(self, row: BenchmarkRow) -> Judged | None:
        return self.verdicts.get(id(row))


@dataclass(frozen=True)
class Column:
    """One column: its header, whether a table has it, and a row's cell in it."""

    header: str
    cell: Callable[[BenchmarkRow, Table], str]
    applies: Callable[[Table], bool] = lambda table: True


def _change_cell(judged: Judged | None) -> str:
    """`+23.1 % ±2.0 % 📉`, `-0.4 % ±1.1 %`, `+8.0 % ±31.0 % 〰️ too noisy`; a host-bound
    row's host change beside its device change, each with its own mark where processes
    judged the host (`device +0.2 % ±0.9 % · host +21.0 % ±6.0 % 📉`, `… · host +3.0 %
    ±24.0 % 〰️ host too noisy`), bare where it is only shown (one process a side)."""
    if judged is None:
        return "–"
    text = f"{percent(judged.change)} {band_text(judged.change)}" + _mark(judged.device_verdict)
    if judged.host_change is None:
        return text
    host = judged.host_change
    shown = f"device {text} · host {percent(host)} {band_text(host)}"
    if judged.host_verdict is Verdict.noisy:
        return f"{shown} {NOISY} host too noisy"
    return shown + (_mark(judged.host_verdict) if judged.host_verdict is not None else "")


_MARK = {Verdict.slower: f" {SLOWER}", Verdict.faster: f" {FASTER}", Verdict.same: ""}


def _mark(verdict: Verdict) -> str:
    return f" {NOISY} too noisy" if verdict is Verdict.noisy else _MARK[verdict]


def _rounds_cell(judged: Judged | None) -> str:
    return str(judged.change.rounds) if judged else "–"


def _speedup_cell(row: BenchmarkRow) -> str:
    """`1.920x`, with the 95 % interval of its median over rounds where known:
    `1.920x (1.85–2.01)`."""
    text = times(row.speedup)
    if row.speedup_low is not None and row.speedup_high is not None:
        text += f" ({row.speedup_low:.2f}–{row.speedup_high:.2f})"
    return text


def _gbps_cell(row: BenchmarkRow) -> str:
    return f"{row.gbps:.1f}" if row.gbps is not None else "–"


def _bandwidth_cell(row: BenchmarkRow) -> str:
    frac = row.bandwidth_fraction
    return f"{frac * 100:.0f}%" if frac is not None else "–"


COLUMNS = (
    Column("dtype", lambda row, t: escape_text(row.dtype, 40)),
    Column("Size", lambda row, t: size_text(row)),
    Column("Torch Latency (ms)", lambda row, t: millis(row.reference_ms)),
    Column("Kernel Latency (ms)", lambda row, t: millis(row.kernel_ms), lambda t: not t.before),
    Column(
        "Kernel Latency (ms) before → after",
        lambda row, t: arrow(row.before_kernel_ms, row.kernel_ms, millis),
        lambda t: t.before,
    ),
    Column("Change (95 %)", lambda row, t: _change_cell(t.judged(row)), lambda t: t.change),
    Column("Rounds", lambda row, t: _rounds_cell(t.judged(row)), lambda t: t.change),
    Column("Speedup", lambda row, t: _speedup_cell(row), lambda t: t.performance),
    Column("GB/s", lambda row, t: _gbps_cell(row), lambda t: t.gbps),
    Column("% of copy bandwidth", lambda row, t: _bandwidth_cell(row), lambda t: t.bandwidth),
)


def render_table(
    rows: Sequence[BenchmarkRow],
    limits: Limits,
    compare: bool,
    performance: bool = True,
    verdicts: Mapping[int, Judged] | None = None,
    columns: Sequence[Column] = COLUMNS,
) -> str:
    """The table of `rows` (the first `limits.rows`; a line counts the rest) with the
    `columns` that apply to it; `verdicts` are the compared rows' by the row's `id`."""
    table = Table(rows, compare, performance, verdicts or {})
    shown = [c for c in columns if c.applies(table)]
    lines = ["| " + " | ".join(c.header for c in shown) + " |", "|" + "---|" * len(shown)]
    for row in rows[: limits.rows]:
        lines.append("| " + " | ".join(c.cell(row, table) for c in shown) + " |")
    more = len(rows) - min(len(rows), limits.rows)
    text = "\n".join(lines)
    if more > 0:
        text += f"\n\n{ELLIPSIS} {more} more rows on the job page."
    return text
