"""Step 1 of the sharded build: corpus partitions → each position's token digest, segment room and document.

One task per partition (``tokenize_documents``, or ``tokenize_file`` on a worker that reads
the file itself) tokenizes its documents under every reading the index holds (SPEC §1–2,
and §8 for the search reading: each document's tokens under every reading, one after the
other), and writes ``p<partition>.{tok,rem,doc}`` to the ``WorkStore`` for the level
passes (``shards.py``). ``partitions_of`` cuts a document stream read in this process into
partitions.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np

from ...corpus.rules import CorpusStats, DocId
from ...corpus.source import read_documents
from ..readings import DEFAULT_READINGS, tokenizer_for
from ..tokenize import LinkageRules
from .hashing import TokenHasher
from .workstore import WorkStore

#: Texts tokenized in one vectorized pass.
BATCH_CHARS = 1 << 20
#: Characters per partition of a stream read in this process (at most; less with a small
#: budget): small enough that the threads tokenize while the rest is still being read and
#: that the last partitions leave little imbalance between them.
PARTITION_CHARS = 1 << 22
_REMAINING_CAP = 255


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


def encode_texts(hashers: Sequence[TokenHasher], texts: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
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
        tok, count, rem, tokens = encode_texts(hashers, batch)
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
