#!/usr/bin/env bash
# One device call that explores kernel variants before one becomes a default: the kernel
# tests (unless SUITE=0), then the tile sweep (tools/tuning.py) of the operators in $OPS
# (default "forward,backward") over the cases matching $ONLY (a regex on labels such as
# "large torch.float16 (8, 64, 16, 56, 56)->(1, 1, 1)"; default all), compiled first in
# parallel. $CASES (space-separated N,C,D,H,W:OD,OH,OW) sweeps those shapes instead of the
# benchmark sizes; REACH=1 also times each row's mover (its reach) and prints the best and the
# default over it; $VARIANTS (a regex on variant names) times only those and the default.
# Results under $OUT (default ./gpu-out), named after $TAG (default "tuning").
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
OPS=${OPS:-forward,backward}
ONLY=${ONLY:-.}
TAG=${TAG:-tuning}
case_args=()
for shape in ${CASES:-}; do
  case_args+=(--case "$shape")
done
start=$SECONDS
for i in $(seq 0 $((workers - 1))); do
  python3 -m tools.tuning --out /tmp/warm --ops "$OPS" --only="$ONLY" --variants="${VARIANTS:-.}" \
    --warm "$i/$workers" \
    ${case_args[@]+"${case_args[@]}"} >"/tmp/warm$i.txt" 2>&1 &
done
if [ "${SUITE:-1}" != 0 ]; then
  KERNELS_VENDOR=nvidia python3 -m pytest tests/kernels -q -p no:cacheprovider -n 4 >"$OUT/suite.txt" 2>&1 &
fi
wait
cat /tmp/warm*.txt >"$OUT/warm_$TAG.txt"
echo "warm: $((SECONDS - start)) s; $(grep -c ok "$OUT/warm_$TAG.txt") ok"
grep -h "WRONG\|Error\|error" "$OUT/warm_$TAG.txt" | head -8
if [ "${SUITE:-1}" != 0 ]; then
  echo "suite: $(tail -n 1 "$OUT/suite.txt")"
  grep -E "failed|FAILED|Error" "$OUT/suite.txt" | head -10
fi
reach_arg=()
[ "${REACH:-0}" = 1 ] && reach_arg=(--reach)
python3 -m tools.tuning --out /tmp/tuning --ops "$OPS" --only="$ONLY" --variants="${VARIANTS:-.}" \
  ${reach_arg[@]+"${reach_arg[@]}"} \
  ${case_args[@]+"${case_args[@]}"} >"$OUT/$TAG.txt" 2>&1
echo "sweep done ($((SECONDS - start)) s)"
grep -v "^forward tiny\|^backward tiny" "$OUT/$TAG.txt" | cut -c1-400
