# Sourced by the device scripts that log the GPU's state beside their runs
# (tools/gpu_flaggems_bars.sh, tools/gpu_flaggems_noise.sh).
#   start_clock_log FILE MS [FIELD ...]
# nvidia-smi writes the timestamp, SM and memory clocks, throttle reasons (the field's older
# or newer name, whichever the driver knows), temperature and power, and any FIELDs, every MS
# milliseconds as CSV into FILE, in the background (errors into FILE's .err); it only reads
# them, never sets a clock. Its pid is in $clock_log_pid (`kill "$clock_log_pid"` ends it).
start_clock_log() {
  local file=$1 ms=$2 reasons=clocks_throttle_reasons.active field
  shift 2
  nvidia-smi --query-gpu=$reasons --format=csv,noheader >/dev/null 2>&1 \
    || reasons=clocks_event_reasons.active
  local fields=timestamp,clocks.sm,clocks.mem,$reasons,temperature.gpu,power.draw
  for field in "$@"; do fields+=",$field"; done
  nvidia-smi --query-gpu="$fields" --format=csv -lms "$ms" >"$file" 2>"${file%.csv}.err" &
  clock_log_pid=$!
}
