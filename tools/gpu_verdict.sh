#!/usr/bin/env bash
# Verdict time on a CUDA host: `ondemand run OP:nvidia` on this repository several times in a
# row, the first fresh (no mirror, environment or compile cache), the next warm (after the
# first run's trusted build), with step times; then, unless BARS=0, the kernel bars in the
# same call. Results under $OUT (default ./gpu-out). See docs/performance.md.
#   RUNS="fresh: warm: warm4:--warm-workers,4"  each NAME:ARGS (ARGS comma-separated)
#   WIDTHS="0 4"  also time the accuracy step alone on the warm cache at these xdist widths
#   DURATIONS=15  and list its slowest tests (pytest --durations) in the summary
#   PRECISION_AB=2  time the benchmark on the warm cache that many times each with the whole
#                 budget (--precision 0) and with the default early stop, alternating, and
#                 compare their rows (each row's spread between runs of one kind, and between
#                 the kinds' medians)
#   EXTRAS=none   the runs use a copy of the workflows that installs no extra of the
#                 repository (for an offline image that lacks one, e.g. playwright)
#   VENDOR_BARS=0 leave out the Moore Threads and do_bench bars (about 2 min: the backward
#                 benchmark with each implementation, tools.host_probe --do-bench 5,
#                 tools.dobench_states)
set -uo pipefail
# gpu_env.sh sets PYTHONPATH to this tree: keep what the caller had after it (wheels installed
# with --target, say: pip then finds them there and installs nothing more).
caller_path=${PYTHONPATH:-}
source "$(dirname "$0")/gpu_env.sh"
export PYTHONPATH=$PWD${caller_path:+:$caller_path}
python3 -c "import pydantic, yaml, torch, triton" || { echo "the service's packages are missing"; exit 1; }
# `ondemand run` tests HEAD: commit the tree as it came (a throwaway copy, which may carry a
# stale .git or none) so that the job runs exactly this code.
[ "$(git rev-parse --show-toplevel 2>/dev/null)" = "$PWD" ] || git init -q
git add -A && git -c user.name=ci -c user.email=ci@example.org commit -qm snapshot --allow-empty
op=${OP:-adaptive_max_pool3d_backward}
export XDG_CACHE_HOME=${VERDICT_CACHE:-/tmp/ondemand-verdict-cache}
rm -rf "$XDG_CACHE_HOME" && mkdir -p "$XDG_CACHE_HOME"
summary="$OUT/summary.txt"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"
echo "commit $(git rev-parse --short HEAD), tree $(python3 -m tools.tree_id); $(nproc) cores" | tee -a "$summary"
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
  # The job sees only the host's site-packages: what it lacks comes from the wheels.
  python3 -m ondemand run "$op:nvidia" "${wf[@]}" ${extra//,/ } --wheelhouse "$PWD/.whl" --json "$OUT/$name.json" \
    >"/tmp/$name.md" 2>"$log"
  rc=$?
  echo "== ondemand run $op:nvidia ${extra//,/ } ($name) -> exit $rc; whole command" \
    "$(( ($(date +%s%N) - start) / 1000000 )) ms (trusted build included)" | tee -a "$summary"
  grep -E "compile cache|bytecode|trusted build|step .*: (exit|.*-n )|passed" "$log" | cut -c1-160 | tee -a "$summary"
  [ "$rc" = 0 ] || tail -20 "$log" | cut -c1-200 | tee -a "$summary"
  names+=("$name=$OUT/$name.json")
done
cp /tmp/fresh.md "$OUT/fresh.md" 2>/dev/null
cp /tmp/warm.log "$OUT/warm.log" 2>/dev/null
layer=$(ls -d "$XDG_CACHE_HOME"/ondemand/compile/*/triton 2>/dev/null | head -1)
if [ -n "$layer" ]; then
  echo "shared layer: $(ls "$layer" | wc -l) entries, $(du -sh "$layer" | cut -f1)" | tee -a "$summary"
else  # no trusted build: nothing below would read a warm cache
  echo "no shared layer: no trusted build finished" | tee -a "$summary"
  WIDTHS="" PRECISION_AB=0
fi
python3 -m tools.verdict_times "${names[@]}" | tee -a "$summary"
for n in ${WIDTHS:-}; do  # the accuracy step alone, reading the shared layer
  xd=$([ "$n" = 0 ] && echo "-p no:xdist" || echo "-n $n")
  start=$(date +%s%N)
  TRITON_CACHE_DIR=$layer KERNELS_VENDOR=nvidia python3 -m pytest tests/kernels -m "$op" $xd -q \
    -p no:cacheprovider -p no:hypothesispytest ${DURATIONS:+--durations=$DURATIONS} \
    >/tmp/width.log 2>&1
  echo "warm accuracy alone, xdist $n: exit $? in $(( ($(date +%s%N) - start) / 1000000 )) ms;" \
    "$(tail -1 /tmp/width.log)" | tee -a "$summary"
  [ -n "${DURATIONS:-}" ] && grep -E "^[0-9.]+s (call|setup|teardown) " /tmp/width.log | cut -c1-160 \
    | tee -a "$summary"
done
for i in $(seq "${PRECISION_AB:-0}"); do  # the benchmark's early stop against the whole budget
  for kind in full early; do
    extra=()
    [ "$kind" = full ] && extra=(--precision 0)
    start=$(date +%s%N)
    TRITON_CACHE_DIR=$layer KERNELS_VENDOR=nvidia python3 -m kernels.benchmark --op "$op" \
      --sizes all "${extra[@]}" --json "/tmp/bench-$kind-$i.json" >/dev/null 2>"/tmp/bench-$kind.log"
    rc=$?
    echo "benchmark alone, $kind budget, run $i: exit $rc in" \
      "$(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$summary"
    [ "$rc" = 0 ] || { tail -5 "/tmp/bench-$kind.log" | tee -a "$summary"; PRECISION_AB=0; break 2; }
  done
done
if [ "${PRECISION_AB:-0}" -gt 0 ]; then  # every run succeeded
  cp /tmp/bench-full-1.json /tmp/bench-early-1.json "$OUT/"
  python3 -m tools.precision_ab "${PRECISION_AB}" | tee -a "$summary"
fi
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
extra=()
if [ "${VENDOR_BARS:-1}" = 1 ]; then  # Moore Threads against generic, tiny rows under do_bench
  for impl in generic mthreads; do
    python3 -m kernels.benchmark --op adaptive_max_pool3d_backward --impl "$impl" --sizes all \
      --json "$OUT/bwd-$impl.json" >/dev/null 2>&1
  done
  python3 -m tools.host_probe --do-bench 5 --json "$OUT/probe.json" >"$OUT/probe.txt" 2>&1
  # The same rows in each of do_bench's two launch-parity states, beside the mover's reach.
  python3 -m tools.dobench_states >"$OUT/dobench-states.txt" 2>&1
  extra=(--generic "$OUT/bwd-generic.json" --mthreads "$OUT/bwd-mthreads.json"
    --do-bench "$OUT/probe.json")
fi
python3 -m tools.bars --backward "$OUT/bwd.json" --forward "$OUT/fwd.json" --bounds /tmp/bounds.json \
  ${extra[@]+"${extra[@]}"} --runs "${names[@]}" | tee -a "$summary"
if [ -s "$OUT/dobench-states.txt" ]; then tee -a "$summary" <"$OUT/dobench-states.txt"; fi
