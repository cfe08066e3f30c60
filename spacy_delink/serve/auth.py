"""The service's API key: where it comes from, how a request proves it, where a server without one may listen.

The key is read once at start from a file (``--api-key-file`` or ``$DELINK_API_KEY_FILE``:
a container secret) or from ``$DELINK_API_KEY``, never from the command line (where any
user of the machine could read it in the process list). A request shows it as
``Authorization: Bearer <key>``; both sides are hashed and compared with
``hmac.compare_digest``, so the time a comparison takes says nothing about the key, not
even its length. A server without a key answers anyone who can reach it, so it listens on
the loopback interface only.
"""
from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
from pathlib import Path
from typing import Mapping, Optional

from ..errors import InputError

KEY_ENV = "DELINK_API_KEY"
KEY_FILE_ENV = "DELINK_API_KEY_FILE"
#: Shortest key accepted: a short one could be guessed by a client that keeps trying.
MIN_KEY_CHARS = 16
LOOPBACK_NAMES = frozenset({"localhost"})


class ApiKey:
    """The secret, kept as its SHA-256 digest only."""

    def __init__(self, secret: str, source: str) -> None:
        if len(secret) < MIN_KEY_CHARS:
            raise InputError(
                f"the API key from {source} has {len(secret)} characters; use at least {MIN_KEY_CHARS} "
                "random ones, e.g. `python -c \"import secrets; print(secrets.token_urlsafe(32))\"`"
            )
        self._digest = hashlib.sha256(secret.encode("utf-8")).digest()
        self.source = source

    def __repr__(self) -> str:
        return f"ApiKey(from {self.source})"

    def accepts(self, authorization: Optional[str]) -> bool:
        """Whether an ``Authorization`` header value carries this key as a Bearer token."""
        scheme, _, token = (authorization or "").partition(" ")
        presented = hashlib.sha256(token.strip().encode("utf-8", "surrogateescape")).digest()
        return hmac.compare_digest(presented, self._digest) and scheme.lower() == "bearer"


def load_api_key(key_file: Optional[Path], environ: Mapping[str, str] = os.environ) -> Optional[ApiKey]:
    """The key from ``key_file``, ``$DELINK_API_KEY_FILE`` or ``$DELINK_API_KEY`` (one of them), or None."""
    file_value = key_file if key_file is not None else (Path(environ[KEY_FILE_ENV]) if environ.get(KEY_FILE_ENV) else None)
    env_value = environ.get(KEY_ENV)
    if file_value is not None and env_value:
        raise InputError(f"an API key is given both as a file ({file_value}) and in ${KEY_ENV}; keep one")
    if file_value is not None:
        try:
            secret = file_value.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            raise InputError(f"API key file {file_value}: cannot read it ({getattr(err, 'strerror', None) or err}); check the path and its permissions") from None
        return ApiKey(secret, str(file_value))
    if env_value:
        return ApiKey(env_value.strip(), f"${KEY_ENV}")
    return None


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine's loopback interface only (127.0.0.0/8, ::1, localhost)."""
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
