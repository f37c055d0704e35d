# Sourced by the tools/gpu_*.sh device scripts: results go under $OUT (default ./gpu-out),
# the wheels the GPU image lacks are installed from .whl/ (docs/h200/README.md), and Python
# finds this tree. `workers` is the pytest-xdist width the scripts use.
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile .whl/*.whl || exit 1
fi
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
workers=$(( $(nproc) > 12 ? 12 : $(nproc) ))
export OUT workers
