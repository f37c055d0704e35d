"""The CPU cost of three things the service and its tests do often, the old way beside the
new, each measured in three runs (the spread between runs is the noise):

- a JWT for a call made as the GitHub App: the PEM parsed for each signature, or once;
- reading a workflow file: PyYAML's pure-Python safe loader, or libyaml's;
- a SQLite database at the schema's head: migrated from empty, or copied from one migrated.

    python -m tools.cpu_costs
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from github import Auth

from service.db.engine import make_engine
from service.db.migrate import upgrade
from service.github.client import app_signer

RUNS = 3


def _ms(fn: Callable[[], object], n: int) -> float:
    """CPU milliseconds a call of `fn`, over `n` calls."""
    started = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - started) / n * 1000


def main() -> None:
    pem = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    each = Auth.AppAuth(1, pem)
    once = Auth.AppAuth(1, sign_func=app_signer(pem))
    text = Path("workflows/nvidia.yaml").read_text()
    scratch = Path(tempfile.mkdtemp())
    made = [0]

    def migrate() -> None:
        made[0] += 1
        engine = make_engine(f"sqlite:///{scratch / f'm{made[0]}.db'}")
        upgrade(engine)
        engine.dispose()

    migrate()
    template = scratch / "m1.db"

    def copy() -> None:
        made[0] += 1
        path = scratch / f"c{made[0]}.db"
        shutil.copyfile(template, path)
        engine = make_engine(f"sqlite:///{path}")
        upgrade(engine)  # finds nothing to do, as the service's start-up migration does
        engine.dispose()

    cases = [
        ("App JWT, PEM parsed each time", lambda: each.create_jwt(), 30),
        ("App JWT, key parsed once", lambda: once.create_jwt(), 300),
        ("workflow file, pure-Python loader", lambda: yaml.load(text, yaml.SafeLoader), 50),
        ("workflow file, libyaml loader", lambda: yaml.load(text, yaml.CSafeLoader), 300),
        ("SQLite at head, migrated from empty", migrate, 10),
        ("SQLite at head, copied", copy, 30),
    ]
    print(f"| what | CPU ms a call, {RUNS} runs |")
    print("|---|---|")
    for name, fn, n in cases:
        print(f"| {name} | {' · '.join(f'{_ms(fn, n):.2f}' for _ in range(RUNS))} |")
    shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
