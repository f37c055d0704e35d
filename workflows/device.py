"""A backend's device stack, the `device:` section of its workflow: what proves the device and
names the job's stack in its report, what the job's environment takes from the host alone,
which modules' bytecode counts, and which of the runner's variables the steps keep. A vendor
is data here; the runner and the service read it and name no vendor themselves.

torch and triton are every backend's (`TORCH_*`): a workflow declares only what its vendor
adds beside them.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field, field_validator

# Every backend's stack beside the vendor's: reported as EnvironmentInfo's own fields, never
# installed into a job's environment (under either name triton ships as), and whose bytecode
# counts.
TORCH_PACKAGES = ("torch", "triton")
TORCH_DISTRIBUTIONS = ("torch", "triton", "pytorch-triton")
TORCH_MODULES = ("torch", "triton")

QUERY_PLACEHOLDER = "{device}"
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# A distribution's name (PEP 508), also how the report names it: no markdown can act on it.
_DISTRIBUTION = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$")


def canonical(name: str) -> str:
    """A distribution's name as package indexes compare it: `Torch_MUSA` is `torch-musa`."""
    return re.sub(r"[-_.]+", "-", name).lower()


class Profiler(BaseModel):
    """How `/test profile` records a row (`torch.profiler`, its activities by name: `cpu`,
    `cuda`, or the vendor's own as torch names it), and which timers of a harness it wraps to
    find the rows: `module:attribute` (a class's method as `Class.method`), each called with
    the timed function first, twice a row (the reference's, then the kernel's)."""

    model_config = ConfigDict(extra="forbid")

    activities: list[str] = Field(default_factory=lambda: ["cpu"], min_length=1, max_length=4)
    timers: list[str] = Field(
        default_factory=lambda: ["triton.testing:do_bench"], min_length=1, max_length=8
    )

    @field_validator("activities")
    @classmethod
    def _activities(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _MODULE.match(name):
                raise ValueError(f"not an activity name: {name!r}")
        return names

    @field_validator("timers")
    @classmethod
    def _timers(cls, names: list[str]) -> list[str]:
        for name in names:
            module, colon, attribute = name.partition(":")
            parts = [*module.split("."), *attribute.split(".")]
            if not colon or not all(_MODULE.match(p) for p in parts):
                raise ValueError(f"not a timer (module:attribute): {name!r}")
        return names


class Device(BaseModel):
    """The vendor's device stack beside torch and triton. Two ways name the device: `query`,
    a tool that prints `name, driver` (nothing is imported, no device initialized), else the
    torch device module `torch.<module>` after importing `plugin`. Without either the job
    names the host's CPU."""

    model_config = ConfigDict(extra="forbid")

    packages: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="distributions whose versions the report names after torch and triton, "
        "in this order (`torch_musa 1.3.0`)",
    )
    plugin: str | None = Field(
        default=None,
        description="a module imported before `module` is asked: the vendor's package that "
        "registers its device with torch (torch_musa registers torch.musa); where it is not "
        "installed the device is not asked",
    )
    module: str | None = Field(
        default=None,
        description="torch's device module, `torch.<module>`: its is_available() and "
        "get_device_name() name the job's device (musa, cuda)",
    )
    version: str | None = Field(
        default=None,
        description="the attribute of `torch.version` holding the device runtime's version: "
        "asked after `plugin` (musa), or read from torch's version.py with `query` (cuda)",
    )
    label: str = Field(
        default="",
        max_length=20,
        description="the runtime's name before its version in the driver field "
        "(`MUSA 4.0`, `580.1 (CUDA 12.8)`); default `module` upper-cased",
    )
    query: list[str] | None = Field(
        default=None,
        min_length=1,
        description="argv of a tool whose first line of output is `name, driver` of the "
        "device; `{device}` stands for the first of the workflow's visible devices, else 0",
    )
    host_only: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="distributions the job's environment takes from the host alone: never "
        "installed, whatever a repository asks (torch-musa)",
    )
    modules: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="top-level modules of the vendor's stack, which every step imports: one "
        "of them without bytecode has the environment compile the host's (torch_musa)",
    )
    inherit: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="variables of the runner's environment the steps keep beside the few "
        "every step keeps (PATH, LD_LIBRARY_PATH, the locale): the vendor's toolkit (MUSA_HOME)",
    )

    profiler: Profiler = Field(
        default_factory=Profiler,
        description="how `/test profile` records a row: the profiler's activities and the "
        "harness's timers it wraps",
    )

    @field_validator("packages", "host_only")
    @classmethod
    def _distributions(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _DISTRIBUTION.match(name):
                raise ValueError(f"not a distribution name: {name!r}")
        return names

    @field_validator("modules")
    @classmethod
    def _modules(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _MODULE.match(name):
                raise ValueError(f"not a top-level module name: {name!r}")
        return names

    @field_validator("inherit")
    @classmethod
    def _variables(cls, names: list[str]) -> list[str]:
        for name in names:
            if not _VARIABLE.match(name) or name.startswith("ONDEMAND_"):
                raise ValueError(f"not a variable a step may inherit: {name!r}")
        return names

    @field_validator("plugin", "module", "version")
    @classmethod
    def _name(cls, name: str | None) -> str | None:
        if name is not None and not _MODULE.match(name):
            raise ValueError(f"not a module or attribute name: {name!r}")
        return name

    @field_validator("query")
    @classmethod
    def _query(cls, argv: list[str] | None) -> list[str] | None:
        for arg in argv or []:
            if re.sub(re.escape(QUERY_PLACEHOLDER), "", arg).count("{"):
                raise ValueError(f"only {QUERY_PLACEHOLDER} may stand in the query: {arg!r}")
        return argv

    def reported(self) -> tuple[str, ...]:
        """The distributions the probe versions: torch's, then the vendor's."""
        return tuple(dict.fromkeys((*TORCH_PACKAGES, *self.packages)))

    def host_only_names(self) -> frozenset[str]:
        """Canonical names of what the job's environment never installs."""
        return frozenset(canonical(name) for name in (*TORCH_DISTRIBUTIONS, *self.host_only))

    def stack(self) -> frozenset[str]:
        """The top-level modules of the whole device stack (torch's and the vendor's)."""
        return frozenset((*TORCH_MODULES, *self.modules))

    def driver_label(self) -> str:
        return self.label or (self.module or "").upper()
