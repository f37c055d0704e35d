#!/usr/bin/env bash
# What busy neighbours do to a verdict on a multi-GPU host, and jobs per hour with N slots
# (docs/h200/slots.md): tools/slots_bars.py on this repository and on a FlagGems checkout,
# each job started as the runner's slot starts its steps (the slot's device in the
# workflow's visible-devices variable, its own caches, pinned to its cores). Steps, in order:
#   alone       slot 0 runs AA comment-only pull requests, every other slot idle
#   busy        the same on slot 0 while every other slot runs full jobs of other operators
#               (accuracy tests, compiles afresh, benchmarks) in a loop
#   throughput  the neighbour mix on one slot, then a copy of it on every slot at once
#   SLOTS (default: the GPUs nvidia-smi lists) AA=3 STEPS="alone busy throughput"
#   SOURCES="self flaggems" CORES_PER_SLOT=auto (N, auto or off: as the runner's option)
# A call that cannot run every step in its time runs some (STEPS=alone, then STEPS=busy ...);
# `python -m tools.slots_bars OUT1 OUT2 ...` reads them together.
# Needs .device/flaggems.tar.xz, .device/wheelhouse/ and .whl/ (tools/device_inputs.sh).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
for need in .device/flaggems.tar.xz .device/wheelhouse .whl; do
  [ -e "$need" ] || { echo "$need is missing: run tools/device_inputs.sh and carry it" >&2; exit 2; }
done
site=/tmp/ondemand-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$site" .whl/*.whl || exit 1
export PYTHONPATH="$PWD:$site" PYTHONUNBUFFERED=1
unset ONDEMAND_INDEX_URL ONDEMAND_WHEELHOUSE PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS
slots=${SLOTS:-$(nvidia-smi -L | wc -l)}
{
  nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
    "tree $(python3 -m tools.tree_id); $(nproc) cores; $slots slots"
} | tee -a "$OUT/device.txt"
python3 -m tools.slots_bars drive --out "$OUT" --slots "$slots" --aa "${AA:-3}" \
  --steps "${STEPS:-alone busy throughput}" --sources "${SOURCES:-self flaggems}" \
  --cores-per-slot "${CORES_PER_SLOT:-auto}" --self-repo "$PWD" \
  --tarball "$PWD/.device/flaggems.tar.xz" --wheelhouse "$PWD/.device/wheelhouse" \
  2>&1 | tee -a "$OUT/drive.txt"
python3 -m tools.slots_bars "$OUT" >"$OUT/slots.txt" 2>&1
# At most 8 files come back from a device call: the jobs' files travel as one archive.
tar -C "$OUT" -czf "$OUT/jobs.tgz" jobs && rm -rf "$OUT/jobs"
cat "$OUT/slots.txt"
