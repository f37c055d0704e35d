#!/usr/bin/env bash
# `/test profile`'s path on a real FlagGems checkout, on a CUDA host (not yet run): the "twice"
# pull request of OP (default exp), `ondemand run OP:nvidia --profile` against main, and the
# kernel whose device time doubled (tools/flaggems_profile.py; docs/h200/flaggems-profile.md).
#   OUT=/some/dir OP=exp bash tools/gpu_flaggems_profile.sh
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
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
python3 -m tools.flaggems_profile --out "$OUT" --op "${OP:-exp}" \
  --tarball "$PWD/.device/flaggems.tar.xz" --wheelhouse "$PWD/.device/wheelhouse" \
  2>&1 | tee "$OUT/profile.txt"
