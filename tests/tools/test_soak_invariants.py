"""The soak's invariant checker on recorded event logs: a clean log passes, and each planted
violation (a duplicate result comment, a delivery never answered 2xx, a job run again after
its verdict, an outsider's job, a verdict shown running again, a stopped job that does not
say why, a verdict on the wrong job, a broken runner not drained or claiming while drained)
is caught by the invariant that owns it, in JSON form as well."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tools.soak.events import Record
from tools.soak.invariants import check_all, render_table, webhook_p99_ms

BOT = "ondemand[bot]"
REPO = "acme/soak-a"
HEAD = "a" * 40
NEXT = "b" * 40
T0 = 1_800_000_000.0


def _result(op: str, emoji: str, words: str, job: int, sha: str = HEAD) -> str:
    return (
        f"<!-- ondemand:{op}:cpu -->\n\n### {emoji} `{op}` on `cpu`: {words}\n\n"
        f"Commit `{sha[:7]}` · [job #{job}](http://soak/jobs/{job}) · "
        f"[full log](http://soak/jobs/{job}/log)\n"
    )


def clean_log() -> dict[str, Any]:
    """A recorded soak in JSON: a maintainer's `/test alpha:cpu` (its first delivery met a
    503 and was redelivered) that passed; `/test beta:cpu` superseded by a push; an outsider
    refused; a command in a code block left alone; a forged signature refused. runner-3's job
    Python was gone: it handed job 1 back, was drained (after one, here), then undrained; job 1
    ran on runner-1."""
    alpha = [
        _result("alpha", "⏳", "queued, position 1 on cpu", 1),
        _result("alpha", "🏃", "running on runner-1: accuracy, 1/2 tests", 1),
        _result("alpha", "✅", "2 passed · latencies only (Triton interpreter)", 1),
    ]
    beta = [
        _result("beta", "⏳", "queued, position 2 on cpu", 2),
        _result("beta", "⛔", "superseded by bbbbbbb", 2),
    ]
    refusal = "<!-- ondemand:reply:d-101 -->\n@\u2060outsider may not start jobs here."
    return {
        "seed": 7,
        "mode": "app",
        "bot": BOT,
        "outsiders": ["outsider", "stranger"],
        "expected": {"alpha": "succeeded", "beta": "succeeded", "gamma": "failed"},
        "sent": [
            {"at": T0, "kind": "open", "repo": REPO, "pr": 1, "detail": HEAD},
            {"at": T0 + 1, "kind": "test", "repo": REPO, "pr": 1, "user": "maint-1",
             "comment_id": 100, "body": "/test alpha:cpu", "trusted": True, "command": True},
            {"at": T0 + 2, "kind": "outsider", "repo": REPO, "pr": 1, "user": "outsider",
             "comment_id": 101, "body": "/test beta:cpu", "trusted": False, "command": True},
            {"at": T0 + 3, "kind": "hostile", "repo": REPO, "pr": 1, "user": "maint-2",
             "comment_id": 102, "body": "```\n/test beta:cpu\n```", "trusted": True,
             "command": False},
            {"at": T0 + 4, "kind": "test", "repo": REPO, "pr": 1, "user": "maint-2",
             "comment_id": 103, "body": "/test beta:cpu", "trusted": True, "command": True},
            {"at": T0 + 21, "kind": "push", "repo": REPO, "pr": 1, "detail": NEXT},
            {"at": T0 + 6, "kind": "direct", "repo": "", "pr": 0,
             "detail": "bad signature: expected 401, answered 401"},
        ],
        "redeliveries": [[T0 + 8, "d-100"]],
        "deliveries": [
            {"id": "d-100", "event": "issue_comment", "action": "created", "comment_id": 100,
             "attempts": [{"at": T0 + 1, "status": 503, "ms": 12},
                          {"at": T0 + 8, "status": 202, "ms": 30}]},
            {"id": "d-101", "event": "issue_comment", "action": "created", "comment_id": 101,
             "attempts": [{"at": T0 + 2, "status": 202, "ms": 25}]},
            {"id": "d-102", "event": "issue_comment", "action": "created", "comment_id": 102,
             "attempts": [{"at": T0 + 3, "status": 200, "ms": 4}]},
            {"id": "d-103", "event": "issue_comment", "action": "created", "comment_id": 103,
             "attempts": [{"at": T0 + 4, "status": 202, "ms": 20}]},
            {"id": "d-104", "event": "pull_request", "action": "synchronize", "repo": REPO,
             "pr": 1, "head": NEXT, "attempts": [{"at": T0 + 21, "status": 202, "ms": 900}]},
        ],
        "comments": [
            {"id": 100, "repo": REPO, "pr": 1, "user": "maint-1", "body": "/test alpha:cpu",
             "bodies": ["/test alpha:cpu"], "reactions": [[BOT, "eyes"]]},
            {"id": 101, "repo": REPO, "pr": 1, "user": "outsider", "body": "/test beta:cpu",
             "bodies": ["/test beta:cpu"], "reactions": [[BOT, "eyes"]]},
            {"id": 102, "repo": REPO, "pr": 1, "user": "maint-2",
             "body": "```\n/test beta:cpu\n```", "bodies": [], "reactions": []},
            {"id": 103, "repo": REPO, "pr": 1, "user": "maint-2", "body": "/test beta:cpu",
             "bodies": ["/test beta:cpu"], "reactions": [[BOT, "eyes"]]},
            {"id": 200, "repo": REPO, "pr": 1, "user": BOT, "body": alpha[-1], "bodies": alpha},
            {"id": 201, "repo": REPO, "pr": 1, "user": BOT, "body": refusal,
             "bodies": [refusal]},
            {"id": 202, "repo": REPO, "pr": 1, "user": BOT, "body": beta[-1], "bodies": beta},
        ],
        "statuses": [],
        "check_runs": [
            {"id": 300, "repo": REPO, "head_sha": HEAD, "name": "ondemand/alpha:cpu",
             "external_id": "1", "status": "completed", "conclusion": "success"},
            {"id": 301, "repo": REPO, "head_sha": HEAD, "name": "ondemand/beta:cpu",
             "external_id": "2", "status": "completed", "conclusion": "neutral"},
            {"id": 302, "repo": REPO, "head_sha": HEAD, "name": "ondemand",
             "external_id": f"head:{HEAD}", "status": "completed", "conclusion": "success"},
        ],
        "jobs": [
            {"id": 1, "repo": REPO, "pr": 1, "sha": HEAD, "op": "alpha", "backend": "cpu",
             "status": "succeeded", "requested_by": "maint-1", "command_comment_id": 100,
             "created_at": T0 + 9, "finished_at": T0 + 20},
            {"id": 2, "repo": REPO, "pr": 1, "sha": HEAD, "op": "beta", "backend": "cpu",
             "status": "superseded", "reason": "superseded by bbbbbbb",
             "requested_by": "maint-2", "command_comment_id": 103, "created_at": T0 + 4.5,
             "finished_at": T0 + 21.5},
        ],
        "drain_after": 1,
        "runs": [
            {"at": T0 + 9.2, "runner": "runner-3", "job_id": 1, "what": "start",
             "detail": "alpha"},
            {"at": T0 + 9.5, "runner": "runner-3", "job_id": 0, "what": "drained",
             "detail": "1"},
            {"at": T0 + 9.6, "runner": "runner-3", "job_id": 1, "what": "end",
             "detail": "errored"},
            {"at": T0 + 9.7, "runner": "runner-3", "job_id": 1, "what": "handed_back",
             "detail": "queued"},
            # Requeued before runner-3 logged the service's answer to its hand-back.
            {"at": T0 + 9.65, "runner": "runner-1", "job_id": 1, "what": "start",
             "detail": "alpha"},
            {"at": T0 + 19, "runner": "runner-1", "job_id": 1, "what": "end",
             "detail": "succeeded"},
            {"at": T0 + 19.5, "runner": "runner-1", "job_id": 1, "what": "reported",
             "detail": "succeeded"},
            {"at": T0 + 30, "runner": "runner-3", "job_id": 0, "what": "undrained",
             "detail": "undrained by an operator (its drain record was removed)"},
        ],
        "server_answers": 120,
        "faults": [
            {"kind": "pg_restart", "target": "postgres", "start": T0 + 20, "end": T0 + 22,
             "detail": "down 2s"},
            {"kind": "runner_python", "target": "runner-3", "start": T0 + 9, "end": T0 + 30,
             "detail": "job Python gone 21s; undrained"},
        ],
    }  # fmt: skip


def failed(log: dict[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each failing invariant's violations."""
    return {c.name: c.violations for c in check_all(Record.from_json(log)) if not c.ok}


def test_a_clean_log_passes() -> None:
    checks = check_all(Record.from_json(clean_log()))
    assert [c.name for c in checks if not c.ok] == [], render_table(checks)
    assert all(c.checked > 0 for c in checks), render_table(checks)


def test_the_record_survives_its_json_form() -> None:
    record = Record.from_json(clean_log())
    again = Record.from_json(copy.deepcopy(record.to_json()))
    assert again == record


def test_a_duplicate_result_comment_is_caught() -> None:
    log = clean_log()
    twin = {**log["comments"][4], "id": 250}
    log["comments"].append(twin)
    found = failed(log)
    assert set(found) == {
        "no duplicate comment, status, check run or 👀",
        "one result comment per target, with its verdict",
    }
    assert found["no duplicate comment, status, check run or 👀"] == (
        f"{REPO}#1: 2 comments <!-- ondemand:alpha:cpu -->",
    )


def test_a_head_whose_one_check_is_missing_doubled_or_wrong_is_caught() -> None:
    name = "one ondemand check per head, matching its jobs"
    log = clean_log()
    log["check_runs"][0]["conclusion"] = "failure"  # alpha's own check failed; the head's: green
    assert failed(log)[name] == (
        f"{REPO}@{HEAD[:7]}: `ondemand` says success; its jobs (#1 failure) say failure",
    )
    log = clean_log()
    log["check_runs"].append({**log["check_runs"][2], "id": 303})
    assert failed(log)[name] == (f"{REPO}@{HEAD[:7]}: 2 `ondemand` check runs, not one",)
    log = clean_log()
    del log["check_runs"][2]
    assert failed(log)[name] == (f"{REPO}@{HEAD[:7]}: 0 `ondemand` check runs, not one",)


def test_a_lost_delivery_is_caught() -> None:
    log = clean_log()
    log["deliveries"].append(
        {"id": "d-105", "event": "issue_comment", "action": "created", "comment_id": 104,
         "attempts": [{"at": T0 + 30, "status": 503, "ms": 3},
                      {"at": T0 + 34, "status": None, "ms": 10000}]}
    )  # fmt: skip
    assert failed(log) == {
        "no delivery lost": (
            "delivery d-105 (issue_comment created) never answered 2xx: [503, None]",
        )
    }


def test_a_job_run_again_after_its_verdict_is_caught() -> None:
    log = clean_log()
    log["runs"].append(
        {"at": T0 + 40, "runner": "runner-2", "job_id": 1, "what": "start", "detail": "alpha"}
    )
    found = failed(log)
    assert list(found) == ["no job run again after its verdict"]
    assert "job #1 started on runner-2 20.0s after its verdict" in found[next(iter(found))][0]


def test_a_verdict_shown_running_again_is_caught() -> None:
    log = clean_log()
    alpha = log["comments"][4]
    again = _result("alpha", "🏃", "running on runner-3", 1)
    alpha["bodies"] = [*alpha["bodies"], again, alpha["body"]]
    found = failed(log)
    assert list(found) == ["no job run again after its verdict"]


def test_an_outsiders_job_and_a_job_from_code_are_caught() -> None:
    log = clean_log()
    log["jobs"] += [
        {"id": 3, "repo": REPO, "pr": 1, "sha": HEAD, "op": "gamma", "backend": "cpu",
         "status": "failed", "requested_by": "outsider", "command_comment_id": 101,
         "created_at": T0 + 3, "finished_at": T0 + 12},
        {"id": 4, "repo": REPO, "pr": 1, "sha": HEAD, "op": "delta", "backend": "cpu",
         "status": "succeeded", "requested_by": "maint-2", "command_comment_id": 102,
         "created_at": T0 + 3, "finished_at": T0 + 12},
    ]  # fmt: skip
    found = failed(log)["outsiders and non-commands never ran"]
    assert len(found) == 2
    assert "outsider, who may not" in found[0] and "which has no command" in found[1]


def test_unanswered_commands_and_stopped_jobs_that_do_not_say_why_are_caught() -> None:
    log = clean_log()
    log["comments"][0]["reactions"] = []  # no 👀 on the maintainer's command
    log["comments"][5]["body"] = "<!-- ondemand:reply:d-999 -->\nnot this one"  # no reply
    log["comments"][6]["body"] = _result("beta", "⛔", "cancelled", 2)  # not why it stopped
    log["check_runs"][1]["conclusion"] = "success"
    found = failed(log)
    assert found["every accepted command answered"] == (
        f"{REPO}#1 comment 100 (test: /test alpha:cpu): 0 👀 from the bot",
        f"{REPO}#1 comment 101 (outsider: /test beta:cpu): no job and no reply",
    )
    assert len(found["cancelled and superseded jobs say so"]) == 2


def test_a_reaction_left_out_for_the_budget_is_not_missing_but_one_sent_too_is() -> None:
    log = clean_log()
    log["comments"][0]["reactions"] = []  # no 👀: the outbox left it out, the budget low
    log["reactions_left_out"] = [100]
    assert "every accepted command answered" not in failed(log)
    log["comments"][0]["reactions"] = [[BOT, "eyes"]]  # and yet one went out
    assert failed(log)["every accepted command answered"] == (
        f"{REPO}#1 comment 100 (test: /test alpha:cpu): 1 👀 from the bot",
    )


def test_a_job_left_running_and_a_stale_comment_are_caught() -> None:
    log = clean_log()
    log["jobs"][0] = {**log["jobs"][0], "status": "running", "finished_at": None}
    found = failed(log)
    assert found["every job terminal, on GitHub too"] == (
        f"job #1 ({REPO}#1 alpha) is still running",
    )
    assert found["one result comment per target, with its verdict"] == (
        f"{REPO}#1 alpha:cpu: job #1 is running, the comment says ✅ `alpha` on `cpu`: 2 "
        "passed · latencies only (Triton interpreter)",
    )


def test_an_internal_error_is_caught() -> None:
    log = clean_log()
    log["server_errors"] = ["replica-2: 500 to POST /api/v1/jobs/23/complete"]
    assert failed(log) == {
        "no 500 from the service": ("replica-2: 500 to POST /api/v1/jobs/23/complete",)
    }


def test_a_deadlock_is_caught() -> None:
    log = clean_log()
    log["deadlocks"] = ["2026-12-05 05:33:12.970 SELECT outbox.kind … FOR UPDATE"]
    assert list(failed(log)) == ["no deadlock in PostgreSQL"]


def test_a_verdict_on_the_wrong_job_is_caught() -> None:
    log = clean_log()
    log["jobs"][0]["status"] = "failed"
    log["comments"][4]["body"] = _result("alpha", "❌", "1 failed", 1)
    assert failed(log) == {
        "verdicts match the code": (f"job #1 ({REPO}#1 alpha) failed; its code is succeeded",)
    }


def test_a_verdict_on_a_head_the_pull_request_left_is_caught() -> None:
    """A job made as the push was taken in (a race the supersede missed) runs to a verdict on
    the old head; another runs on a closed pull request."""
    log = clean_log()
    log["jobs"] += [
        {"id": 3, "repo": REPO, "pr": 1, "sha": HEAD, "op": "delta", "backend": "cpu",
         "status": "succeeded", "requested_by": "maint-1", "created_at": T0 + 21,
         "finished_at": T0 + 60},
        {"id": 4, "repo": REPO, "pr": 1, "sha": NEXT, "op": "alpha", "backend": "cpu",
         "status": "succeeded", "requested_by": "maint-1", "created_at": T0 + 40,
         "finished_at": T0 + 75},
    ]  # fmt: skip
    log["sent"].append({"at": T0 + 45, "kind": "close", "repo": REPO, "pr": 1})
    log["deliveries"].append(
        {"id": "d-106", "event": "pull_request", "action": "closed", "repo": REPO, "pr": 1,
         "head": NEXT, "attempts": [{"at": T0 + 45, "status": 202, "ms": 20}]}
    )  # fmt: skip
    log["comments"].append(
        {"id": 303, "repo": REPO, "pr": 1, "user": BOT, "body": _result("delta", "✅", "ok", 3)}
    )
    log["comments"][4]["body"] = _result("alpha", "✅", "passed", 4)
    log["check_runs"] += [
        {
            "id": 400 + job,
            "repo": REPO,
            "head_sha": HEAD,
            "name": "n",
            "external_id": str(job),
            "status": "completed",
            "conclusion": "success",
        }
        for job in (3, 4)
    ] + [
        {
            "id": 410,
            "repo": REPO,
            "head_sha": NEXT,
            "name": "ondemand",
            "external_id": f"head:{NEXT}",
            "status": "completed",
            "conclusion": "success",
        }
    ]
    found = failed(log)
    assert found == {
        "no verdict on a head the pull request left": (
            f"job #3 ({REPO}#1 delta at aaaaaaa) succeeded 39s after the push of bbbbbbb was "
            "delivered (6s of it PostgreSQL's restart)",
            f"job #4 ({REPO}#1 alpha at bbbbbbb) succeeded 30s after the close was delivered "
            "(0s of it PostgreSQL's restart)",
        )
    }, found


@pytest.mark.parametrize("answered", ["200", "500", "None"])
def test_a_forged_delivery_must_be_refused_as_such(answered: str) -> None:
    log = clean_log()
    log["sent"][-1]["detail"] = f"bad signature: expected 401, answered {answered}"
    assert list(failed(log)) == ["deliveries GitHub never sent refused"]


def test_the_webhook_p99_leaves_out_postgresql_restarts() -> None:
    record = Record.from_json(clean_log())
    p99, counted = webhook_p99_ms(record)
    # The restart's window (and five seconds after it) holds the 900 ms push.
    assert (p99, counted) == (30.0, 5)
    assert webhook_p99_ms(record, exclude=()) == (900.0, 6)


DRAIN = "broken runners drained, their jobs run elsewhere"


def _run(at: float, runner: str, job_id: int, what: str, detail: str = "") -> dict[str, Any]:
    return {"at": T0 + at, "runner": runner, "job_id": job_id, "what": what, "detail": detail}


@pytest.mark.parametrize(
    ("plant", "violation"),
    [
        # Drained, it still started a job.
        (lambda log: log["runs"].append(_run(12, "runner-3", 2, "start", "beta")),
         "runner-3 started job #2 2.5s after its drain"),
        # It never drained, though it handed back as many jobs as it may.
        (lambda log: log["runs"].pop(1),
         "runner-3 handed back 1 jobs in a row, still not drained"),
        # Undrained at once, it took back the job it had handed back.
        (lambda log: log["runs"].extend([_run(9.8, "runner-3", 0, "undrained", "undrained by "
                                              "an operator"), _run(9.9, "runner-3", 1, "start")]),
         "job #1 handed back by runner-3 ran again on runner-3"),
        # Requeued, the job never ran again yet has a verdict.
        (lambda log: log["runs"].pop(4),
         "job #1 handed back by runner-3 was requeued but never ran again, and is succeeded"),
        # Drained by a job it never handed back.
        (lambda log: log["runs"][1].update(detail="2"),
         "runner-3 drained by jobs [2]: not 1 it handed back"),
    ],
)  # fmt: skip
def test_a_broken_runner_not_drained_or_claiming_while_drained_is_caught(
    plant: Any, violation: str
) -> None:
    log = clean_log()
    plant(log)
    assert failed(log)[DRAIN] == (violation,)
