"""tools.sass_stalls: ncu's per-instruction stall samples summed by reason and opcode."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

from tools.sass_stalls import read, summary

ROOT = Path(__file__).resolve().parents[2]
HEADER = [
    "Address", "Source", "Warp Stall Sampling (All Samples)",
    "Warp Stall Sampling (Not-issued Samples)", "Instructions Executed",
    "stall_long_sb", "stall_wait", "stall_math", "stall_long_sb (Not Issued)",
]  # fmt: skip


def write(path: Path, rows: list[list[object]]) -> Path:
    with path.open("w", newline="") as f:
        out = csv.writer(f, quoting=csv.QUOTE_ALL)
        out.writerow(["Kernel Name", "walk_kernel", ""])
        out.writerow(HEADER)
        out.writerows(rows)
    return path


def test_samples_are_summed_by_reason_and_opcode_and_the_worst_line_comes_first(
    tmp_path: Path,
) -> None:
    path = write(
        tmp_path / "k.csv",
        [
            ["0x0", "  LDG.E R2, desc[UR4][R2.64]", 5, 5, 100, 1, 4, 0, 1],
            ["0x10", "@!P0  HADD2.F32 R3, -RZ, R2.H0_H0", 30, 28, 100, 27, 0, 3, 27],
            ["0x20", "@P1 BRA 0x0", 15, 15, 400, 0, 15, 0, 0],
            ["0x30", "  ISETP.GE.AND P1, PT, R0, R1, PT", 0, 0, 400, 0, 0, 0, 0],
            ["0x40", "truncated row"],
        ],
    )
    name, lines = read(path)
    assert name == "walk_kernel"
    assert [line.opcode for line in lines] == ["LDG", "HADD2", "BRA", "ISETP"]
    assert lines[1].reasons == {"long_sb": 27, "wait": 0, "math": 3}  # not-issued ones left out
    text = summary(name, lines, top=2)
    assert "4 instructions, 1000 executed (warp level), 50 stall samples" in text
    assert "reasons: long_sb 56%, wait 38%, math 6%" in text
    assert "HADD2 60% 100" in text and "BRA 30% 400" in text
    listed = text.splitlines()[3:]
    assert len(listed) == 2
    assert listed[0].startswith(" 60.0% @!P0  HADD2.F32") and "long_sb=27 math=3" in listed[0]
    assert "BRA" in listed[1] and "wait=15" in listed[1]


def test_a_csv_that_is_not_a_source_page_is_refused_clearly(tmp_path: Path) -> None:
    bad = tmp_path / "details.csv"
    bad.write_text('"ID","Metric Name","Metric Value"\n"0","Duration","17.1"\n')
    done = subprocess.run(
        [sys.executable, "-m", "tools.sass_stalls", str(bad)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "no source-page header" in done.stderr
