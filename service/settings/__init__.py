"""The service's configuration: `ONDEMAND_*` environment variables, one object passed around.

Every value is checked when the object is made, files and URLs included (`Check`: a kind of
value and its check), so a service never starts on a setting it would fail on later.
`read_settings` is how the daemon and the doctor read them: each problem becomes one line that
names the variable, what is wrong with its value and the fix (`Problem`).

`model.py` is the `Settings` object, `checks.py` the kinds of value and their checks,
`reading.py` reading them from the environment as one line a problem."""

from service.settings.checks import Check
from service.settings.model import MAX_WEBHOOK_BYTES, PREFIX, Settings, link_key, variable
from service.settings.reading import Problem, expected, read_settings, settings_source

__all__ = [
    "MAX_WEBHOOK_BYTES",
    "PREFIX",
    "Check",
    "Problem",
    "Settings",
    "expected",
    "link_key",
    "read_settings",
    "settings_source",
    "variable",
]
