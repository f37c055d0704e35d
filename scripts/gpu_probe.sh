#!/usr/bin/env bash
# One device call that checks and measures a backward change before it becomes the default:
# scripts/gpu_sweep.sh with OPS=backward (kernel tests, tile sweep), the flush and host-time
# probes, and the backward benchmark with its bars. Results under $OUT; 8 files at most.
set -uo pipefail
OPS=backward bash "$(dirname "$0")/gpu_sweep.sh"
source "$(dirname "$0")/gpu_env.sh"
python3 scripts/host_probe.py >"$OUT/host.md" 2>&1
python3 scripts/flush_probe.py >"$OUT/flush.md" 2>&1
python3 -m kernels.benchmark --no-progress --op adaptive_max_pool3d_backward --impl generic --sizes all \
  --json "$OUT/bwd.json" --markdown "$OUT/bwd.md" >/dev/null 2>&1
python3 -m kernels.benchmark.bars --backward "$OUT/bwd.json" >"$OUT/bars.txt" 2>&1
cat "$OUT/host.md" "$OUT/flush.md" "$OUT/bars.txt"
