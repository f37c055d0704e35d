"""The soak's bars read from its figures: scaled to the run's length, each able to fail."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.soak.bars import bars, main
from tools.soak.faults import KINDS


def _hour(**changes: Any) -> dict[str, Any]:
    figures: dict[str, Any] = {
        "minutes": 60,
        "commands": 1180,
        "faults": {kind: 5 for kind in KINDS},
        "webhook_p99_ms": 140.0,
        "witness": "replica-1",
        "memory": {"replica-1": {"mib_from": 131.0, "mib_to": 139.5, "change": 0.065,
                                 "from_minute": 10.0, "to_minute": 60.0}},
    }  # fmt: skip
    return {**figures, **changes}


def test_an_hour_that_meets_every_bar() -> None:
    assert all(b.ok for b in bars(_hour()))


def test_each_bar_fails_on_its_own_figure() -> None:
    assert bars(_hour(commands=999))[0].ok is False
    few = {kind: 3 for kind in KINDS}
    assert bars(_hour(faults=few))[1].ok is False  # 3 x 10 kinds < 40
    no_balancer = {k: 6 for k in KINDS if k != "balancer_restart"}
    kinds = bars(_hour(faults=no_balancer))[2]
    assert kinds.ok is False and "balancer_restart" in kinds.value
    assert bars(_hour(webhook_p99_ms=1200.0))[3].ok is False
    leak = {"replica-1": {"mib_from": 131.0, "mib_to": 170.0, "change": 0.298,
                          "from_minute": 10.0, "to_minute": 60.0}}  # fmt: skip
    assert bars(_hour(memory=leak))[4].ok is False


def test_a_short_run_is_scaled_and_leaves_the_hours_bars_unjudged(tmp_path: Path) -> None:
    short = _hour(minutes=3, commands=60, faults={"pg_restart": 1, "replica_kill": 2})
    found = bars(short)
    assert [b.ok for b in found] == [True, True, None, True, None]
    path = tmp_path / "soak.json"
    path.write_text(json.dumps({"figures": _hour(commands=10)}))
    assert main([str(path)]) == 1
