"""The gap store: where each search-reading token stands in its document (SPEC §9).

The level files say which documents hold a phrase, not where; a sloppy phrase around a
mask ("charged * first") needs the positions of its words. An index that holds the gap
reading keeps, beside its levels:

    gap.vocabulary   uint64, sorted: every distinct search-reading token digest of the
                     collection (the keys level 1 already holds, in the clear)
    gap.rows         per search-reading token, in document order, ``id << 1 | break``
                     bit-packed at ``bits`` bits: the token's number in the vocabulary and
                     whether a mask of the collection ends its run (or its document ends);
                     sealed chunk by chunk like the forward store (``hashing.ForwardCipher``)
    gap.offsets      uint64, documents + 1: each document's first token

In the clear, ``gap.rows`` would be the collection under a word-substitution cipher, which
frequency analysis breaks; so it is encrypted and authenticated under the index key, and
read back whole (a query needs the positions of any word in any document) into memory,
where an inverted list of positions per token is built once per process.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ...errors import IndexFormatError
from .packing import packed_words, unpack
from .forward import Forward, ForwardWriter
from .format import FORWARD_CIPHER, GAP_OFFSETS, GAP_ROWS, GAP_VOCABULARY
from .hashing import ForwardCipher
from .ngram_keys import FAMILY
from .workstore import WorkStore, write_durable


def search_tokens(store: WorkStore, partition: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One partition's search-reading tokens (the digests with the search family bit), whether
    each ends its run (room 1: a mask or its document's end follows), and their documents."""
    prefix = f"p{partition:05d}"
    tok = store.get(f"{prefix}.tok", np.uint64)
    chosen = (tok & FAMILY) != 0
    ends = store.get(f"{prefix}.rem", np.uint8)[chosen] == 1
    return tok[chosen], ends, store.get(f"{prefix}.doc", np.uint32)[chosen]


def write_build(store: WorkStore, out: str, documents_per_partition: list[int], secret: bytes) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """The gap store of a whole build (documents in corpus order): its manifest entry and array entries."""
    vocabulary = np.zeros(0, dtype=np.uint64)
    counts = []
    for partition in range(len(documents_per_partition)):
        tok, _, doc = search_tokens(store, partition)
        vocabulary = np.union1d(vocabulary, tok)
        counts.append(np.bincount(doc, minlength=documents_per_partition[partition]))
    pieces = (search_tokens(store, partition)[:2] for partition in range(len(documents_per_partition)))
    return write_store(Path(out), vocabulary, pieces, np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64), secret)


def write_store(
    folder: Path, vocabulary: np.ndarray, pieces: Iterable[tuple[np.ndarray, np.ndarray]], counts: np.ndarray, secret: bytes, prefix: str = ""
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Write a gap store into ``folder``: ``pieces`` are (digests, run ends) in document order,
    ``counts`` the tokens of each document. Returns the manifest's ``gap`` entry and the array
    entries (named ``prefix`` + file: a delta's store lives in its folder)."""
    tokens = int(np.sum(counts))
    bits = max(1, (max(1, len(vocabulary)) - 1).bit_length()) + 1
    writer = ForwardWriter(folder, tokens, bits, secret, GAP_ROWS, GAP_OFFSETS)
    for tok, ends in pieces:
        ids = np.searchsorted(vocabulary, tok).astype(np.uint64)
        writer.add(ids << np.uint64(1) | np.asarray(ends).astype(np.uint64))
    nonce, arrays = writer.finish(np.concatenate([[0], np.cumsum(counts)]))
    vocabulary = np.ascontiguousarray(vocabulary, dtype="<u8")
    arrays[GAP_VOCABULARY] = {
        "dtype": "<u8", "length": len(vocabulary), "bytes": vocabulary.nbytes,
        "sha256": write_durable(folder / GAP_VOCABULARY, vocabulary),
    }
    entry = {"bits": bits, "nonce": nonce, "cipher": FORWARD_CIPHER, "tokens": tokens, "folder": prefix}
    return entry, {prefix + name: spec for name, spec in arrays.items()}


@dataclass
class GapStore:
    """An index's gap store, read back: the collection's search tokens as vocabulary numbers."""

    vocabulary: np.ndarray
    forward: Forward
    max_gap: int

    @classmethod
    def open(cls, path: Path, arrays: dict[str, np.ndarray], entry: dict[str, Any], secret: bytes, max_gap: int) -> "GapStore":
        prefix = entry.get("folder", "")
        where = f"index {path}: {prefix}{GAP_ROWS}"
        try:
            cipher = ForwardCipher(secret, bytes.fromhex(entry["nonce"]))
            forward = Forward(arrays[prefix + GAP_ROWS], arrays[prefix + GAP_OFFSETS], int(entry["bits"]), cipher, where, room_bits=1)
        except (ValueError, KeyError, TypeError) as err:
            raise IndexFormatError(f"{where} does not match the manifest ({err}); rebuild the index with `delink index --overwrite`") from None
        vocabulary = arrays[prefix + GAP_VOCABULARY]
        if int(forward.offsets[-1]) != int(entry["tokens"]) or (len(vocabulary) > 1 and np.any(vocabulary[1:] <= vocabulary[:-1])):
            raise IndexFormatError(f"{where} does not match its vocabulary or token count; rebuild the index with `delink index --overwrite`")
        return cls(vocabulary, forward, max_gap)

    @cached_property
    def stream(self) -> tuple[np.ndarray, np.ndarray]:
        """Every token's vocabulary number (int32) and whether its run ends with it (bool), opened once."""
        total = int(self.forward.offsets[-1])
        if not total:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=bool)
        words = self.forward._plain_words(0, packed_words(total, self.forward.bits))
        values = unpack(words, 0, total, self.forward.bits)
        ids = (values >> np.uint64(1)).astype(np.int32)
        if len(ids) and int(ids.max()) >= len(self.vocabulary):
            raise IndexFormatError(f"{self.forward.where}: a token names no vocabulary entry; rebuild the index with `delink index --overwrite`")
        return ids, (values & np.uint64(1)).astype(bool)

    @cached_property
    def postings(self) -> tuple[np.ndarray, np.ndarray]:
        """Each vocabulary number's positions in the stream: ``starts`` (vocabulary + 1) and the positions (int64)."""
        ids, _ = self.stream
        positions = np.argsort(ids, kind="stable").astype(np.int64)
        starts = np.searchsorted(ids[positions], np.arange(len(self.vocabulary) + 1)).astype(np.int64)
        return starts, positions

    def digests(self) -> tuple[np.ndarray, np.ndarray]:
        """Every token's digest and run end, in document order: what an update writes again beside the new documents."""
        ids, ends = self.stream
        return self.vocabulary[ids], ends

    @property
    def offsets(self) -> np.ndarray:
        return self.forward.offsets

    def numbers(self, digests: np.ndarray) -> np.ndarray:
        """Each digest's vocabulary number, or -1 where the collection never holds it."""
        digests = np.asarray(digests, dtype=np.uint64)
        if not len(self.vocabulary):
            return np.full(len(digests), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(self.vocabulary, digests), len(self.vocabulary) - 1)
        return np.where(self.vocabulary[at] == digests, at, -1).astype(np.int64)
