"""The sharded build: corpus partitions → keyed n-gram pairs → hash-range shards, level by level.

The build is a sequence of tasks that read and write named arrays in a ``WorkStore``, so
the same tasks run in this process (``ThreadRunner``) or on Dask workers
(``distributed.py``) and write the same bytes:

1. ``tokenize_documents`` / ``tokenize_file`` (one task per corpus partition): tokens
   (SPEC §1–2, and §8 for the search reading: each document's tokens under every reading
   the index holds, one after the other) → keyed digests, each position's segment room
   and local document number.
2. For each level n = 1..max_n:

   * ``emit_level`` (per partition): the positions that survive the reduction (below),
     their n-gram keys (chained from level n−1), and the (key, document) pairs of each
     shard — shard ``s`` holds the keys whose top ``shard_bits`` bits are ``s``;
   * ``count_level`` (per shard): the partitions' pairs in partition order (so documents
     ascend), grouped by key (``kernels.group``): distinct keys, df and posting lists;
     and, per partition, a flag per pair: df ≥ 2, which the next level's ``emit_level``
     reads back;
   * ``write_level`` (per shard): those rows Elias–Fano coded into the shard's level file
     (``codec.py``). Nothing of the next level waits for it, so it runs beside it.

In this process the tasks share a pool of threads (2 by default): the partitions are
tokenized while the corpus is still being read, and when there are fewer shards than
threads ``count_level`` spreads one grouping over the idle ones.

**Reduction** (lossless, see ``builder.py``): an n-gram (n ≥ 2) is counted only where
both its (n−1)-gram prefix and suffix have df ≥ 2 in the whole corpus — the flags above.

Documents are numbered in corpus order across partitions and every shard sees its pairs
in that order, so the output depends only on the corpus, the rules and the shard count —
not on how the corpus was cut into partitions or how the tasks were spread over threads,
processes or machines. Every task writes its outputs under a temporary name and renames
them, and reads only what earlier tasks wrote, so a task that fails or whose worker dies
can simply run again (Dask's retries); the index is committed only when all are done.
"""
from __future__ import annotations

import hashlib
import os
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np

from ...corpus.rules import CorpusStats, DocId
from ...corpus.source import read_documents
from ..readings import DEFAULT_READINGS, tokenizer_for
from ..tokenize import LinkageRules
from . import codec, kernels
from .format import CODED_PARTS, POSTING_CLASSES, frequent_file, frequent_words, shard_file, twin_file
from .hashing import TokenHasher
from .keys import KEY_BYTES

#: Default tokens per shard: a shard's level-1 pairs (~24 bytes each) stay near 400 MB.
SHARD_TOKENS = 1 << 24
MAX_SHARD_BITS = 10
#: Working bytes per pair of a shard's level while it is grouped (inputs, buckets, outputs).
BYTES_PER_PAIR = 56
#: Texts tokenized in one vectorized pass.
BATCH_CHARS = 1 << 20
#: Characters per partition of a stream read in this process (at most; less with a small
#: budget): small enough that the threads tokenize while the rest is still being read and
#: that the last partitions leave little imbalance between them.
PARTITION_CHARS = 1 << 22
_REMAINING_CAP = 255


def shard_bits_for(tokens: int, memory_bytes: int, concurrent: int = 2) -> int:
    """log2 of the default shard count.

    The fewest shards such that each has at most ``SHARD_TOKENS`` tokens and ``concurrent``
    shards' level-1 pairs fit ``memory_bytes`` together. It depends only on the corpus size
    and the budget, so every way of running a build with the same options shards alike.
    """
    bits = 0
    while bits < MAX_SHARD_BITS and (
        (tokens >> bits) > SHARD_TOKENS or concurrent * BYTES_PER_PAIR * (tokens >> bits) > memory_bytes
    ):
        bits += 1
    return bits


# --- work store ------------------------------------------------------------------------


class WorkStore:
    """Named arrays of one build: in memory up to ``memory_bytes``, else files in ``folder``.

    Files are written under a temporary name and renamed, so a re-run task replaces them
    whole. A store that keeps arrays in memory serves threads of one process only; with
    ``memory_bytes=0`` it is plain files and can be sent to Dask workers (which then need
    ``folder`` on a file system they all see).
    """

    def __init__(self, folder: Path, memory_bytes: int = 0) -> None:
        self.folder = Path(folder)
        self.memory_bytes = memory_bytes
        self._memory: dict[str, np.ndarray] = {}
        self._used = 0
        self._lock = threading.Lock()
        self.folder.mkdir(parents=True, exist_ok=True)

    def __getstate__(self) -> dict[str, Any]:
        if self.memory_bytes:
            raise TypeError("a WorkStore that keeps arrays in memory cannot be sent to another process")
        return {"folder": self.folder}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["folder"])  # type: ignore[misc]

    def put(self, name: str, array: np.ndarray) -> None:
        array = np.ascontiguousarray(array)
        with self._lock:
            self._drop_locked(name)
            if self.memory_bytes and self._used + array.nbytes <= self.memory_bytes:
                self._memory[name] = array
                self._used += array.nbytes
                return
        path = self.folder / name
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as handle:
            handle.write(array.data)
        os.replace(tmp, path)

    def get(self, name: str, dtype: "np.typing.DTypeLike") -> np.ndarray:
        with self._lock:
            if name in self._memory:
                return self._memory[name]
        return np.fromfile(self.folder / name, dtype=dtype)

    def _drop_locked(self, name: str) -> None:
        array = self._memory.pop(name, None)
        if array is not None:
            self._used -= array.nbytes

    def drop(self, name: str) -> None:
        with self._lock:
            self._drop_locked(name)
        (self.folder / name).unlink(missing_ok=True)


def write_durable(path: Path, words: np.ndarray) -> str:
    """Write an index file and fsync it (the commit renames the build into place); its SHA-256."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(words.data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return hashlib.sha256(words.data).hexdigest()


# --- tokenizing ------------------------------------------------------------------------


@dataclass
class PartitionResult:
    """What one partition's tokenizing found: its ids in order and its counts.

    ``tokens`` counts every position the partition indexes, the tokens of all readings;
    ``reading_tokens`` counts them per reading.
    """

    partition: int
    doc_ids: list[DocId]
    tokens: int
    empty_documents: int
    skipped_lines: list[str] = field(default_factory=list)
    reading_tokens: dict[str, int] = field(default_factory=dict)
    #: The longest n-gram any of its positions may start (``Tokens.remaining``, capped at 255).
    longest: int = 0


def reading_hashers(rules: LinkageRules, secret: bytes, readings: Sequence[str], vocabulary_limit: int) -> list[TokenHasher]:
    """One ``TokenHasher`` per reading, in the readings' order."""
    return [TokenHasher(tokenizer_for(reading, rules), secret, vocabulary_limit) for reading in readings]


def _encode(hashers: Sequence[TokenHasher], texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """(digest per token, token count per text, segment room per token capped at 255, tokens per reading).

    With several readings each text's tokens are its tokens under every reading in turn,
    each reading's first token starting a segment: the index counts every reading's
    n-grams as n-grams of the same document, in key families that never meet
    (``hashing.TokenHasher``), and no n-gram runs from one reading into the next.
    """
    parts = []
    for hasher in hashers:
        tokens, counts = hasher.tokenizer.tokenize_batch(texts)
        remaining = np.minimum(tokens.remaining, _REMAINING_CAP).astype(np.uint8)
        parts.append((hasher.hash_tokens(tokens), counts, remaining))
    per_reading = [len(part[0]) for part in parts]
    if len(parts) == 1:
        return (*parts[0], per_reading)
    counts = np.sum([part[1] for part in parts], axis=0)
    text_start = np.cumsum(counts) - counts
    digests = np.empty(int(counts.sum()), dtype=np.uint64)
    remaining = np.empty(len(digests), dtype=np.uint8)
    before = np.zeros(len(texts), dtype=np.int64)  # tokens of the earlier readings in each text
    for part_digests, part_counts, part_remaining in parts:
        part_start = np.cumsum(part_counts) - part_counts
        at = np.repeat(text_start + before - part_start, part_counts) + np.arange(len(part_digests))
        digests[at] = part_digests
        remaining[at] = part_remaining
        before += part_counts
    return digests, counts, remaining, per_reading


def tokenize_documents(
    store: WorkStore, partition: int, documents: Iterable[tuple[DocId, str]], rules: LinkageRules, secret: bytes,
    vocabulary_limit: int, hashers: Sequence[TokenHasher] | None = None, readings: Sequence[str] = DEFAULT_READINGS,
) -> PartitionResult:
    """Tokenize one partition's documents into ``p<partition>.{tok,rem,doc}`` under ``readings``.

    ``hashers`` (``reading_hashers`` for ``rules``, ``secret`` and ``readings``) may be
    shared by the partitions of an in-process build, so that each distinct token is
    digested once; the digests, hence the outputs, are the same with or without them.
    """
    if hashers is None:
        hashers = reading_hashers(rules, secret, readings, vocabulary_limit)
    doc_ids: list[DocId] = []
    digests: list[np.ndarray] = []
    remaining: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    per_reading = np.zeros(len(hashers), dtype=np.int64)
    batch: list[str] = []
    chars = 0

    def encode() -> None:
        tok, count, rem, tokens = _encode(hashers, batch)
        digests.append(tok)
        counts.append(count)
        remaining.append(rem)
        per_reading[:] += tokens

    for doc_id, text in documents:
        doc_ids.append(doc_id)
        batch.append(text)
        chars += len(text)
        if chars >= BATCH_CHARS:
            encode()
            batch, chars = [], 0
    if batch:
        encode()
    count = np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64)
    tok = np.concatenate(digests) if digests else np.zeros(0, dtype=np.uint64)
    prefix = f"p{partition:05d}"
    store.put(f"{prefix}.tok", tok)
    store.put(f"{prefix}.rem", np.concatenate(remaining) if remaining else np.zeros(0, dtype=np.uint8))
    store.put(f"{prefix}.doc", np.repeat(np.arange(len(count), dtype=np.uint32), count))
    tokens_by_reading = {hasher.tokenizer.reading: int(n) for hasher, n in zip(hashers, per_reading)}
    longest = max((int(r.max()) for r in remaining if len(r)), default=0)
    return PartitionResult(
        partition, doc_ids, len(tok), int(np.count_nonzero(count == 0)), reading_tokens=tokens_by_reading, longest=longest
    )


def tokenize_file(
    store: WorkStore, partition: int, path: str, text_field: str, id_field: str, skip_invalid: bool,
    rules: LinkageRules, secret: bytes, vocabulary_limit: int, readings: Sequence[str] = DEFAULT_READINGS,
    input_format: str | None = None,
) -> PartitionResult:
    """Read one corpus file (on the worker: a path every worker sees) and tokenize it."""
    stats = CorpusStats()
    result = tokenize_documents(
        store, partition, read_documents([path], text_field, id_field, skip_invalid, stats, input_format), rules, secret, vocabulary_limit,
        readings=readings,
    )
    result.skipped_lines = stats.skipped_lines
    return result


# --- levels ----------------------------------------------------------------------------


def _flags_name(shard: int, level: int, partition: int) -> str:
    return f"s{shard:04d}.n{level}.p{partition:05d}.ok"


def kept_keys_name(shard: int, level: int) -> str:
    """The distinct keys of one shard's level, which ``count_level`` keeps on request."""
    return f"s{shard:04d}.n{level}.unique"


def _pairs_name(partition: int, level: int, shard: int, kind: str) -> str:
    return f"p{partition:05d}.n{level}.s{shard:04d}.{kind}"


def extend_level(
    previous: np.ndarray, previous_keys: np.ndarray, frequent: np.ndarray, remaining: np.ndarray, tok: np.ndarray, level: int
) -> tuple[np.ndarray, np.ndarray]:
    """The positions and keys of level ``level`` from level ``level - 1``'s (the reduction).

    A position survives when the (n−1)-grams at it and at the next position are both
    ``frequent`` (df ≥ 2) and its segment has room for ``level`` tokens.
    """
    return kernels.extend_positions(
        np.ascontiguousarray(previous, dtype=np.uint32), previous_keys, np.ascontiguousarray(frequent, dtype=bool), remaining, tok, level
    )


def warm_kernels(rules: LinkageRules, readings: Sequence[str] = DEFAULT_READINGS) -> None:
    """Load the compiled kernels of tokenizing and counting from numba's cache, on a tiny corpus.

    The first compiled call in a process costs ~0.5 s (numba sets itself up) and each
    kernel's first call loads it; run as the build's first task, this happens while the
    first partitions are read instead of in front of them. It calls the functions the
    build calls, with the same array types, so it loads the very signatures the build uses.
    """
    tok, counts, remaining, _ = _encode(reading_hashers(rules, bytes(KEY_BYTES), readings, 1 << 10), ["warm up warm up"])
    docs = np.repeat(np.arange(len(counts), dtype=np.uint32), counts)
    positions, keys = extend_level(np.arange(len(tok), dtype=np.uint32), tok, np.ones(len(tok), dtype=bool), remaining, tok, 2)
    unique, df, postings, _ = kernels.group([keys], [docs[positions]])
    if "search" in readings and "exact" in readings:  # a build with both readings stores twins once (``write_level``)
        kernels.shared_twins(unique, df, postings)


def emit_level(store: WorkStore, partition: int, level: int, doc_base: int, shard_bits: int) -> int:
    """Level ``level``'s surviving positions, keys and per-shard pairs of one partition.

    Returns the number of pairs emitted. Level 1 takes every token; level n takes the
    positions whose (n−1)-grams at i and i+1 both had df ≥ 2 (flags from the shards) and
    whose segment has room for n tokens.
    """
    prefix = f"p{partition:05d}"
    tok = store.get(f"{prefix}.tok", np.uint64)
    doc = store.get(f"{prefix}.doc", np.uint32)
    if level == 1:  # every position, keyed by its token: nothing to store beyond the pairs
        keys = tok
        docs = doc + np.uint32(doc_base)
    else:
        if level == 2:
            previous, previous_keys = np.arange(len(tok), dtype=np.uint32), tok
        else:
            previous = store.get(f"{prefix}.n{level - 1}.pos", np.uint32)
            previous_keys = store.get(f"{prefix}.n{level - 1}.keys", np.uint64)
        if shard_bits == 0:
            frequent = store.get(_flags_name(0, level - 1, partition), np.uint8).view(bool)
        else:
            flags = [store.get(_flags_name(shard, level - 1, partition), np.uint8) for shard in range(1 << shard_bits)]
            bounds = np.cumsum([0] + [len(f) for f in flags])
            frequent = kernels.gather_shard_flags(previous_keys, shard_bits, np.concatenate(flags), bounds)
        positions, keys = extend_level(previous, previous_keys, frequent, store.get(f"{prefix}.rem", np.uint8), tok, level)
        store.put(f"{prefix}.n{level}.pos", positions)
        store.put(f"{prefix}.n{level}.keys", keys)
        docs = doc[positions]
        docs += np.uint32(doc_base)
    if shard_bits == 0:
        store.put(_pairs_name(partition, level, 0, "keys"), keys)
        store.put(_pairs_name(partition, level, 0, "docs"), docs)
    else:
        shard_keys, shard_docs, bounds = kernels.split_shards(keys, docs, shard_bits)
        for shard, (start, stop) in enumerate(zip(bounds[:-1].tolist(), bounds[1:].tolist())):
            store.put(_pairs_name(partition, level, shard, "keys"), shard_keys[start:stop])
            store.put(_pairs_name(partition, level, shard, "docs"), shard_docs[start:stop])
    return len(keys)


def drop_level(store: WorkStore, partition: int, level: int, shard_bits: int) -> None:
    """Free what level ``level`` left for partition ``partition`` (once level+1 is emitted)."""
    prefix = f"p{partition:05d}"
    store.drop(f"{prefix}.n{level}.pos")
    store.drop(f"{prefix}.n{level}.keys")
    for shard in range(1 << shard_bits):
        store.drop(_flags_name(shard, level, partition))


@dataclass
class LevelFile:
    """One shard's coded level: the layout of each part (``CODED_PARTS``), counts and the checksum of its words."""

    shard: int
    level: int
    layouts: list[codec.Layout | codec.Packed]
    ngrams: int
    postings_count: int
    sha256: str
    #: The SHA-256 of its ``frequent_file`` (one bit per row: df >= 2).
    frequent_sha256: str
    #: The SHA-256 of its ``twin_file`` (one bit per row: it answers for its search twin), if written.
    twin_sha256: str | None = None

    def frequent_dict(self) -> dict[str, Any]:
        """The ``frequent_file``'s entry in the manifest's array table."""
        return self._bits_dict(self.frequent_sha256)

    def twin_dict(self) -> dict[str, Any]:
        """The ``twin_file``'s entry in the manifest's array table."""
        assert self.twin_sha256 is not None
        return self._bits_dict(self.twin_sha256)

    def _bits_dict(self, sha256: str) -> dict[str, Any]:
        words = codec.flag_words_length(self.ngrams)
        return {"dtype": "<u8", "length": words, "bytes": 8 * words, "sha256": sha256}

    def to_dict(self) -> dict[str, Any]:
        """The file's entry in the manifest's array table."""
        words = sum(layout.words for layout in self.layouts)
        return {
            "dtype": "<u8",
            "length": words,
            "bytes": 8 * words,
            "sha256": self.sha256,
            **{part: layout.to_dict() for part, layout in zip(CODED_PARTS, self.layouts)},
        }


def code_rows(
    keys: np.ndarray, key_universe: int, df: np.ndarray, postings: np.ndarray, width: int, class_floors: Sequence[int]
) -> list[tuple[codec.Layout | codec.Packed, np.ndarray]]:
    """Elias–Fano code a level's sorted distinct keys, then their posting lists by df
    (``codec.encode_posting_classes``: the df-1 rows' documents packed, the rest in classes)."""
    return [codec.encode(keys, key_universe, codec.KEY_SAMPLE_SHIFT), *codec.encode_posting_classes(df, postings, width, class_floors)]


def _rows_name(shard: int, level: int, kind: str) -> str:
    return f"s{shard:04d}.n{level}.{kind}"


def count_level(
    store: WorkStore, shard: int, level: int, partitions: int, shard_bits: int, last: bool, threads: int = 1
) -> int:
    """Group one shard's pairs of one level: its rows (for ``write_level``) and the df ≥ 2 flags.

    Returns the number of rows. ``threads`` is how many threads the grouping may use (it
    does not change the result).
    """
    parts_keys = [store.get(_pairs_name(p, level, shard, "keys"), np.uint64) for p in range(partitions)]
    parts_docs = [store.get(_pairs_name(p, level, shard, "docs"), np.uint32) for p in range(partitions)]
    unique, df, postings, pair_df = kernels.group(parts_keys, parts_docs, key_bits=64 - shard_bits, threads=threads)
    if not last:
        flags = (pair_df >= 2).view(np.uint8)
        bounds = np.cumsum([0] + [len(k) for k in parts_keys]).tolist()
        for p in range(partitions):
            store.put(_flags_name(shard, level, p), flags[bounds[p] : bounds[p + 1]])
    del parts_keys, parts_docs, pair_df
    store.put(kept_keys_name(shard, level), unique)
    store.put(_rows_name(shard, level, "df"), df)
    store.put(_rows_name(shard, level, "postings"), postings)
    for p in range(partitions):
        for kind in ("keys", "docs"):
            store.drop(_pairs_name(p, level, shard, kind))
    return len(unique)


def write_level(
    store: WorkStore, out: str, shard: int, level: int, shard_bits: int, documents: int, keep_keys: bool = False,
    twins: bool = False,
) -> LevelFile:
    """Code the rows ``count_level`` left for one shard's level into its level file (and the frequent bits).

    It depends on nothing the next level computes, so it runs while that level is emitted
    and counted. ``keep_keys`` leaves the shard's distinct keys in the store (the forward
    store's rows). With ``twins``, a search-reading row with the same documents as its
    exact twin is not written: the twin's bit in the ``twin_file`` says it answers for
    both (``kernels.shared_twins``), which stores most search n-grams once.
    """
    unique = store.get(kept_keys_name(shard, level), np.uint64)
    df = store.get(_rows_name(shard, level, "df"), np.uint32)
    postings = store.get(_rows_name(shard, level, "postings"), np.uint32)
    twin_sha256 = None
    if twins:
        assert not keep_keys, "the forward store names every row: an updatable index keeps its search rows"
        keep, twin = kernels.shared_twins(unique, df, postings)
        if not keep.all():
            postings = postings[np.repeat(keep, df)]
            unique, df, twin = unique[keep], df[keep], twin[keep]
        twin_sha256 = write_durable(Path(out) / twin_file(shard, level), codec.flag_words(twin))
    base = np.uint64(shard << (64 - shard_bits)) if shard_bits else np.uint64(0)
    parts = code_rows(unique - base, 1 << (64 - shard_bits), df, postings, documents, POSTING_CLASSES)
    sha256 = write_durable(Path(out) / shard_file(shard, level), np.concatenate([words for _, words in parts]))
    frequent_sha256 = write_durable(Path(out) / frequent_file(shard, level), frequent_words(df))
    if not keep_keys:
        store.drop(kept_keys_name(shard, level))
    store.drop(_rows_name(shard, level, "df"))
    store.drop(_rows_name(shard, level, "postings"))
    return LevelFile(shard, level, [layout for layout, _ in parts], len(unique), len(postings), sha256, frequent_sha256, twin_sha256)


# --- running the tasks -----------------------------------------------------------------


class Runner:
    """Runs batches of independent tasks: ``map`` returns their results in order (a barrier)."""

    def map(self, function: Callable[..., Any], *iterables: Sequence[Any]) -> list[Any]:
        return [future.result() for future in [self.submit(function, *args) for args in zip(*iterables)]]

    def submit(self, function: Callable[..., Any], *args: Any) -> Any:
        """Start one task; the returned future's ``result()`` waits for it, ``done()`` says whether it has ended."""
        raise NotImplementedError

    def task_threads(self, tasks: int) -> int:
        """Threads each of ``tasks`` tasks run at once may use (a Dask worker runs one task per thread)."""
        return 1

    def ordered(self, function: Callable[..., Any], arguments: Iterable[tuple[Any, ...]], in_flight: int) -> Iterator[Any]:
        """``function(*args)`` for each argument tuple, results in input order, at most
        ``in_flight`` tasks running or waiting at once (so a long input streams)."""
        pending: deque[Any] = deque()
        for args in arguments:
            pending.append(self.submit(function, *args))
            if len(pending) >= in_flight:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    def close(self) -> None:
        """Release the workers."""


class ThreadRunner(Runner):
    """In this process, on ``threads`` threads: the compiled kernels and sorts release the GIL."""

    def __init__(self, threads: int) -> None:
        self.threads = max(1, threads)
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="delink-build")

    def submit(self, function: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._pool.submit(function, *args)

    def task_threads(self, tasks: int) -> int:
        """The pool's threads that fewer tasks than threads (one shard) would leave idle, shared out."""
        return max(1, self.threads // max(1, tasks))

    def close(self) -> None:
        self._pool.shutdown(cancel_futures=True)


@dataclass
class Levels:
    """What the level passes produced: the level files and the figures for the summary."""

    shard_bits: int
    files: list[LevelFile]

    def ngrams_per_level(self) -> dict[int, int]:
        per_level: dict[int, int] = {}
        for file in self.files:
            per_level[file.level] = per_level.get(file.level, 0) + file.ngrams
        return dict(sorted(per_level.items()))

    @property
    def postings(self) -> int:
        return sum(file.postings_count for file in self.files)

    def arrays(self) -> dict[str, dict[str, Any]]:
        tables = {shard_file(f.shard, f.level): f.to_dict() for f in self.files}
        twins = {twin_file(f.shard, f.level): f.twin_dict() for f in self.files if f.twin_sha256 is not None}
        return {**tables, **{frequent_file(f.shard, f.level): f.frequent_dict() for f in self.files}, **twins}


def count_levels(
    runner: Runner,
    store: WorkStore,
    out: Path,
    partitions: list[PartitionResult],
    max_n: int,
    shard_bits: int,
    advance: Callable[[], object] | None = None,
    keep_level1_keys: bool = False,
    twins: bool = False,
) -> Levels:
    """Step 2 of the module docstring, level by level: emit and count are barriers; each
    level's writes run beside the next level and are waited for at the end.

    ``keep_level1_keys`` leaves each shard's distinct level-1 keys in the store
    (``kept_keys_name``), which the forward store's tasks read; ``twins`` stores a search
    n-gram with its exact twin's documents once (``write_level``).
    """
    bases = np.cumsum([0] + [len(p.doc_ids) for p in partitions]).tolist()
    documents = bases[-1]
    count = len(partitions)
    shards = list(range(1 << shard_bits))
    writes: list[Any] = []
    for level in range(1, max_n + 1):
        runner.map(emit_level, [store] * count, list(range(count)), [level] * count, bases[:-1], [shard_bits] * count)
        if level > 1:
            runner.map(drop_level, [store] * count, list(range(count)), [level - 1] * count, [shard_bits] * count)
        runner.map(
            count_level,
            [store] * len(shards),
            shards,
            [level] * len(shards),
            [count] * len(shards),
            [shard_bits] * len(shards),
            [level == max_n] * len(shards),
            [runner.task_threads(len(shards))] * len(shards),
        )
        writes += [
            runner.submit(write_level, store, str(out), shard, level, shard_bits, documents, keep_level1_keys and level == 1, twins)
            for shard in shards
        ]
        if advance is not None:
            advance()
    return Levels(shard_bits, [write.result() for write in writes])


def partitions_of(documents: Iterable[tuple[DocId, str]], chars: int) -> Iterator[list[tuple[DocId, str]]]:
    """Cut a document stream into lists of about ``chars`` characters."""
    batch: list[tuple[DocId, str]] = []
    size = 0
    for document in documents:
        batch.append(document)
        size += len(document[1])
        if size >= chars:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch
