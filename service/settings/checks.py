"""The kinds of setting value and their checks (`Check`): a URL, the database URL, the App's
key (a file or the text) and its PEM, the workflows' directory, a cache directory, a team; each
as an annotated type the `Settings` fields take."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, SecretStr
from pydantic_settings import NoDecode

from ondemand.options import directory_problem, one_line, read_file, shown, url_problem
from workflows.spec import WorkflowError, load_workflows


@dataclass(frozen=True)
class Check:
    """A kind of setting value and its check (a pydantic after-validator): the value, or
    ValueError saying what is wrong with it. `fix` says what a right value is. The settings test
    makes wrong values of each kind."""

    kind: str
    check: Callable[[Any], Any]
    fix: str

    def __call__(self, value: Any) -> Any:
        try:
            return self.check(value)
        except ValueError as exc:
            raise ValueError(f"{exc}; {self.fix}") from None


def _http_url(value: str) -> str:
    problem = url_problem(value)
    if problem:
        raise ValueError(problem)
    return value.rstrip("/")


def _database_url(value: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = make_url(value)
    except ArgumentError:
        raise ValueError("not a database URL") from None
    if url.drivername == "postgresql":  # as service/db/engine.py reads it
        url = url.set(drivername="postgresql+psycopg")
    try:
        dialect = url.get_dialect()
    except NoSuchModuleError:
        raise ValueError(f"names no database this service speaks ({url.drivername})") from None
    try:
        dialect.import_dbapi()
    except ImportError:
        raise ValueError(f"needs a driver that is not installed ({url.drivername})") from None
    database = url.database or ""
    file = database not in ("", ":memory:") and not database.startswith("file:")
    if url.get_backend_name() == "sqlite" and file:
        path = Path(database).expanduser()
        if path.is_dir():
            raise ValueError(f"{path} is a directory, not a database file")
        problem = directory_problem(path.parent, create=True)
        if problem:
            raise ValueError(f"its directory {path.parent}: {problem}")
    return value


def _pem(text: str) -> None:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    try:
        # Its form only (a full check of the key's numbers costs ~40 ms): GitHub, which
        # holds its public half, says whether it is the App's (`ondemand doctor service`).
        key = serialization.load_pem_private_key(
            text.encode(), password=None, unsafe_skip_rsa_key_validation=True
        )
    except TypeError:
        raise ValueError("an encrypted key") from None
    except (ValueError, UnsupportedAlgorithm):
        raise ValueError("not a PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("not an RSA key")


def _pem_file(path: Path) -> Path:
    _pem(read_file(path))
    return path


def _pem_text(secret: SecretStr) -> SecretStr:
    _pem(secret.get_secret_value())
    return secret


def _workflows_dir(path: Path) -> Path:
    problem = directory_problem(path, create=False)
    if problem:
        raise ValueError(problem)
    try:
        load_workflows(path)
    except WorkflowError as exc:
        raise ValueError(one_line(str(exc))) from None
    if not list(path.glob("*.y*ml")):
        raise ValueError("holds no workflow file")
    return path


def _cache_dir(path: Path) -> Path:
    problem = directory_problem(path, create=True)
    if problem:
        raise ValueError(problem)
    return path


def _team(value: str) -> str:
    org, slash, team = value.partition("/")
    if not (org and slash and team) or "/" in team:
        raise ValueError(f"{shown(value)} is not ORG/TEAM")
    return value


KEY_FIX = "give the App's private key (a .pem from its settings, as GitHub made it)"
HttpUrl = Annotated[str, AfterValidator(Check("url", _http_url, "write it as https://HOST[/PATH]"))]
DatabaseUrl = Annotated[str, AfterValidator(Check(
    "database_url", _database_url, "write postgresql+psycopg://USER:PASSWORD@HOST/DATABASE "
    "(replicas) or sqlite:///PATH (one process)",
))]  # fmt: skip
KeyFile = Annotated[Path, AfterValidator(Check(
    "pem_file", _pem_file, f"{KEY_FIX}, in a file the service's user can read",
))]  # fmt: skip
KeyText = Annotated[SecretStr, AfterValidator(Check("pem", _pem_text, KEY_FIX))]
WorkflowsDir = Annotated[Path, AfterValidator(Check(
    "workflows_dir", _workflows_dir, "name a directory of workflow files, or unset it for the "
    "installed ones",
))]  # fmt: skip
CacheDir = Annotated[Path, AfterValidator(Check(
    "cache_dir", _cache_dir, "name a directory the service's user may create and write",
))]  # fmt: skip
Team = Annotated[str, AfterValidator(Check("team", _team, "write teams as org/team-slug"))]

# A list setting accepts JSON (`["a","b"]`) or a comma-separated string (`a,b`).
StrList = Annotated[list[str], NoDecode]
