#!/usr/bin/env bash
# Where FlagGems' benchmark noise comes from, on a CUDA machine, from the repository root
# (tools/flaggems_noise.py reads what it leaves and prints the tables):
#   STEPS=driver: tools/flaggems_noise_driver.py in one warm-up process (WARM=0: none), then N
#     processes one after another (each row repeated within the process, host against device time, the
#     harness's modes, do_bench's loop with and without a device pad, a per-CPU scan);
#   STEPS=between: FlagGems' own benchmark file of OP as the runner's flaggems layout runs it,
#     in HN processes;
#   STEPS=inproc: in one process, a generated file that runs the same benchmark K times, each
#     of MODES in turn (the record log keeps a short name, where K copies of the file on the
#     argv made it too long to open).
# nvidia-smi logs the clocks, throttle reasons, temperature and power every 100 ms all along
# (it only reads them). Needs .device/flaggems.tar.xz (a FlagGems tree) and
# .device/wheelhouse/ (what it needs and the image lacks). Everything lands in $OUT/noise.tar.gz
# (unpack it and run `python -m tools.flaggems_noise DIR OP` for every table), and the driver's
# tables in $OUT/noise.txt.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
OP=${OP:-adaptive_max_pool3d_backward}
STEPS=${STEPS:-driver between inproc}
N=${N:-6} REPEATS=${REPEATS:-6} HN=${HN:-3} K=${K:-5}
MODES=${MODES:-kernel,wrapper,operator,cudagraph}
HARNESS_ARGS=${HARNESS_ARGS:-}      # e.g. "--dtypes float16" for the between-process runs
INPROC_ARGS=${INPROC_ARGS:---dtypes float16 --warmup 100}
BUDGET_S=${BUDGET_S:-540}           # no new process starts past this many seconds...
INPROC_BUDGET_S=${INPROC_BUDGET_S:-$BUDGET_S}  # ...nor the in-process run past this many,
BETWEEN_BUDGET_S=${BETWEEN_BUDGET_S:-$BUDGET_S}  # ...nor a harness process past this many
WARM=${WARM:-1}                     # 0: no driver warm-up process (its first process compiles)
begin=$(date +%s)
mkdir -p "$OUT"
repo=$PWD work=/tmp/noise fg=/tmp/fg site=/tmp/fgsite
rm -rf "$work" "$fg" "$site" && mkdir -p "$work/driver" "$fg" "$site"
tar -xJf .device/flaggems.tar.xz -C "$fg" || exit 1
# What FlagGems needs and the image lacks; never the image's own pytest, its plugins, or what
# the image already has.
wheels=()
for w in .device/wheelhouse/*.whl; do
  case "$(basename "$w")" in
    pytest-*|pluggy-*|iniconfig-*|packaging-*|setuptools-*|pygments-*) ;;
    six-*|python_dateutil-*|pytz-*|typing_extensions-*) ;;
    *) wheels+=("$w") ;;
  esac
done
python3 -m pip install -q --no-index --no-deps --target "$site" "${wheels[@]}" || exit 1
export PYTHONPATH="$fg:$fg/src:$site" PYTHONUNBUFFERED=1
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
late() { [ $(( $(date +%s) - begin )) -gt "${1:-$BUDGET_S}" ]; }
# Everything so far into $OUT after each step: a call stopped later still returns it.
keep() { tar -czf "$OUT/noise.tar.gz" -C "$work" . ; }
times=$work/times.txt
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv,noheader |
  tee "$times"
source "$repo/tools/gpu_clocks.sh"
start_clock_log "$work/smi.csv" 100 utilization.gpu
smi=$clock_log_pid
lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|CPU max MHz|CPU MHz)' >>"$times"
cd "$fg" || exit 1

if [[ " $STEPS " == *" driver "* ]]; then
  driver=("$repo/tools/flaggems_noise_driver.py" --repeats "$REPEATS")
  if [ "$WARM" != 0 ]; then
    start=$(date +%s%N)
    timeout 240 python3 "${driver[@]}" --repeats 1 --no-cpus --out "$work/driver/warm.jsonl" \
      >"$work/driver/warm.txt" 2>&1
    echo "driver warm-up process: exit $? in $(ms "$start") ms" | tee -a "$times"
  fi
  for i in $(seq 1 "$N"); do
    late && { echo "driver process $i: not started (budget)" | tee -a "$times"; break; }
    start=$(date +%s%N)
    timeout 150 python3 "${driver[@]}" --out "$work/driver/proc$i.jsonl" >"$work/driver/proc$i.txt" 2>&1
    echo "driver process $i: exit $? in $(ms "$start") ms" | tee -a "$times"
  done
  keep
fi

if [[ " $STEPS " == *" inproc "* ]]; then
  rm -f result*.log
  cat >benchmark/test_noise_repeat.py <<'EOF'
"""One benchmark K times in one process, each of its modes in turn (written by the probe's
gpu_flaggems_noise.sh, not part of FlagGems)."""

import importlib
import os

import pytest

from . import conftest, consts

OP = os.environ["NOISE_OP"]
_case = getattr(importlib.import_module(f"{__package__}.test_{OP}"), f"test_{OP}")
pytestmark = [getattr(pytest.mark, OP)]
RUNS = [
    (i, mode)
    for i in range(int(os.environ["NOISE_REPEATS"]))
    for mode in os.environ["NOISE_MODES"].split(",")
]


@pytest.mark.parametrize("i,mode", RUNS)
def test_noise_repeat(i, mode):
    conftest.Config.mode = consts.BenchMode(mode)
    _case()
EOF
  if late "$INPROC_BUDGET_S"; then
    echo "harness in one process: not started (budget)" | tee -a "$times"
  else
    start=$(date +%s%N)
    # shellcheck disable=SC2086
    NOISE_OP=$OP NOISE_REPEATS=$K NOISE_MODES=$MODES timeout 100 python3 -m pytest \
      benchmark/test_noise_repeat.py -m "$OP" -q -s -p no:cacheprovider --level core --record log \
      $INPROC_ARGS >"$work/inproc.txt" 2>&1
    echo "harness in one process, $K × $MODES: exit $? in $(ms "$start") ms" | tee -a "$times"
    mkdir -p "$work/inproc" && mv result*.log "$work/inproc/" 2>/dev/null
  fi
fi

if [[ " $STEPS " == *" between "* ]]; then
  args=(-m pytest "benchmark/test_$OP.py" -m "$OP" -q -s -p no:cacheprovider --level core --record log)
  for i in $(seq 1 "$HN"); do
    late "$BETWEEN_BUDGET_S" && { echo "harness process $i: not started (budget)" | tee -a "$times"; break; }
    rm -f result*.log
    start=$(date +%s%N)
    # shellcheck disable=SC2086
    timeout 90 python3 "${args[@]}" $HARNESS_ARGS >"$work/proc$i.txt" 2>&1
    echo "harness process $i: exit $? in $(ms "$start") ms" | tee -a "$times"
    mkdir -p "$work/proc$i" && mv result*.log "$work/proc$i/" 2>/dev/null
  done
  keep
fi

kill "$smi" 2>/dev/null
wait "$smi" 2>/dev/null
cd "$repo" || exit 1
PYTHONPATH="$repo" python3 -m tools.flaggems_noise "$work" "$OP" >"$work/noise.txt" 2>&1
keep
cp "$work/noise.txt" "$OUT/noise.txt"
cat "$work/noise.txt"
