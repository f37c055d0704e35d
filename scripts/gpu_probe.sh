#!/usr/bin/env bash
# One device call that checks and measures a kernel change before it becomes the default:
# the kernel suite (nvidia), the backward tile sweep, the flush and host-time probes, and the
# backward benchmark with its bars. Results under $OUT (default ./gpu-out); 8 files at most.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
start=$SECONDS
for i in $(seq 0 $((workers - 1))); do
  python3 -m kernels.tuning --out /tmp/warm --ops backward --warm "$i/$workers" >"/tmp/warm$i.txt" 2>&1 &
done
wait
cat /tmp/warm*.txt >"$OUT/warm.txt"
echo "warm: $((SECONDS - start)) s; $(grep -c ok "$OUT/warm.txt") ok, $(grep -vc ok "$OUT/warm.txt") other"
KERNELS_VENDOR=nvidia python3 -m pytest tests/kernels -q -p no:cacheprovider -n "$workers" >"$OUT/suite.txt" 2>&1
echo "suite: $(tail -n 1 "$OUT/suite.txt") ($((SECONDS - start)) s)"
python3 -m kernels.tuning --out /tmp/tuning --ops backward >"$OUT/tuning.txt" 2>&1
echo "tuning done ($((SECONDS - start)) s)"
python3 scripts/host_probe.py >"$OUT/host.md" 2>&1
python3 scripts/flush_probe.py >"$OUT/flush.md" 2>&1
python3 -m kernels.benchmark --no-progress --op adaptive_max_pool3d_backward --impl generic --sizes all \
  --json "$OUT/bwd.json" --markdown "$OUT/bwd.md" >/dev/null 2>&1
python3 -m kernels.benchmark.bars --backward "$OUT/bwd.json" >"$OUT/bars.txt" 2>&1
echo "all done ($((SECONDS - start)) s)"
grep -h "WRONG\|Error\|error" "$OUT/warm.txt" | head -5
grep -E "failed|FAILED|Error" "$OUT/suite.txt" | head -10
cat "$OUT/tuning.txt" "$OUT/host.md" "$OUT/flush.md" "$OUT/bars.txt"
