"""Keyed hashing under the index secret: N-gram keys, document-id digests, the manifest MAC.

Each distinct search form gets a 64-bit keyed BLAKE2b digest under a secret that is
generated at build time and kept in a separate key file (``keys.py``); one of its bits
names the reading (the family bit). An N-gram's key chains the keyed token digests with a 64-bit
mixing step (``ngram_keys.extend``); without the secret no N-gram key can be computed, so the
index cannot be probed for phrases. Chaining lets level n be computed from level n−1 with
one vectorized step, both at build and at query time. Two distinct N-grams of one length
and family collide with probability about 2^-63 per pair.

The secret is used for three purposes, each under its own key so that no output of one
can stand in for another (domain separation):

* token digests: BLAKE2b keyed with the secret itself, no personalization, one bit
  (``ngram_keys.FAMILY``) replaced by the reading's family (clear exact, set search, SPEC §8):
  the two readings' keys are two disjoint families in one index, and the same strings read
  under both have keys that differ in that bit alone (``ngram_keys.mix``), so a build can
  store a search-reading n-gram with the same documents as its exact twin once;
* the manifest MAC, document-id digests and ``delink protect``'s input digests: BLAKE2b
  keyed with a subkey derived from the secret (``derive_key``, a keyed BLAKE2b with its own
  personalization and the purpose);
* the public key id (``keys.key_id``): an unkeyed BLAKE2b of the secret, personalized;
* the forward store's encryption (``ForwardCipher``): BLAKE2b under two more subkeys, one
  deriving each file's nonce from its content, one deriving each file's AES-256-GCM-SIV key
  from that nonce.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import threading
from functools import cached_property

import numpy as np
from cryptography.exceptions import InvalidTag, UnsupportedAlgorithm
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

from ...errors import InputError
from ..tokenize import SearchTokenizer, Tokenizer, Tokens
from .blake2b import ascii_digests, blake2b_keyed_state
from .ngram_keys import FAMILY, extend
from .vocabulary import Vocabulary
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
_FORWARD_KEY_PURPOSE = b"forward-aes-gcm-siv/v2"


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

    A ``vocabulary.Vocabulary`` gives every occurrence of a token already seen its digest by
    an array gather; only new tokens reach Python, where their search form is digested.
    The index build and every query use this one path. A lock makes it safe to share
    between threads (a pipeline's components share one index).
    """

    def __init__(self, tokenizer: Tokenizer | SearchTokenizer, secret: bytes, cache_limit: int = 1_000_000) -> None:
        if len(secret) != KEY_BYTES:
            raise InputError(f"secret must be {KEY_BYTES} bytes")
        self.tokenizer = tokenizer
        #: The family bit of this reading's digests (``ngram_keys.FAMILY``): clear exact, set search.
        self.family = np.uint64(0) if tokenizer.reading == "exact" else FAMILY
        #: The keyed state before any data: each digest continues a copy of it (no key setup per token).
        self._keyed = hashlib.blake2b(digest_size=8, key=secret)
        self._secret = secret
        self.vocabulary = Vocabulary(fold_ascii=tokenizer.folds_ascii, limit=cache_limit)
        self._lock = threading.Lock()

    def digest(self, form: str) -> int:
        """The keyed digest of one token's key form, its lowest bit the reading's family."""
        state = self._keyed.copy()
        state.update(form.encode("utf-8", "surrogatepass"))
        return int.from_bytes(state.digest(), "little") & ~int(FAMILY) | int(self.family)

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
        """The keyed state for ``blake2b.ascii_digests`` (made on first use: a compiled call, which
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
    """Seals a forward store file (``forward.py``) with AES-256-GCM-SIV (RFC 8452), chunk by chunk.

    The forward store lists each document's tokens as level-1 rows: in the clear that is
    the corpus under a word-substitution cipher, which frequency analysis breaks. So the
    file is encrypted and authenticated with an AEAD of the maintained ``cryptography``
    library, in chunks of ``CHUNK_WORDS`` words, each stored as its ciphertext then its
    16-byte tag: a read opens only the chunks that hold its words (an update reads a few
    documents, compaction all of them), and any edit to a chunk fails its tag.

    Nonces: a build writes the same bytes every time (a compaction equals a fresh build
    byte for byte), so nothing random goes in. The file's nonce is a keyed digest of its
    plaintext (as in SIV): the file's key is derived from the index secret and that nonce,
    so two files share a key only when they are equal, and chunk ``i`` is sealed under
    nonce ``i``, its position: a chunk moved to another place fails its tag. AES-GCM-SIV,
    not ChaCha20-Poly1305 or AES-GCM, because it is the AEAD made for such derived nonces:
    should one ever repeat, it reveals only that two chunks are equal, where the others
    would reveal the XOR of their plaintexts (and, GCM, let tags be forged).
    """

    #: Words of plaintext per sealed chunk (8 KiB: reading one document opens one or two;
    #: the tags cost 0.2% of the file).
    CHUNK_WORDS = 1024
    #: Words of each chunk's tag.
    TAG_WORDS = 2
    #: The manifest's name for this sealing (``format.FORWARD_CIPHER``): the forward store's version.
    NAME = f"aes-256-gcm-siv/{CHUNK_WORDS * 8 // 1024}KiB-chunks"

    def __init__(self, secret: bytes, nonce: bytes) -> None:
        self.nonce = nonce
        key = hashlib.blake2b(nonce, key=derive_key(secret, _FORWARD_KEY_PURPOSE), digest_size=32).digest()
        try:
            self._aead = AESGCMSIV(key)
        except UnsupportedAlgorithm:
            raise InputError(
                "the forward store needs AES-GCM-SIV, which this build of the cryptography package lacks (it is "
                "linked with OpenSSL older than 3.2); install cryptography's own wheel: pip install --force-reinstall cryptography"
            ) from None

    @staticmethod
    def nonce_of(secret: bytes, plaintext: memoryview | bytes) -> bytes:
        return hashlib.blake2b(plaintext, key=derive_key(secret, _NONCE_PURPOSE), digest_size=16).digest()

    @classmethod
    def sealed_words(cls, words: int) -> int:
        """Words of a file that seals ``words`` words of plaintext: each chunk grows by its tag."""
        return words + cls.TAG_WORDS * -(-words // cls.CHUNK_WORDS)

    @classmethod
    def chunk_start(cls, chunk: int) -> int:
        """The first word of sealed chunk ``chunk`` in the file."""
        return chunk * (cls.CHUNK_WORDS + cls.TAG_WORDS)

    def seal(self, chunk: int, words: np.ndarray) -> np.ndarray:
        """Plaintext chunk ``chunk`` (at most ``CHUNK_WORDS`` uint64 words) as stored: ciphertext, then tag."""
        sealed = self._aead.encrypt(chunk.to_bytes(12, "big"), np.ascontiguousarray(words, dtype="<u8").tobytes(), None)
        return np.frombuffer(sealed, dtype="<u8")

    def unseal(self, chunk: int, sealed: np.ndarray) -> np.ndarray:
        """The plaintext words of sealed chunk ``chunk``; ValueError when its tag fails (an edit or damage)."""
        try:
            plain = self._aead.decrypt(chunk.to_bytes(12, "big"), np.ascontiguousarray(sealed, dtype="<u8").tobytes(), None)
        except InvalidTag:
            raise ValueError(f"chunk {chunk} fails authentication") from None
        return np.frombuffer(plain, dtype="<u8")
