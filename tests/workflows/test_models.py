"""The wire models' tolerance of a newer peer (`known_part`): what one side adds later is left
out by the other, named, at any depth, list items included; any other error still refuses."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from workflows.models import JobResult, known_part


def test_unknown_fields_are_left_out_and_named_at_any_depth() -> None:
    data = {
        "status": "failed", "sha": "a" * 40, "future": 1,
        "steps": [{"name": "accuracy", "status": "failed", "cost": 3}],
        "accuracy": {"passed": 1, "proof": {"prefix": "P", "specialization": None, "hash": "x"}},
    }  # fmt: skip
    result, dropped = known_part(JobResult, data)
    assert sorted(dropped) == ["accuracy.proof.hash", "future", "steps.0.cost"]
    assert result.steps[0].name == "accuracy" and result.accuracy is not None
    assert result.accuracy.proof is not None and result.accuracy.proof.prefix == "P"
    assert data["future"] == 1  # the caller's data is left as it was


def test_anything_else_wrong_still_refuses() -> None:
    with pytest.raises(ValidationError, match="status"):
        known_part(JobResult, {"status": "splendid", "sha": "a" * 40, "future": 1})
    assert known_part(JobResult, {"status": "succeeded", "sha": "b" * 40})[1] == []
