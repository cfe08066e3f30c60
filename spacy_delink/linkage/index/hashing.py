"""Keyed hashing of search forms and N-grams, so the index holds no plaintext.

Each distinct search form gets a 64-bit keyed BLAKE2b digest under a secret that is
generated at build time and kept in a separate key file. An N-gram's key chains the
keyed token digests with a 64-bit mixing step (``extend``); without the secret no
N-gram key can be computed, so the index cannot be probed for phrases. Chaining lets
level n be computed from level n−1 with one vectorized step, both at build and at query
time. Two distinct N-grams of one length collide with probability about 2^-64 per pair.
"""
from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

import numpy as np

from ...errors import IndexFormatError, InputError
from ..tokenize import Tokenizer, Tokens

KEY_BYTES = 32
KEY_ENV = "DELINK_KEY_FILE"
_MUL1 = np.uint64(0x9E3779B97F4A7C15)
_MUL2 = np.uint64(0xBF58476D1CE4E5B9)
_MUL3 = np.uint64(0x94D049BB133111EB)


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


def key_id(secret: bytes) -> str:
    """A public fingerprint of the secret, stored in the manifest to detect a wrong key file."""
    return hashlib.blake2b(secret, digest_size=8, person=b"delinkid").hexdigest()


def new_secret() -> bytes:
    return secrets.token_bytes(KEY_BYTES)


def write_key(path: Path, secret: bytes) -> None:
    """Write the secret as hex, readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(secret.hex() + "\n")
    os.replace(tmp, path)


def read_key(path: Path, expected_id: str | None = None) -> bytes:
    if not path.exists():
        raise IndexFormatError(
            f"key file {path} not found; pass the key file the index was built with "
            f"(--key-file or ${KEY_ENV})"
        )
    try:
        secret = bytes.fromhex(path.read_text().strip())
    except ValueError:
        raise IndexFormatError(f"key file {path} is not a hex-encoded key") from None
    if len(secret) != KEY_BYTES:
        raise IndexFormatError(f"key file {path} holds {len(secret)} bytes, expected {KEY_BYTES}")
    if expected_id is not None and key_id(secret) != expected_id:
        raise IndexFormatError(f"key file {path} does not belong to this index (key id mismatch)")
    return secret


def extend(prefix: np.ndarray, token: np.ndarray) -> np.ndarray:
    """Key of an N-gram from its (N−1)-gram prefix key and its last token's keyed digest."""
    x = prefix * _MUL1 + token
    x ^= x >> np.uint64(30)
    x *= _MUL2
    x ^= x >> np.uint64(27)
    x *= _MUL3
    x ^= x >> np.uint64(31)
    return x


class TokenHasher:
    """Maps raw tokens to keyed 64-bit digests of their search forms (cached per raw string)."""

    def __init__(self, tokenizer: Tokenizer, secret: bytes, cache_limit: int = 1_000_000) -> None:
        if len(secret) != KEY_BYTES:
            raise InputError(f"secret must be {KEY_BYTES} bytes")
        self.tokenizer = tokenizer
        self._secret = secret
        self._cache: dict[str, int] = {}
        self.cache_limit = cache_limit  # distinct raw tokens kept (~150 bytes each)

    def _digest(self, raw: str) -> int:
        form = self.tokenizer.search_form(raw).encode("utf-8", "surrogatepass")
        return int.from_bytes(hashlib.blake2b(form, digest_size=8, key=self._secret).digest(), "little")

    def hash_tokens(self, tokens: Tokens) -> np.ndarray:
        """uint64 keyed digests of each token's search form."""
        cache = self._cache
        unseen = set(tokens.raw).difference(cache)
        if unseen:
            if len(cache) + len(unseen) > self.cache_limit:
                cache.clear()
                unseen = set(tokens.raw)
            for raw in unseen:
                cache[raw] = self._digest(raw)
        return np.fromiter(map(cache.__getitem__, tokens.raw), dtype=np.uint64, count=len(tokens.raw))
