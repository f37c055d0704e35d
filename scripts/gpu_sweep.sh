#!/usr/bin/env bash
# One device call that explores kernel variants before one becomes a default: the kernel
# tests, then the tile sweep (kernels/tuning.py) of the operators in $OPS (default
# "forward,backward"), compiled first in parallel. Results under $OUT (default ./gpu-out).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
OPS=${OPS:-forward,backward}
start=$SECONDS
for i in $(seq 0 $((workers - 1))); do
  python3 -m kernels.tuning --out /tmp/warm --ops "$OPS" --warm "$i/$workers" >"/tmp/warm$i.txt" 2>&1 &
done
KERNELS_VENDOR=nvidia python3 -m pytest tests/kernels -q -p no:cacheprovider -n 4 >"$OUT/suite.txt" 2>&1 &
wait
cat /tmp/warm*.txt >"$OUT/warm.txt"
echo "warm + suite: $((SECONDS - start)) s; $(grep -c ok "$OUT/warm.txt") ok; suite: $(tail -n 1 "$OUT/suite.txt")"
grep -h "WRONG\|Error\|error" "$OUT/warm.txt" | head -8
grep -E "failed|FAILED|Error" "$OUT/suite.txt" | head -10
python3 -m kernels.tuning --out /tmp/tuning --ops "$OPS" >"$OUT/tuning.txt" 2>&1
echo "sweep done ($((SECONDS - start)) s)"
grep -v "^forward tiny\|^backward tiny" "$OUT/tuning.txt" | cut -c1-330
