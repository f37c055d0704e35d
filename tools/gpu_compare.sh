#!/usr/bin/env bash
# The before → after comparison's bars on a CUDA host (tools/compare_bars.py prints them):
# pull requests that change only a comment (A/A), one that slows the backward by about 20 %
# (power) and the forward it does not touch, each through `ondemand run --ref PR --base main`.
#   PART=repo      this repository: A/A on AA pull requests (the first two full jobs, the
#                  second warm: the cost bar), the rest and the power runs benchmark-only
#   PART=flaggems  a FlagGems checkout (.device/flaggems.tar.xz, .device/wheelhouse/):
#                  FLAGGEMS_AA comment-only pull requests and one that slows its backward;
#                  FG_RUNS picks the runs, REF:full or REF:bench (default "aa1:full
#                  aa2:bench aa3:bench power:bench")
# Needs .whl/ (the runner's pure-Python packages; SKIP_WHEELS=1: the host has them). A dry
# run here: BACKEND=cpu AA=2 SKIP_WHEELS=1. Results under $OUT (default ./gpu-out).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
site=/tmp/ondemand-site
[ -n "${SKIP_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile \
  --no-cache-dir --upgrade --target "$site" .whl/*.whl || exit 1
export PYTHONPATH="$PWD:$site" PYTHONUNBUFFERED=1
unset ONDEMAND_INDEX_URL ONDEMAND_WHEELHOUSE PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_FIND_LINKS
tools=$PWD
summary="$OUT/summary.txt"
runs=/tmp/compare-runs  # every run's JSON, packed into $OUT/runs.tar.gz at the end
rm -rf "$runs" && mkdir -p "$runs"
trap 'tar -czf "$OUT/runs.tar.gz" -C "$runs" .' EXIT
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$summary"

# Workflow copies: no extra installed (the image is offline), and one with the benchmark only.
mkdir -p /tmp/wf-full /tmp/wf-bench
python3 - <<'EOF' || exit 1
from pathlib import Path
import yaml
for path in Path("workflows").glob("*.yaml"):
    doc = yaml.safe_load(path.read_text())
    doc.setdefault("python_env", {})["extras"] = []
    Path("/tmp/wf-full", path.name).write_text(yaml.safe_dump(doc, sort_keys=False))
    doc["steps"] = [s for s in doc["steps"] if s.get("kind") != "accuracy"]
    for name, steps in doc.get("layouts", {}).items():
        doc["layouts"][name] = [s for s in steps if s.get("kind") != "accuracy"]
    Path("/tmp/wf-bench", path.name).write_text(yaml.safe_dump(doc, sort_keys=False))
EOF

# The job's environment sees only the host's site-packages, not this script's PYTHONPATH: what
# the repository declares and the image lacks (pydantic) comes from the wheels, as on a runner.
wheels=()
[ -d .whl ] && wheels=(--wheelhouse "$PWD/.whl")
run() {  # name, op, workflows dir, then the arguments of `ondemand run`
  local name=$1 op=$2 wf=$3 start
  shift 3
  start=$(date +%s%N)
  timeout 400 python3 -m ondemand run "$op:${BACKEND:-nvidia}" --workflows "$wf" -q --json "$runs/$name.json" \
    "${wheels[@]}" "$@" >"/tmp/$name.md" 2>"/tmp/$name.stderr"
  local code=$?
  echo "$name: exit $code in $(( ($(date +%s%N) - start) / 1000000 )) ms" | tee -a "$summary"
  [ "$code" -le 1 ] || tail -5 "/tmp/$name.stderr" | cut -c1-200 | tee -a "$summary"
}

branch() {  # repo, name, file to touch, python that edits it (argv[1] is the file)
  local repo=$1 name=$2 file=$3 edit=$4
  git -C "$repo" checkout -q -b "$name" main
  python3 -c "$edit" "$repo/$file" || exit 1
  git -C "$repo" -c user.name=pr -c user.email=pr@example.org commit -qam "$name" || exit 1
  git -C "$repo" checkout -q main
}
comment='import sys; p = sys.argv[1]; open(p, "a").write("\n# a comment, no code\n")'

if [ "${PART:-repo}" = repo ]; then
  op=adaptive_max_pool3d_backward
  repo=/tmp/this-repo
  rm -rf "$repo" && mkdir -p "$repo"
  git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$repo"
  mkdir -p "$repo/.github" && printf 'compare:\n  gate: fail\n' >"$repo/.github/ondemand.yml"
  git -C "$repo" init -q -b main && git -C "$repo" add -A
  git -C "$repo" -c user.name=ci -c user.email=ci@example.org commit -qm main
  files=(kernels/ops/$op/__init__.py kernels/ops/$op/fill_scatter.py kernels/ops/_adaptive.py
         kernels/ops/$op/rows.py kernels/ops/$op/disjoint.py kernels/heuristics.py
         kernels/ops/$op/small_input.py kernels/ops/$op/zeroed_scatter.py kernels/launch.py
         kernels/ops/$op/_scatter.py)
  for i in $(seq 1 "${AA:-10}"); do branch "$repo" "aa$i" "${files[$(( (i - 1) % 10 ))]}" "$comment"; done
  # About 20 % slower: the backward then rewrites a tenth of its gradient once more.
  branch "$repo" power "kernels/ops/$op/__init__.py" 'import sys
p = sys.argv[1]; s = open(p).read()
s += """

_exact = adaptive_max_pool3d_backward


def adaptive_max_pool3d_backward(grad_output, input, indices, *, config=None):  # noqa: F811
    grad = _exact(grad_output, input, indices, config=config)
    flat = grad.view(-1)
    flat[: max(1, flat.numel() // 10)].mul_(1)
    return grad
"""
open(p, "w").write(s)'
  export XDG_CACHE_HOME=/tmp/compare-cache
  run aa1 "$op" /tmp/wf-full --repo "$repo" --ref aa1 --base main   # fresh, then the trusted build
  run aa2 "$op" /tmp/wf-full --repo "$repo" --ref aa2 --base main   # warm: the cost bar
  cp "/tmp/aa2.md" "$OUT/aa2.md"
  for i in $(seq 3 "${AA:-10}"); do run "aa$i" "$op" /tmp/wf-bench --repo "$repo" --ref "aa$i" --base main; done
  run power "$op" /tmp/wf-bench --repo "$repo" --ref power --base main
  cp "/tmp/power.md" "$OUT/power.md"
  run untouched adaptive_max_pool3d /tmp/wf-bench --repo "$repo" --ref power --base main
  args=()
  for i in $(seq 1 "${AA:-10}"); do args+=(aa:"$runs/aa$i.json"); done
  cd "$tools" && python3 -m tools.compare_bars "${args[@]}" power:"$runs/power.json" \
    untouched:"$runs/untouched.json" --cost-s 45 --name "this repository" --json "$OUT/verdicts.json" \
    | tee -a "$summary"
else
  op=adaptive_max_pool3d_backward
  repo=/tmp/flaggems
  rm -rf "$repo" && python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], \
    filter='data')" .device/flaggems.tar.xz "$repo" || exit 1
  mkdir -p "$repo/.github" && printf 'compare:\n  gate: fail\n' >"$repo/.github/ondemand.yml"
  git -C "$repo" init -q -b main && git -C "$repo" add -A
  git -C "$repo" -c user.name=pr -c user.email=pr@example.org commit -qm "FlagGems main"
  for i in $(seq 1 "${FLAGGEMS_AA:-3}"); do
    branch "$repo" "aa$i" "src/flag_gems/ops/$op.py" "$comment"
  done
  # Slower: the gradient passed over four times more (four launches on a host-bound row).
  branch "$repo" power "src/flag_gems/ops/$op.py" 'import sys, re
p = sys.argv[1]; s = open(p).read()
s += """

_exact_backward = adaptive_max_pool3d_backward


def adaptive_max_pool3d_backward(*args, **kwargs):  # noqa: F811
    grad = _exact_backward(*args, **kwargs)
    for _ in range(4):
        grad.mul_(1)
    return grad
"""
open(p, "w").write(s)'
  export XDG_CACHE_HOME=/tmp/compare-cache-fg
  # No trusted build after each run (--no-compile-cache): a job's rounds share its own cache.
  args=()
  for item in ${FG_RUNS:-aa1:full aa2:bench aa3:bench power:bench}; do
    ref=${item%%:*} kind=${item#*:}
    wf=/tmp/wf-bench && [ "$kind" = full ] && wf=/tmp/wf-full
    run "fg-$ref" "$op" "$wf" --repo "$repo" --ref "$ref" --base main \
      --wheelhouse .device/wheelhouse --no-compile-cache
    cp "/tmp/fg-$ref.md" "$OUT/" 2>/dev/null
    case $ref in power) args+=(power:"$runs/fg-$ref.json") ;; *) args+=(aa:"$runs/fg-$ref.json") ;; esac
  done
  cd "$tools" && python3 -m tools.compare_bars "${args[@]}" --cost-s 270 --name FlagGems \
    --json "$OUT/fg-verdicts.json" | tee -a "$summary"
fi
