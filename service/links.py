"""Links to job pages and logs. A job of a private repository gets a key in its links (an
HMAC of its id under the service's link secret): whoever can read the pull request, where
the links are posted, can open them; ids alone, being sequential, open nothing."""

from __future__ import annotations

import hashlib
import hmac
from urllib.parse import quote


class Links:
    def __init__(self, public_url: str, secret: bytes) -> None:
        self.public_url = public_url.rstrip("/")
        self._secret = secret

    def key(self, job_id: int) -> str:
        digest = hmac.new(self._secret, f"job:{job_id}".encode(), hashlib.sha256).hexdigest()
        return digest[:32]

    def opens(self, job_id: int, private: bool, key: str | None) -> bool:
        """Whether a request with `key` may see job `job_id` (any may see a public one)."""
        if not private:
            return True
        return key is not None and hmac.compare_digest(self.key(job_id), key)

    def job(self, job_id: int, private: bool) -> str:
        return self._with_key(f"{self.public_url}/jobs/{job_id}", job_id, private)

    def log(self, job_id: int, private: bool) -> str:
        return self._with_key(f"{self.public_url}/jobs/{job_id}/log", job_id, private)

    def _with_key(self, url: str, job_id: int, private: bool) -> str:
        return f"{url}?key={quote(self.key(job_id))}" if private else url
