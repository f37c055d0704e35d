"""`ondemand doctor service`: the service's settings, database and GitHub App, checked the way
a deployment fails: each finding names the setting (or step) that fixes it.

The settings checks are pure (`config_findings`); `ondemand serve` prints their problems at
start-up too. The database and GitHub checks reach out, each bounded and never retried.
"""

from __future__ import annotations

import ipaddress
import sys
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ondemand.doctor import Finding, exit_status, fail, ok, render, warn
from ondemand.options import OneLineParser
from service.db.engine import Database
from service.db.migrate import alembic_config, current_revision
from service.github.client import GitHubClient, GitHubError
from service.github.installations import check_installations
from service.settings import Settings, read_settings
from workflows.spec import WorkflowError, WorkflowSpec, load_workflows

# Recent webhook deliveries looked at for a wrong secret.
DELIVERIES = 30


def loopback(url: str) -> bool:
    """Whether `url`'s host is this machine only (a link nobody else can open)."""
    host = (urlsplit(url).hostname or "").lower()
    if host in ("localhost", "") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def config_findings(settings: Settings, workflows: Mapping[str, WorkflowSpec]) -> list[Finding]:
    """The settings alone: what is missing, left at a default only a trial wants, or wrong."""
    found: list[Finding] = []
    trial = settings.local_trial
    if settings.webhook_secrets:
        found.append(ok("webhook secret", f"{len(settings.webhook_secrets)} set"))
    else:
        found.append(fail(
            "webhook secret", "none: every delivery is refused with 401",
            "set ONDEMAND_WEBHOOK_SECRETS to the App's webhook secret",
        ))  # fmt: skip
    if len(settings.webhook_secrets) > 1 and settings.link_secret is None:
        found.append(warn(
            "link secret", "unset while webhook secrets rotate: a private repository's job "
            "links open while the secret that signed them is listed, and 404 once it is removed",
            "before removing the old webhook secret, set ONDEMAND_LINK_SECRET to it "
            "(docs/deploy.md, Rotating secrets)",
        ))  # fmt: skip
    if settings.github_app_id is not None:
        found.append(ok("credentials", f"GitHub App {settings.github_app_id}"))
    elif settings.github_token is not None:
        found.append(ok("credentials", "a token user (statuses, not check runs)"))
    else:
        found.append(fail(
            "credentials", "neither an App nor a token: no command can be answered",
            "set ONDEMAND_GITHUB_APP_ID and ONDEMAND_GITHUB_PRIVATE_KEY_PATH "
            "(or ONDEMAND_GITHUB_TOKEN)",
        ))  # fmt: skip
    if settings.registration_tokens:
        found.append(ok("registration tokens", f"{len(settings.registration_tokens)} set"))
    else:
        found.append(fail(
            "registration tokens", "none: every runner's registration is refused",
            "set ONDEMAND_REGISTRATION_TOKENS; give each runner one "
            "(ONDEMAND_REGISTRATION_TOKEN or --registration-token-file)",
        ))  # fmt: skip
    if loopback(settings.public_url):
        found.append((warn if trial else fail)(
            "public URL", f"{settings.public_url} is this machine only: the links in comments "
            "and statuses open for nobody else",
            "set ONDEMAND_PUBLIC_URL to the address people and GitHub reach the service at",
        ))  # fmt: skip
    elif urlsplit(settings.public_url).scheme != "https":
        found.append(warn(
            "public URL", f"{settings.public_url} is not https",
            "serve the service behind TLS and set ONDEMAND_PUBLIC_URL to its https address",
        ))  # fmt: skip
    else:
        found.append(ok("public URL", settings.public_url))
    backends = ", ".join(settings.default_backends)
    unknown = [b for b in settings.default_backends if b not in _names(workflows)]
    if unknown:
        found.append(fail(
            "default backends", f"unknown: {', '.join(unknown)}",
            f"ONDEMAND_DEFAULT_BACKENDS names backends of {', '.join(sorted(workflows))}",
        ))  # fmt: skip
    elif "default_backends" not in settings.model_fields_set and not trial:
        found.append(warn(
            "default backends", f"{backends} (the default): `/test OP` without a backend "
            "runs on Triton's CPU interpreter, whose timings are not performance",
            "set ONDEMAND_DEFAULT_BACKENDS to the backends your runners serve (e.g. mthreads)",
        ))  # fmt: skip
    else:
        found.append(ok("default backends", backends))
    return found


def _names(workflows: Mapping[str, WorkflowSpec]) -> set[str]:
    return {n for w in workflows.values() for n in (w.name, *w.aliases)}


def database_findings(settings: Settings) -> list[Finding]:
    """Whether the database answers, and whether its schema is this version's."""
    shown = make_url(settings.database_url).render_as_string(hide_password=True)
    db = Database.connect(settings.database_url)
    try:
        with db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            current = current_revision(conn)
    except SQLAlchemyError as exc:
        first = str(exc.orig if getattr(exc, "orig", None) else exc).strip().splitlines()[0]
        return [fail(
            "database", f"{shown} does not answer: {first}",
            "check ONDEMAND_DATABASE_URL, and that the database server runs and takes "
            "connections from this host",
        )]  # fmt: skip
    finally:
        db.dispose()
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    found = [ok("database", f"{shown} answers")]
    if current == head:
        found.append(ok("schema", f"migrated ({head})"))
    elif current is None:
        found.append(warn("schema", "empty", "`ondemand serve` creates it at start-up"))
    elif current in _revisions():
        found.append(warn(
            "schema", f"at {current}, this version's is {head}",
            "`ondemand serve` migrates it at start-up (back it up first)",
        ))  # fmt: skip
    else:
        found.append(fail(
            "schema", f"at {current}, which this version does not know (a newer service "
            "migrated it)", "run the newer version, or restore the backup taken before it",
        ))  # fmt: skip
    return found


def _revisions() -> set[str]:
    return {r.revision for r in ScriptDirectory.from_config(alembic_config()).walk_revisions()}


def github_findings(settings: Settings, client: GitHubClient) -> list[Finding]:
    """The credentials as GitHub takes them, and for an App its webhook: where GitHub delivers,
    and whether its recent deliveries were refused (a secret the service does not have)."""
    if not client.app_mode:
        try:
            login = client.login()
        except GitHubError as exc:
            return [fail("GitHub", str(exc), "check ONDEMAND_GITHUB_TOKEN and its scopes")]
        return [ok("GitHub", f"token of {login} accepted at {settings.github_api_url}")]
    try:
        app = client.app_get("/app")
    except GitHubError as exc:
        why = "the App's id or private key is wrong" if exc.status == 401 else str(exc)
        return [fail(
            "GitHub App", f"{settings.github_api_url} refused the App: {why}",
            "check ONDEMAND_GITHUB_APP_ID and ONDEMAND_GITHUB_PRIVATE_KEY(_PATH)",
        )]  # fmt: skip
    found = [ok("GitHub App", f"{app.get('slug') or app.get('name')} (id {app.get('id')})")]
    found += _permissions(settings, client)
    found += _webhook(settings, client)
    return found


def _permissions(settings: Settings, client: GitHubClient) -> list[Finding]:
    """Each installation's granted permissions against what the code needs
    (`ondemand app-manifest --markdown` lists them)."""
    try:
        problems = check_installations(client, teams=bool(settings.allowed_teams))
        count = len(client.installations())
    except GitHubError as exc:
        return [warn("permissions", f"GitHub did not list the App's installations: {exc}", "")]
    if count == 0:
        return [
            warn(
                "permissions",
                "the App is installed nowhere",
                "install it on the kernel repositories",
            )
        ]
    found = [
        fail(
            "permissions",
            f"the installation on {p.account} lacks {p.permission.label} (has {p.granted}): "
            f"{p.permission.without}",
            f"grant {p.permission.label} in the App's settings; an owner of {p.account} then "
            "accepts it (parked commands run then)",
        )
        for p in problems
    ]
    return found or [ok("permissions", f"{count} installation(s) grant all the App needs")]


def _webhook(settings: Settings, client: GitHubClient) -> list[Finding]:
    expected = f"{settings.public_url}/webhook"
    try:
        config = client.app_get("/app/hook/config")
        deliveries = client.app_get(f"/app/hook/deliveries?per_page={DELIVERIES}")
    except GitHubError as exc:
        return [warn("webhook", f"GitHub did not show the App's webhook: {exc}", "")]
    found: list[Finding] = []
    url = str(config.get("url") or "")
    if not url:
        found.append(fail(
            "webhook URL", "the App has none: GitHub delivers nothing",
            f"set the App's webhook URL to {expected}",
        ))  # fmt: skip
    elif url.rstrip("/") != expected:
        found.append(warn(
            "webhook URL", f"GitHub delivers to {url}, the service's public URL says {expected}",
            "make the App's webhook URL and ONDEMAND_PUBLIC_URL name the same service",
        ))  # fmt: skip
    else:
        found.append(ok("webhook URL", url))
    codes = [int(d.get("status_code") or 0) for d in deliveries if isinstance(d, dict)]
    refused = [c for c in codes if c == 401]
    if codes and codes[0] == 401:
        found.append(fail(
            "webhook secret", f"GitHub's last delivery was refused with 401 ({len(refused)} of "
            f"the last {len(codes)}): the App's secret is none of the service's",
            "set the App's webhook secret and ONDEMAND_WEBHOOK_SECRETS to the same value "
            "(several, comma-separated, while rotating); then redeliver the refused ones",
        ))  # fmt: skip
    elif refused:
        found.append(warn(
            "webhook secret", f"{len(refused)} of the last {len(codes)} deliveries were "
            "refused with 401, not the last one", "redeliver the refused ones from the App's "
            "advanced settings",
        ))  # fmt: skip
    else:
        seen = f"the last {len(codes)} deliveries accepted" if codes else "no delivery yet"
        found.append(ok("webhook secret", seen))
    return found


def service_findings(settings: Settings) -> list[Finding]:
    """Every check, in the order a deployment is set up."""
    try:
        workflows = load_workflows(settings.workflows_dir)
    except WorkflowError as exc:
        return [fail("workflows", str(exc), "fix the file, or ONDEMAND_WORKFLOWS_DIR")]
    found = config_findings(settings, workflows)
    found += _guarded("database", lambda: database_findings(settings))
    client = GitHubClient.from_settings(settings)
    if client is not None:
        found += _guarded("GitHub", lambda: github_findings(settings, client))
    return found


def _guarded(check: str, findings: Callable[[], list[Finding]]) -> list[Finding]:
    """A check's findings; one that fails unforeseen is a finding too, never a traceback."""
    try:
        return findings()
    except Exception as exc:
        return [fail(check, f"the check failed: {type(exc).__name__}: {exc}", "")]


def main(argv: list[str]) -> int:
    parser = OneLineParser(
        prog="ondemand doctor service",
        description="Check the service's settings (ONDEMAND_*), its database and its GitHub "
        "App as `ondemand serve` would use them. Exit 2 when `ondemand serve` would refuse a "
        "setting (each one line on stderr, as it says them), else 1 when a check fails.",
    )
    parser.parse_args(argv)
    settings, problems = read_settings()
    for problem in problems:
        print(f"ondemand doctor service: {problem.line}", file=sys.stderr)
    # What the settings would refuse, then every other check on the rest (a variable with a
    # problem read as unset).
    findings = [fail("settings", problem.line, "") for problem in problems]
    if settings is not None:
        findings += service_findings(settings)
    print(render("ondemand doctor service", findings))
    return 2 if problems else exit_status(findings)
