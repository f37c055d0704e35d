#!/usr/bin/env bash
# A real FlagGems checkout through `ondemand run` on an offline CUDA host, as a FlagGems
# maintainer would run it: the host's own torch, triton and newer PyYAML/pytest/pandas, the packages it
# lacks from a wheelhouse and no index. Reports under $OUT (default ./gpu-out).
#
# Needs, git-ignored in the tree (docs/h200/flaggems.md says how they were made):
#   .device/flaggems.tar.xz   `git archive` of FlagGems (src tests benchmark conf, config files)
#   .device/wheelhouse/       wheels of what FlagGems declares and the image may lack
#   .whl/                     the runner's own pure-Python packages (pydantic)
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
site=/tmp/ondemand-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$site" .whl/*.whl || exit 1
export PYTHONPATH="$site:$PWD" PYTHONUNBUFFERED=1
unset ONDEMAND_INDEX_URL ONDEMAND_WHEELHOUSE PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS
op=adaptive_max_pool3d_backward

# The checkout: FlagGems as fetched (the merge base) and a pull request on top of it.
repo=/tmp/flaggems
rm -rf "$repo" && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], \
  filter='data')" .device/flaggems.tar.xz "$repo" || exit 1
git_() { git -C "$repo" -c user.name=pr -c user.email=pr@example.org "$@"; }
git_ init -q -b main && git_ add -A && git_ commit -qm "FlagGems main"
printf '\n# A pull request that touches the operator.\n' >>"$repo/src/flag_gems/ops/$op.py"
git_ commit -qam "Touch $op" && git_ branch -q pr && git_ reset -q --hard HEAD~1

{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 - <<'EOF'
from importlib import metadata
for name in ("torch", "triton", "PyYAML", "pytest", "pandas", "coverage", "numpy", "scipy",
             "packaging", "SQLAlchemy", "distro", "openpyxl", "pytest-md-report"):
    try:
        print(f"host {name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(f"host {name} (not installed)")
EOF
} | tee "$OUT/host.txt"

run() {  # name, then the arguments of `ondemand run`
  local name=$1 start
  shift
  start=$(date +%s%N)
  timeout 420 python3 -m ondemand run "$op:nvidia" --repo "$repo" -q --json "$OUT/$name.json" \
    "$@" >"$OUT/$name.md" 2>"$OUT/$name.stderr"
  local code=$?
  echo "$name: exit $code in $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$OUT/summary.txt"
  cp "$(sed -n 's/.*(file:\/\/\([^)]*job\.log\)).*/\1/p' "$OUT/$name.md" | head -1)" \
    "$OUT/$name.log" 2>/dev/null
}

# 1. The pull request against its merge base, wheels from the wheelhouse, no index.
run flaggems --ref pr --base main --wheelhouse .device/wheelhouse --cache /tmp/cache-a
# 2. A package really missing: a wheelhouse without distro, then no source at all.
mkdir -p /tmp/partial && cp .device/wheelhouse/*.whl /tmp/partial/ && rm /tmp/partial/distro-*
run missing --ref pr --no-bench --wheelhouse /tmp/partial --cache /tmp/cache-b
run no-source --ref pr --no-bench --cache /tmp/cache-c
# 3. Our own Moore Threads specialization's proof log, forced on this GPU, counted by the
#    runner's plugin over the backward suite's shape and proof cases.
mkdir -p /tmp/proof && cp runner/plugins/pytest_proof.py /tmp/proof/
start=$(date +%s)
KERNELS_VENDOR=mthreads TEST_PROOF_PREFIX=KERNELS_MTHREADS \
  TEST_PROOF_LOGGER=kernels.backends._mthreads TEST_PROOF_DIR=/tmp/proof \
  PYTHONPATH="/tmp/proof:$PYTHONPATH" timeout 240 python3 -m pytest -q -p pytest_proof \
  -p no:cacheprovider tests/kernels/test_adaptive_max_pool3d_backward.py -m "$op" \
  -k "upstream or other_shapes or proof or grid" >"$OUT/proof.txt" 2>&1
echo "proof: exit $? in $(( $(date +%s) - start ))s" | tee -a "$OUT/summary.txt"
python3 -c "
from pathlib import Path
from runner.results.results import read_proof
for line in read_proof(Path('/tmp/proof'), 'KERNELS_MTHREADS').lines:
    print(f'{line.count:6d}  {line.message}')
" | tee "$OUT/proof-counts.txt"

tail -n 3 "$OUT/proof.txt"
for name in flaggems missing no-source; do
  echo "== $name"; grep -E "^###|^\*\*Steps|passed|missing|wheelhouse|index|Size|→" \
    "$OUT/$name.md" | head -n 12
done
cat "$OUT/summary.txt"
