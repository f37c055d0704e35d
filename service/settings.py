"""The service's configuration: `ONDEMAND_*` environment variables, one object passed around.

Every value is checked when the object is made, files and URLs included (`Check`: a kind of
value and its check), so a service never starts on a setting it would fail on later.
`read_settings` is how the daemon and the doctor read them: each problem becomes one line that
names the variable, what is wrong with its value and the fix (`Problem`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import annotated_types
from pydantic import (
    AfterValidator,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ondemand.options import directory_problem, one_line, read_file, shown, url_problem
from workflows.spec import WORKFLOWS_DIR, WorkflowError, backend_names, load_workflows

PREFIX = "ONDEMAND_"
# Settings are read from no other environment variable than those `read_settings` hands over.
_NOWHERE = "\0ONDEMAND_"


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

MAX_WEBHOOK_BYTES = 25 * 1024 * 1024


class Settings(BaseSettings):
    """Everything the service reads from its environment (prefix `ONDEMAND_`)."""

    # An empty variable is an unset one (a line of an environment file left blank).
    model_config = SettingsConfigDict(env_prefix=PREFIX, extra="ignore", env_ignore_empty=True)

    database_url: DatabaseUrl = "sqlite:///./.ondemand/ondemand.db"
    github_api_url: HttpUrl = "https://api.github.com"
    github_html_url: HttpUrl | None = Field(
        default=None, description="where people read repositories; derived from the API's URL"
    )
    github_token: SecretStr | None = None
    github_app_id: int | None = Field(default=None, gt=0)
    github_private_key: KeyText | None = None
    github_private_key_path: KeyFile | None = None
    webhook_secrets: StrList = Field(default_factory=list)
    link_secret: SecretStr | None = None
    registration_tokens: StrList = Field(default_factory=list)
    public_url: HttpUrl = "http://127.0.0.1:8000"
    default_backends: StrList = Field(default_factory=lambda: ["cpu"])
    allowed_users: StrList = Field(default_factory=list)
    allowed_teams: Annotated[list[Team], NoDecode] = Field(
        default_factory=list, description="org/team slugs"
    )
    lease_seconds: int = Field(default=120, ge=1)
    permission_cache_seconds: float = Field(default=60.0, ge=0)
    workflows_dir: WorkflowsDir = WORKFLOWS_DIR
    changes_dir: CacheDir = Field(
        default=Path(".ondemand/changes"),
        description="a cache of bare mirrors of the tested repositories, from which the change "
        "selection reads a pull request's tree",
    )
    bot_login: str | None = None
    max_webhook_bytes: int = Field(default=MAX_WEBHOOK_BYTES, ge=1)
    max_claim_wait_s: float = Field(default=30.0, ge=0)
    runner_online_seconds: float = Field(
        default=90.0, gt=0, description="a runner seen within this window counts as online"
    )
    runner_forget_days: float = Field(
        default=14.0,
        gt=0,
        description="a runner unseen this long is removed (a machine gone for good, an "
        "ephemeral runner killed before it could deregister); if it comes back it registers "
        "again",
    )
    head_wait_s: float = Field(
        default=10.0,
        ge=0,
        description="how long a command waits for a late push event before it is refused",
    )
    github_secondary_wait_s: float = Field(
        default=60.0,
        ge=0,
        description="wait after a secondary rate limit that names no time (GitHub: a minute)",
    )
    github_budget_reserve: float = Field(
        default=0.2,
        ge=0,
        lt=1,
        description="below this share of an installation's hourly GitHub budget left, the "
        "outbox leaves out 👀 reactions and edits on the way (answers and verdicts still go "
        "out); 0 never does",
    )
    retry_max_backoff_s: float = Field(
        default=300.0, gt=0, description="the longest wait between two tries of a GitHub call"
    )
    github_outage_probe_max_s: float = Field(
        default=5.0,
        gt=0,
        description="while GitHub is unavailable, the longest wait between two tries (what "
        "waited goes out this soon after it is back)",
    )
    log_max_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="a job's log is refused past this size (runners keep its head and tail)",
    )
    local_trial: bool = Field(
        default=False,
        description="a trial on this machine: start without a webhook secret or GitHub credentials",
    )
    progress_edit_interval_s: float = Field(
        default=20.0,
        ge=0,
        description="a running job's comment and status show new progress at most this often",
    )
    process_workers: bool = Field(
        default=True,
        description="run the inbox, the outbox, the lease reaper and the pruner in-process",
    )
    # Retention (service/queue/retention.py); 0 keeps forever. The defaults: a quarter of job
    # history for the pages and comments' links, a month of logs (the bulk of the database),
    # two weeks of inbox and outbox, past GitHub's window for redelivering a webhook.
    retention_days: float = Field(
        default=90.0,
        ge=0,
        description="a finished job is deleted this many days after it finished, with its log "
        "(the newest succeeded or failed job of each repository, operator and backend stays, "
        "for the dashboard); 0 keeps jobs forever",
    )
    log_retention_days: float = Field(
        default=30.0,
        ge=0,
        description="a finished job's log is deleted this many days after the job finished; "
        "the job, its result and its report stay; 0 keeps logs as long as their jobs",
    )
    delivery_retention_days: float = Field(
        default=14.0,
        ge=0,
        description="a handled or given-up webhook delivery and a delivered outbox item are "
        "deleted this many days after they were done (never a pending one); 0 keeps them",
    )

    @field_validator(
        "webhook_secrets",
        "registration_tokens",
        "default_backends",
        "allowed_users",
        "allowed_teams",
        mode="before",
    )
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    return json.loads(text)
                except json.JSONDecodeError as exc:
                    raise ValueError(
                        f"not a JSON list ({exc.msg}); write the values comma-separated (a,b), "
                        'or as JSON (["a","b"])'
                    ) from None
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _retention(self) -> Settings:
        """0 keeps forever; a job or log kept less than a day would leave the comments' links
        and a command processed again without their rows, and a delivery kept less than a week
        could be redelivered by GitHub (3 days; Enterprise Server 7) and run twice."""
        floors = (
            ("ONDEMAND_RETENTION_DAYS", self.retention_days, 1.0),
            ("ONDEMAND_LOG_RETENTION_DAYS", self.log_retention_days, 1.0),
            ("ONDEMAND_DELIVERY_RETENTION_DAYS", self.delivery_retention_days, 7.0),
        )
        for name, days, floor in floors:
            if 0 < days < floor:
                raise ValueError(f"{name} is {days:g}: 0 (keep forever) or at least {floor:g}")
        if 0 < self.retention_days < self.log_retention_days:
            raise ValueError(
                f"ONDEMAND_LOG_RETENTION_DAYS ({self.log_retention_days:g}) is longer than "
                f"ONDEMAND_RETENTION_DAYS ({self.retention_days:g}): a log goes with its job"
            )
        return self

    @model_validator(mode="after")
    def _credentials(self) -> Settings:
        """One way to GitHub: a token, or an App's id with one private key."""
        inline, path = self.github_private_key, self.github_private_key_path
        if inline is not None and path is not None:
            raise ValueError(
                "ONDEMAND_GITHUB_PRIVATE_KEY and ONDEMAND_GITHUB_PRIVATE_KEY_PATH are both set: "
                "keep one (the file, where the environment is written down)"
            )
        has_key = inline is not None or path is not None
        if self.github_app_id is not None and not has_key:
            raise ValueError(
                "ONDEMAND_GITHUB_APP_ID needs ONDEMAND_GITHUB_PRIVATE_KEY_PATH (or "
                "ONDEMAND_GITHUB_PRIVATE_KEY): give the App's private key"
            )
        if self.github_app_id is None and has_key:
            which = "ONDEMAND_GITHUB_PRIVATE_KEY" + ("_PATH" if path is not None else "")
            raise ValueError(
                f"{which} is set but ONDEMAND_GITHUB_APP_ID is not: set the App's id (its "
                "settings page), or unset the key"
            )
        if self.github_app_id is not None and self.github_token is not None:
            raise ValueError(
                "ONDEMAND_GITHUB_TOKEN and ONDEMAND_GITHUB_APP_ID are both set: the token would "
                "be used and the App ignored; unset one"
            )
        return self

    @model_validator(mode="after")
    def _backends(self) -> Settings:
        """`/test OP` alone runs on the default backends: each must be one the service knows."""
        names = backend_names(load_workflows(self.workflows_dir))
        unknown = [b for b in self.default_backends if b.lower() not in names]
        if unknown or not self.default_backends:
            what = f"unknown backend {', '.join(unknown)}" if unknown else "no backend"
            raise ValueError(
                f"ONDEMAND_DEFAULT_BACKENDS={shown(','.join(self.default_backends))}: {what}; "
                f"name those your runners serve, of {', '.join(sorted(set(names.values())))}"
            )
        return self

    def private_key(self) -> str | None:
        """The GitHub App's PEM private key, inline or from its file."""
        if self.github_private_key is not None:
            return self.github_private_key.get_secret_value()
        if self.github_private_key_path is not None:
            return self.github_private_key_path.read_text()
        return None

    def missing_for_service(self) -> list[str]:
        """What a service that GitHub talks to cannot work without and is not set: without a
        webhook secret every delivery is refused, without credentials nothing is answered."""
        missing = []
        if not self.webhook_secrets:
            missing.append(
                "ONDEMAND_WEBHOOK_SECRETS (the webhook's secret): every delivery would get 401"
            )
        if self.github_token is None and self.github_app_id is None:
            missing.append(
                "ONDEMAND_GITHUB_APP_ID with ONDEMAND_GITHUB_PRIVATE_KEY(_PATH), or "
                "ONDEMAND_GITHUB_TOKEN: no command could be answered"
            )
        return missing

    def html_url(self) -> str:
        """Where pull requests and commits are read: the setting, else github.com for its API,
        the host of an Enterprise server's `/api/v3`, else the API's own base (the sandbox)."""
        if self.github_html_url:
            return self.github_html_url.rstrip("/")
        if self.github_api_url == "https://api.github.com":
            return "https://github.com"
        return self.github_api_url.removesuffix("/api/v3")

    def link_keys(self) -> list[bytes]:
        """The keys a job link of a private repository may carry a signature of; the first
        signs new links. The link secret's, else the first webhook secret's, signs; every
        webhook secret's opens too, so rotating them (`new,old`) leaves posted links opening
        while the old one is listed, and `ONDEMAND_LINK_SECRET` set to a retired webhook secret
        keeps its links for good (docs/deploy.md, Rotating secrets). A link secret is also
        taken as the key itself, as versions before signed with it."""
        keys = [link_key(s) for s in self.webhook_secrets] or [link_key("")]
        if self.link_secret is not None:
            secret = self.link_secret.get_secret_value()
            keys = [link_key(secret), *keys, secret.encode()]
        return list(dict.fromkeys(keys))


def link_key(secret: str) -> bytes:
    """The key a secret signs job links with (the same wherever the secret is set)."""
    return hashlib.sha256(f"ondemand-links:{secret}".encode()).digest()


def variable(field: str) -> str:
    """The environment variable of a settings field."""
    return f"{PREFIX}{field.upper()}"


@dataclass(frozen=True)
class Problem:
    """A setting the service would refuse: the variable (or variables) it is about, and one
    line naming it, what is wrong with its value and the fix."""

    fields: tuple[str, ...]
    line: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "line", one_line(self.line))


PLACEHOLDER = re.compile(r"<[^<>]+>")
# Values never shown in a problem's line (the database URL is shown without its password).
SECRETS = frozenset({"webhook_secrets", "registration_tokens", "github_token", "link_secret",
                     "github_private_key"})  # fmt: skip


def read_settings(
    environ: Mapping[str, str] | None = None,
) -> tuple[Settings | None, list[Problem]]:
    """The settings from `environ` (the process's), and every problem of theirs as one line.

    A variable with a problem is then read as unset, so that what remains can still be checked
    (the doctor goes on with it); what only that fallback brings up is not reported. None when
    no settings can be made at all."""
    env = os.environ if environ is None else environ
    raw = {
        name: env[variable(name)]
        for name in Settings.model_fields
        if env.get(variable(name), "").strip()
    }
    # A line of the example environment file copied and not filled in.
    problems = [
        Problem((name,), f"{variable(name)} holds the example's placeholder {found.group()}: "
                "fill it in (docs/deploy.md)")
        for name, value in raw.items()
        if (found := PLACEHOLDER.search(value))
    ]  # fmt: skip
    for name in [p.fields[0] for p in problems]:
        raw.pop(name)
    for attempt in range(len(raw) + 1):
        try:
            return Settings(**raw, _env_prefix=_NOWHERE), problems  # type: ignore[arg-type]
        except ValidationError as exc:
            found = [_problem(error, raw) for error in exc.errors()]
        if attempt == 0:
            problems += found
        dropped = {f for p in found for f in p.fields} & raw.keys()
        if not dropped:
            break
        for name in dropped:
            raw.pop(name)
    return None, problems


def _problem(error: Any, raw: Mapping[str, str]) -> Problem:
    """One validation error as a `Problem`: a field's names its variable and the value it
    could not take (secrets left out); a check across fields names its variables itself."""
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    loc = error.get("loc") or ()
    if not loc or loc[0] not in Settings.model_fields:
        names = re.findall(rf"{PREFIX}[A-Z0-9_]+", message)
        fields = tuple(dict.fromkeys(n.removeprefix(PREFIX).lower() for n in names))
        return Problem(fields, message)
    name = str(loc[0])
    field = Settings.model_fields[name]
    head = variable(name)
    if name not in SECRETS and name in raw:
        head += f"={_shown(name, raw[name])}"
    if error["type"] == "value_error":
        return Problem((name,), f"{head}: {message}")
    what = expected(field)
    default = _default(field)
    unset = f"unset it for the default ({default})" if default else "unset it"
    return Problem((name,), f"{head}: not {what}; set {what}, or {unset}")


def _shown(name: str, value: str) -> str:
    if name != "database_url":
        return shown(value)
    from sqlalchemy.engine import make_url

    try:
        return shown(make_url(value).render_as_string(hide_password=True))
    except Exception:  # unparseable: it may hold a password anywhere
        return "(not shown)"


def _base(annotation: Any) -> Any:
    """The type under Optional, Annotated and list (`list[int] | None` → list)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        else:
            return origin or annotation


def expected(field: FieldInfo) -> str:
    """What a field takes, in words, with its bounds: "a number ≥ 0"."""
    base = _base(field.annotation)
    words = {int: "a whole number", float: "a number", bool: "true or false", list:
             "a comma-separated list", Path: "a path"}  # fmt: skip
    bounds = [
        f"{sign} {limit:g}"
        for bound in field.metadata
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
        if isinstance(bound, annotated_types.BaseMetadata)
        and (limit := getattr(bound, attr, None)) is not None
    ]
    return (
        " and ".join([f"{words.get(base, 'a value')} {bounds[0]}", *bounds[1:]])
        if bounds
        else words.get(base, "a value")
    )


def _default(field: FieldInfo) -> str:
    value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
    if value is None or value == [] or value == "":
        return ""
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def settings_source(environ: Mapping[str, str] | None = None) -> str:
    """Where the settings came from, for the start-up line: the `ONDEMAND_*` variables set
    (names only: values may be secret)."""
    names = sorted(
        k for k in (os.environ if environ is None else environ) if k.startswith("ONDEMAND_")
    )
    if not names:
        return "settings: defaults (no ONDEMAND_* variable is set)"
    return f"settings: {', '.join(names)} from the environment, defaults for the rest"
