#!/usr/bin/env bash
# Two follow-ups to tools/gpu_flaggems.sh on the H200 (same git-ignored inputs):
# 1. A/A: FlagGems' benchmark of one operator, the same commit, in three processes in a row,
#    to see how far apart identical code measures (the before → after columns compare two).
# 2. The same FlagGems job with its steps as the unprivileged job user in their own
#    namespaces, as a runner started as root runs them.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
site=/tmp/ondemand-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$site" .whl/*.whl || exit 1
export PYTHONPATH="$site:$PWD" PYTHONUNBUFFERED=1
op=adaptive_max_pool3d_backward
repo=/tmp/flaggems
rm -rf "$repo" && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], \
  filter='data')" .device/flaggems.tar.xz "$repo" || exit 1
git -C "$repo" init -q -b main && git -C "$repo" add -A \
  && git -C "$repo" -c user.name=pr -c user.email=pr@example.org commit -qm "FlagGems main"

py=$(python3 -c "
from pathlib import Path
from runner.environment.pyenv import PackageSources, python_env
env = python_env(Path('$repo'), Path('/tmp/envs'), sources=PackageSources(Path('.device/wheelhouse')))
print(env.python)") || exit 1
for run in 1 2 3; do
  rm -f "$repo"/result*.log
  (cd "$repo" && PYTHONPATH="$repo" timeout 120 "$py" -m pytest "benchmark/test_$op.py" -m "$op" \
    -q -s -p no:cacheprovider --level core --record log >"$OUT/aa-$run.txt" 2>&1)
  python3 -c "
import glob, sys
from pathlib import Path
from runner.job.layouts import read_flaggems_records
rows = read_flaggems_records([Path(p) for p in glob.glob('$repo/result*.log')], '$op').rows
print('run $run', ' '.join(f'{r.kernel_ms:.4f}' for r in rows))" | tee -a "$OUT/aa.txt"
done

id ondemand-job >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin \
  ondemand-job
start=$(date +%s)
timeout 240 python3 -m ondemand run "$op:nvidia" --repo "$repo" --no-bench -q \
  --job-user ondemand-job --wheelhouse .device/wheelhouse --cache /tmp/cache-j \
  >"$OUT/jailed.md" 2>"$OUT/jailed.stderr"
echo "jailed: exit $? in $(( $(date +%s) - start ))s" | tee -a "$OUT/aa.txt"
head -n 12 "$OUT/jailed.md"
tail -n 5 "$OUT/jailed.stderr"
cat "$OUT/aa.txt"
