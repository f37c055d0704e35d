"""Links to job pages and logs. A job of a private repository gets a key in its links (an
HMAC of its id under the service's link key): whoever can read the pull request, where the
links are posted, can open them; ids alone, being sequential, open nothing. A link carries the
signature of the first key; any of the keys opens it, so a key that signed links already
posted stays among them (`Settings.link_keys`).

A private repository's default-branch trends (`/trends/...`) open with a key of the
repository's own (`repo_key`): a job page that opened with its key links to them with it, since
whoever may read one of its pull requests may read the repository's history."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from urllib.parse import quote


def trends_path(repo: str, op: str | None = None, backend: str | None = None) -> str:
    """`/trends/owner/name` (the repository's operators with default-branch history), or with
    `op` and `backend` one operator's trend page; each part quoted."""
    parts = [*repo.split("/", 1), *(p for p in (op, backend) if p is not None)]
    return "/trends/" + "/".join(quote(p, safe="") for p in parts)


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

    def repo_key(self, repo: str) -> str:
        return self._sign_text(self._keys[0], f"repo:{repo}")

    def opens_repo(self, repo: str, private: bool, key: str | None) -> bool:
        """Whether a request with `key` may see `repo`'s trends (any may see a public one's)."""
        if not private:
            return True
        if key is None:
            return False
        matches = [hmac.compare_digest(self._sign_text(k, f"repo:{repo}"), key) for k in self._keys]
        return any(matches)

    def job_path(self, job_id: int, private: bool) -> str:
        """`/jobs/7` (with its key where private): a link within the service's own pages."""
        return self._with_key(f"/jobs/{job_id}", job_id, private)

    def trends_path(
        self, repo: str, private: bool, op: str | None = None, backend: str | None = None
    ) -> str:
        """`trends_path`, with the repository's key where it is private."""
        path = trends_path(repo, op, backend)
        return f"{path}?key={quote(self.repo_key(repo))}" if private else path

    def job(self, job_id: int, private: bool) -> str:
        return self._with_key(f"{self.public_url}/jobs/{job_id}", job_id, private)

    def log(self, job_id: int, private: bool) -> str:
        return self._with_key(f"{self.public_url}/jobs/{job_id}/log", job_id, private)

    def _with_key(self, url: str, job_id: int, private: bool) -> str:
        return f"{url}?key={quote(self.key(job_id))}" if private else url

    @staticmethod
    def _sign(secret: bytes, job_id: int) -> str:
        return Links._sign_text(secret, f"job:{job_id}")

    @staticmethod
    def _sign_text(secret: bytes, text: str) -> str:
        return hmac.new(secret, text.encode(), hashlib.sha256).hexdigest()[:32]
