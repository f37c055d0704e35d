"""Who is calling: `Authorization: token X` / `Bearer X` with a registered or minted token, or a
GitHub App's RS256 JWT (`iss` = app id) checked against the App's registered public key."""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass
from typing import Literal

import jwt

from sandbox.state import SandboxError, SandboxState

MAX_JWT_LIFETIME_S = 600
CLOCK_SKEW_S = 60


@dataclass(frozen=True)
class Caller:
    """The authenticated identity of one request."""

    kind: Literal["anonymous", "token", "app"]
    login: str | None = None
    installation_id: int | None = None
    app_id: int | None = None
    repositories: tuple[str, ...] | None = None  # an installation token limited to these
    permissions: dict[str, str] | None = None  # an installation token's, as they stand now


ANONYMOUS = Caller("anonymous")


def credential(header: str | None) -> str | None:
    """The credential of an Authorization header (`token X`, `Bearer X`), or None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() not in ("token", "bearer") or not value.strip():
        raise SandboxError(401, "Bad credentials")
    return value.strip()


def _looks_like_jwt(value: str) -> bool:
    return value.count(".") == 2 and value.startswith("eyJ")


def app_caller(state: SandboxState, value: str) -> Caller:
    """Verify an App JWT: known `iss`, RS256 signature by the App's key, sane iat/exp."""
    try:
        claims = jwt.decode(value, options={"verify_signature": False})
        app_id = int(claims["iss"])
    except (jwt.PyJWTError, KeyError, TypeError, ValueError) as exc:
        raise SandboxError(401, "A JSON web token could not be decoded") from exc
    app = state.apps.get(app_id)
    if app is None:
        raise SandboxError(401, "Integration not found")
    try:
        claims = jwt.decode(
            value,
            key=app.public_key_pem,
            algorithms=["RS256"],
            options={"require": ["iat", "exp", "iss"]},
            leeway=CLOCK_SKEW_S,
        )
    except jwt.ExpiredSignatureError as exc:
        raise SandboxError(401, "'Expiration time' claim ('exp') is too far in the past") from exc
    except jwt.PyJWTError as exc:
        raise SandboxError(401, "A JSON web token could not be decoded") from exc
    if int(claims["exp"]) - time.time() > MAX_JWT_LIFETIME_S + CLOCK_SKEW_S:
        raise SandboxError(401, "'Expiration time' claim ('exp') is too far in the future")
    return Caller("app", login=None, app_id=app_id)


def resolve(state: SandboxState, header: str | None) -> Caller:
    """The caller for an Authorization header; SandboxError 401 on bad credentials."""
    value = credential(header)
    if value is None:
        return ANONYMOUS
    if _looks_like_jwt(value):
        return app_caller(state, value)
    return token_caller(state, value)


def token_caller(state: SandboxState, value: str) -> Caller:
    """The caller a token (a user's or an installation's) stands for; 401 if none."""
    grant = state.token_user(value)
    if grant is None:
        raise SandboxError(401, "Bad credentials")
    return Caller(
        "token",
        login=grant.login,
        installation_id=grant.installation_id,
        repositories=grant.repositories,
        permissions=state.token_permissions(grant),
    )


def basic_caller(state: SandboxState, header: str | None) -> Caller:
    """The caller of a git request: `Authorization: Basic` with the token as the password
    (any user name: GitHub takes `x-access-token` for installation tokens), or anonymous."""
    if not header:
        return ANONYMOUS
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return resolve(state, header)
    try:
        _, _, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise SandboxError(401, "Bad credentials") from exc
    return token_caller(state, password) if password else ANONYMOUS


def peek_login(state: SandboxState, header: str | None) -> str | None:
    """Best-effort login for logging and rate accounting; never raises."""
    try:
        caller = resolve(state, header)
    except SandboxError:
        return None
    if caller.kind == "app":
        return f"app:{caller.app_id}"
    return caller.login
