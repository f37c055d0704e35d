#!/usr/bin/env bash
# Where FlagGems' benchmark noise comes from (tools/flaggems_noise.py prints it): the operator's
# benchmark file, as the runner's flaggems layout runs it, in N processes of the same tree one
# after another (between processes), then once with the file given K times (within one
# process); each process's wall time and the import of flag_gems alone. Needs
# .device/flaggems.tar.xz (a FlagGems tree), .device/wheelhouse/ (what it needs and the image
# lacks) and .whl/ (the runner's pure-Python packages: the reader parses the records as the
# runner does; SKIP_WHEELS=1 when the host has them). Results under $OUT.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
OP=${OP:-adaptive_max_pool3d_backward}
N=${N:-8}
K=${K:-4}
mkdir -p "$OUT"
tools=$PWD
fg=/tmp/fg site=/tmp/fgsite
rm -rf "$fg" "$site" && mkdir -p "$fg" "$site"
tar -xJf .device/flaggems.tar.xz -C "$fg" || exit 1
# What FlagGems needs and the image lacks; never the image's own pytest and its plugins.
wheels=()
for w in .device/wheelhouse/*.whl; do
  case "$(basename "$w")" in
    pytest-*|pluggy-*|iniconfig-*|packaging-*|setuptools-*|pygments-*) ;;
    *) wheels+=("$w") ;;
  esac
done
python3 -m pip install -q --no-index --no-deps --target "$site" "${wheels[@]}" || exit 1
ours=/tmp/ondemand-site  # for the reader only: FlagGems' runs never see it
[ -n "${SKIP_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
  --target "$ours" .whl/*.whl || exit 1
export PYTHONPATH="$fg/src:$site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/times.txt"
cd "$fg" || exit 1
args=(-m pytest "benchmark/test_$OP.py" -m "$OP" -q -s -p no:cacheprovider --level core --record log)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

start=$(date +%s%N)
python3 -c "import flag_gems" 2>"$OUT/import.err"
echo "import flag_gems: $(ms "$start") ms" | tee -a "$OUT/times.txt"
start=$(date +%s%N)
timeout 300 python3 "${args[@]::3}" -q -p no:cacheprovider --collect-only >/dev/null 2>&1
echo "collect the benchmark file: $(ms "$start") ms" | tee -a "$OUT/times.txt"
# The accuracy step first, as a job runs it (its compiles land in the cache the benchmark reads).
start=$(date +%s%N)
timeout 600 python3 -m pytest "tests/test_$OP.py" -m "$OP" -q -p no:cacheprovider -x >"$OUT/accuracy.txt" 2>&1
echo "accuracy: exit $? in $(ms "$start") ms" | tee -a "$OUT/times.txt"

for i in $(seq 1 "$N"); do
  rm -f result*.log
  start=$(date +%s%N)
  timeout 300 python3 "${args[@]}" >"$OUT/proc$i.txt" 2>&1
  echo "process $i: exit $? in $(ms "$start") ms" | tee -a "$OUT/times.txt"
  mkdir -p "$OUT/proc$i" && mv result*.log "$OUT/proc$i/" 2>/dev/null
done
rm -f result*.log
files=()
for _ in $(seq 1 "$K"); do files+=("benchmark/test_$OP.py"); done
start=$(date +%s%N)
timeout 400 python3 -m pytest --keep-duplicates "${files[@]}" -m "$OP" -q -s -p no:cacheprovider \
  --level core --record log >"$OUT/inproc.txt" 2>&1
echo "one process, the file $K times: exit $? in $(ms "$start") ms" | tee -a "$OUT/times.txt"
mkdir -p "$OUT/inproc" && mv result*.log "$OUT/inproc/" 2>/dev/null
ls ~/.flaggems ~/.cache/flaggems 2>/dev/null | head -5 | tee -a "$OUT/times.txt"
cd "$tools" && PYTHONPATH="$tools:$ours" python3 -m tools.flaggems_noise "$OUT" "$OP" |
  tee "$OUT/noise.txt"
