"""The service's runner API (docs/runner-protocol.md) over httpx, one method per call."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

from workflows.models import JobResult, JobSpec, Progress, known_part

log = logging.getLogger(__name__)


class ServiceUnavailable(RuntimeError):
    """The service could not be reached or answered 5xx: try again later."""


class NotHeld(RuntimeError):
    """The service says this runner does not hold the job (404): stop working on it."""


class Rejected(RuntimeError):
    """The service refused the call (4xx other than 404): retrying will not help."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class LogFull(Rejected):
    """The service keeps no more of this job's log (413 on a log chunk)."""


class Unauthorized(Rejected):
    """401: the runner token (or registration token) is not, or no longer, valid."""


@dataclass(frozen=True)
class HeartbeatAnswer:
    """The service's answer to a heartbeat: whether to cancel the job, and why."""

    cancel: bool
    reason: str | None


class ServiceClient:
    """One runner's connection to the service. Thread-safe (httpx.Client is)."""

    def __init__(self, base_url: str, token: str | None = None, timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def _post(self, path: str, body: Any, timeout: float | None = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            kwargs: dict[str, Any] = {"json": body, "headers": headers}
            if timeout is not None:
                kwargs["timeout"] = timeout
            response = self._http.post(path, **kwargs)
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(f"POST {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise ServiceUnavailable(f"POST {path}: {response.status_code} {response.text[:200]}")
        if response.status_code == 404:
            raise NotHeld(f"POST {path}: 404 {response.text[:200]}")
        if response.status_code == 401:
            raise Unauthorized(f"POST {path}: 401 {response.text[:200]}")
        if response.status_code >= 400 and response.status_code != 409:
            raise Rejected(
                f"POST {path}: {response.status_code} {response.text[:300]}",
                response.status_code,
            )
        return response

    def me(self) -> dict[str, Any]:
        """Who the service takes this runner's token for (Unauthorized: it does not)."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = self._http.get("/api/v1/runners/me", headers=headers)
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(f"GET /api/v1/runners/me: {exc}") from exc
        if response.status_code == 401:
            raise Unauthorized(f"GET /api/v1/runners/me: 401 {response.text[:200]}")
        if response.status_code != 200:
            raise ServiceUnavailable(f"GET /api/v1/runners/me: {response.status_code}")
        return dict(response.json())

    def register(
        self,
        registration_token: str,
        *,
        name: str,
        backends: list[str],
        labels: list[str],
        slots: int,
        version: str,
    ) -> tuple[int, str]:
        """Register; (runner id, runner token)."""
        body = {
            "registration_token": registration_token,
            "name": name,
            "backends": backends,
            "labels": labels,
            "slots": slots,
            "version": version,
        }
        data = self._post("/api/v1/runners/register", body).json()
        return int(data["runner_id"]), str(data["token"])

    def deregister(self) -> None:
        """Leave the service: this runner's token stops working (Rejected while it holds a
        job)."""
        response = self._post("/api/v1/runners/deregister", {})
        if response.status_code == 409:
            raise Rejected(f"deregister: 409 {response.text[:200]}", 409)

    def health(
        self,
        healthy: bool,
        reason: str | None,
        backends: list[str],
        drained: dict[str, object] | None = None,
    ) -> None:
        """The runner's health; `drained`: the record of its drain (the jobs that caused it)."""
        body: dict[str, object] = {"healthy": healthy, "reason": reason, "backends": backends}
        if drained is not None:
            body["drained"] = drained
        self._post("/api/v1/runners/health", body)

    def claim(
        self, wait_s: float, backends: list[str] | None = None, skip: list[int] | None = None
    ) -> JobSpec | None:
        """Long-poll for a job; None when none came within `wait_s`. `skip`: jobs this runner
        handed back because it could not run them, which another runner is to take."""
        body: dict[str, object] = {"wait_s": wait_s, "backends": backends}
        if skip:
            body["skip"] = skip
        response = self._post("/api/v1/jobs/claim", body, timeout=wait_s + 30)
        if response.status_code == 204:
            return None
        data = response.json()
        # A newer service may send more than this runner knows: the job is still the job.
        spec, unknown = known_part(JobSpec, data)
        if unknown:
            names = ", ".join(sorted(unknown))
            log.warning("job %s: ignoring fields this runner does not know: %s", spec.id, names)
        return spec

    def release(self, job_id: int) -> None:
        """Give back a claimed job this runner will not start (it is stopping)."""
        self._post(f"/api/v1/jobs/{job_id}/release", {})

    def heartbeat(self, job_id: int) -> HeartbeatAnswer:
        data = self._post(f"/api/v1/jobs/{job_id}/heartbeat", {}).json()
        return HeartbeatAnswer(bool(data.get("cancel")), data.get("reason"))

    def events(self, job_id: int, wait_s: float) -> HeartbeatAnswer:
        """The job's open channel: held up to `wait_s`, answered at once on a cancel."""
        data = self._post(
            f"/api/v1/jobs/{job_id}/events", {"wait_s": wait_s}, timeout=wait_s + 30
        ).json()
        return HeartbeatAnswer(bool(data.get("cancel")), data.get("reason"))

    def progress(self, job_id: int, progress: Progress) -> None:
        """The job's progress now (the service keeps the latest)."""
        self._post(f"/api/v1/jobs/{job_id}/progress", progress.model_dump(mode="json"))

    def append_log(self, job_id: int, offset: int, data: str) -> tuple[bool, int]:
        """Append a chunk at `offset`; (accepted, the service's end offset)."""
        try:
            response = self._post(f"/api/v1/jobs/{job_id}/logs", {"offset": offset, "data": data})
        except Rejected as exc:
            if exc.status == 413:
                raise LogFull(str(exc), exc.status) from exc
            raise
        return response.status_code == 200, int(response.json()["offset"])

    def complete(self, job_id: int, result: JobResult) -> str:
        data = self._post(f"/api/v1/jobs/{job_id}/complete", result.model_dump(mode="json")).json()
        return str(data.get("status", ""))

    def upload_artifact(self, job_id: int, name: str, data: bytes) -> None:
        """Store a held job's artifact `name` (gzip bytes; a profile's trace)."""
        headers = {"Content-Type": "application/gzip"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        path = f"/api/v1/jobs/{job_id}/artifacts/{name}"
        try:
            response = self._http.put(path, content=data, headers=headers)
        except httpx.HTTPError as exc:
            raise ServiceUnavailable(f"PUT {path}: {type(exc).__name__}: {exc}") from exc
        if response.status_code >= 500:
            raise ServiceUnavailable(f"PUT {path}: {response.status_code}")
        if response.status_code == 404:
            raise NotHeld(f"PUT {path}: 404 {response.text[:200]}")
        if response.status_code >= 400:
            raise Rejected(
                f"PUT {path}: {response.status_code} {response.text[:300]}", response.status_code
            )

    def interrupt(self, job_id: int, reason: str) -> str:
        """Hand back a started job this runner stopped for its own reasons (it is shutting
        down); the service requeues it or, after its last attempt, errors it."""
        data = self._post(f"/api/v1/jobs/{job_id}/interrupt", {"reason": reason}).json()
        return str(data.get("status", ""))
