#!/usr/bin/env bash
# The before → after comparison's bars on a real FlagGems checkout, on a CUDA host, through the
# product's own path (`ondemand run OP:nvidia --ref PR --base main --json`); see
# docs/h200/flaggems-verdict.md. tools/flaggems_bars.py makes the pull requests, runs the jobs
# and prints the bars. Steps, in the order given (each within its own deadline and the call's):
#   aa      AA comment-only pull requests on adaptive_max_pool3d_backward (the first to run on
#           a warm runner a full job: the cost bar), the rest benchmark-only
#   power   the backward done twice; and with one more pass over a quarter of its result
#   others  OTHERS (exp: bandwidth-bound, 1 Gi-element rows; vdot: host-bound, 64–65536
#           elements): OTHER_AA comment-only pull requests each and the twice one
#   cost    this repository's own job on a comment-only pull request, fresh then warm
#   host    HOST_AA comment-only pull requests on HOST_OP (gelu) and one whose wrapper spends
#           HOST_US (30) more µs of Python a call: its host-bound rows judged on host time over
#           HOST_PROCESSES processes per tree (0: the workflow's, 3); the first A/A on the
#           fresh runner, then the host one and the rest warm (FULL_WARM=1: the last A/A a
#           full job, accuracy too). One call: STEPS=host TIMER_COST=0 (docs/h200/README.md)
#   main    MAIN_AA comment-only pushes of MAIN_RUN_OP (gelu) on a branch standing for main,
#           each run against the commit before it, as the service runs a push (A/A bars)
# Every job's result lands in $OUT/jobs/ as it ends; a later call passes SKIP (job-name globs)
# to leave out what an earlier one finished, and `python -m tools.flaggems_bars OUT1 OUT2 ...`
# reads them all together.
#   STEPS="aa power"  AA=5 OTHER_AA=1 OTHERS="exp vdot" SKIP="*-aa1 *-aa2"
#   DEADLINE_S=570 (the call) AA_S POWER_S OTHERS_S COST_S (each step)
#   OTHER_QUARTER=1 (the quarter pass on the other operators too) FG_COMPILE_CACHE=1 (FlagGems
#   jobs keep a shared compile cache: a trusted build after the first) WORKERS=auto|on|off
#   (compare.workers on the flaggems layout of the workflow copies; auto: where the runner
#   knows the field) SELF_OP=adaptive_max_pool3d (the cost step's operator; default the
#   backward, whose warm job compare.md timed) TIMER_COST=0 (leave out the timer's cost
#   by phase, tools/timer_cost.py, which goes first into device.txt) FULL_FIRST=1 (the first
#   A/A job runs the accuracy tests too, on the fresh runner: a short call times a full job)
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
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
  # The device's git may lag the tree it ran: the tree's id says which code it was
  # (`python -m tools.tree_id` here, at a commit, gives the same id for the same code).
  echo "commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
    "tree $(python3 -m tools.tree_id); $(nproc) cores;" \
    "FlagGems $(cat .device/flaggems.commit 2>/dev/null || echo '?')"
} | tee -a "$OUT/device.txt"
# What one reading of the workers' timer costs, phase by phase (a few seconds).
[ "${TIMER_COST:-1}" = 1 ] && python3 -m tools.timer_cost --readings 20 2>&1 | tee -a "$OUT/device.txt"

# The GPU's clocks every 200 ms; tools/flaggems_rounds.py lines each job up with its window.
source tools/gpu_clocks.sh
start_clock_log "$OUT/smi.csv" 200
smi=$clock_log_pid

args=(drive --out "$OUT" --steps "${STEPS:-aa power others cost}" --aa "${AA:-5}"
  --other-aa "${OTHER_AA:-1}" --others "${OTHERS:-exp vdot}" --skip "${SKIP:-}"
  --deadline-s "${DEADLINE_S:-570}" --workers "${WORKERS:-auto}"
  --tarball "$PWD/.device/flaggems.tar.xz" --wheelhouse "$PWD/.device/wheelhouse"
  --self-repo "$PWD" --self-wheelhouse "$PWD/.whl" --self-op "${SELF_OP:-adaptive_max_pool3d_backward}")
for step in aa power others cost host main; do
  var=${step^^}_S
  [ -n "${!var:-}" ] && args+=("--$step-s" "${!var}")
done
[ "${OTHER_QUARTER:-0}" = 1 ] && args+=(--other-quarter)
[ "${FG_COMPILE_CACHE:-0}" = 1 ] && args+=(--compile-cache)
[ "${FULL_FIRST:-0}" = 1 ] && args+=(--full-first)
[ "${FULL_WARM:-0}" = 1 ] && args+=(--full-warm)
args+=(--host-op "${HOST_OP:-gelu}" --host-aa "${HOST_AA:-3}" --host-us "${HOST_US:-30}"
  --host-processes "${HOST_PROCESSES:-0}" --host-budget-s "${HOST_BUDGET_S:-0}"
  --main-op "${MAIN_RUN_OP:-gelu}" --main-aa "${MAIN_AA:-2}")
python3 -m tools.flaggems_bars "${args[@]}" 2>&1 | tee -a "$OUT/drive.txt"
kill "$smi" 2>/dev/null
cat "$OUT/smi.err" >>"$OUT/device.txt" 2>/dev/null && rm -f "$OUT/smi.err"  # 8 files come back
# The bars of this call's jobs, the short table last.
python3 -m tools.flaggems_bars "$OUT" --json "$OUT/bars.json" >"$OUT/bars.txt" 2>&1
python3 -m tools.flaggems_rounds "$OUT" --clocks-only >"$OUT/clocks.txt" 2>&1
# At most 8 files come back from a device call: the jobs' files travel as one archive, and
# beside it each run's log and its rounds' timings (tools/flaggems_rounds.py reads them).
tar -C "$OUT" -czf "$OUT/jobs.tgz" jobs && rm -rf "$OUT/jobs"
find /tmp -maxdepth 1 -name 'ondemand-run-*' -type d -print0 2>/dev/null \
  | xargs -0 -I{} find {} \( -name job.log -o -path '*bench-rounds-*' -name 'round-*.json' \) \
  | tar -czf "$OUT/runs.tgz" -T - 2>/dev/null
cat "$OUT/clocks.txt" "$OUT/bars.txt"
