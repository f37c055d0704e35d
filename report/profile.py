"""The comment's Profile section (`/test profile`): per profiled row, each kernel's device
time per call before → after and its change, and the host time per call around them; marked
as no part of the verdict, with the link to the traces on the job's page."""

from __future__ import annotations

from report.limits import Limits
from report.markdown import code_span, escape_text, link
from report.text import micros
from report.views import JobView
from workflows.models import KernelTime, ProfiledRow, ProfileResult

MIN_KERNELS = 3  # kernels shown per row at the tightest limits
TRACES_ANCHOR = "#profile"


def profile_section(profile: ProfileResult | None, view: JobView, limits: Limits) -> list[str]:
    """The section, or nothing where the job profiled nothing."""
    if profile is None:
        return []
    traces = link("the job's page", f"{view.job_url}{TRACES_ANCHOR}")
    activities = escape_text(profile.profiler.replace(",", ", "), 100)
    where = f"the profiler ({activities})" if activities else "the profiler"
    parts = [
        "#### Profile",
        f"_Not part of the verdict: the rows that changed most, timed under {where} on the "
        f"merge base and on this pull request. Traces (Chrome JSON, Perfetto opens them): "
        f"{traces}._",
    ]
    if not profile.rows:
        parts.append(escape_text(profile.message or "Nothing was profiled.", 300))
        return parts
    shown = max(MIN_KERNELS, limits.rows // 20)
    for row in profile.rows:
        parts.append(_row_heading(row))
        parts.append(_kernels_table(row.kernels[:shown]))
    return parts


def _row_heading(row: ProfiledRow) -> str:
    label = escape_text(f"{row.dtype} [{', '.join(str(n) for n in row.size)}]", 200)
    words = [f"**{label}**"]
    if row.ratio is not None:
        words.append(f"(benchmark: {_percent(row.ratio)})")
    host = _arrow(row.before_host_us, row.after_host_us)
    if host:
        words.append(f"· host time per call {host}")
    return " ".join(words)


def _kernels_table(kernels: list[KernelTime]) -> str:
    if not kernels:
        return "_No kernel was recorded._"
    lines = [
        "| kernel | calls | time per call before → after | change |",
        "|---|---|---|---|",
    ]
    for k in kernels:
        calls = k.after_calls if k.after_calls is not None else k.before_calls
        change = _change(k.before_us, k.after_us)
        lines.append(
            f"| {code_span(k.name, 120, table=True)} | {_calls(calls)} | "
            f"{_arrow(k.before_us, k.after_us)} | {change} |"
        )
    return "\n".join(lines)


def _arrow(before: float | None, after: float | None) -> str:
    if before is None and after is None:
        return ""
    return f"{_us(before)} → {_us(after)}"


def _us(value: float | None) -> str:
    return "—" if value is None else micros(value)


def _calls(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:g}"


def _change(before: float | None, after: float | None) -> str:
    if before is None:
        return "new"
    if after is None:
        return "gone"
    if before <= 0:
        return "—"
    return _percent(after / before)


def _percent(ratio: float) -> str:
    """`+98 % slower`, `−12 % faster`, `±0 %`."""
    change = (ratio - 1) * 100
    if abs(change) < 0.5:
        return "±0 %"
    return f"+{change:.0f} % slower" if change > 0 else f"−{-change:.0f} % faster"
