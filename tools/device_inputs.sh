#!/usr/bin/env bash
# Rebuilds, from nothing and idempotently, the git-ignored inputs that the FlagGems device
# scripts (tools/gpu_flaggems*.sh, tools/gpu_compare.sh PART=flaggems) carry to the GPU host,
# which has Python 3.12, torch, triton and numpy but no package index:
#   .device/flaggems.tar.xz  FlagGems' whole tree at FLAGGEMS_COMMIT (`git archive | xz -9`),
#                            from the local mirror FLAGGEMS_MIRROR; .device/flaggems.commit
#                            names the commit it holds (rebuilt only when that changes)
#   .device/wheelhouse/      the wheels FlagGems' environment needs beyond the image (its
#                            dependencies and `test` extra: sqlalchemy, distro, openpyxl,
#                            pytest-md-report) with their dependencies
#   .whl/                    the runner's own packages the image lacks (pydantic, the service's
#                            renderer's stack), no dependencies resolved: the pinned list below
# pip skips what is already downloaded. Prints the sizes: a device call carries at most 64 MiB.
#   FLAGGEMS_MIRROR=DIR FLAGGEMS_COMMIT=REV PYTHON_VERSION=3.12 bash tools/device_inputs.sh
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mirror=${FLAGGEMS_MIRROR:-/work/.mirror/flagos-ai+FlagGems/repo}
commit=${FLAGGEMS_COMMIT:-ed2508bcb}
py=${PYTHON_VERSION:-3.12}
mkdir -p .device/wheelhouse .whl

full=$(git -C "$mirror" rev-parse --verify "$commit^{commit}")
if [ -s .device/flaggems.tar.xz ] && [ "$(cat .device/flaggems.commit 2>/dev/null)" = "$full" ]; then
  echo "flaggems.tar.xz: $full already"
else
  git -C "$mirror" archive "$full" | xz -9 -T1 >.device/flaggems.tar.xz.part
  mv .device/flaggems.tar.xz.part .device/flaggems.tar.xz
  echo "$full" >.device/flaggems.commit
  echo "flaggems.tar.xz: $full built"
fi

platforms=(--platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux_2_28_x86_64 --platform manylinux_2_34_x86_64)
download=(python3 -m pip download -q --disable-pip-version-check --only-binary=:all:
  --python-version "$py" --implementation cp "${platforms[@]}")

# FlagGems at ed2508bcb: pyproject's dependencies (PyYAML, packaging and numpy the image has)
# and its `test` extra that the image lacks (pytest, pandas, coverage, scipy it has, newer).
"${download[@]}" -d .device/wheelhouse \
  sqlalchemy==2.0.48 distro==1.9.0 openpyxl==3.1.5 pytest-md-report==0.8.0

# The runner's own stack, as docs/h200/README.md lists it (what `ondemand run` imports that the
# image lacks); --no-deps: the list is closed.
"${download[@]}" --no-deps -d .whl \
  pydantic==2.14.4 pydantic_core==2.50.5 pydantic-settings==2.16.3 annotated-types==0.8.0 \
  typing-inspection==0.4.5 typing_extensions==4.16.0 python-dotenv==1.2.4 fastapi==0.165.0 \
  annotated-doc==0.0.7 opentelemetry-api==1.45.2 starlette==1.10.0 uvicorn==0.54.0 \
  SQLAlchemy==2.1.9 alembic==1.20.1 Mako==1.4.3 MarkupSafe==3.0.4 psycopg==3.3.9 \
  psycopg-binary==3.3.9 PyGithub==2.10.0 PyJWT==2.15.1 cryptography==50.0.2 cffi==2.1.1 \
  pycparser==3.12 PyNaCl==1.6.2

du -sh .device/flaggems.tar.xz .device/wheelhouse .whl
total=$(du -sbc .device .whl | tail -1 | cut -f1)
echo "carried in all: $((total / 1024 / 1024)) MiB (at most 64)"
[ "$total" -le $((64 * 1024 * 1024)) ] || { echo "over the 64 MiB a device call carries" >&2; exit 1; }
