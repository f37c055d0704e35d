"""An RSA key pair in PEM, as a GitHub App's private key and the public key GitHub keeps.

A 2048-bit key takes about 60 ms of CPU to make, and the flows make one each: a process makes
two and hands them out in turn, so two calls in a row (an App's key, then one GitHub never
saw) are always different keys."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

_made: list[tuple[str, str]] = []  # the two pairs of this process, made when first asked for
_calls = [0]


def rsa_keypair() -> tuple[str, str]:
    """(private PEM in PKCS#8, public PEM): never the pair the previous call returned."""
    turn = _calls[0] % 2
    _calls[0] += 1
    if len(_made) <= turn:
        _made.append(_new_pair())
    return _made[turn]


def _new_pair() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, public.decode()
