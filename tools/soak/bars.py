"""The hour's bars from a soak's figures, scaled to its length: pure, so a recorded run's JSON
is read back the same way (`python -m tools.soak.bars soak.json`).

Commands and faults are counted per minute of load (at least 1,000 and 40 in an hour); every
fault kind must have come in a run of half an hour or more; the webhook's p99 outside
PostgreSQL's restarts stays under a second; the witness replica (never killed) holds its
memory within 20 % from minute 10 to the end, judged in runs of 20 minutes or more. The
invariants are the table's; these say whether the run was the load and the fire it claims."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.soak.faults import KINDS

COMMANDS_AN_HOUR = 1000
FAULTS_AN_HOUR = 40
P99_MS = 1000.0
RSS_CHANGE = 0.20
EVERY_KIND_FROM_MIN = 30
MEMORY_FROM_MIN = 20


@dataclass(frozen=True)
class Bar:
    name: str
    value: str
    ok: bool | None  # None: not judged in a run this short


def bars(figures: dict[str, Any]) -> list[Bar]:
    minutes = float(figures["minutes"])
    need_commands = COMMANDS_AN_HOUR * minutes / 60
    need_faults = FAULTS_AN_HOUR * minutes / 60
    faults: dict[str, int] = figures["faults"]
    missing = sorted(set(KINDS) - set(faults))
    p99 = figures.get("webhook_p99_ms")
    out = [
        Bar(f"commands ≥ {need_commands:.0f}", str(figures["commands"]),
            figures["commands"] >= need_commands),
        Bar(f"faults ≥ {need_faults:.0f}", str(sum(faults.values())),
            sum(faults.values()) >= need_faults),
        Bar("every kind of fault", "missing: " + ", ".join(missing) if missing else "all",
            not missing if minutes >= EVERY_KIND_FROM_MIN else None),
        Bar(f"webhook p99 < {P99_MS:.0f} ms (outside PostgreSQL restarts)", f"{p99} ms",
            p99 is not None and p99 < P99_MS),
    ]  # fmt: skip
    witness = figures.get("witness")
    memory = (figures.get("memory") or {}).get(witness) if witness else None
    if memory and memory.get("change") is not None:
        value = (f"{witness} {memory['mib_from']} → {memory['mib_to']} MiB "
                 f"({memory['change']:+.1%}, minute {memory['from_minute']:.0f} to "
                 f"{memory['to_minute']:.0f})")  # fmt: skip
        judged = minutes >= MEMORY_FROM_MIN
        out.append(Bar(f"witness memory within ±{RSS_CHANGE:.0%}", value,
                       abs(memory["change"]) <= RSS_CHANGE if judged else None))  # fmt: skip
    else:
        out.append(Bar(f"witness memory within ±{RSS_CHANGE:.0%}", "not sampled", None))
    return out


def render(found: list[Bar]) -> str:
    mark = {True: "✅", False: "❌", None: "–"}
    lines = ["| bar | measured | |", "|---|---|---|"]
    lines += [f"| {b.name} | {b.value} | {mark[b.ok]} |" for b in found]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m tools.soak.bars SOAK.json", file=sys.stderr)
        return 2
    figures = json.loads(Path(args[0]).read_text())["figures"]
    found = bars(figures)
    print(render(found))
    return 1 if any(b.ok is False for b in found) else 0


if __name__ == "__main__":
    raise SystemExit(main())
