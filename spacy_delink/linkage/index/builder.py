"""Building the corpus index: stream, tokenize, count document frequencies level by level.

Algorithm (SPEC §3 with a lossless reduction):

1. Stream the documents once; tokenize (SPEC §1–2) and write each token's keyed digest,
   its document number and its segment length to spill files. Memory stays bounded by
   the chunk size whatever the corpus size.
2. For n = 1..max_n, derive each position's n-gram key from the (n−1)-gram key at the same
   position (``hashing.extend``) and count document frequencies by sorting
   ``(key, document)`` pairs. Pairs are hash-partitioned on the key's top bits so that each
   partition's sort fits the memory budget (``memory_mb``): partitions spill to disk and
   their sorted outputs, taken in partition order, are the globally sorted level.
3. **Reduction.** An n-gram (n ≥ 2) is only counted and stored when both its (n−1)-word
   prefix and suffix occur in at least two documents. If either occurs in one document,
   the n-gram occurs in at most that one; it strictly contains a linkable phrase (df = 1
   < k for every k ≥ 2), so it is never minimal (SPEC §4), never frequent (SPEC §5), and
   cannot lower ``anonymity`` below the 1 its prefix or suffix already gives (SPEC §6).
   Queries apply the same rule, so results equal the unreduced index for every k ≥ 2
   (``tests/test_index.py`` checks this against a brute force). The rule also prunes
   the work: positions whose sub-grams are rare are never extended.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Union

import numpy as np
import xxhash
from tqdm import tqdm

from ...errors import InputError
from ...io import atomic_directory, atomic_write
from ..tokenize import LinkageRules, Tokenizer
from .format import DOC_IDS, FORMAT_NAME, FORMAT_VERSION, MANIFEST, array_file
from .hashing import TokenHasher, extend, key_id, new_secret, resolve_key_path, write_key

#: A document id as given by the user (JSON string or integer).
DocId = Union[str, int]
#: Bytes of working memory per counted (key, document) pair while a partition is sorted.
_BYTES_PER_PAIR = 64
_MAX_DOCS = 2**32 - 1


@dataclass
class BuildSummary:
    """What a build produced; printed by ``delink index`` and stored in the manifest."""

    documents: int = 0
    empty_documents: int = 0
    tokens: int = 0
    ngrams: int = 0
    ngrams_per_level: dict[int, int] = field(default_factory=dict)
    postings: int = 0
    bytes_on_disk: int = 0
    seconds: float = 0.0
    partitions: int = 1

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class _ArrayWriter:
    """Appends raw array chunks to one file while hashing them for the manifest."""

    def __init__(self, path: Path, dtype: "np.typing.DTypeLike") -> None:
        self.path = path
        self.dtype = np.dtype(dtype)
        self._handle = open(path, "wb")
        self._hasher = xxhash.xxh3_128()
        self.length = 0

    def append(self, values: np.ndarray) -> None:
        data = np.ascontiguousarray(values, dtype=self.dtype).tobytes()
        self._handle.write(data)
        self._hasher.update(data)
        self.length += len(values)

    def close(self) -> dict[str, Any]:
        self._handle.close()
        return {
            "file": self.path.name,
            "dtype": self.dtype.str,
            "length": self.length,
            "bytes": self.length * self.dtype.itemsize,
            "xxh3_128": self._hasher.hexdigest(),
        }


class _Spill:
    """Parallel (key, document, position) columns of one hash partition: in memory or on disk."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.size = 0
        self._chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._handles = None
        if path is not None:
            self._handles = [open(path.with_suffix(f".{kind}"), "wb") for kind in ("h", "d", "p")]

    def add(self, keys: np.ndarray, docs: np.ndarray, positions: np.ndarray) -> None:
        self.size += len(keys)
        if self._handles is None:
            self._chunks.append((keys, docs, positions))
            return
        for handle, values in zip(self._handles, (keys, docs, positions)):
            handle.write(values.tobytes())

    def load(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._handles is None:
            if not self._chunks:
                return np.zeros(0, np.uint64), np.zeros(0, np.uint32), np.zeros(0, np.int64)
            columns = [np.concatenate(column) for column in zip(*self._chunks)]
            self._chunks.clear()
            return columns[0], columns[1], columns[2]
        for handle in self._handles:
            handle.close()
        assert self.path is not None
        columns = []
        for kind, dtype in (("h", np.uint64), ("d", np.uint32), ("p", np.int64)):
            file = self.path.with_suffix(f".{kind}")
            columns.append(np.fromfile(file, dtype=dtype))
            file.unlink()
        return columns[0], columns[1], columns[2]


_INDEX_BITS = 24


def _order_by_key(keys: np.ndarray) -> np.ndarray:
    """Indices that sort ``keys`` so that equal keys are adjacent.

    numpy's value sort is SIMD-accelerated and ~8x faster than ``argsort`` on uint64, so
    the top 40 key bits and a 24-bit element index are packed into one word and sorted as
    values. Keys are uniform hashes: two distinct keys rarely share their top 40 bits, and
    when they do (checked) the exact ``argsort`` is used instead.
    """
    count = len(keys)
    if count >= 1 << _INDEX_BITS:
        return np.argsort(keys)
    low_mask = np.uint64((1 << _INDEX_BITS) - 1)
    packed = (keys & ~low_mask) | np.arange(count, dtype=np.uint64)
    packed.sort()
    order = (packed & low_mask).astype(np.int64)
    sorted_keys = keys[order]
    top = packed & ~low_mask
    if np.any((sorted_keys[1:] != sorted_keys[:-1]) & (top[1:] == top[:-1])):
        return np.argsort(keys)
    return order


def _count_partition(
    keys: np.ndarray, docs: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Distinct keys (ascending), their df and posting lists, and each pair's key rank.

    Returns ``(unique_keys, df, postings, order, rank)``: ``order`` groups the input by key
    and ``rank[j]`` is the row in ``unique_keys`` of pair ``order[j]``.
    """
    order = _order_by_key(keys)
    grouped = keys[order]
    new_key = np.empty(len(grouped), dtype=bool)
    new_key[:1] = True
    np.not_equal(grouped[1:], grouped[:-1], out=new_key[1:])
    rank = np.cumsum(new_key) - 1
    unique_keys = grouped[new_key]
    pairs = (rank.astype(np.uint64) << np.uint64(32)) | docs[order].astype(np.uint64)
    pairs.sort()
    distinct = np.empty(len(pairs), dtype=bool)
    distinct[:1] = True
    np.not_equal(pairs[1:], pairs[:-1], out=distinct[1:])
    pairs = pairs[distinct]
    postings = (pairs & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    df = np.bincount((pairs >> np.uint64(32)).astype(np.int64), minlength=len(unique_keys)).astype(np.uint32)
    return unique_keys, df, postings, order, rank


_BATCH_CHARS = 1 << 18


class _BatchEncoder:
    """Tokenizes and hashes a batch of texts: (digests, token count per text, segment lengths)."""

    def __init__(self, rules: LinkageRules, secret: bytes, cache_limit: int) -> None:
        self.tokenizer = Tokenizer(rules)
        self.hasher = TokenHasher(self.tokenizer, secret, cache_limit)

    def encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        tokens, counts = self.tokenizer.tokenize_batch(texts)
        remaining = np.minimum(tokens.remaining, 255).astype(np.uint8)
        return self.hasher.hash_tokens(tokens), counts, remaining


_worker_encoder: _BatchEncoder | None = None


def _start_worker(rules: LinkageRules, secret: bytes, cache_limit: int) -> None:
    global _worker_encoder
    _worker_encoder = _BatchEncoder(rules, secret, cache_limit)


def _encode_in_worker(texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    assert _worker_encoder is not None, "worker not initialized"
    return _worker_encoder.encode(texts)


class IndexBuilder:
    """Builds an index directory from ``(doc_id, text)`` pairs within a memory budget."""

    def __init__(
        self,
        rules: LinkageRules | None = None,
        memory_mb: int = 2048,
        progress: bool = True,
        workers: int | None = None,
    ) -> None:
        if memory_mb < 64:
            raise InputError(f"--memory-mb must be at least 64, got {memory_mb}")
        self.rules = rules or LinkageRules()
        self.memory_bytes = memory_mb * 1024 * 1024
        self.progress = progress
        self.workers = workers if workers is not None else min(2, os.cpu_count() or 1)
        Tokenizer(self.rules)  # build the character tables before workers fork
        # Positions handled per step; each costs ~40 bytes across the per-level arrays.
        self.chunk = max(1 << 16, self.memory_bytes // 160)

    def build(
        self,
        documents: Iterable[tuple[DocId, str]],
        output: str | Path,
        key_file: str | Path | None = None,
        overwrite: bool = False,
    ) -> BuildSummary:
        """Write the index to ``output`` atomically; the key goes to ``key_file``."""
        started = time.perf_counter()
        output = Path(output)
        key_path = resolve_key_path(output, key_file)
        secret = new_secret()
        summary = BuildSummary()
        with atomic_directory(output, overwrite=overwrite) as tmp:
            work = tmp / "_work"
            work.mkdir()
            doc_ids = self._tokenize(documents, secret, work, summary)
            arrays = self._count_levels(work, tmp, summary)
            shutil.rmtree(work)
            doc_ids_json = json.dumps(doc_ids, ensure_ascii=False).encode("utf-8")
            with atomic_write(tmp / DOC_IDS, "wb") as handle:
                handle.write(doc_ids_json)
            summary.bytes_on_disk = sum(int(a["bytes"]) for a in arrays.values()) + len(doc_ids_json)
            summary.seconds = round(time.perf_counter() - started, 3)
            manifest = {
                "format": FORMAT_NAME,
                "format_version": FORMAT_VERSION,
                "rules": self.rules.to_dict(),
                "key_id": key_id(secret),
                "documents": summary.documents,
                "tokens": summary.tokens,
                "reduction": "prefix-suffix-df1",
                "arrays": arrays,
                "doc_ids_xxh3_128": xxhash.xxh3_128(doc_ids_json).hexdigest(),
                "summary": summary.to_dict(),
            }
            with atomic_write(tmp / MANIFEST) as handle:
                json.dump(manifest, handle, indent=1)
            write_key(key_path, secret)
        summary.bytes_on_disk += (output / MANIFEST).stat().st_size
        return summary

    def _tokenize(
        self, documents: Iterable[tuple[DocId, str]], secret: bytes, work: Path, summary: BuildSummary
    ) -> list[DocId]:
        """Pass 1: token digests, document numbers and segment lengths to spill files.

        Documents are tokenized in batches of ~256K characters (one vectorized pass each);
        from the second batch on, batches go to a pool of ``workers`` processes, with at
        most two batches per worker in flight so memory stays bounded.
        """
        doc_ids: list[DocId] = []
        seen: dict[DocId, int] = {}
        files = {name: open(work / name, "wb") for name in ("tok", "doc", "rem")}
        # The digest cache (~150 bytes per distinct raw token) takes at most a tenth of the budget.
        cache_limit = max(10_000, self.memory_bytes // 1500)
        encoder = _BatchEncoder(self.rules, secret, cache_limit)

        def write(first_doc: int, encoded: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
            digests, counts, remaining = encoded
            summary.empty_documents += int(np.count_nonzero(counts == 0))
            summary.tokens += len(digests)
            files["tok"].write(digests.tobytes())
            files["doc"].write(np.repeat(np.arange(first_doc, first_doc + len(counts), dtype=np.uint32), counts).tobytes())
            files["rem"].write(remaining.tobytes())

        pool = None
        pending: deque[tuple[int, Any]] = deque()
        try:
            for first_doc, texts in self._batches(documents, doc_ids, seen):
                if pool is None and first_doc > 0 and self.workers > 1:
                    pool = multiprocessing.get_context("fork").Pool(
                        self.workers, initializer=_start_worker, initargs=(self.rules, secret, cache_limit)
                    )
                if pool is None:
                    write(first_doc, encoder.encode(texts))
                    continue
                pending.append((first_doc, pool.apply_async(_encode_in_worker, (texts,))))
                while len(pending) > 2 * self.workers:
                    done_doc, result = pending.popleft()
                    write(done_doc, result.get())
            while pending:
                done_doc, result = pending.popleft()
                write(done_doc, result.get())
        finally:
            if pool is not None:
                pool.terminate()
            for handle in files.values():
                handle.close()
        summary.documents = len(doc_ids)
        if not doc_ids:
            raise InputError("the corpus has no documents; check the input paths and --text-field")
        if summary.tokens == 0:
            raise InputError(f"the corpus's {len(doc_ids)} documents contain no tokens; nothing to index")
        return doc_ids

    def _batches(
        self, documents: Iterable[tuple[DocId, str]], doc_ids: list[DocId], seen: dict[DocId, int]
    ) -> Iterator[tuple[int, list[str]]]:
        """``(number of the batch's first document, texts)``, registering ids in order."""
        batch: list[str] = []
        chars = 0
        first = 0
        bar = tqdm(documents, desc="tokenizing", unit="doc", disable=not self.progress, leave=False)
        for doc_id, text in bar:
            doc_no = len(doc_ids)
            if doc_id in seen:
                raise InputError(
                    f"duplicate document id {doc_id!r} (documents {seen[doc_id] + 1} and {doc_no + 1}); ids must be unique"
                )
            if doc_no >= _MAX_DOCS:
                raise InputError(f"corpus has more than {_MAX_DOCS:,} documents; split it into several indexes")
            seen[doc_id] = doc_no
            doc_ids.append(doc_id)
            batch.append(text)
            chars += len(text)
            if chars >= _BATCH_CHARS:
                yield first, batch
                first, batch, chars = len(doc_ids), [], 0
        if batch:
            yield first, batch

    def _partitions_for(self, pairs: int) -> int:
        needed = pairs * _BYTES_PER_PAIR / self.memory_bytes
        partitions = 1
        while partitions < needed:
            partitions *= 2
        return partitions

    def _level_arrays(self, work: Path, total: int) -> tuple[np.ndarray, ...]:
        """Per-position arrays: in memory when they fit half the budget, else memory-mapped."""
        in_memory = total * 37 <= self.memory_bytes // 2
        columns = []
        for name, dtype in (("tok", np.uint64), ("doc", np.uint32), ("rem", np.uint8)):
            if in_memory:
                columns.append(np.fromfile(work / name, dtype=dtype))
            else:
                columns.append(np.memmap(work / name, dtype=dtype, mode="r", shape=(total,)))
        for name, dtype in (("keys0", np.uint64), ("keys1", np.uint64), ("df0", np.uint32), ("df1", np.uint32)):
            if in_memory:
                columns.append(np.zeros(total, dtype=dtype))
            else:
                columns.append(np.memmap(work / name, dtype=dtype, mode="w+", shape=(total,)))
        return tuple(columns)

    def _count_levels(self, work: Path, out: Path, summary: BuildSummary) -> dict[str, dict[str, Any]]:
        """Pass 2: per level, keys of the surviving positions → df, postings, stored arrays."""
        total = summary.tokens
        tok, doc, rem, *scratch = self._level_arrays(work, total)
        keys_buffers, df_buffers = scratch[:2], scratch[2:]
        postings_dtype = np.uint16 if summary.documents <= 1 << 16 else np.uint32
        arrays: dict[str, dict[str, Any]] = {}
        prev_keys: np.ndarray | None = None
        prev_df: np.ndarray | None = None
        levels = tqdm(
            range(1, self.rules.max_n + 1), desc="counting n-grams", unit="level", disable=not self.progress, leave=False
        )
        for n in levels:
            keys_now, df_now = keys_buffers[n % 2], df_buffers[n % 2]
            df_now[:] = 0
            survivors = total if prev_df is None else int(np.count_nonzero(prev_df >= 2))
            partitions = self._partitions_for(survivors)
            summary.partitions = max(summary.partitions, partitions)
            spills = [_Spill(work / f"part{p}" if partitions > 1 else None) for p in range(partitions)]
            shift = np.uint64(64 - max(1, partitions.bit_length() - 1))
            for start in range(0, total, self.chunk):
                stop = min(total, start + self.chunk)
                alive = rem[start:stop] >= n
                if prev_df is not None and prev_keys is not None:
                    alive &= prev_df[start:stop] >= 2
                    following = np.zeros(stop - start, dtype=np.uint32)
                    following[: min(stop + 1, total) - start - 1] = prev_df[start + 1 : min(stop + 1, total)]
                    alive &= following >= 2
                positions = np.flatnonzero(alive) + start
                if not len(positions):
                    continue
                if prev_keys is None:
                    keys = np.asarray(tok[positions])
                else:
                    keys = extend(prev_keys[positions], tok[positions + n - 1])
                keys_now[positions] = keys
                if partitions == 1:
                    spills[0].add(keys, doc[positions], positions)
                    continue
                part_of = (keys >> shift).astype(np.int64)
                for p in np.unique(part_of):
                    chosen = part_of == p
                    spills[p].add(keys[chosen], doc[positions[chosen]], positions[chosen])
            pairs = sum(spill.size for spill in spills)
            writers = {
                "keys": _ArrayWriter(out / array_file(n, "keys"), np.uint64),
                "offsets": _ArrayWriter(out / array_file(n, "offsets"), np.uint32 if pairs < 2**32 else np.uint64),
                "postings": _ArrayWriter(out / array_file(n, "postings"), postings_dtype),
            }
            writers["offsets"].append(np.zeros(1, dtype=np.uint64))
            written = 0
            for spill in spills:
                keys, docs, positions = spill.load()
                if not len(keys):
                    continue
                unique_keys, df, postings, order, rank = _count_partition(keys, docs)
                df_now[positions[order]] = df[rank]
                writers["keys"].append(unique_keys)
                writers["offsets"].append(written + np.cumsum(df, dtype=np.uint64))
                writers["postings"].append(postings)
                written += len(postings)
            for kind, writer in writers.items():
                arrays[array_file(n, kind)] = writer.close()
            stored = writers["keys"].length
            summary.ngrams_per_level[n] = stored
            summary.ngrams += stored
            summary.postings += written
            prev_keys, prev_df = keys_now, df_now
        return arrays
