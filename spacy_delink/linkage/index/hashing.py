"""Keyed hashing under the index secret: N-gram keys, document-id digests, the manifest MAC.

Each distinct search form gets a 64-bit keyed BLAKE2b digest under a secret that is
generated at build time and kept in a separate key file (``keys.py``); its lowest bit names
the reading (the family bit). An N-gram's key chains the keyed token digests with a 64-bit
mixing step (``kernels.extend``); without the secret no N-gram key can be computed, so the
index cannot be probed for phrases. Chaining lets level n be computed from level n−1 with
one vectorized step, both at build and at query time. Two distinct N-grams of one length
and family collide with probability about 2^-63 per pair.

The secret is used for three purposes, each under its own key so that no output of one
can stand in for another (domain separation):

* token digests: BLAKE2b keyed with the secret itself, no personalization, its lowest
  bit replaced by the reading's family (0 exact, 1 search, SPEC §8): the two readings'
  keys are two disjoint families in one index, and the same strings read under both
  have keys that differ in that bit alone (``kernels.mix``), so a build can store a
  search-reading n-gram with the same documents as its exact twin once;
* the manifest MAC, document-id digests and ``delink protect``'s input digests: BLAKE2b
  keyed with a subkey derived from the secret (``derive_key``, a keyed BLAKE2b with its own
  personalization and the purpose);
* the public key id (``keys.key_id``): an unkeyed BLAKE2b of the secret, personalized;
* the forward store's encryption (``ForwardCipher``): BLAKE2b under two more subkeys, one
  deriving each file's nonce from its content, one generating the keystream.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
from functools import cached_property

import numpy as np

from ...errors import InputError
from ..tokenize import SearchTokenizer, Tokenizer, Tokens
from .kernels import FAMILY, Vocabulary, ascii_digests, blake2b_keyed_state, extend
from .keys import KEY_BYTES

__all__ = ["ID_DIGEST_BYTES", "ID_DIGEST_DTYPE", "IdHasher", "TokenHasher", "derive_key", "extend", "mac_matches", "manifest_mac", "sidecar_mac_key"]

#: 128-bit id digests: a collision between two ids of one collection is never expected.
ID_DIGEST_BYTES = 16
ID_DIGEST_DTYPE = np.dtype(f"S{ID_DIGEST_BYTES}")
_SUBKEY_PERSON = b"delink-subkey"
_MAC_PURPOSE = b"manifest-mac/v2"
_SIDECAR_MAC_PURPOSE = b"sidecar-manifest-mac/v1"
_ID_PURPOSE = b"document-id/v2"
_INPUT_PURPOSE = b"protect-input/v1"
_NONCE_PURPOSE = b"forward-nonce/v1"
_STREAM_PURPOSE = b"forward-stream/v1"
#: Bytes of keystream per BLAKE2b call (its largest digest).
_BLOCK = 64


def derive_key(secret: bytes, purpose: bytes) -> bytes:
    """A 256-bit subkey of the secret for one purpose (independent of the token digests)."""
    return hashlib.blake2b(purpose, key=secret, digest_size=32, person=_SUBKEY_PERSON).digest()


def manifest_mac(secret: bytes, canonical: bytes) -> str:
    """The keyed MAC of a manifest's canonical bytes (hex)."""
    return hashlib.blake2b(canonical, key=derive_key(secret, _MAC_PURPOSE), digest_size=32).hexdigest()


def sidecar_mac_key(secret: bytes) -> bytes:
    """The subkey that authenticates manifests kept beside an index (its embeddings), apart from the index's own."""
    return derive_key(secret, _SIDECAR_MAC_PURPOSE)


def mac_matches(secret: bytes, canonical: bytes, mac: str) -> bool:
    return hmac.compare_digest(manifest_mac(secret, canonical), mac)


def input_digest(secret: bytes, doc_id: str | int, text: str) -> str:
    """A keyed digest (hex) of one input document, id and text, that ``delink protect`` records:
    a resumed run redoes a document whose input text changed, and the digest says nothing
    of the text to whoever lacks the key (a plain hash would confirm a guessed text)."""
    canonical = json.dumps([doc_id, text], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(canonical, key=derive_key(secret, _INPUT_PURPOSE), digest_size=16).hexdigest()


class IdHasher:
    """Keyed 128-bit digests of document ids; ``1`` and ``"1"`` are different ids."""

    def __init__(self, secret: bytes) -> None:
        self._key = derive_key(secret, _ID_PURPOSE)

    def digest(self, doc_id: str | int) -> bytes:
        canonical = json.dumps(doc_id, ensure_ascii=False).encode("utf-8")
        return hashlib.blake2b(canonical, key=self._key, digest_size=ID_DIGEST_BYTES).digest()


class TokenHasher:
    """Maps tokens to keyed 64-bit digests of their search forms, each distinct token once.

    A ``kernels.Vocabulary`` gives every occurrence of a token already seen its digest by
    an array gather; only new tokens reach Python, where their search form is digested.
    The index build and every query use this one path. A lock makes it safe to share
    between threads (a pipeline's components share one index).
    """

    def __init__(self, tokenizer: Tokenizer | SearchTokenizer, secret: bytes, cache_limit: int = 1_000_000) -> None:
        if len(secret) != KEY_BYTES:
            raise InputError(f"secret must be {KEY_BYTES} bytes")
        self.tokenizer = tokenizer
        #: The family bit of this reading's digests (``kernels.FAMILY``): 0 exact, 1 search.
        self.family = np.uint64(0 if tokenizer.reading == "exact" else 1)
        #: The keyed state before any data: each digest continues a copy of it (no key setup per token).
        self._keyed = hashlib.blake2b(digest_size=8, key=secret)
        self._secret = secret
        self.vocabulary = Vocabulary(fold_ascii=tokenizer.folds_ascii, limit=cache_limit)
        self._lock = threading.Lock()

    def digest(self, form: str) -> int:
        """The keyed digest of one token's key form, its lowest bit the reading's family."""
        state = self._keyed.copy()
        state.update(form.encode("utf-8", "surrogatepass"))
        return int.from_bytes(state.digest(), "little") & ~1 | int(self.family)

    def hash_tokens(self, tokens: Tokens) -> np.ndarray:
        """uint64 keyed digests of each token's search form.

        Threads sharing the hasher take turns on its vocabulary, so only the table probes
        and the new tokens' digests are done under the lock; the table keys are not.
        """
        vocabulary = self.vocabulary
        codes, starts, ends = tokens.forms
        keys = vocabulary.keys(codes, starts, ends)
        with self._lock:
            ids, new = vocabulary.assign(codes, starts, ends, keys)
            if len(new):
                vocabulary.digests[ids[new]] = self._new_digests(tokens, new)
            return vocabulary.digests[ids]

    @cached_property
    def _keyed_words(self) -> np.ndarray:
        """The keyed state for ``kernels.ascii_digests`` (made on first use: a compiled call, which
        a build makes in its worker threads, not while it sets up)."""
        return blake2b_keyed_state(np.frombuffer(self._secret, dtype=np.uint8))

    def _new_digests(self, tokens: Tokens, new: np.ndarray) -> np.ndarray:
        """The digests of the tokens ``new`` (under the lock): compiled for ASCII tokens (most of them), else ``digest``."""
        codes, all_starts, all_ends = tokens.forms
        starts, ends = all_starts[new], all_ends[new]
        digests, plain = ascii_digests(codes, starts, ends, self.tokenizer.folds_ascii, self._keyed_words)
        digests &= ~FAMILY
        digests |= self.family
        others = new[~plain]
        if len(others):
            key_form, digest = self.tokenizer.key_form, self.digest
            digests[~plain] = np.fromiter((digest(key_form(tokens.form(i))) for i in others.tolist()), dtype=np.uint64, count=len(others))
        return digests


class ForwardCipher:
    """Encrypts a forward store file (``forward.py``): words XOR a keyed BLAKE2b keystream.

    The forward store lists each document's tokens as level-1 rows: in the clear that is
    the corpus under a word-substitution cipher, which frequency analysis breaks. So the
    file is encrypted as a stream, BLAKE2b in counter mode (block ``i`` of the keystream
    is BLAKE2b-512 of ``nonce || i`` under a subkey), and any word range decrypts on its
    own. The nonce is a keyed digest of the plaintext (as in SIV): two files share a
    keystream only when they are equal, and a build writes the same bytes every time.
    """

    def __init__(self, secret: bytes, nonce: bytes) -> None:
        self.nonce = nonce
        self._stream = hashlib.blake2b(nonce, key=derive_key(secret, _STREAM_PURPOSE), digest_size=_BLOCK)

    @staticmethod
    def nonce_of(secret: bytes, plaintext: memoryview | bytes) -> bytes:
        return hashlib.blake2b(plaintext, key=derive_key(secret, _NONCE_PURPOSE), digest_size=16).digest()

    def xor(self, words: np.ndarray, first_word: int) -> np.ndarray:
        """``words`` (uint64, starting at word ``first_word`` of the file) XOR the keystream."""
        words_per_block = _BLOCK // 8
        first_block = first_word // words_per_block
        last_block = (first_word + len(words) + words_per_block - 1) // words_per_block
        stream = bytearray()
        for block in range(first_block, last_block):
            state = self._stream.copy()
            state.update(block.to_bytes(8, "little"))
            stream += state.digest()
        start = first_word - first_block * words_per_block
        keys = np.frombuffer(bytes(stream), dtype="<u8")[start : start + len(words)]
        return np.asarray(words, dtype=np.uint64) ^ keys
