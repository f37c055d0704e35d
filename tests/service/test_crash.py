"""`ondemand serve` killed with SIGKILL in the middle of a command's fan-out, then started
again on the same database: the command is finished within seconds, and every target has
exactly one job, one result comment, and the comment one 👀. On SQLite the restarted service
takes up at once what its previous life left locked (one process serves a SQLite database)."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from pathlib import Path

from devtools.stack import Stack, free_port
from tests.service.test_flow import BOT, REPO, SECRET, sandbox_world

# 16 targets each: the most one command may start. A host busy enough to let a whole fan-out
# through before the lock is taken gets the next command instead.
TRIES = [[f"op{t}_{c}" for c in "abcdefghijklmnop"] for t in range(3)]


def _jobs(db: Path) -> int:
    with sqlite3.connect(db, timeout=0.1) as conn:
        try:
            return int(conn.execute("SELECT count(*) FROM jobs").fetchone()[0])
        except sqlite3.OperationalError:  # not migrated yet, or busy
            return 0


def test_a_sigkill_mid_fan_out_is_finished_after_restart_exactly_once(tmp_path: Path) -> None:
    db = tmp_path / "ondemand.db"
    stack = Stack(tmp_path)
    with sandbox_world(tmp_path) as world:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        env = {
            "ONDEMAND_DATABASE_URL": f"sqlite:///{db}",
            "ONDEMAND_GITHUB_API_URL": world.url,
            "ONDEMAND_GITHUB_TOKEN": world.auth["github_token"],
            "ONDEMAND_BOT_LOGIN": BOT,
            "ONDEMAND_WEBHOOK_SECRETS": SECRET,
            "ONDEMAND_REGISTRATION_TOKENS": "reg",
            "ONDEMAND_PUBLIC_URL": url,
            "ONDEMAND_DEFAULT_BACKENDS": "cpu",
        }
        argv = ["serve", "--port", str(port), "--log-level", "warning"]
        try:
            first = stack.start("service-1", argv, env)
            stack.wait_http(first, f"{url}/healthz")
            world.admin.set_webhook(f"{url}/webhook", SECRET)
            holder = sqlite3.connect(db, timeout=10, isolation_level=None)
            OPS: list[str] = []
            for ops in TRIES:
                before = len(OPS)
                OPS += ops
                world.admin.comment(
                    REPO, world.pr, "alice", "/test " + " ".join(f"{o}:cpu" for o in ops)
                )
                # Once the command's first job is in, hold SQLite's write lock so the fan-out
                # stops where it is, and kill the service there. The count is read under the
                # lock itself (taken, looked at, given back until a job is there).
                deadline = time.monotonic() + 20
                while True:
                    holder.execute("BEGIN IMMEDIATE")
                    made = int(holder.execute("SELECT count(*) FROM jobs").fetchone()[0])
                    if made > before:
                        break
                    holder.execute("ROLLBACK")
                    assert time.monotonic() < deadline, first.log_tail()
                    time.sleep(0.002)
                if made < len(OPS):
                    break  # mid fan-out
                holder.execute("ROLLBACK")  # the whole fan-out slipped through: again
            os.killpg(first.popen.pid, signal.SIGKILL)
            first.popen.wait(timeout=10)
            holder.execute("ROLLBACK")
            holder.close()
            assert before < made < len(OPS), (before, made)  # killed mid fan-out

            second = stack.start("service-2", argv, env)
            stack.wait_http(second, f"{url}/healthz")
            restarted = time.monotonic()
            while _jobs(db) < len(OPS):
                assert time.monotonic() - restarted < 30, second.log_tail()
                time.sleep(0.1)
            resumed = time.monotonic() - restarted

            def answered() -> list[dict]:
                return [c for c in world.admin.comments(REPO, world.pr) if c["user"] == BOT]

            deadline = time.monotonic() + 30
            while len(answered()) < len(OPS):
                assert time.monotonic() < deadline, second.log_tail()
                time.sleep(0.1)
            time.sleep(1.0)  # anything extra would show now
        finally:
            stack.close()

        with sqlite3.connect(db) as conn:
            rows = conn.execute("SELECT op, count(*) FROM jobs GROUP BY op").fetchall()
        assert sorted(rows) == [(op, 1) for op in OPS]
        comments = answered()
        assert len(comments) == len(OPS)
        assert sorted(c["body"].splitlines()[0] for c in comments) == sorted(
            f"<!-- ondemand:{op}:cpu -->" for op in OPS
        )
        commands = [c for c in world.admin.comments(REPO, world.pr) if c["user"] == "alice"]
        assert len(commands) == len(OPS) // 16
        assert all([r["content"] for r in c["reactions"]] == ["eyes"] for c in commands)
        assert resumed < 5, f"the fan-out resumed {resumed:.1f}s after the restart"
