"""The soak's count of the service's GitHub calls (tools/soak/collect.py github_calls): from
the sandbox's call log, the rate against the App's hourly budget and the busiest endpoints."""

from __future__ import annotations

from tools.soak import collect


def _call(second: int, method: str, path: str, login: str | None = "ondemand[bot]") -> dict:
    return {"at": f"2026-12-05T10:00:{second:02d}Z", "method": method, "path": path,
            "status": 200, "login": login}  # fmt: skip


def test_calls_are_counted_by_rate_and_endpoint_and_anonymous_ones_left_out() -> None:
    calls = [_call(0, "GET", "/repos/acme/a/pulls/7")]
    calls += [_call(i, "POST", f"/repos/acme/a/issues/comments/{100 + i}/reactions") for i in
              range(1, 31)]  # fmt: skip
    calls += [_call(30, "GET", "/repos/acme/a/collaborators/alice/permission?x=1")]
    calls += [_call(45, "GET", "/zen", login=None)]  # the soak's own probe: not the service's
    found = collect.github_calls({"api_calls": calls}, commands=8, minutes=0.5)
    assert found["calls"] == 32 and found["complete"]
    assert found["span_min"] == 0.5 and found["per_minute"] == 64.0
    assert found["per_hour_at_that_rate"] == 3840 and found["per_command"] == 4.0
    busiest = next(iter(found["busiest"].items()))
    assert busiest == ("POST /repos/acme/a/issues/comments/N/reactions", 30)
    assert "GET /repos/acme/a/collaborators/alice/permission" in found["busiest"]


def test_a_full_log_is_a_floor_and_an_empty_one_says_none() -> None:
    full = [_call(i % 60, "GET", "/repos/acme/a") for i in range(collect.KEPT_CALLS)]
    assert collect.github_calls({"api_calls": full}, commands=1, minutes=1)["complete"] is False
    assert collect.github_calls({"api_calls": []}, commands=0, minutes=1) == {"calls": 0}
