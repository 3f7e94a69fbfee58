"""Signed, expiring tokens: what the server hands a model and must get back unchanged.

Pagination cursors, dry-run tokens and confirmation request states use it (policy.py), and
`keyed_digest` derives idempotency keys. A token is

    base64url(JSON payload) "." base64url(HMAC-SHA256(subkey(purpose), payload))

The payload carries the purpose, an expiry and the caller's data. It is signed, not encrypted:
do not put secrets in it. Each purpose signs with its own key derived from the server key, so
a cursor can never be replayed as a confirmation (or the other way round).

The server key comes from `$OPENAPI2MCP_SIGNING_KEY` (at least 32 characters; replicas behind
one load balancer must share it), or is generated at start-up: then tokens do not survive a
restart and are not accepted by another replica.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Literal

SIGNING_KEY_VAR: Final = "OPENAPI2MCP_SIGNING_KEY"
MIN_KEY_CHARS: Final = 32
TOKEN_VERSION: Final = 1

Reason = Literal["malformed", "signature", "expired", "purpose"]


class SigningKeyError(ValueError):
    """The configured signing key cannot be used (too short)."""


class TokenError(Exception):
    """A token was refused; `reason` says why (malformed, signature, expired, purpose)."""

    def __init__(self, reason: Reason, message: str) -> None:
        self.reason: Reason = reason
        super().__init__(message)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _canonical(value: Any) -> bytes:
    """The bytes a digest is over; `surrogatepass`: JSON strings may hold lone surrogates ("\\ud800")."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return text.encode("utf-8", "surrogatepass")


def digest(value: Any) -> str:
    """A short, stable fingerprint of a JSON value (for binding a token to arguments)."""
    return hashlib.sha256(_canonical(value)).hexdigest()[:24]


class Signer:
    """Signs and verifies tokens with one server key."""

    def __init__(self, key: bytes, *, generated: bool = False, clock: Callable[[], float] = time.time) -> None:
        if len(key) < 16:
            raise SigningKeyError("the signing key must be at least 16 bytes")
        self._key = key
        self.generated = generated
        self.clock = clock
        self._subkeys: dict[str, bytes] = {}

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], *, clock: Callable[[], float] = time.time) -> Signer:
        """The key of `$OPENAPI2MCP_SIGNING_KEY`, or a random one (per process) when it is unset."""
        configured = environ.get(SIGNING_KEY_VAR, "")
        if not configured:
            return cls(secrets.token_bytes(32), generated=True, clock=clock)
        if len(configured) < MIN_KEY_CHARS:
            raise SigningKeyError(
                f"{SIGNING_KEY_VAR} must be at least {MIN_KEY_CHARS} characters "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)"
            )
        return cls(configured.encode(), clock=clock)

    def _derive(self, purpose: str) -> bytes:
        return hmac.new(self._key, f"openapi2mcp/{purpose}".encode(), hashlib.sha256).digest()

    def _subkey(self, purpose: str) -> bytes:
        """The key of one of the server's own purposes (cached: callers pass constants, never client input)."""
        key = self._subkeys.get(purpose)
        if key is None:
            key = self._subkeys[purpose] = self._derive(purpose)
        return key

    def keyed_digest(self, purpose: str, value: Any) -> str:
        """HMAC-SHA256 (hex) of a JSON value: stable across replicas sharing the key, unguessable without it."""
        return hmac.new(self._subkey(purpose), _canonical(value), hashlib.sha256).hexdigest()

    def sign(self, purpose: str, data: Mapping[str, Any], *, ttl: float) -> str:
        """A token for `data` that `verify(purpose, ...)` accepts for `ttl` seconds."""
        payload = {"v": TOKEN_VERSION, "p": purpose, "x": int(self.clock() + ttl), "d": dict(data)}
        raw = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        mac = hmac.new(self._subkey(purpose), raw, hashlib.sha256).digest()
        return f"{_b64(raw)}.{_b64(mac)}"

    def verify(self, purpose: str, token: str) -> dict[str, Any]:
        """The data of a valid token; TokenError when it is malformed, forged, foreign or expired."""
        head, dot, tail = token.partition(".")
        try:
            if not dot or not head or not tail:
                raise ValueError("no signature")
            raw, mac = _unb64(head), _unb64(tail)
        except (ValueError, binascii.Error, UnicodeError):
            raise TokenError("malformed", "not a token issued by this server") from None
        expected = hmac.new(self._subkey(purpose), raw, hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            try:
                other = json.loads(raw).get("p")  # unauthenticated: any size, any nesting, any purpose
            except (ValueError, AttributeError, RecursionError):
                other = None
            if isinstance(other, str) and other != purpose and hmac.compare_digest(
                mac, hmac.new(self._derive(other), raw, hashlib.sha256).digest()  # not cached: client input
            ):
                raise TokenError("purpose", f"this is a {other} token, not a {purpose}")
            raise TokenError("signature", "the token was altered or was not issued by this server")
        try:
            payload = json.loads(raw)
            data, expiry = payload["d"], payload["x"]
            valid = payload.get("v") == TOKEN_VERSION and payload.get("p") == purpose
            valid = valid and isinstance(data, dict) and isinstance(expiry, int)
        except (ValueError, KeyError, TypeError):
            valid = False
        if not valid:
            raise TokenError("malformed", "not a token issued by this server")
        if self.clock() > expiry:
            raise TokenError("expired", "the token has expired")
        result: dict[str, Any] = data
        return result
