"""Incremental updates (``delink index --update``) and compaction (``delink compact``).

**Why a plain delta is not enough.** The index V in place stores an n-gram s (n ≥ 2) only
when its prefix p and suffix q both have df_V ≥ 2 (``builder.py``, step 3). After adding
documents Δ, a fresh build of U = V ∪ Δ stores s when df_U(p), df_U(q) ≥ 2, with
df_U(s) = df_V(s) + df_Δ(s). When s was not stored in V, df_V(s) is not in any array:
it depends on whether V's documents contain s. Guessing 0 would report s as singling
out where the union has two documents, or the reverse.

**The exact update.** Let R be the documents of V that are the only document of a stored
n-gram t (df_V(t) = 1) which also occurs in Δ; a walk over Δ's n-grams, looking them up in
V level by level as a query does, finds them. Every document d of V that holds an n-gram s
stored in U but not in V is in R: s is not stored in V, so one of its sub-grams has
df_V = 1; a shortest such sub-gram t is stored in V (its own sub-grams have df_V ≥ 2) and
holds only d; and t lies in p or q, so df_U(t) ≥ 2 and t occurs in Δ. R's tokens come
from the forward store (``forward.py``), and only the windows of ``max_n`` tokens around
the occurrences of such t are needed (``around``): s contains one. The level passes then
run over those windows and Δ with the union's document frequencies: an n-gram stored in V gets df_V (looked up) plus Δ's
documents; any other gets its documents in R ∪ Δ, which are all its documents in U. So:

- an n-gram V stores and Δ contains: the delta *adds* Δ's documents to V's row;
- an n-gram V does not store that U stores: the delta stores it with all its documents;
- a position is extended to level n + 1 exactly when a fresh build of U would extend it.

The delta lives in ``delta-<d>/`` inside the index (``format.py``), and queries read
V and its deltas as one index (``levels.UpdatedLevel``): the same df, documents, linkable
n-grams, combinations and anonymity as a fresh build of U (``tests/test_index_update.py``
checks this on random corpora). The cost of an update is its new documents plus the windows of R.

**Writes.** Under the build lock, the delta's files are written under a name the manifest
does not list, the new ids are appended to the id mapping (readers use only as many ids
as their manifest counts, ``ids.py``), and the manifest — MAC'd under the index's key —
is replaced atomically: that rename is the commit point, so a kill leaves the previous
index usable, and the next update or compaction removes the unlisted leftovers.

**Compaction** runs the build's level passes over the forward store of every segment
(no tokenizing) and puts the result in place with ``commit.py``'s journal, under the same
key: its files are byte for byte those of a fresh updatable build of U with that key and
shard count.
"""
from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ...corpus.rules import DocId, check_doc_id
from ...errors import InputError
from ...io.files import atomic_write, check_output_path, fsync_dir
from ..readings import token_readings
from . import forward, gapstore
from .eliasfano import KEY_SAMPLE_SHIFT, encode
from .grouping import group
from .lookup import encode_rows
from .ngram_keys import FAMILY, extend
from .partitions import PartitionResult, tokenize_documents
from .builder import VOCABULARY_LIMIT, BuildSummary, IndexBuilder, write_digests
from .commit import build_lock, commit, recover, sidecar
from .format import DOC_ID_DIGESTS, FORMAT_VERSION, MANIFEST, delta_folder, delta_level_file, sign
from .ids import IdMapping, ids_digest
from .keys import KeyFile
from .reader import CorpusIndex
from .shards import extend_level
from .workstore import WorkStore, write_durable

#: Slots of the bitmap that finds R's occurrences of the df-1 n-grams (``around``).
_FILTER_SIZE = 1 << 22
_FILTER_MASK = np.uint64(_FILTER_SIZE - 1)
#: Tokens per partition when compaction reads the forward store back.
_COMPACT_PARTITION_TOKENS = 1 << 22


@dataclass
class UpdateSummary:
    """What one update added; printed by ``delink index --update``."""

    documents: int = 0
    empty_documents: int = 0
    tokens: int = 0
    #: Documents of the index read back from the forward store (R, module docstring).
    linked_documents: int = 0
    ngrams_per_level: dict[int, int] = field(default_factory=dict)
    #: Postings the delta adds to n-grams the index already held (new n-grams: ``ngrams_per_level``).
    additions: int = 0
    bytes_on_disk: int = 0
    seconds: float = 0.0
    delta: str = ""
    notes: list[str] = field(default_factory=list)


def not_updatable_message(path: Path) -> str:
    return (
        f"index {path} was built without a forward store, which updates and compaction need; "
        f"rebuild it updatable: `delink index <corpus> -o {path} --updatable --overwrite`"
    )


def _clean(path: Path) -> list[str]:
    """Recover an interrupted rebuild or compaction, and remove deltas the manifest does not list."""
    notes = recover(path)
    if not path.is_dir():
        return notes
    try:
        listed = {delta["name"] for delta in json.loads((path / MANIFEST).read_text(encoding="utf-8")).get("deltas", [])}
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return notes  # opening the index reports what is wrong with it
    for leftover in sorted(path.glob("delta-*")):
        if leftover.is_dir() and leftover.name not in listed:
            shutil.rmtree(leftover)
            notes.append(f"removed {leftover}, left by an interrupted update")
    return notes


def _open(path: Path, key_file: str | Path | None, ids_file: str | Path | None, strict: bool | None) -> CorpusIndex:
    index = CorpusIndex(path, key_file=key_file, verify=True, ids_file=ids_file, strict_key_permissions=strict)
    if index.forward is None:
        raise InputError(not_updatable_message(path))
    index.require_readings(index.readings)  # new documents are read as the index read the others
    return index


def _segment_starts(index: CorpusIndex) -> np.ndarray:
    """The first document number of each segment (base, then each delta)."""
    return np.array([0, *(delta["first_document"] for delta in index.deltas)], dtype=np.int64)


def _stored_documents(index: CorpusIndex, numbers: np.ndarray, level1_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tokens (keyed digests), segment room and document number of each token of these documents."""
    assert index.forward is not None
    starts = _segment_starts(index)
    tok, rem, doc = [np.zeros(0, dtype=np.uint64)], [np.zeros(0, dtype=np.uint8)], [np.zeros(0, dtype=np.uint32)]
    for number in numbers.tolist():
        segment = int(np.searchsorted(starts, number, side="right")) - 1
        local = number - int(starts[segment])
        rows, room, counts = index.forward[segment].tokens(local, local + 1)
        tok.append(level1_keys[rows])
        rem.append(room)
        doc.append(np.full(len(rows), number, dtype=np.uint32))
    return np.concatenate(tok), np.concatenate(rem), np.concatenate(doc)


def linked_documents(index: CorpusIndex, tok: np.ndarray, rem: np.ndarray) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """R: the documents of ``index`` that alone hold a stored n-gram occurring in these tokens,
    and those n-grams' keys by length (sorted)."""
    positions = np.arange(len(tok), dtype=np.uint32)
    keys = tok
    df = np.zeros(0, dtype=np.int64)
    found: list[int] = []
    singles: dict[int, np.ndarray] = {}
    for n in range(1, index.max_tokens + 1):
        if n > 1:
            positions, keys = extend_level(positions, keys, df >= 2, rem, tok, n)
        if not len(positions):
            break
        unique, inverse = np.unique(keys, return_inverse=True)
        rows, unique_df = index.levels[n].lookup(unique)
        level = index.levels[n]
        found += [int(level.documents(row)[0]) for row in rows[unique_df == 1].tolist()]
        singles[n] = unique[unique_df == 1]
        df = unique_df[inverse]
    return np.unique(np.array(found, dtype=np.int64)), singles


def around(tok: np.ndarray, rem: np.ndarray, singles: dict[int, np.ndarray], max_n: int) -> tuple[np.ndarray, np.ndarray]:
    """Which of R's tokens an n-gram stored in U but not in V can cover, and their segment room within those.

    Such an n-gram (module docstring) contains an occurrence of one of the ``singles``, so
    it lies within ``max_n`` tokens of one: only those windows are counted again, each a
    segment of its own (the room is cut at the window's end).
    """
    count = len(tok)
    edges = np.zeros(count + 1, dtype=np.int64)
    keys = tok
    for n in range(1, max_n + 1):
        if n > 1:
            keys = extend(keys[:-1], tok[n - 1 :])
        wanted = singles.get(n, np.zeros(0, dtype=np.uint64))
        if len(wanted) and len(keys):
            # A bitmap of the keys' low bits first: R has millions of tokens, the singles are few.
            seen = np.zeros(_FILTER_SIZE, dtype=bool)
            seen[(wanted & _FILTER_MASK).astype(np.int64)] = True
            starts = np.flatnonzero(seen[(keys & _FILTER_MASK).astype(np.int64)] & (rem[: len(keys)] >= n))
            at = np.minimum(np.searchsorted(wanted, keys[starts]), len(wanted) - 1)  # the singles are sorted
            starts = starts[wanted[at] == keys[starts]]
            np.add.at(edges, np.maximum(starts + n - max_n, 0), 1)
            np.add.at(edges, np.minimum(starts + max_n, count), -1)
    covered = np.cumsum(edges[:-1]) > 0
    run_end = np.flatnonzero(np.append(covered[1:] != covered[:-1], True)) + 1  # end of each run of equal cover
    room = run_end[np.searchsorted(run_end, np.arange(count), side="right")] - np.arange(count)
    return covered, np.minimum(rem, room).astype(np.uint8)


@dataclass
class _DeltaLevel:
    """What one level of a delta holds before it is coded."""

    keys: np.ndarray
    df: np.ndarray
    postings: np.ndarray
    additions: np.ndarray
    earlier_rows: int


def count_delta(
    index: CorpusIndex, tok: np.ndarray, rem: np.ndarray, doc: np.ndarray, first_new: int, width: int
) -> tuple[list[_DeltaLevel], np.ndarray]:
    """The level passes over R ∪ Δ (module docstring): each level's delta, and each token's level-1 row.

    ``doc`` is non-decreasing (R's documents, then Δ's from ``first_new`` on).
    """
    positions = np.arange(len(tok), dtype=np.uint32)
    keys = tok
    frequent = np.zeros(0, dtype=bool)
    levels: list[_DeltaLevel] = []
    level1_rows = np.zeros(0, dtype=np.int64)
    for n in range(1, index.max_tokens + 1):
        level = index.levels[n]
        if n > 1:
            positions, keys = extend_level(positions, keys, frequent, rem, tok, n)
        docs = doc[positions]
        unique, inverse = np.unique(keys, return_inverse=True)
        unique_rows, unique_df = level.lookup(unique)
        known_key = unique_rows >= 0
        known = known_key[inverse]
        pair_rows = unique_rows[inverse]
        added = known & (docs >= first_new)
        additions = np.unique(pair_rows[added].astype(np.uint64) * np.uint64(width) + docs[added].astype(np.uint64))
        added_rows, added_df = np.unique((additions // np.uint64(width)).astype(np.int64), return_counts=True)
        new = ~known
        if new.any():
            new_keys, new_df, new_postings, _ = group([keys[new]], [docs[new]])
        else:
            new_keys, new_df, new_postings = np.zeros(0, np.uint64), np.zeros(0, np.uint32), np.zeros(0, np.uint32)
        total = unique_df.copy()
        if len(added_rows):
            at = np.minimum(np.searchsorted(added_rows, unique_rows), len(added_rows) - 1)
            hit = known_key & (added_rows[at] == unique_rows)
            total[hit] += added_df[at[hit]]
        total[~known_key] = new_df[np.searchsorted(new_keys, unique[~known_key])]
        frequent = total[inverse] >= 2
        if n == 1:
            level1_rows = np.where(known, pair_rows, len(level) + np.searchsorted(new_keys, keys))
        levels.append(_DeltaLevel(new_keys, new_df, new_postings, additions, len(level)))
    return levels, level1_rows


def _write_level(folder: Path, name: str, level: _DeltaLevel, width: int) -> dict[str, Any]:
    """One delta level file (keys, postings, additions); its entry in the array table."""
    key_layout, key_words = encode(level.keys, 1 << 64, KEY_SAMPLE_SHIFT)
    posting_layout, posting_words = encode_rows(level.df, level.postings, width)
    addition_layout, addition_words = encode(level.additions, max(1, level.earlier_rows * width))
    words = np.concatenate([key_words, posting_words, addition_words])
    return {
        "dtype": "<u8", "length": len(words), "bytes": words.nbytes,
        "sha256": write_durable(folder / Path(name).name, words),
        "keys": key_layout.to_dict(), "postings": posting_layout.to_dict(), "additions": addition_layout.to_dict(),
    }


def _new_documents(index: CorpusIndex, documents: Iterable[tuple[DocId, str]]) -> list[tuple[DocId, str]]:
    """The new documents, each with an id neither the index nor an earlier new document has."""
    seen: dict[DocId, int] = {}
    accepted = []
    for number, (doc_id, text) in enumerate(documents, start=1):
        doc_id = check_doc_id(doc_id, f"new document {number}", "id", "give every document a string or integer id")
        if doc_id in seen:
            raise InputError(f"duplicate document id {doc_id!r} (new documents {seen[doc_id]} and {number}); ids must be unique")
        if index.document_number(doc_id) is not None:
            raise InputError(
                f"document id {doc_id!r} (new document {number}) is already in index {index.path}; "
                "an update adds new documents only: drop it from the input, or rebuild the index to change a document"
            )
        seen[doc_id] = number
        accepted.append((doc_id, text))
    if not accepted:
        raise InputError("the update has no documents; check the input paths and --text-field")
    return accepted


def update_index(
    path: str | Path,
    documents: Iterable[tuple[DocId, str]],
    key_file: str | Path | None = None,
    ids_file: str | Path | None = None,
    strict_key_permissions: bool | None = None,
    memory_mb: int = 2048,
) -> UpdateSummary:
    """Add ``documents`` to the updatable index at ``path`` as a delta (module docstring).

    Every new id is checked against the index and the other new ids before anything is
    written; the new documents are held in memory (split a very large addition into
    several updates, or rebuild).
    """
    started = time.perf_counter()
    path = Path(path)
    summary = UpdateSummary()
    with build_lock(path):
        summary.notes = _clean(path)
        index = _open(path, key_file, ids_file, strict_key_permissions)
        accepted = _new_documents(index, documents)
        secret = KeyFile(index.key_path).secret(index.manifest["key_id"], strict_key_permissions)
        keyed = index.manifest["doc_ids"].get("ids_sha256") is not None
        ids = index.doc_ids + [doc_id for doc_id, _ in accepted] if keyed else None
        if ids is not None:
            check_output_path(index.ids_path, "--ids-file")
        if index.documents + len(accepted) > 2**32 - 2:
            raise InputError(f"index {path} would pass {2**32 - 2:,} documents; build another index")
        first_new = index.documents
        width = first_new + len(accepted)
        scratch = sidecar(path, "partial")
        try:
            store = WorkStore(scratch / "_work", memory_mb * 1024 * 1024)
            result = tokenize_documents(
                store, 0, accepted, index.rules, secret, VOCABULARY_LIMIT, readings=token_readings(index.readings)
            )
            new_tok, new_rem = store.get("p00000.tok", np.uint64), store.get("p00000.rem", np.uint8)
            if result.longest > index.max_tokens:  # a delta holds the base's levels only
                raise InputError(
                    f"the new documents hold n-grams of up to {result.longest} tokens (text written without spaces, "
                    f"docs/languages.md) but index {path} stores {index.max_tokens} levels; rebuild it with all the "
                    f"documents (`delink index <corpus> -o {path} --updatable --overwrite`)"
                )
            local_doc = store.get("p00000.doc", np.uint32)
            counts = np.bincount(local_doc, minlength=len(accepted))
            new_doc = local_doc + np.uint32(first_new)
            level1_keys = index.levels[1].keys_by_row()
            linked, singles = linked_documents(index, new_tok, new_rem)
            old_tok, old_rem, old_doc = _stored_documents(index, linked, level1_keys)
            kept, old_rem = around(old_tok, old_rem, singles, index.max_tokens)
            old_tok, old_rem, old_doc = old_tok[kept], old_rem[kept], old_doc[kept]
            levels, level1_rows = count_delta(
                index, np.concatenate([old_tok, new_tok]), np.concatenate([old_rem, new_rem]),
                np.concatenate([old_doc, new_doc]), first_new, width,
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        name = delta_folder(len(index.deltas) + 1)
        folder = path / name
        folder.mkdir()
        arrays = {
            delta_level_file(name, n): _write_level(folder, delta_level_file(name, n), level, width) for n, level in enumerate(levels, 1)
        }
        bits = forward.row_bits(len(index.levels[1]) + len(levels[0].keys), index.forward_room_bits)
        writer = forward.ForwardWriter(folder, len(new_tok), bits, secret)
        writer.add(forward.token_values(level1_rows[len(old_tok) :], new_rem, index.forward_room_bits))
        nonce, forward_arrays = writer.finish(np.concatenate([[0], np.cumsum(counts)]))
        arrays.update({f"{name}/{k}": v for k, v in forward_arrays.items()})
        arrays[f"{name}/{DOC_ID_DIGESTS}"] = write_digests(folder, [index.id_digest(doc_id) for doc_id, _ in accepted])
        gap_entry = None
        if index.gap is not None:  # the gap store is written again whole, in the delta's folder
            searched = (new_tok & FAMILY) != 0
            old_digests, old_ends = index.gap.digests()
            gap_entry, gap_arrays = gapstore.write_store(
                folder, np.union1d(index.gap.vocabulary, new_tok[searched]),
                [(old_digests, old_ends), (new_tok[searched], new_rem[searched] == 1)],
                np.concatenate([np.diff(index.gap.offsets), np.bincount(local_doc[searched], minlength=len(accepted))]),
                secret, f"{name}/",
            )
            arrays.update(gap_arrays)
        fsync_dir(folder)  # the delta is durable before the manifest names it
        summary.documents, summary.tokens, summary.delta = len(accepted), len(new_tok), name
        summary.empty_documents = result.empty_documents
        summary.linked_documents = len(linked)
        summary.ngrams_per_level = {n: len(level.keys) for n, level in enumerate(levels, 1)}
        summary.additions = sum(len(level.additions) for level in levels)
        summary.bytes_on_disk = sum(int(a["bytes"]) for a in arrays.values())
        manifest = {name_: value for name_, value in index.manifest.items() if name_ != "mac"}
        manifest["format_version"] = FORMAT_VERSION
        manifest["documents"] = width
        manifest["tokens"] = index.positions + len(new_tok)
        if "readings" in manifest:
            manifest["readings"] = {
                reading: {**entry, "tokens": entry["tokens"] + result.reading_tokens["search" if reading == "gap" else reading]}
                for reading, entry in manifest["readings"].items()
            }
        if gap_entry is not None:
            manifest["gap"] = gap_entry
        manifest["arrays"] = {**manifest["arrays"], **arrays}
        if ids is not None:
            manifest["doc_ids"] = {**manifest["doc_ids"], "ids_sha256": ids_digest(ids)}
            IdMapping(index.ids_path).update(add={index.manifest["key_id"]: ids})  # readers count only their own
        summary.seconds = round(time.perf_counter() - started, 3)
        manifest["deltas"] = [
            *index.deltas,
            {
                "name": name, "first_document": first_new, "documents": len(accepted), "tokens": len(new_tok),
                "forward_bits": bits, "forward_nonce": nonce, "linked_documents": len(linked),
                "ngrams_per_level": summary.ngrams_per_level, "additions": summary.additions, "seconds": summary.seconds,
            },
        ]
        with atomic_write(path / MANIFEST) as handle:  # the commit point
            json.dump(sign(manifest, secret), handle, indent=1)
    return summary


def _forward_partitions(
    index: CorpusIndex, store: WorkStore, level1_keys: np.ndarray
) -> list[PartitionResult]:
    """Step 1 of a build, from the forward store: each segment's documents as partitions of the work store."""
    assert index.forward is not None
    results: list[PartitionResult] = []
    for start, segment in zip(_segment_starts(index).tolist(), index.forward):
        first = 0
        while first < segment.documents:
            stop = int(np.searchsorted(segment.offsets, segment.offsets[first] + _COMPACT_PARTITION_TOKENS, side="right"))
            stop = min(max(stop - 1, first + 1), segment.documents)
            rows, rem, counts = segment.tokens(first, stop)
            rem = np.minimum(rem, index.max_tokens).astype(np.uint8)  # a one-bit store reads a segment's whole room
            prefix = f"p{len(results):05d}"
            store.put(f"{prefix}.tok", level1_keys[rows])
            store.put(f"{prefix}.rem", rem)
            store.put(f"{prefix}.doc", np.repeat(np.arange(stop - first, dtype=np.uint32), counts))
            numbers: list[DocId] = list(range(start + first, start + stop))  # ids stand in: they are unique
            results.append(PartitionResult(
                len(results), numbers, len(rows), int(np.count_nonzero(counts == 0)), longest=int(rem.max(initial=0)),
            ))
            first = stop
    return results


def compact_index(
    path: str | Path,
    key_file: str | Path | None = None,
    ids_file: str | Path | None = None,
    strict_key_permissions: bool | None = None,
    memory_mb: int = 2048,
    shards: int | None = None,
    progress: bool = True,
) -> BuildSummary:
    """Merge the deltas of the index at ``path`` into its base (module docstring).

    The shard count is chosen as a fresh build would (``--shards`` fixes it). An index
    without deltas is left as it is (a note says so).
    """
    started = time.perf_counter()
    path = Path(path)
    with build_lock(path):
        notes = _clean(path)
        index = _open(path, key_file, ids_file, strict_key_permissions)
        summary = BuildSummary(notes=notes)
        if not index.deltas:
            summary.notes.append(f"index {path} has no deltas; nothing to compact")
            return summary
        secret = KeyFile(index.key_path).secret(index.manifest["key_id"], strict_key_permissions)
        keyed = index.manifest["doc_ids"].get("ids_sha256") is not None
        ids = index.doc_ids if keyed else []
        builder = IndexBuilder(index.rules, memory_mb=memory_mb, progress=progress, shards=shards, updatable=True, readings=index.readings)
        level1_keys = index.levels[1].keys_by_row()
        partial = sidecar(path, "partial")
        partial.mkdir()
        try:
            _, arrays, shard_bits, forward_spec = builder.count_into(
                partial, secret, summary, lambda runner, store: _forward_partitions(index, store, level1_keys)
            )
            summary.reading_tokens = {reading: entry["tokens"] for reading, entry in index.reading_entries.items()}
            arrays[DOC_ID_DIGESTS] = write_digests(partial, index.doc_id_digests.tolist())
            summary.bytes_on_disk = sum(int(a["bytes"]) for a in arrays.values())
            summary.seconds = round(time.perf_counter() - started, 3)
            manifest = builder.signed_manifest(arrays, ids if keyed else None, secret, summary, shard_bits, forward_spec)
            with atomic_write(partial / MANIFEST) as handle:
                json.dump(manifest, handle, indent=1)
            commit(path, partial, index.key_path, secret, index.ids_path if keyed else None, ids)
        except BaseException:
            recover(path)
            raise
    summary.bytes_on_disk += (path / MANIFEST).stat().st_size
    return summary
