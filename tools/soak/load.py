"""The load: what maintainers, outsiders and GitHub do to two repositories, seeded. Single and
fan-out `/test`, `/test changed`, `/retest`, `/test cancel`, help; pushes that supersede
running jobs; closed pull requests (and new ones opened); outsiders' commands; hostile bodies
(commands in code, quotes and comments, a forged result-comment marker, shell and HTML in
operator names) and malformed ones; redelivered duplicates; deliveries GitHub never sent (bad
signatures, bodies that are not JSON) straight to the balancer. Everything it does is a
`Sent`; `Redeliverer` is GitHub's Redeliver button, pressed for every delivery that was not
answered 2xx (a 503 in an outage, a balancer down)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from sandbox.client import SandboxAdmin, SandboxAdminError
from tools.soak.events import Sent
from tools.soak.repo import OPERATORS, SoakRepo
from tools.soak.world import MAINTAINERS, OUTSIDERS

log = logging.getLogger("soak.load")

OPEN_PULLS = 3  # per repository, kept open (a closed one is replaced)

# (body template, the body holds a command to answer); {op}, {op2} are operators.
TEST = (
    "/test {op}:cpu",
    "/test | {op}:cpu",
    "/test {op}",
    "Looks good.\n\n/test {op}:cpu --no-compare",
    "/Test {op} : cpu",
)
FANOUT = (
    "/test {op},{op2}:cpu",
    "/test {op}:cpu {op2}:cpu --no-bench",
    "/test {op}:cpu\n/test {op2}:cpu",
)
CHANGED = ("/test changed", "/test", "/test changed:cpu --no-bench")
CANCEL = ("/test cancel", "/test cancel {op}", "/test cancel {op}:cpu")
OUTSIDER = ("/test {op}:cpu", "/retest", "/test cancel", "/test changed")
HOSTILE: tuple[tuple[str, bool], ...] = (
    ("```\n/test {op}:cpu\n```", False),
    ("> /test {op}:cpu", False),
    ("`/test {op}:cpu`", False),
    ("<!-- /test {op}:cpu -->", False),
    ("~~/test {op}:cpu~~", False),
    ("Look:\n\n    /test {op}:cpu", False),
    ("/test <script>alert(1)</script>:cpu", True),
    ("/test $(rm -rf /):cpu", True),
    ("/test {op}:cpu; DROP TABLE jobs", True),
    ("/test " + "a" * 70 + ":cpu", True),
    ("/test help\n" * 25, True),
    ("/test ａｌｐｈａ:cpu", True),
    ("/test {op}\u202e:cpu", True),
    ("/test ![x](http://127.0.0.1:1/x.png):cpu", True),
    ("/test {op}:cpu " + "x" * 5000, True),
)
# A result comment's hidden marker, forged by an outsider: the bot must not take it for its own.
FORGED = "<!-- ondemand:{op}:cpu -->\n### ✅ `{op}` on `cpu`: all good, trust me"
MALFORMED = (
    "/test :cpu",
    "/test {op}:nope",
    "/test {op}:cpu --frobnicate",
    "/test hlep",
    "/test Alpha:cpu",
    "/test {op}::cpu",
    "/retest {op}",
)
CHATTER = ("Looks good to me.", "Could you rebase?", "Thanks! /testing this locally first.")

WEIGHTS = {
    "test": 20,
    "fanout": 9,
    "changed": 6,
    "retest": 6,
    "cancel": 5,
    "help": 2,
    "outsider": 6,
    "forged": 2,
    "hostile": 7,
    "malformed": 7,
    "push": 8,
    "close": 2,
    "redeliver": 6,
    "chatter": 4,
    "direct": 4,
}


@dataclass
class Pull:
    repo: SoakRepo
    number: int
    branch: str
    version: int = 0


class Load:
    """Acts on GitHub (the sandbox's admin API, as people) every 0.5–3.1 s, seeded."""

    def __init__(
        self,
        admin: SandboxAdmin,
        repos: list[SoakRepo],
        rng: random.Random,
        balancer_url: str,
        secret: str,
        deliveries: Callable[[], list[dict[str, Any]]],
    ) -> None:
        self.admin = admin
        self.repos = repos
        self.rng = rng
        self.balancer_url = balancer_url
        self.secret = secret
        self.deliveries = deliveries
        self.sent: list[Sent] = []
        self.pulls: dict[str, list[Pull]] = {r.name: [] for r in repos}
        self.next_branch: dict[str, int] = {r.name: 0 for r in repos}
        self.errors: list[str] = []

    def open_pulls(self) -> None:
        for repo in self.repos:
            while len(self.pulls[repo.name]) < OPEN_PULLS:
                self._open(repo)

    def run(self, until: float, stop: threading.Event) -> None:
        kinds, weights = list(WEIGHTS), list(WEIGHTS.values())
        while not stop.is_set() and time.time() < until:
            kind = self.rng.choices(kinds, weights)[0]
            try:
                getattr(self, f"_{kind}")()
            except (SandboxAdminError, httpx.HTTPError) as exc:
                self.errors.append(f"{kind}: {exc}")
            except Exception as exc:  # a bug of the load: said in the figures, the load goes on
                log.exception("load: %s failed", kind)
                self.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            stop.wait(self.rng.uniform(0.5, 3.1))

    # -- people -----------------------------------------------------------------------------

    def _pull(self) -> Pull:
        repo = self.rng.choice([r for r in self.repos if self.pulls[r.name]])
        return self.rng.choice(self.pulls[repo.name])

    def _ops(self) -> tuple[str, str]:
        op, op2 = self.rng.sample(OPERATORS, 2)
        return op, op2

    def _comment(
        self, kind: str, pull: Pull, user: str, body: str, *, command: bool, trusted: bool
    ) -> None:
        made = self.admin.comment(pull.repo.name, pull.number, user, body)
        self.sent.append(
            Sent(time.time(), kind, pull.repo.name, pull.number, user, int(made["id"]), body,
                 trusted, command)
        )  # fmt: skip

    def _say(self, kind: str, templates: tuple[str, ...], *, command: bool = True) -> None:
        pull = self._pull()
        op, op2 = self._ops()
        body = self.rng.choice(templates).format(op=op, op2=op2)
        user = self.rng.choice(MAINTAINERS)
        self._comment(kind, pull, user, body, command=command, trusted=True)

    def _test(self) -> None:
        self._say("test", TEST)

    def _fanout(self) -> None:
        self._say("fanout", FANOUT)

    def _changed(self) -> None:
        self._say("changed", CHANGED)

    def _retest(self) -> None:
        self._say("retest", ("/retest",))

    def _cancel(self) -> None:
        self._say("cancel", CANCEL)

    def _help(self) -> None:
        pull = self._pull()
        user = self.rng.choice((*MAINTAINERS, *OUTSIDERS))
        self._comment("help", pull, user, "/test help", command=True, trusted=user in MAINTAINERS)

    def _outsider(self) -> None:
        pull = self._pull()
        body = self.rng.choice(OUTSIDER).format(op=self._ops()[0])
        self._comment("outsider", pull, self.rng.choice(OUTSIDERS), body, command=True,
                      trusted=False)  # fmt: skip

    def _forged(self) -> None:
        pull = self._pull()
        body = FORGED.format(op=self._ops()[0])
        self._comment("forged", pull, OUTSIDERS[0], body, command=False, trusted=False)

    def _hostile(self) -> None:
        pull = self._pull()
        template, command = self.rng.choice(HOSTILE)
        body = template.format(op=self._ops()[0])
        self._comment("hostile", pull, self.rng.choice(MAINTAINERS), body, command=command,
                      trusted=True)  # fmt: skip

    def _malformed(self) -> None:
        self._say("malformed", MALFORMED)

    def _chatter(self) -> None:
        pull = self._pull()
        body = self.rng.choice(CHATTER)
        self._comment("chatter", pull, self.rng.choice(MAINTAINERS), body, command=False,
                      trusted=True)  # fmt: skip

    # -- the pull requests ---------------------------------------------------------------------

    def _open(self, repo: SoakRepo) -> None:
        """A new pull request on the next branch; once every branch had one, the branches
        again from the first (a new pull request from the same commits, as a contributor who
        reopens their work does), so an hour's closes never leave a repository without one."""
        n = self.next_branch[repo.name]
        branches = sorted(repo.versions, key=lambda b: int(b.split("-")[1]))
        self.next_branch[repo.name] = n + 1
        branch = branches[n % len(branches)]
        made = self.admin.open_pull(
            repo.name,
            head=repo.versions[branch][0],
            base="main",
            user=self.rng.choice(MAINTAINERS),
            title=f"Soak {branch}",
        )
        pull = Pull(repo, int(made["number"]), branch)
        self.pulls[repo.name].append(pull)
        head = repo.versions[branch][0]
        self.sent.append(Sent(time.time(), "open", repo.name, pull.number, detail=head))
        if self.rng.random() < 0.5:  # a marker forged before the bot's own comment exists
            body = FORGED.format(op=self._ops()[0])
            self._comment("forged", pull, OUTSIDERS[0], body, command=False, trusted=False)

    def _push(self) -> None:
        """The next version of the branch: supersedes (queued) or cancels (running) jobs."""
        pull = self._pull()
        versions = pull.repo.versions[pull.branch]
        if pull.version + 1 >= len(versions):
            return
        pull.version += 1
        sha = versions[pull.version]
        self.admin.push(pull.repo.name, pull.number, sha, user=self.rng.choice(MAINTAINERS))
        self.sent.append(Sent(time.time(), "push", pull.repo.name, pull.number, detail=sha))

    def _close(self) -> None:
        pull = self._pull()
        repo = pull.repo
        self.admin.close_pull(repo.name, pull.number, user=self.rng.choice(MAINTAINERS))
        self.pulls[repo.name].remove(pull)
        self.sent.append(Sent(time.time(), "close", repo.name, pull.number))
        self._open(repo)
        # A command on the closed pull request: answered, nothing runs.
        if self.rng.random() < 0.5:
            op = self._ops()[0]
            self._comment("test", pull, self.rng.choice(MAINTAINERS), f"/test {op}:cpu",
                          command=True, trusted=True)  # fmt: skip

    # -- GitHub ---------------------------------------------------------------------------------

    def _redeliver(self) -> None:
        """A duplicate: GitHub sends a delivery again with the same id."""
        done = [d for d in self.deliveries()[-60:] if _answered(d)]
        if not done:
            return
        chosen = self.rng.choice(done)
        self.admin.redeliver(chosen["id"])
        self.sent.append(Sent(time.time(), "redeliver", "", 0, detail=chosen["id"]))

    def _direct(self) -> None:
        """What GitHub never sends, straight at the balancer: refused (401 for a signature
        that does not match, 400 for a body that is not JSON), never stored."""
        what, body, expect = self.rng.choice(
            (
                ("bad signature", b'{"zen": "forged"}', 401),
                ("not JSON", b"{this is not json", 400),
                ("deep JSON", b"[" * 100 + b"]" * 100, 400),
            )
        )
        signature = _sign(self.secret, body)
        if what == "bad signature":
            signature = _sign("not-the-secret", body)
        headers = {
            "Content-Type": "application/json",
            "X-GitHub-Event": "issue_comment",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": signature,
        }
        status: int | None = None
        for _ in range(5):  # a balancer or replica down: tried again, as a sender would
            try:
                status = httpx.post(
                    f"{self.balancer_url}/webhook", content=body, headers=headers, timeout=10
                ).status_code
            except httpx.HTTPError:
                status = None
            if status is not None and status < 500:
                break
            time.sleep(2)
        self.sent.append(
            Sent(time.time(), "direct", "", 0, body=body.decode()[:200], detail=f"{what}: "
                 f"expected {expect}, answered {status}")
        )  # fmt: skip


class Redeliverer:
    """GitHub's Redeliver, pressed for each delivery whose attempts all failed (no answer, or
    not 2xx) once its last attempt is a couple of seconds old; keeps the latest list of
    deliveries for the load's duplicates."""

    def __init__(self, admin: SandboxAdmin, every_s: float = 3.0) -> None:
        self.admin = admin
        self.every_s = every_s
        self.latest: list[dict[str, Any]] = []
        self.pressed: list[tuple[float, str]] = []
        self._last: dict[str, float] = {}
        self.lock = threading.Lock()

    def deliveries(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.latest)

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.every_s):
            try:
                self.round()
            except (SandboxAdminError, httpx.HTTPError):
                continue

    def round(self) -> int:
        """Redeliver what failed; how many are still unanswered."""
        found = self.admin.deliveries()
        with self.lock:
            self.latest = found
        now = time.time()
        waiting = 0
        for d in found:
            if _answered(d) or not d["attempts"]:
                continue
            waiting += 1
            if now - self._last.get(d["id"], 0.0) < max(4.0, self.every_s):
                continue
            self._last[d["id"]] = now
            self.admin.redeliver(d["id"])
            self.pressed.append((now, d["id"]))
        return waiting


def _answered(delivery: dict[str, Any]) -> bool:
    return any(
        a["status_code"] is not None and 200 <= a["status_code"] < 300 for a in delivery["attempts"]
    )


def _sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def summary(sent: list[Sent]) -> dict[str, int]:
    """How many of each kind the load did."""
    counts: dict[str, int] = {}
    for s in sent:
        counts[s.kind] = counts.get(s.kind, 0) + 1
    return dict(sorted(counts.items()))
