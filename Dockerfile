# syntax=docker/dockerfile:1
# Two targets from one file:
#   docker build --target service -t ondemand-service .
#   docker build --target runner --build-arg RUNNER_BASE=<a MUSA or CUDA image with torch> -t ondemand-runner .
# The runner image takes torch (and torch_musa) from its base image: a GPU stack is not pip-installed.
# Either base may also be a bare Debian (`make images` builds both on a debootstrap rootfs): a
# base without a usable python3 gets Debian's, and the project goes into a venv under
# /opt/ondemand, never into the base's own interpreter.

ARG PYTHON_IMAGE=python:3.12-slim
ARG RUNNER_BASE=python:3.12-slim

FROM ${PYTHON_IMAGE} AS service
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# git: `/test changed` reads a pull request's tree from a mirror the service fetches.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates \
    && if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then \
         apt-get install -y --no-install-recommends python3 python3-venv; fi \
    && apt-get clean && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 ondemand \
    && install -d -o ondemand -g ondemand -m 0750 /var/lib/ondemand \
    && python3 -m venv /opt/ondemand/venv
ENV PATH=/opt/ondemand/venv/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md ./
# The product only: the GitHub sandbox, the demo and the lab's tools stay out of the image.
COPY ondemand ./ondemand
COPY report ./report
COPY service ./service
COPY workflows ./workflows
# Versions are ranged in pyproject.toml, the one place that names them.
# hadolint ignore=DL3013
RUN pip install ".[service]"
USER 10001
# SQLite and the change selection's mirrors live on a volume, not in the container's layer.
ENV ONDEMAND_DATABASE_URL=sqlite:////var/lib/ondemand/ondemand.db \
    ONDEMAND_CHANGES_DIR=/var/lib/ondemand/changes
VOLUME ["/var/lib/ondemand"]
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
CMD ["ondemand", "serve", "--host", "0.0.0.0", "--port", "8000"]

FROM ${RUNNER_BASE} AS runner
# The daemon's interpreter. Jobs run on the base image's Python whatever this is; a base whose
# python3 is older than 3.11 (torch_musa images ship 3.10) names another one here.
ARG DAEMON_PYTHON=python3
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The base image's distribution decides these versions. util-linux brings unshare (steps run
# in their own namespaces); ondemand-job is the unprivileged user every step runs as.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates util-linux \
    && if ! "${DAEMON_PYTHON}" -c 'import ensurepip, venv' 2>/dev/null; then \
         apt-get install -y --no-install-recommends python3 python3-venv; fi \
    && apt-get clean && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
       --uid 10002 ondemand-job
RUN if ! "${DAEMON_PYTHON}" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then \
      echo "DAEMON_PYTHON=${DAEMON_PYTHON} is not Python 3.11+" \
        "($("${DAEMON_PYTHON}" --version 2>&1)): the runner daemon needs 3.11 or newer." \
        "Pass --build-arg DAEMON_PYTHON=<a 3.11+ interpreter>; the jobs keep the base's python." >&2; \
      exit 1; fi
# --system-site-packages: the host's torch stays importable for the jobs' environments, which
# the runner builds on top of its own site directories.
RUN "${DAEMON_PYTHON}" -m venv --system-site-packages /opt/ondemand/venv
ENV PATH=/opt/ondemand/venv/bin:$PATH
WORKDIR /app
COPY pyproject.toml README.md ./
# The runner renders its report (`ondemand run`) with the same `report` package as the service.
COPY ondemand ./ondemand
COPY report ./report
COPY runner ./runner
COPY workflows ./workflows
# What the daemon imports (`runner`), and the test steps' tools for hosts without an index
# (`test`); neither names torch or triton, which come from the base image.
# hadolint ignore=DL3013
RUN pip install ".[runner,test]"
# The daemon runs as root only to set up each step's namespaces and drop to ondemand-job: no
# step ever runs as root. The container needs CAP_SYS_ADMIN for that (e.g. --privileged, or
# --cap-add SYS_ADMIN with unshare allowed by its seccomp profile).
VOLUME ["/var/lib/ondemand-runner"]
ENTRYPOINT ["ondemand", "runner", "--state-dir", "/var/lib/ondemand-runner", "--job-user", "ondemand-job"]
