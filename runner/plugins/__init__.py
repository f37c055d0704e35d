"""The pytest plugins a job's accuracy step loads (`-p NAME`), copied into the job's directory:
they run inside the job's own process, so they import only pytest and the standard library."""

from pathlib import Path

PLUGINS = Path(__file__).parent
