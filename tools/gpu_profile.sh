#!/usr/bin/env bash
# ncu counters of one case, our kernels, PyTorch's and the row's mover (tools/profile_case.py),
# appended to $OUT/ncu.txt. Arguments: operator, input shape, output size, dtype, e.g.
# backward 4,32,32,64,64 10,20,20 float32; a fifth, a config instead of the default plan's
# (tools/profile_case.py).
#   SOURCE=REGEX  instead, the first kernel whose name matches REGEX (e.g. column_, fill_scatter,
#                 _move for the mover) with `--set full` and its source: the report and its
#                 per-instruction CSV under $OUT/source/, summarized by tools/sass_stalls.py
#                 into $OUT/ncu.txt.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
if [ -n "${SOURCE:-}" ]; then
  mkdir -p "$OUT/source"
  name=$(echo "$*-$SOURCE" | tr -c 'A-Za-z0-9_.-' '_')
  timeout 180 "$NCU" --clock-control none --set full --import-source yes -k "regex:$SOURCE" -c 1 \
    -f -o "$OUT/source/$name" python3 -m tools.profile_case "$@" >"$OUT/source/$name.log" 2>&1
  "$NCU" -i "$OUT/source/$name.ncu-rep" --page source --csv --print-source sass \
    >"$OUT/source/$name.sass.csv" 2>&1
  { echo "## $* ($SOURCE, by instruction)"; python3 -m tools.sass_stalls "$OUT/source/$name.sass.csv"; } \
    >>"$OUT/ncu.txt" 2>&1
  exit 0
fi
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct
metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed
metrics+=,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
metrics+=,launch__registers_per_thread,launch__grid_size,smsp__inst_executed.sum
metrics+=,smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct
metrics+=,smsp__warp_issue_stalled_barrier_per_warp_active.pct
metrics+=,smsp__warp_issue_stalled_drain_per_warp_active.pct
metrics+=,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct
metrics+=,smsp__warp_issue_stalled_wait_per_warp_active.pct
metrics+=,smsp__warp_issue_stalled_math_pipe_throttle_per_warp_active.pct
metrics+=,smsp__warp_issue_stalled_mio_throttle_per_warp_active.pct
metrics+=,smsp__warp_issue_stalled_short_scoreboard_per_warp_active.pct
metrics+=,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__maximum_warps_per_active_cycle_pct
metrics+=,launch__occupancy_limit_registers,launch__occupancy_limit_blocks
metrics+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
metrics+=,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active
metrics+=,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active
echo "## $*" >>"$OUT/ncu.txt"
timeout 120 "$NCU" --clock-control none --metrics "$metrics" python3 -m tools.profile_case "$@" 2>&1 \
  | grep -vE "^==PROF==|^\s*$|Warning|----|Metric Name|Section:" >>"$OUT/ncu.txt"
