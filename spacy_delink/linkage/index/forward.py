"""The forward store: each document's tokens as level-1 rows, which updates and compaction read.

The level files say which documents hold an n-gram, not which n-grams a document holds,
and an exact update needs the latter for the few base documents that a new document can
change (``update.py``). An index built with ``updatable=True`` (``delink index
--updatable``) therefore also keeps, per segment (the base and each delta):

    forward.rows     uint64 words: per token, ``row << room_bits | room``, bit-packed at
                     ``bits`` bits (``row_bits``): the token's row in level 1 and its room
                     (``Tokens.remaining``, capped at ``2 ** room_bits - 1``; with one
                     room bit, as in an index of max_n levels and before ``room_bits``
                     was recorded: whether the gap after the token breaks or its
                     document ends); sealed in chunks
                     (``hashing.ForwardCipher``: each chunk's ciphertext, then its tag)
    forward.offsets  uint64, documents + 1: the first token of each document

A row names the token's keyed digest (level 1 stores every token), so the tokens, their
digests and the segments of any document can be read back without its text. The cost is
``bits / 8`` bytes per token (about 2.1 for a vocabulary of 60,000 distinct tokens, 2.9 for
4 million) plus 8 bytes per document. In the clear the rows would be the corpus under a
word-substitution cipher, so ``forward.rows`` is encrypted and authenticated under the
index key with AES-256-GCM-SIV (``hashing.ForwardCipher``; its nonce is in the manifest,
whose ``forward.cipher`` names the cipher), and only the chunks holding the words an
update or a compaction reads are opened; a chunk that fails its tag is an
``IndexFormatError`` naming the file.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

import numpy as np

from ...errors import IndexFormatError
from .packing import pack_into, packed_words, unpack
from .format import FORWARD_CIPHER
from .format import FORWARD_OFFSETS as OFFSETS
from .hashing import ForwardCipher
from .format import FORWARD_ROWS as ROWS
from .format import shard_of
from .shards import kept_keys_name
from .workstore import WorkStore, write_durable

#: Segment room is capped like the build's (``partitions._REMAINING_CAP``): n-grams are short.
REMAINING_CAP = 255


def room_bits_for(level_total: int, max_n: int) -> int:
    """Bits of a token's room in a new store: one (the segment-end flag) when the index stores
    ``max_n`` levels, where a room of 1 is a segment's end and longer rooms all read alike;
    else enough for the index's longest n-gram."""
    return 1 if level_total == max_n else level_total.bit_length()


def row_bits(level1_rows: int, room_bits: int = 1) -> int:
    """Bits per packed token: the row (of ``level1_rows``) and the room (``room_bits``)."""
    return max(1, (max(1, level1_rows) - 1).bit_length()) + room_bits


def token_values(rows: np.ndarray, remaining: np.ndarray, room_bits: int = 1) -> np.ndarray:
    """What one token packs: its row and its room (with one room bit: whether its segment ends with it)."""
    shifted = np.asarray(rows, dtype=np.uint64) << np.uint64(room_bits)
    if room_bits == 1:
        return shifted | (np.asarray(remaining) == 1).astype(np.uint64)
    return shifted | np.minimum(np.asarray(remaining, dtype=np.uint64), np.uint64((1 << room_bits) - 1))


def remaining_from_ends(ends: np.ndarray) -> np.ndarray:
    """Each token's room to the end of its segment (capped), from the segment-end flags.

    Every document's last token ends a segment, so a run of documents decodes at once.
    """
    count = len(ends)
    if count == 0:
        return np.zeros(0, dtype=np.uint8)
    last = np.flatnonzero(ends)
    here = np.arange(count, dtype=np.int64)
    return np.minimum(last[np.searchsorted(last, here)] - here + 1, REMAINING_CAP).astype(np.uint8)


def manifest_entry(bits: int, nonce: str, room_bits: int) -> dict[str, Any]:
    """The manifest's ``forward`` entry of a build: bits per token, the file's nonce (hex), its cipher and the room's bits."""
    return {"bits": bits, "nonce": nonce, "cipher": FORWARD_CIPHER, "room_bits": room_bits}


class ForwardWriter:
    """Packs a segment's tokens piece by piece into a memory-mapped file, then seals it and makes it durable."""

    def __init__(self, folder: Path, tokens: int, bits: int, secret: bytes, rows_name: str = ROWS, offsets_name: str = OFFSETS) -> None:
        self.path = folder / rows_name
        self.offsets_name = offsets_name
        self.bits = bits
        self._secret = secret
        self.words = packed_words(tokens, bits)
        self.sealed_words = ForwardCipher.sealed_words(self.words)
        self._tmp = self.path.with_name(f"{rows_name}.{os.getpid()}.tmp")
        self._map = np.memmap(self._tmp, dtype=np.uint64, mode="w+", shape=(self.sealed_words,))
        self._written = 0

    def add(self, values: np.ndarray) -> None:
        pack_into(self._map, self._written, values, self.bits)
        self._written += len(values)

    def finish(self, offsets: np.ndarray) -> tuple[str, dict[str, dict[str, Any]]]:
        """Seal, flush and rename both files into place: the nonce (hex) and their entries in the array table.

        The plaintext fills the file's first ``words`` words and is sealed in place, from the
        last chunk to the first: chunk i's slot (``chunk_start``) begins where the plaintext
        of the chunks before it has ended or later, so a slot overwrites only plaintext
        already sealed (its own included, read before the slot is written).
        """
        plain = self._map[: self.words]
        nonce = ForwardCipher.nonce_of(self._secret, plain.view(np.uint8).data)
        cipher = ForwardCipher(self._secret, nonce)
        size = ForwardCipher.CHUNK_WORDS
        for chunk in reversed(range(-(-self.words // size))):
            sealed = cipher.seal(chunk, plain[chunk * size : (chunk + 1) * size])
            start = ForwardCipher.chunk_start(chunk)
            self._map[start : start + len(sealed)] = sealed
        self._map.flush()
        sha256 = hashlib.sha256(self._map.view(np.uint8).data).hexdigest()
        with open(self._tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        del self._map, plain
        os.replace(self._tmp, self.path)
        offsets = np.ascontiguousarray(offsets, dtype="<u8")
        return nonce.hex(), {
            self.path.name: {"dtype": "<u8", "length": self.sealed_words, "bytes": 8 * self.sealed_words, "sha256": sha256},
            self.offsets_name: {
                "dtype": "<u8", "length": len(offsets), "bytes": offsets.nbytes,
                "sha256": write_durable(self.path.with_name(self.offsets_name), offsets),
            },
        }


class Forward:
    """A segment's forward store, read back: the level-1 rows and segment room of its documents.

    ``words`` is the sealed file (``where`` names it in messages); reads open only the chunks they need.
    """

    def __init__(
        self, words: np.ndarray, offsets: np.ndarray, bits: int, cipher: ForwardCipher, where: str, room_bits: int = 1
    ) -> None:
        self.room_bits = room_bits
        self.words = words
        self._cipher = cipher
        self.where = where
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.bits = bits
        if len(self.offsets) < 1 or self.offsets[0] != 0 or np.any(np.diff(self.offsets) < 0):
            raise ValueError("forward offsets must start at 0 and never decrease")
        expected = ForwardCipher.sealed_words(packed_words(int(self.offsets[-1]), bits))
        if expected != len(words):
            raise ValueError(f"{len(words)} forward words, not {expected}, for {int(self.offsets[-1])} tokens of {bits} bits")

    @property
    def documents(self) -> int:
        return len(self.offsets) - 1

    def _plain_words(self, start: int, stop: int) -> np.ndarray:
        """Plaintext words ``start .. stop - 1`` of the file, from the chunks that hold them."""
        size = ForwardCipher.CHUNK_WORDS
        first, last = start // size, max(start, stop - 1) // size
        pieces = []
        for chunk in range(first, last + 1):
            sealed = self.words[ForwardCipher.chunk_start(chunk) : ForwardCipher.chunk_start(chunk + 1)]
            try:
                pieces.append(self._cipher.unseal(chunk, sealed))
            except ValueError as err:
                raise IndexFormatError(
                    f"{self.where}: {err}: it was altered or damaged after the build; rebuild the index with "
                    "`delink index ... --updatable --overwrite`"
                ) from None
        return np.concatenate(pieces)[start - first * size : stop - first * size]

    def tokens(self, first: int, stop: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Documents ``first .. stop - 1`` (local numbers): level-1 rows, segment room, tokens per document."""
        begin, end = int(self.offsets[first]), int(self.offsets[stop])
        first_word = begin * self.bits // 64
        words = self._plain_words(first_word, packed_words(end, self.bits))
        values = unpack(words, begin * self.bits - 64 * first_word, end - begin, self.bits)
        rows = (values >> np.uint64(self.room_bits)).astype(np.int64)
        if self.room_bits == 1:
            room = remaining_from_ends(values & np.uint64(1))
        else:
            room = (values & np.uint64((1 << self.room_bits) - 1)).astype(np.uint8)
        return rows, room, np.diff(self.offsets[first : stop + 1])


# --- the build's tasks (``builder.py`` runs them after the level passes) ---------------------


def partition_rows(store: WorkStore, partition: int, shard_bits: int, row_bases: list[int], room_bits: int) -> None:
    """One partition's tokens as packed values (level-1 row, segment end) in the work store."""
    prefix = f"p{partition:05d}"
    tok = store.get(f"{prefix}.tok", np.uint64)
    rows = np.empty(len(tok), dtype=np.int64)
    owner = shard_of(tok, shard_bits)
    for shard in np.unique(owner).tolist():
        chosen = owner == shard
        rows[chosen] = row_bases[shard] + np.searchsorted(store.get(kept_keys_name(shard, 1), np.uint64), tok[chosen])
    store.put(f"{prefix}.fwd", token_values(rows, store.get(f"{prefix}.rem", np.uint8), room_bits))


def write_build(
    store: WorkStore, out: str, documents_per_partition: list[int], tokens: int, bits: int, secret: bytes
) -> tuple[str, dict[str, dict[str, Any]]]:
    """The forward store of a whole build, partition after partition (documents in corpus order): its nonce and entries."""
    writer = ForwardWriter(Path(out), tokens, bits, secret)
    counts = []
    for partition, documents in enumerate(documents_per_partition):
        prefix = f"p{partition:05d}"
        writer.add(store.get(f"{prefix}.fwd", np.uint64))
        counts.append(np.bincount(store.get(f"{prefix}.doc", np.uint32), minlength=documents))
        store.drop(f"{prefix}.fwd")
    return writer.finish(np.concatenate([[0], np.cumsum(np.concatenate(counts))]))
