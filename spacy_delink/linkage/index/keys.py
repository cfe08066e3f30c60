"""The key file: the secrets that unlock indexes, kept apart from them.

A key file is a JSON object, readable by its owner only (0600)::

    {"format": "spacy-delink-keys", "keys": {"<key id>": "<secret: 64 hex digits>"}}

An index's manifest names its key id, and opening the index takes that entry. One file
may hold the keys of several indexes (e.g. one ``$DELINK_KEY_FILE`` for all): a build
adds its key and never removes another index's; a rebuild with ``--overwrite`` retires
only the key of the index it replaced (``store.py``, ``commit.py``). A file holding one
bare hex secret (index format 1) reads as one key, so such an index can be rebuilt in place.

Every write goes through ``io.atomic_write(private=True)``: a random temporary name
created with ``O_CREAT | O_EXCL | O_NOFOLLOW`` and mode 0600, fsynced, then renamed, so a
planted file or symlink is never written through. On reading, a key file that another
user owns or that group or others may access is reported like ssh does (``store.py``):
a warning by default, an error with ``strict`` (or ``$DELINK_STRICT_KEY_PERMISSIONS=1``).
"""
from __future__ import annotations

import hashlib
import os
import re
import secrets
from pathlib import Path
from typing import Any

from ...errors import IndexFormatError
from .store import KeyedStore

KEY_BYTES = 32
KEY_ENV = "DELINK_KEY_FILE"
_KEY_ID = re.compile(r"[0-9a-f]{16}")
_SECRET = re.compile(r"[0-9a-f]{64}")


def new_secret() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def key_id(secret: bytes) -> str:
    """A public fingerprint of the secret, stored in the manifest to find and check its key."""
    return hashlib.blake2b(secret, digest_size=8, person=b"delinkid").hexdigest()


def default_key_path(index_dir: str | Path) -> Path:
    """``<index>.key`` beside the index directory (outside it, so the index can be shared alone)."""
    index_dir = Path(index_dir)
    return index_dir.with_name(index_dir.name + ".key")


def resolve_key_path(index_dir: str | Path, key_file: str | Path | None) -> Path:
    """Explicit path, else ``$DELINK_KEY_FILE``, else ``<index>.key``."""
    if key_file:
        return Path(key_file)
    if os.environ.get(KEY_ENV):
        return Path(os.environ[KEY_ENV])
    return default_key_path(index_dir)


class KeyFile(KeyedStore):
    """The key file at ``path`` (module docstring)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, "spacy-delink-keys", "keys", "key file", "whoever reads it can probe the index for phrases", self._parse_keys)

    def _parse_keys(self, path: Path, text: str) -> dict[str, Any]:
        if _SECRET.fullmatch(text.strip().lower()):  # a format-1 key file: one bare secret
            return {key_id(bytes.fromhex(text.strip())): text.strip().lower()}
        keys = self._parse_json(path, text)
        for kid, secret in keys.items():
            if not (isinstance(secret, str) and _SECRET.fullmatch(secret) and _KEY_ID.fullmatch(kid)):
                raise IndexFormatError(f"key file {path}: entry {kid!r} is not '<key id>: <{2 * KEY_BYTES} hex digits>'; it is damaged")
            if key_id(bytes.fromhex(secret)) != kid:
                raise IndexFormatError(f"key file {path}: key id {kid} does not match its secret (the file was edited or damaged)")
        return keys

    def secrets(self, strict: bool | None = None) -> dict[str, bytes]:
        """Every key in the file by key id, after the permission check."""
        if not self.path.exists():
            raise IndexFormatError(
                f"key file {self.path} not found; pass the key file the index was built with (--key-file or ${KEY_ENV})"
            )
        self.check_access(strict)
        return {kid: bytes.fromhex(secret) for kid, secret in self.read().items()}

    def secret(self, expected_id: str, strict: bool | None = None) -> bytes:
        """The secret of the index whose manifest names ``expected_id``."""
        secret = self.secrets(strict).get(expected_id)
        if secret is None:
            raise IndexFormatError(
                f"key file {self.path} does not belong to this index: it holds no key with id {expected_id}; "
                f"pass the key file the index was built with (--key-file or ${KEY_ENV})"
            )
        return secret

    def add(self, secret: bytes) -> None:
        self.update(add={key_id(secret): secret.hex()})
