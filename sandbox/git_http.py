"""Git's smart HTTP protocol at `/{owner}/{name}.git`, as GitHub serves it. Fetch: a public
repository to anyone, a private one to a token that may read it (basic auth, the token as the
password); anyone else gets 401 with a challenge (no credentials) or 404 (credentials that may
not see it), so a private repository's existence is not given away, and an installation token
without `contents: read` gets 403. Push: a token whose user may write (or an installation
token with `contents: write`); each branch it moves is delivered as `push` (and as
`pull_request` `synchronize` for the open pull requests it heads), as GitHub does
(`pushes.py`). Not a REST call: no rate limit, no faults, no call log."""

from __future__ import annotations

import gzip
import re
import subprocess
import threading

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from sandbox import git
from sandbox.auth import Caller, basic_caller
from sandbox.github_api import ACCEPTED_HEADER, NOT_ACCESSIBLE, may_see
from sandbox.pushes import emit_moves
from sandbox.state import Repo, SandboxError, SandboxState, grants

router = APIRouter()
GIT_PATH = re.compile(r"^/[^/]+/[^/]+\.git/")
SERVICE = "git-upload-pack"
RECEIVE = "git-receive-pack"
WRITERS = ("write", "maintain", "admin")
_PUSHING = threading.Lock()  # one push at a time: each tells of the branches it alone moved
TIMEOUT_S = 120
# GitHub lets a fetch ask for any commit it has, advertised or not (a pull request's head
# SHA, a merge base); git's own server needs telling.
UPLOAD_PACK = ["git", "-c", "uploadpack.allowAnySHA1InWant=true", "upload-pack", "--stateless-rpc"]
# A repository with a work tree takes a push to its checked-out branch when that tree is clean.
RECEIVE_PACK = ["git", "-c", "receive.denyCurrentBranch=updateInstead", "receive-pack",
                "--stateless-rpc"]  # fmt: skip


def is_git(path: str) -> bool:
    return GIT_PATH.match(path) is not None


def _readable(request: Request, owner: str, name: str) -> Repo | None:
    """The repository if the caller may read it; None when the caller sent no credentials
    and should be asked for some; else 404 (also for a repository that does not exist)."""
    state: SandboxState = request.app.state.sandbox
    header = request.headers.get("authorization")
    caller = basic_caller(state, header)  # 401 for a token that does not exist
    repo = state.repos.get(f"{owner}/{name}")
    if repo is not None and may_see(state, caller, repo):
        held = caller.permissions  # an installation token's
        if held is not None and repo.private and not grants(held, "contents", "read"):
            raise SandboxError(403, NOT_ACCESSIBLE, {ACCEPTED_HEADER: "contents=read"})
        return repo
    if header is None:
        return None
    raise SandboxError(404, "Repository not found.")


def _pkt(line: str) -> bytes:
    data = line.encode()
    return f"{len(data) + 4:04x}".encode() + data


def _upload_pack(repo: Repo, body: bytes, *advertise: str, argv: list[str] = UPLOAD_PACK) -> bytes:
    proc = subprocess.run(
        [*argv, *advertise, repo.git_path],
        input=body,
        capture_output=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0:
        raise SandboxError(500, proc.stderr.decode(errors="replace").strip() or "upload-pack")
    return proc.stdout


def _challenge() -> Response:
    return Response(
        "Authentication required\n",
        status_code=401,
        headers={"WWW-Authenticate": 'Basic realm="GitHub"'},
        media_type="text/plain",
    )


def _writer(request: Request, owner: str, name: str) -> tuple[Repo, Caller] | None:
    """The repository and its caller if the caller may push to it; None when the caller sent
    no credentials and should be asked for some; 403 for one that may read but not write."""
    state: SandboxState = request.app.state.sandbox
    header = request.headers.get("authorization")
    caller = basic_caller(state, header)
    repo = state.repos.get(f"{owner}/{name}")
    if repo is None or not may_see(state, caller, repo):
        if header is None:
            return None
        raise SandboxError(404, "Repository not found.")
    if caller.login is None:
        return None
    held = caller.permissions  # an installation token's
    if held is not None:
        allowed = grants(held, "contents", "write")
    else:
        allowed = state.permission(repo, caller.login) in WRITERS
    if not allowed:
        raise SandboxError(403, f"Permission to {repo.full_name}.git denied to {caller.login}.")
    return repo, caller


@router.get("/{owner}/{name}.git/info/refs")
async def info_refs(owner: str, name: str, request: Request) -> Response:
    """The refs advertisement that opens a fetch or a push (the smart protocol only)."""
    service = request.query_params.get("service")
    if service == RECEIVE:
        writer = _writer(request, owner, name)
        if writer is None:
            return _challenge()
        refs = await run_in_threadpool(
            _upload_pack, writer[0], b"", "--advertise-refs", argv=RECEIVE_PACK
        )
        return Response(
            _pkt(f"# service={RECEIVE}\n") + b"0000" + refs,
            media_type=f"application/x-{RECEIVE}-advertisement",
            headers={"Cache-Control": "no-cache"},
        )
    if service != SERVICE:
        raise SandboxError(403, "Only the smart protocol's git-upload-pack is served")
    repo = _readable(request, owner, name)
    if repo is None:
        return _challenge()
    refs = await run_in_threadpool(_upload_pack, repo, b"", "--advertise-refs")
    return Response(
        _pkt(f"# service={SERVICE}\n") + b"0000" + refs,
        media_type=f"application/x-{SERVICE}-advertisement",
        headers={"Cache-Control": "no-cache"},
    )


@router.post(f"/{{owner}}/{{name}}.git/{RECEIVE}")
async def receive_pack(owner: str, name: str, request: Request) -> Response:
    """A push: the pack and the ref updates in, git's report out; then what GitHub delivers
    for each branch it moved."""
    writer = _writer(request, owner, name)
    if writer is None:
        return _challenge()
    repo, caller = writer
    body = await request.body()
    if request.headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)

    def push() -> bytes:
        assert caller.login is not None  # a writer has one
        with _PUSHING:
            old = git.branch_heads(repo.git_path)
            report = _upload_pack(repo, body, argv=RECEIVE_PACK)
            new = git.branch_heads(repo.git_path)
            base = str(request.base_url).rstrip("/")
            emit_moves(request.app.state.deliverer, base, repo, old, new, caller.login)
        return report

    report = await run_in_threadpool(push)
    return Response(report, media_type=f"application/x-{RECEIVE}-result")


@router.post(f"/{{owner}}/{{name}}.git/{SERVICE}")
async def upload_pack(owner: str, name: str, request: Request) -> Response:
    """One round of the fetch negotiation: the client's wants and haves in, a pack out."""
    repo = _readable(request, owner, name)
    if repo is None:
        return _challenge()
    body = await request.body()
    if request.headers.get("content-encoding") == "gzip":
        body = gzip.decompress(body)
    pack = await run_in_threadpool(_upload_pack, repo, body)
    return Response(pack, media_type=f"application/x-{SERVICE}-result")
