"""Links to job pages and logs. A job of a private repository gets a key in its links (an
HMAC of its id under the service's link key): whoever can read the pull request, where the
links are posted, can open them; ids alone, being sequential, open nothing. A link carries the
signature of the first key; any of the keys opens it, so a key that signed links already
posted stays among them (`Settings.link_keys`)."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from urllib.parse import quote


class Links:
    def __init__(self, public_url: str, keys: bytes | Sequence[bytes]) -> None:
        self.public_url = public_url.rstrip("/")
        self._keys = [keys] if isinstance(keys, bytes) else list(keys)

    def key(self, job_id: int) -> str:
        return self._sign(self._keys[0], job_id)

    def opens(self, job_id: int, private: bool, key: str | None) -> bool:
        """Whether a request with `key` may see job `job_id` (any may see a public one)."""
        if not private:
            return True
        if key is None:
            return False
        # Every key is tried, whichever matches: the time taken tells nothing of which did.
        matches = [hmac.compare_digest(self._sign(k, job_id), key) for k in self._keys]
        return any(matches)

    def job(self, job_id: int, private: bool) -> str:
        return self._with_key(f"{self.public_url}/jobs/{job_id}", job_id, private)

    def log(self, job_id: int, private: bool) -> str:
        return self._with_key(f"{self.public_url}/jobs/{job_id}/log", job_id, private)

    def _with_key(self, url: str, job_id: int, private: bool) -> str:
        return f"{url}?key={quote(self.key(job_id))}" if private else url

    @staticmethod
    def _sign(secret: bytes, job_id: int) -> str:
        return hmac.new(secret, f"job:{job_id}".encode(), hashlib.sha256).hexdigest()[:32]
