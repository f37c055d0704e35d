#!/usr/bin/env bash
# The whole loop on a CUDA machine: `ondemand run` and
# `ondemand demo --backend nvidia`, with their reports under $OUT (default ./gpu-out).
# Packages the GPU image lacks travel as wheels in .whl/ (see docs/h200/README.md).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
if [ "$(git rev-parse --show-toplevel 2>/dev/null)" != "$PWD" ]; then  # a copied tree, no history
  git init -q && git add -A && git -c user.name=ci -c user.email=ci@example.org commit -qm snapshot
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"

op=${OP:-adaptive_max_pool3d_backward}
start=$(date +%s)
python3 -m ondemand run "$op:nvidia" --json "$OUT/run.json" >"$OUT/run_report.md" 2>"$OUT/run.log"
echo "ondemand run $op:nvidia -> exit $? in $(( $(date +%s) - start ))s" | tee -a "$OUT/summary.txt"

start=$(date +%s)
rm -rf /tmp/ondemand-demo
python3 -m ondemand demo --backend nvidia --op "$op" --workdir /tmp/ondemand-demo \
  --json "$OUT/demo.json" >"$OUT/demo.txt" 2>&1
echo "ondemand demo --backend nvidia -> exit $? in $(( $(date +%s) - start ))s" | tee -a "$OUT/summary.txt"
cp /tmp/ondemand-demo/runner.log "$OUT/demo_runner.log" 2>/dev/null
tail -n 40 "$OUT/demo.txt"
cat "$OUT/summary.txt"
