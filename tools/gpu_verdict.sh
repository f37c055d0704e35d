#!/usr/bin/env bash
# Verdict time on a CUDA host: `ondemand run OP:nvidia` on this repository several times in a
# row, the first fresh (no mirror, environment or compile cache), the next warm (after the
# first run's trusted build), with step times; then, unless BARS=0, the kernel bars in the
# same call. Results under $OUT (default ./gpu-out). See docs/performance.md.
#   RUNS="fresh: warm: warm4:--warm-workers,4"  each NAME:ARGS (ARGS comma-separated)
#   WIDTHS="0 4"  also time the accuracy step alone on the warm cache at these xdist widths
#   EXTRAS=none   the runs use a copy of the workflows that installs no extra of the
#                 repository (for an offline image that lacks one, e.g. playwright)
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
# `ondemand run` tests HEAD: commit the tree as it came (a throwaway copy, which may carry a
# stale .git or none) so that the job runs exactly this code.
[ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$PWD" ] || git init -q
git add -A && git -c user.name=ci -c user.email=ci@example.org commit -qm snapshot --allow-empty
op=${OP:-adaptive_max_pool3d_backward}
export XDG_CACHE_HOME=${VERDICT_CACHE:-/tmp/ondemand-verdict-cache}
rm -rf "$XDG_CACHE_HOME" && mkdir -p "$XDG_CACHE_HOME"
summary="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
echo "commit $(git rev-parse --short HEAD); $(nproc) cores" | tee -a "$summary"
names=()
wf=()
if [ "${EXTRAS:-}" = none ]; then
  mkdir -p /tmp/wf-noextras && cp workflows/*.yaml /tmp/wf-noextras/
  sed -i 's/^  extras: \[test\]/  extras: []/' /tmp/wf-noextras/*.yaml
  wf=(--workflows /tmp/wf-noextras)
fi
for item in ${RUNS:-fresh: warm:}; do
  name=${item%%:*} extra=${item#*:}
  log=/tmp/$name.log
  start=$(date +%s%N)
  python3 -m ondemand run "$op:nvidia" "${wf[@]}" ${extra//,/ } --json "$OUT/$name.json" \
    >"/tmp/$name.md" 2>"$log"
  rc=$?
  echo "== ondemand run $op:nvidia ${extra//,/ } ($name) -> exit $rc; whole command" \
    "$(( ($(date +%s%N) - start) / 1000000 )) ms (trusted build included)" | tee -a "$summary"
  grep -E "compile cache|trusted build|step .*: (exit|.*-n )|passed" "$log" | cut -c1-160 | tee -a "$summary"
  names+=("$name=$OUT/$name.json")
done
cp /tmp/fresh.md "$OUT/fresh.md" 2>/dev/null
layer=$(ls -d "$XDG_CACHE_HOME"/ondemand/compile/*/triton | head -1)
echo "shared layer: $(ls "$layer" | wc -l) entries, $(du -sh "$layer" | cut -f1)" | tee -a "$summary"
python3 -m tools.verdict_times "${names[@]}" | tee -a "$summary"
for n in ${WIDTHS:-}; do  # the accuracy step alone, reading the shared layer
  xd=$([ "$n" = 0 ] && echo "-p no:xdist" || echo "-n $n")
  start=$(date +%s%N)
  TRITON_CACHE_DIR=$layer KERNELS_VENDOR=nvidia python3 -m pytest tests/kernels -m "$op" $xd -q \
    -p no:cacheprovider >/tmp/width.log 2>&1
  echo "warm accuracy alone, xdist $n: exit $? in $(( ($(date +%s%N) - start) / 1000000 )) ms;" \
    "$(tail -1 /tmp/width.log)" | tee -a "$summary"
done
[ "${BARS:-1}" = 0 ] && exit 0
# The bars: the second run's backward benchmark, the forward's, the movers' reach, and the
# verdict times, in one table with verdicts.
second=${names[1]#*=}
python3 -c "import json,sys; json.dump(json.load(open(sys.argv[1]))['benchmark'], open(sys.argv[2],'w'))" \
  "$second" "$OUT/bwd.json"
python3 -m kernels.benchmark --op adaptive_max_pool3d --sizes all --json "$OUT/fwd.json" >/dev/null 2>&1
timeout "${BOUNDS_S:-200}" python3 -m tools.bar_bounds --flushes zero --json /tmp/bounds.json \
  >"$OUT/bounds.md" 2>&1
echo "bar_bounds -> exit $?" | tee -a "$summary"
python3 -m tools.bars --backward "$OUT/bwd.json" --forward "$OUT/fwd.json" --bounds /tmp/bounds.json \
  --runs "${names[@]}" | tee -a "$summary"
