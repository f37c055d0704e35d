#!/usr/bin/env bash
# One device call that explores kernel variants before one becomes a default: the forward
# kernel tests, the tile sweep of both operators, the timer's floor for tiny launches, and
# ncu's DRAM counts for the backward's stepped fill-and-scatter. Results under $OUT.
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
start=$SECONDS
for i in $(seq 0 $((workers - 1))); do
  python3 -m kernels.tuning --out /tmp/warm --warm "$i/$workers" >"/tmp/warm$i.txt" 2>&1 &
done
KERNELS_VENDOR=nvidia python3 -m pytest tests/kernels/test_adaptive_max_pool3d.py -q -p no:cacheprovider \
  -n 4 >"$OUT/suite_fwd.txt" 2>&1 &
wait
cat /tmp/warm*.txt >"$OUT/warm.txt"
echo "warm + forward suite: $((SECONDS - start)) s; $(grep -c ok "$OUT/warm.txt") ok; suite: $(tail -n 1 "$OUT/suite_fwd.txt")"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -n 1)
for case in "5,9,11 float16"; do
  timeout 90 "$NCU" --clock-control none -k regex:fill_scatter \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct \
    python3 scripts/bwd_profile_case.py $case >"/tmp/ncu.txt" 2>&1
  echo "## $case" >>"$OUT/ncu.txt"
  grep -E "fill_scatter|duration|bytes|hit_rate|ERR|rror" /tmp/ncu.txt | head -n 24 >>"$OUT/ncu.txt"
done
for case in 5,9,11 7,7,7 10,20,20; do
  timeout 90 "$NCU" --clock-control none -k regex:"window" --metrics \
gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_elapsed,\
lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,\
sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__t_sector_hit_rate.pct,launch__registers_per_thread,\
smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct,smsp__warp_issue_stalled_lg_throttle_per_warp_active.pct,\
smsp__inst_executed.sum \
    python3 scripts/fwd_profile_case.py $case >/tmp/ncu.txt 2>&1
  echo "## forward $case" >>"$OUT/ncu.txt"
  grep -vE "^==PROF==|^\s*$" /tmp/ncu.txt | head -n 40 >>"$OUT/ncu.txt"
done
echo "probes done ($((SECONDS - start)) s)"
python3 -m kernels.tuning --out /tmp/tuning --ops forward >"$OUT/tuning_fwd.txt" 2>&1
echo "forward sweep done ($((SECONDS - start)) s)"
python3 -m kernels.tuning --out /tmp/tuning --ops backward >"$OUT/tuning_bwd.txt" 2>&1
echo "all done ($((SECONDS - start)) s)"
grep -h "WRONG\|Error\|error" "$OUT/warm.txt" | head -8
grep -E "failed|FAILED|Error" "$OUT/suite_fwd.txt" | head -10
cat "$OUT/ncu.txt" "$OUT/tuning_fwd.txt" "$OUT/tuning_bwd.txt"
