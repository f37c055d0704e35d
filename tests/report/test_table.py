"""The result table is built from column specifications: a column is one entry (its header,
when it applies, its cell), so adding one changes nothing else, and the columns that apply
follow from the rows (before → after only where compared, speedups only on a device)."""

from __future__ import annotations

from report.limits import LEVELS
from report.table import COLUMNS, Column, render_table
from workflows.models import BenchmarkRow


def _row(kernel_ms: float, before: float | None = None, **more: object) -> BenchmarkRow:
    return BenchmarkRow(
        dtype="float16",
        size=[2, 3],
        reference_ms=0.004,
        kernel_ms=kernel_ms,
        speedup=0.004 / kernel_ms,
        before_kernel_ms=before,
        **more,
    )


def _header(table: str) -> list[str]:
    return [cell.strip() for cell in table.splitlines()[0].strip("|").split("|")]


def test_the_columns_that_apply_follow_from_the_rows() -> None:
    plain = render_table([_row(0.002)], LEVELS[0], compare=True)
    assert _header(plain) == [
        "dtype",
        "Size",
        "Torch Latency (ms)",
        "Kernel Latency (ms)",
        "Speedup",
    ]
    assert plain.splitlines()[2] == "| float16 | 2, 3 | 0.004000 | 0.002000 | 2.000x |"
    compared = render_table([_row(0.002, before=0.003, gbps=12.0)], LEVELS[0], compare=True)
    assert _header(compared)[3:] == ["Kernel Latency (ms) before → after", "Speedup", "GB/s"]
    assert "| 0.003000 → 0.002000 |" in compared
    interpreter = render_table([_row(0.002)], LEVELS[0], compare=False, performance=False)
    assert "Speedup" not in _header(interpreter)


def test_a_new_column_is_one_entry() -> None:
    launches = Column("Launches", lambda row, t: str(len(row.size)), lambda t: t.performance)
    table = render_table([_row(0.002), _row(0.004)], LEVELS[0], True, columns=(*COLUMNS, launches))
    lines = table.splitlines()
    assert _header(table)[-1] == "Launches" and lines[1] == "|" + "---|" * 6
    assert all(line.endswith("| 2 |") for line in lines[2:])
    off = render_table([_row(0.002)], LEVELS[0], True, False, columns=(*COLUMNS, launches))
    assert "Launches" not in off


def test_rows_past_the_limit_are_counted() -> None:
    rows = [_row(0.001 * (i + 1)) for i in range(LEVELS[2].rows + 3)]
    table = render_table(rows, LEVELS[2], compare=True)
    assert len([line for line in table.splitlines() if line.startswith("| float16")]) == 20
    assert table.endswith("… 3 more rows on the job page.")
