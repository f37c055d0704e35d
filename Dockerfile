# syntax=docker/dockerfile:1
# Two targets from one file:
#   docker build --target service -t ondemand-service .
#   docker build --target runner --build-arg RUNNER_BASE=<a MUSA or CUDA image with torch> -t ondemand-runner .
# The runner image takes torch (and torch_musa) from its base image: a GPU stack is not pip-installed.

ARG PYTHON_IMAGE=python:3.12-slim
ARG RUNNER_BASE=python:3.12-slim

FROM ${PYTHON_IMAGE} AS service
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# git: `/test changed` reads a pull request's tree from a mirror the service fetches.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 ondemand
WORKDIR /app
COPY pyproject.toml README.md ./
# The product only: the GitHub sandbox, the demo and the lab's tools stay out of the image.
COPY ondemand ./ondemand
COPY service ./service
COPY workflows ./workflows
# Versions are ranged in pyproject.toml, the one place that names them.
# hadolint ignore=DL3013
RUN pip install ".[service]"
USER 10001
ENV ONDEMAND_DATABASE_URL=sqlite:////home/ondemand/ondemand.db \
    ONDEMAND_CHANGES_DIR=/home/ondemand/changes
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
CMD ["ondemand", "serve", "--host", "0.0.0.0", "--port", "8000"]

FROM ${RUNNER_BASE} AS runner
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
# The base image's distribution decides these versions. util-linux brings unshare (steps run
# in their own namespaces); ondemand-job is the unprivileged user every step runs as.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends git ca-certificates util-linux \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
       --uid 10002 ondemand-job
WORKDIR /app
COPY pyproject.toml README.md ./
# The runner renders its report with the service's pure renderer (`ondemand run`).
COPY ondemand ./ondemand
COPY runner ./runner
COPY service ./service
COPY workflows ./workflows
# torch comes from the base image; install only what the runner adds.
# hadolint ignore=DL3013
RUN pip install --no-deps . && pip install "pydantic>=2.6" "pyyaml>=6" "httpx>=0.27" "rich>=13" "packaging>=23" "pytest>=8"
# The daemon runs as root only to set up each step's namespaces and drop to ondemand-job: no
# step ever runs as root. The container needs CAP_SYS_ADMIN for that (e.g. --privileged, or
# --cap-add SYS_ADMIN with unshare allowed by its seccomp profile).
VOLUME ["/var/lib/ondemand-runner"]
ENTRYPOINT ["ondemand", "runner", "--state-dir", "/var/lib/ondemand-runner", "--job-user", "ondemand-job"]
