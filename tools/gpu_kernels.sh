#!/usr/bin/env bash
# The kernel library on a CUDA machine, in one command from the repository root: the accuracy
# suite with each vendor active, then the benchmark tables docs/performance.md quotes and the
# bars. Results under $OUT (default ./gpu-out): the two suite logs, the three harness JSONs,
# their tables in one tables.md, and bars.txt; the summary goes to standard output.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
for vendor in nvidia mthreads; do
  KERNELS_VENDOR=$vendor python3 -m pytest tests/kernels -q -p no:cacheprovider -n "$workers" \
    >"$OUT/suite_$vendor.txt" 2>&1
  echo "suite KERNELS_VENDOR=$vendor: $(tail -n 1 "$OUT/suite_$vendor.txt")"
done
bench() {  # name, then the harness's arguments
  local name=$1; shift
  python3 -m kernels.benchmark --no-progress "$@" --json "$OUT/$name.json" --markdown "/tmp/$name.md" \
    >/dev/null 2>"/tmp/$name.err"
  echo "benchmark $name: exit $?"
  tail -n 5 "/tmp/$name.err"
  cat "/tmp/$name.md" >>"$OUT/tables.md"
}
bench bwd_generic --op adaptive_max_pool3d_backward --impl generic --sizes all
bench bwd_mthreads --op adaptive_max_pool3d_backward --impl mthreads --sizes all
bench fwd_generic --op adaptive_max_pool3d --impl generic --sizes all
python3 -m tools.bars --backward "$OUT/bwd_generic.json" --forward "$OUT/fwd_generic.json" \
  --generic "$OUT/bwd_generic.json" --mthreads "$OUT/bwd_mthreads.json" | tee "$OUT/bars.txt"
