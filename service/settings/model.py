"""The `Settings` object: every `ONDEMAND_*` variable the service reads, as a typed field
whose kind of value is checked as it is made (`checks.py`), the checks across fields, and what
the rest of the service derives from them (the App's key, the job links' keys, where people
read GitHub)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from ondemand.options import shown
from service.settings.checks import (
    CacheDir,
    DatabaseUrl,
    HttpUrl,
    KeyFile,
    KeyText,
    StrList,
    Team,
    WorkflowsDir,
)
from workflows.spec import WORKFLOWS_DIR, backend_names, load_workflows

PREFIX = "ONDEMAND_"
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
    nightly_hour_utc: int = Field(
        default=2,
        ge=0,
        le=23,
        description="the hour (UTC) each night's run of the default branches that ask for one "
        "(`main.nightly` in their settings) begins",
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
