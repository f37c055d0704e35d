"""deploy/: the systemd units and the compose file say what the service and the runner rely on.
No init system or container engine runs here, so they are read, as systemd and compose would."""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import yaml

from service.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def unit(name: str) -> dict[str, dict[str, list[str]]]:
    """A unit's settings by section, every value of a key repeated (Environment=) kept."""
    text = (DEPLOY / name).read_text()
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.read_string(text)  # INI, as far as systemd's format is
    sections: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    for line in re.sub(r"\\\n\s*", " ", text).splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        assert current is not None, f"{name}: {line!r} outside a section"
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


def environment(values: list[str]) -> dict[str, str]:
    return dict(item.partition("=")[::2] for item in values)


def test_the_service_unit() -> None:
    service = unit("ondemand-service.service")["Service"]
    assert service["ExecStart"][0].startswith("/opt/ondemand/venv/bin/ondemand serve ")
    assert service["User"] == ["ondemand"]
    assert service["EnvironmentFile"] == ["/etc/ondemand/service.env"]
    # SQLite and the mirrors default to the state directory systemd makes for that user
    assert service["StateDirectory"] == ["ondemand"]
    env = environment(service["Environment"])
    assert env["ONDEMAND_DATABASE_URL"] == "sqlite:////var/lib/ondemand/ondemand.db"
    assert env["ONDEMAND_CHANGES_DIR"].startswith("/var/lib/ondemand/")
    # a configuration error (exit 2) is not restarted in a loop; anything else is
    assert service["Restart"] == ["on-failure"]
    assert "2" in service["RestartPreventExitStatus"][0].split()
    for key, value in [("NoNewPrivileges", "true"), ("ProtectSystem", "strict")]:
        assert service[key] == [value]
    assert unit("ondemand-service.service")["Install"]["WantedBy"] == ["multi-user.target"]


def test_the_runner_unit() -> None:
    sections = unit("ondemand-runner.service")
    service = sections["Service"]
    assert service["ExecStart"][0].startswith("/opt/ondemand/venv/bin/ondemand runner ")
    assert "--job-user ondemand-job" in service["ExecStart"][0]
    assert service["Restart"] == ["on-failure"]
    assert "2" in service["RestartPreventExitStatus"][0].split()
    assert service["StateDirectory"] == ["ondemand-runner"]
    # a second SIGTERM hands the job back; it is not cancelled
    text = (DEPLOY / "ondemand-runner.service").read_text()
    assert "requeues it for another runner" in text and "report it cancelled" not in text


def test_the_settings_named_for_the_service_exist() -> None:
    """A misspelt ONDEMAND_ name in the example or the unit would be silently ignored."""
    known = {f"ONDEMAND_{field.upper()}" for field in Settings.model_fields}
    named = set(
        re.findall(r"^#?(ONDEMAND_\w+)=", (DEPLOY / "service.env.example").read_text(), re.M)
    )
    named |= set(environment(unit("ondemand-service.service")["Service"]["Environment"]))
    named -= {"PYTHONUNBUFFERED"}
    assert len(named) >= 8 and named <= known, named - known


def test_the_compose_file() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services, volumes = compose["services"], compose["volumes"]
    postgres, service = services["postgres"], services["service"]
    assert postgres["image"] == "postgres:15"
    assert service["build"] == {"context": "..", "target": "service"}
    # a named volume for each data directory: PostgreSQL's and the one the image declares
    [data_dir] = re.findall(r'^VOLUME \["(\S+)"\]$', DOCKERFILE.split("AS runner")[0], re.M)
    mounts = {
        "postgres": "/var/lib/postgresql/data",
        "service": data_dir,
    }
    for name, path in mounts.items():
        [volume] = [v for v in services[name]["volumes"] if v.endswith(f":{path}")]
        assert volume.split(":")[0] in volumes, volume
    # the service's database is this PostgreSQL, named by its service name
    url = service["environment"]["ONDEMAND_DATABASE_URL"]
    database = postgres["environment"]["POSTGRES_DB"]
    assert re.fullmatch(
        rf"postgresql\+psycopg://ondemand:\$\{{POSTGRES_PASSWORD.*\}}@postgres:5432/{database}", url
    )
    assert service["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert postgres["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    assert "/healthz" in " ".join(service["healthcheck"]["test"])
    assert service["env_file"] == "service.env" and (DEPLOY / "service.env.example").is_file()
    assert "127.0.0.1:8000:8000" in service["ports"] and "EXPOSE 8000" in DOCKERFILE
