"""The service's API key: where it comes from, how a request proves it, where a server without one may listen.

The key is read once at start from a file (``--api-key-file`` or ``$DELINK_API_KEY_FILE``:
a container secret) or from ``$DELINK_API_KEY``, never from the command line (where any
user of the machine could read it in the process list). A request shows it as
``Authorization: Bearer <key>``; both sides are hashed and compared with
``hmac.compare_digest``, so the time a comparison takes says nothing about the key, not
even its length. A server without a key answers anyone who can reach it, so it listens on
the loopback interface only. A key travels in an HTTP header, so it must be visible ASCII
(``key_problem``): anything else is refused at start, and by ``DelinkClient``, rather than
by every request. A key file group or others may read gets the warning the index key gets.
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
#: The Host header names a server without ``--allowed-host`` answers for: its loopback names (a DNS-rebinding
#: page reaches 127.0.0.1 under its own name, which is not one of these).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def key_problem(secret: str) -> Optional[str]:
    """Why ``secret`` cannot be sent as ``Authorization: Bearer <key>`` (None: it can): HTTP header values are
    ASCII, and a space would end the token. Says where, never what, the character is: the key is a secret."""
    for position, character in enumerate(secret, 1):
        if not "!" <= character <= "~":
            return f"character {position} is not visible ASCII (letters, digits, punctuation; no spaces), which an HTTP header cannot carry"
    return None


class ApiKey:
    """The secret, kept as its SHA-256 digest only."""

    def __init__(self, secret: str, source: str) -> None:
        if len(secret) < MIN_KEY_CHARS:
            raise InputError(
                f"the API key from {source} has {len(secret)} characters; use at least {MIN_KEY_CHARS} "
                "random ones, e.g. `python -c \"import secrets; print(secrets.token_urlsafe(32))\"`"
            )
        problem = key_problem(secret)
        if problem is not None:
            raise InputError(f"the API key from {source}: {problem}; make one with `python -c \"import secrets; print(secrets.token_urlsafe(32))\"`")
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
        from ..linkage.index.store import KeyedStore  # the index key's own check (here, not at the top: the client imports this module)

        KeyedStore(file_value, "", "", "API key file", "they can call the server as any client").check_access()
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
