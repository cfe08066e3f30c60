"""Building the corpus index: partition, tokenize, count document frequencies level by level.

Algorithm (SPEC §3 with a lossless reduction), run as the tasks of ``shards.py``:

1. The corpus is cut into partitions (a stream: by size; files on Dask workers: one per
   file); each is tokenized (SPEC §1–2) into each token's keyed digest, its document
   number and its segment length. Document numbers follow the corpus order.
2. For n = 1..max_n, each position's n-gram key is derived from the (n−1)-gram key at the
   same position (``ngram_keys.extend``); the (key, document) pairs go to the shard of the
   key's top bits, and each shard counts document frequencies by grouping its pairs
   (``grouping.group``) and writes its level Elias–Fano coded (``lookup.py``).
3. **Reduction.** An n-gram (n ≥ 2) is only counted and stored when both its (n−1)-word
   prefix and suffix occur in at least two documents. If either occurs in one document,
   the n-gram occurs in at most that one; it strictly contains a linkable phrase (df = 1
   < k for every k ≥ 2), so it is never minimal (SPEC §4), never frequent (SPEC §5), and
   cannot lower ``anonymity`` below the 1 its prefix or suffix already gives (SPEC §6).
   Queries apply the same rule, so results equal the unreduced index for every k ≥ 2
   (``tests/test_index.py`` checks this against a brute force). The rule also prunes
   the work: positions whose sub-grams are rare are never extended.

The tasks run on threads of this process (default), on a local Dask cluster
(``workers=N``) or on an existing one (``scheduler=ADDRESS``); the bytes written are the
same (``tests/test_index_scale.py``). docs/scale.md has the figures and the options.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence, Union

import numpy as np

from ...corpus.rules import DocId, check_doc_id, unique_ids
from ...corpus.source import JSONL_SUFFIXES
from ...errors import InputError
from ...io.files import atomic_write, check_output_path
from ..readings import DEFAULT_READINGS, check_readings, token_readings
from ...progress import Progress, count_lines
from ..tokenize import LinkageRules, Tokenizer
from . import forward, gapstore
from . import shards as shards_module
from .commit import build_lock, check_outputs, commit, recover, sidecar
from .format import BASE_FORMAT_VERSION, DOC_ID_DIGESTS, FORMAT_NAME, ID_MODES, MANIFEST, REDUCTION, default_ids_path, reading_entries, sign
from .hashing import ID_DIGEST_DTYPE, IdHasher
from .ids import ids_digest
from .keys import key_id, new_secret, resolve_key_path
from .partitions import PARTITION_CHARS, PartitionResult, partitions_of, reading_hashers, tokenize_documents, tokenize_file
from .runners import Runner, ThreadRunner
from .workstore import WorkStore, write_durable

_MAX_DOCS = 2**32 - 2
#: Distinct tokens a digest cache keeps (~40 bytes each): in this process the build's one, on Dask each partition's.
VOCABULARY_LIMIT = 4_000_000


@dataclass(frozen=True)
class CorpusFiles:
    """A corpus given as files, which Dask workers read themselves (one partition per file).

    Each is a path every worker can open (a shared file system) or a URL fsspec opens
    (``s3://``, ``https://``, ...: ``corpus.resolve_sources`` makes paths absolute and
    expands URL globs); nothing but the name travels to a worker. In this process the
    files are simply streamed, as ``corpus.read_documents`` does.
    """

    paths: tuple[str, ...]
    text_field: str = "text"
    id_field: str = "id"
    skip_invalid: bool = False
    #: ``--format``, for the sources whose name does not say theirs (``corpus.input_format``).
    input_format: str | None = None

    def for_workers(self) -> tuple[str, ...]:
        """The paths, refusing a ``memory://`` URL: it lives in this process, which Dask workers cannot see."""
        from ...urls import is_url, redact_url, url_protocols

        for path in self.paths:
            if is_url(path) and "memory" in url_protocols(path):
                raise InputError(
                    f"{redact_url(path)}: a memory:// URL lives in this process only, and Dask workers cannot read it; "
                    "build without --workers/--scheduler, or put the corpus where every worker can read it"
                )
        return self.paths


Corpus = Union[Iterable[tuple[DocId, str]], CorpusFiles]


@dataclass
class BuildSummary:
    """What a build produced; printed by ``delink index`` and stored in the manifest."""

    documents: int = 0
    #: Documents with no token (indexed: they count towards the collection).
    empty_documents: int = 0
    #: Positions indexed: every reading's tokens (``reading_tokens`` has them per reading).
    tokens: int = 0
    reading_tokens: dict[str, int] = field(default_factory=dict)
    #: Distinct n-grams (keys), in all and per level.
    ngrams: int = 0
    ngrams_per_level: dict[int, int] = field(default_factory=dict)
    postings: int = 0
    bytes_on_disk: int = 0
    seconds: float = 0.0
    #: Pieces of the collection built apart and merged (``partitions.py``), and shards per level.
    partitions: int = 0
    shards: int = 1
    #: Levels stored: max_n, or max_n + max_n_chars when the search reading holds longer
    #: n-grams (text written without spaces, ``LinkageRules.levels``).
    levels: int = 0
    #: Invalid input lines skipped (``skip_invalid``), as ``<file>:<line>``.
    skipped_lines: list[str] = field(default_factory=list)
    #: What the build found and cleaned up (an interrupted earlier build), for the user.
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        """The figures stored in the manifest (the notes are about this machine, not the index)."""
        figures = asdict(self)
        del figures["notes"], figures["skipped_lines"]
        return figures


def write_digests(folder: Path, digests: list[bytes], name: str = DOC_ID_DIGESTS) -> dict[str, Any]:
    """The documents' keyed id digests, durable in ``folder``; their entry in the array table."""
    array = np.array(digests, dtype=ID_DIGEST_DTYPE)
    return {
        "dtype": ID_DIGEST_DTYPE.str,
        "length": len(array),
        "bytes": array.nbytes,
        "sha256": write_durable(folder / name, array.view(np.uint8)),
    }


class IndexBuilder:
    """Builds an index directory from a corpus within a memory budget.

    ``workers`` is the number of threads of an in-process build (default: up to 2), or,
    with ``dask=True``, the number of worker processes of a local Dask cluster;
    ``scheduler`` runs the build on an existing Dask cluster instead. ``shards`` fixes
    the shard count (a power of two; default from the corpus size and ``memory_mb``).
    ``work_dir`` holds the build's scratch files (default: inside the partial index,
    beside the output); Dask workers must see it, and the output, on a shared file system.
    ``updatable`` also writes the forward store (``forward.py``) that ``delink index
    --update`` and ``delink compact`` need. ``readings`` are the readings of the rules the
    index holds (``linkage.readings``; default both): a query for another is refused.
    """

    def __init__(
        self,
        rules: LinkageRules | None = None,
        memory_mb: int = 2048,
        progress: bool = True,
        workers: int | None = None,
        dask: bool = False,
        scheduler: str | None = None,
        shards: int | None = None,
        work_dir: str | Path | None = None,
        updatable: bool = False,
        readings: Sequence[str] = DEFAULT_READINGS,
    ) -> None:
        if memory_mb < 64:
            raise InputError(f"--memory-mb must be at least 64, got {memory_mb}")
        if workers is not None and workers < 1:
            raise InputError(f"--workers must be at least 1, got {workers}")
        if shards is not None and (shards < 1 or shards & (shards - 1) or shards > 1 << shards_module.MAX_SHARD_BITS):
            raise InputError(f"--shards must be a power of two between 1 and {1 << shards_module.MAX_SHARD_BITS}, got {shards}")
        if scheduler is not None and dask:
            raise InputError("give either --workers N (a local Dask cluster) or --scheduler ADDRESS, not both")
        self.rules = rules or LinkageRules()
        self.memory_bytes = memory_mb * 1024 * 1024
        self.progress = progress
        self.dask = dask
        self.scheduler = scheduler
        self.workers = workers if workers is not None else min(2, os.cpu_count() or 1)
        self.shards = shards
        self.work_dir = Path(work_dir) if work_dir is not None else None
        self.updatable = updatable
        self.readings = check_readings(readings)
        #: The manifest's ``gap`` entry of the last build (``gapstore.write_build``), None without the gap reading.
        self.gap_entry: dict[str, Any] | None = None
        #: Search rows with their exact twin's documents stored once (``shards.write_level``); an
        #: updatable index keeps them apart, as its forward store names every row.
        self.twins = "search" in self.readings and "exact" in self.readings and not updatable
        Tokenizer(self.rules)  # refuse bad rules before any output is touched

    def build(
        self,
        documents: Corpus,
        output: str | Path,
        key_file: str | Path | None = None,
        overwrite: bool = False,
        doc_ids: str = "keyed",
        ids_file: str | Path | None = None,
        strict_key_permissions: bool | None = None,
    ) -> BuildSummary:
        """Build the index into ``output``; its key goes to ``key_file``, the id mapping to ``ids_file``.

        ``doc_ids="keyed"`` (default) writes the plaintext id of each document number to
        ``ids_file`` (default ``<output>.ids.json``), beside the index like the key;
        ``"external"`` writes no mapping: document numbers follow the input order. The
        index itself only ever holds keyed digests of the ids. Every output is checked
        before the corpus is read; the result is put in place as one step (``commit.py``).
        ``strict_key_permissions`` refuses an existing key file others may read (``keys.py``).
        """
        started = time.perf_counter()
        output = Path(output)
        if doc_ids not in ID_MODES:
            raise InputError(f"--doc-ids must be one of {', '.join(ID_MODES)}, got {doc_ids!r}")
        if ids_file is not None and doc_ids == "external":
            raise InputError("--ids-file names where the id mapping goes, but --doc-ids external writes none; drop one of them")
        key_path = resolve_key_path(output, key_file)
        ids_path = (Path(ids_file) if ids_file is not None else default_ids_path(output)) if doc_ids == "keyed" else None
        check_output_path(output, "--output", directory=True)
        output.parent.mkdir(parents=True, exist_ok=True)
        summary = BuildSummary()
        with build_lock(output):
            summary.notes = recover(output)
            check_outputs(output, key_path, ids_path, overwrite, strict_key_permissions)
            secret = new_secret()
            partial = sidecar(output, "partial")
            partial.mkdir()
            try:
                ids, arrays, shard_bits, forward_spec = self.count_into(
                    partial, secret, summary, lambda runner, store: self._tokenize(runner, store, documents, secret)
                )
                hasher = IdHasher(secret)
                arrays[DOC_ID_DIGESTS] = write_digests(partial, [hasher.digest(doc_id) for doc_id in ids])
                summary.bytes_on_disk = sum(int(a["bytes"]) for a in arrays.values())
                summary.seconds = round(time.perf_counter() - started, 3)
                manifest = self.signed_manifest(arrays, ids if ids_path is not None else None, secret, summary, shard_bits, forward_spec)
                with atomic_write(partial / MANIFEST) as handle:
                    json.dump(manifest, handle, indent=1)
                commit(output, partial, key_path, secret, ids_path, ids)
            except BaseException:
                recover(output)  # remove this build, or roll back its interrupted commit
                raise
        summary.bytes_on_disk += (output / MANIFEST).stat().st_size
        return summary

    @property
    def _distributed(self) -> bool:
        """Whether the tasks run on Dask workers (other processes) rather than on threads here."""
        return self.scheduler is not None or self.dask

    def _runner(self) -> Runner:
        if self._distributed:
            from .distributed import DaskRunner

            return DaskRunner(workers=self.workers if self.dask else None, scheduler=self.scheduler)
        return ThreadRunner(self.workers)

    def count_into(
        self,
        folder: Path,
        secret: bytes,
        summary: BuildSummary,
        partitions_of_run: Callable[[Runner, WorkStore], list[PartitionResult]],
    ) -> tuple[list[DocId], dict[str, dict[str, Any]], int, dict[str, Any] | None]:
        """Steps 1–3 into ``folder`` (and the forward store): the ids, the array table, the shard bits
        and the manifest's ``forward`` entry (None without one).

        ``partitions_of_run`` is step 1: tokenizing the corpus, or (``update.compact``)
        reading an index's forward store back.
        """
        work = (self.work_dir / f"{folder.name}-work") if self.work_dir is not None else folder / "_work"
        # Threads share the store's memory; Dask workers only see its files.
        store = WorkStore(work, 0 if self._distributed else self.memory_bytes // 2)
        runner = self._runner()
        try:
            partitions = partitions_of_run(runner, store)
            ids = self._check_partitions(partitions, summary)
            shard_bits = (
                self.shards.bit_length() - 1
                if self.shards is not None
                else shards_module.shard_bits_for(summary.tokens, self.memory_bytes)
            )
            summary.shards = 1 << shard_bits
            longest = max((p.longest for p in partitions), default=0)
            # Past max_n only n-grams with characters of scripts written without spaces: an
            # index of a collection without them stores max_n levels.
            level_total = self.rules.levels if longest > self.rules.max_n else self.rules.max_n
            summary.levels = level_total
            with Progress("counting n-grams", "levels", level_total, enabled=self.progress) as bar:
                levels = shards_module.count_levels(
                    runner, store, folder, partitions, level_total, shard_bits, advance=bar.update,
                    keep_level1_keys=self.updatable, twins=self.twins,
                )
            arrays = levels.arrays()
            self.gap_entry = None
            if "gap" in self.readings:
                self.gap_entry, gap_arrays = runner.submit(
                    gapstore.write_build, store, str(folder), [len(p.doc_ids) for p in partitions], secret
                ).result()
                arrays.update(gap_arrays)
            forward_spec = None
            if self.updatable:
                forward_spec, forward_arrays = self._forward(
                    runner, store, folder, partitions, levels, summary.tokens, secret, level_total
                )
                arrays.update(forward_arrays)
        finally:
            runner.close()
            shutil.rmtree(work, ignore_errors=True)
        summary.ngrams_per_level = levels.ngrams_per_level()
        summary.ngrams = sum(summary.ngrams_per_level.values())
        summary.postings = levels.postings
        return ids, arrays, shard_bits, forward_spec

    def _forward(
        self,
        runner: Runner,
        store: WorkStore,
        folder: Path,
        partitions: list[PartitionResult],
        levels: shards_module.Levels,
        tokens: int,
        secret: bytes,
        level_total: int,
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The forward store (``forward.py``): each token's level-1 row, partition by partition.

        Returns the manifest's ``forward`` entry (bits per token, nonce, cipher) and its entries in the array table.
        """
        per_shard = [0] * (1 << levels.shard_bits)
        for file in levels.files:
            if file.level == 1:
                per_shard[file.shard] = file.ngrams
        row_bases = np.cumsum([0, *per_shard]).tolist()
        count = len(partitions)
        room_bits = forward.room_bits_for(level_total, self.rules.max_n)
        runner.map(
            forward.partition_rows, [store] * count, list(range(count)), [levels.shard_bits] * count, [row_bases] * count,
            [room_bits] * count,
        )
        documents = [len(p.doc_ids) for p in partitions]
        bits = forward.row_bits(row_bases[-1], room_bits)
        nonce, arrays = runner.submit(forward.write_build, store, str(folder), documents, tokens, bits, secret).result()
        return forward.manifest_entry(bits, nonce, room_bits), arrays

    def signed_manifest(
        self,
        arrays: dict[str, dict[str, Any]],
        mapped_ids: list[DocId] | None,
        secret: bytes,
        summary: BuildSummary,
        shard_bits: int,
        forward_spec: dict[str, Any] | None,
    ) -> dict[str, Any]:
        """The signed manifest (format.py); ``mapped_ids``: the ids written beside the index, if any."""
        return sign(
            {
                "format": FORMAT_NAME,
                "format_version": BASE_FORMAT_VERSION,
                "rules": self.rules.to_dict(),
                "key_id": key_id(secret),
                "documents": summary.documents,
                "tokens": summary.tokens,
                "readings": reading_entries(self.readings, summary.reading_tokens, summary.levels),
                "twins": self.twins,
                "reduction": REDUCTION,
                "shard_bits": shard_bits,
                "doc_ids": {
                    "mode": "keyed" if mapped_ids is not None else "external",
                    "ids_sha256": ids_digest(mapped_ids) if mapped_ids is not None else None,
                },
                "forward": forward_spec,
                "gap": self.gap_entry,
                "arrays": arrays,
                "summary": summary.to_dict(),
            },
            secret,
        )

    def _tokenize(
        self, runner: Runner, store: WorkStore, documents: Corpus, secret: bytes
    ) -> list[PartitionResult]:
        """Step 1: one task per partition; a stream is cut by size, files go to workers whole.

        One partition more than ``workers`` is in flight (the next one is read while the
        threads tokenize), so memory stays bounded by the budget (a partition holds at most
        about a twentieth of it); on threads the partitions share one ``TokenHasher``. The
        first task loads the compiled kernels (``shards.warm_kernels``, ~0.5 s in a fresh
        process); until it is done, ``workers`` more partitions may wait, so that reading
        goes on meanwhile.
        """
        if isinstance(documents, CorpusFiles) and self._distributed:
            paths = documents.for_workers()
            count = len(paths)
            return runner.map(
                tokenize_file,
                [store] * count,
                list(range(count)),
                list(paths),
                [documents.text_field] * count,
                [documents.id_field] * count,
                [documents.skip_invalid] * count,
                [self.rules] * count,
                [secret] * count,
                [VOCABULARY_LIMIT] * count,
                [token_readings(self.readings)] * count,
                [documents.input_format] * count,
            )
        if isinstance(documents, CorpusFiles):
            from ...corpus.rules import CorpusStats
            from ...corpus.source import read_documents

            stats = CorpusStats()
            stream: Iterable[tuple[DocId, str]] = read_documents(
                documents.paths, documents.text_field, documents.id_field, documents.skip_invalid, stats, documents.input_format
            )
        else:
            stats, stream = None, documents
        results: list[PartitionResult] = []
        pending: list[Any] = []
        partition_chars = max(1 << 16, min(self.memory_bytes // 24, PARTITION_CHARS))
        # A hasher cannot be sent to Dask workers: each task there makes its own.
        hashers = None if self._distributed else reading_hashers(self.rules, secret, token_readings(self.readings), VOCABULARY_LIMIT)
        warm = runner.submit(shards_module.warm_kernels, self.rules, token_readings(self.readings))
        total = count_lines(documents.paths, JSONL_SUFFIXES) if isinstance(documents, CorpusFiles) else None
        with Progress("tokenizing", "docs", total, enabled=self.progress) as bar:
            for number, batch in enumerate(partitions_of(self._checked(stream, bar), partition_chars)):
                pending.append(
                    runner.submit(
                        tokenize_documents, store, number, batch, self.rules, secret, VOCABULARY_LIMIT, hashers,
                        token_readings(self.readings),
                    )
                )
                while len(pending) > (self.workers if warm.done() else 2 * self.workers):
                    results.append(pending.pop(0).result())
            warm.result()
            results += [future.result() for future in pending]
        if stats is not None and results:
            results[-1].skipped_lines.extend(stats.skipped_lines)
        return results

    def _checked(self, documents: Iterable[tuple[DocId, str]], bar: Any) -> Iterator[tuple[DocId, str]]:
        """The id rule on a stream, with the progress bar."""
        for number, (doc_id, text) in enumerate(unique_ids(documents), start=1):
            if number > _MAX_DOCS:
                raise InputError(f"corpus has more than {_MAX_DOCS:,} documents; split it into several indexes")
            yield check_doc_id(doc_id, f"document {number}", "id", "give every document a string or integer id"), text
            bar.update()

    def _check_partitions(self, partitions: list[PartitionResult], summary: BuildSummary) -> list[DocId]:
        """The ids in corpus order (unique across partitions) and the corpus counts."""
        ids: list[DocId] = []
        seen: dict[DocId, int] = {}
        for partition in partitions:
            for doc_id in partition.doc_ids:
                first = seen.setdefault(doc_id, len(ids) + 1)
                if first != len(ids) + 1:
                    raise InputError(f"duplicate document id {doc_id!r} (documents {first} and {len(ids) + 1}); ids must be unique")
                ids.append(doc_id)
            summary.tokens += partition.tokens
            for reading, count in partition.reading_tokens.items():
                summary.reading_tokens[reading] = summary.reading_tokens.get(reading, 0) + count
            summary.empty_documents += partition.empty_documents
            summary.skipped_lines += partition.skipped_lines
        summary.documents = len(ids)
        summary.partitions = len(partitions)
        if not ids:
            raise InputError("the corpus has no documents; check the input paths and --text-field")
        if len(ids) > _MAX_DOCS:
            raise InputError(f"corpus has more than {_MAX_DOCS:,} documents; split it into several indexes")
        if summary.tokens == 0:
            raise InputError(f"the corpus's {len(ids)} documents contain no tokens; nothing to index")
        return ids
