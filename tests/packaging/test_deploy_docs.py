"""The deployment guide names every setting the code reads, with the code's default: the
service's (every field of the one settings object) and the runner's environment variables."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic_core import PydanticUndefined

from service.settings import Settings, read_settings

ROOT = Path(__file__).resolve().parents[2]
GUIDE = (ROOT / "docs" / "deploy.md").read_text()
SETTINGS = re.search(r"<!-- settings:.*?-->\n(.*?)<!-- /settings -->", GUIDE, re.S)


def _rows() -> dict[str, str]:
    """Each variable of the settings table → its default cell."""
    assert SETTINGS, "docs/deploy.md: the settings table"
    rows: dict[str, str] = {}
    for line in SETTINGS.group(1).splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`ONDEMAND_"):
            for name in re.findall(r"`(ONDEMAND_[A-Z0-9_]+)`", cells[0]):
                rows[name] = cells[2]
    return rows


def _shown(value: object) -> str | None:
    """The default as the table writes it, for the plain kinds of setting (None: free text)."""
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    if isinstance(value, int | str) and value:
        return f"`{value}`"
    if isinstance(value, list) and value:
        return f"`{','.join(value)}`"
    return None


def test_every_service_setting_is_in_the_guide_with_its_default() -> None:
    rows = _rows()
    for name, field in Settings.model_fields.items():
        variable = f"ONDEMAND_{name.upper()}"
        assert variable in rows, f"docs/deploy.md does not name {variable}"
        default = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
        shown = None if default is PydanticUndefined else _shown(default)
        if shown is not None and name != "workflows_dir":  # a path of the install
            assert rows[variable] == shown, (variable, rows[variable], shown)
    assert set(rows) <= {f"ONDEMAND_{n.upper()}" for n in Settings.model_fields}


def test_every_variable_a_runner_reads_is_in_the_guide() -> None:
    code = "\n".join(p.read_text() for p in (ROOT / "runner").rglob("*.py"))
    read = set(re.findall(r"\"(ONDEMAND_[A-Z0-9_]+)\"", code))
    assert read, "the runner reads its settings from ONDEMAND_* variables"
    missing = sorted(v for v in read if f"`{v}`" not in GUIDE)
    assert missing == []


def _assignments(text: str, indent: str = "") -> dict[str, str]:
    found = re.findall(rf"^{indent}(ONDEMAND_[A-Z0-9_]+)=(.*)$", text, re.M)
    assert len(found) == len(dict(found)), "a variable set twice"
    return dict(found)


def test_the_example_environment_file_is_the_guides() -> None:
    """`deploy/service.env.example` sets exactly the guide's variables to the guide's values,
    and what is left to fill in is refused, naming the variable, until it is."""
    [block] = re.findall(
        r"`/etc/ondemand/service.env` for an App(?s:.*?)\n\n((?:    .*\n)+)", GUIDE
    )
    guide = _assignments(block, "    ")
    example = _assignments((ROOT / "deploy" / "service.env.example").read_text())
    assert example == guide
    assert {"ONDEMAND_DATABASE_URL", "ONDEMAND_LINK_SECRET", "ONDEMAND_WEBHOOK_SECRETS"} <= set(
        guide
    )
    _, problems = read_settings(example)
    unfilled = sorted(name for name, value in example.items() if "<" in value)
    placeholders = sorted(p.line.split()[0] for p in problems if "placeholder" in p.line)
    assert len(unfilled) >= 4 and placeholders == unfilled
