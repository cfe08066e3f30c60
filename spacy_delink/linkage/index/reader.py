"""Opening an index directory and answering document-frequency and posting-list lookups."""
from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ...corpus.rules import DocId
from ...errors import IndexFormatError, InputError
from ..readings import check_readings, describe, token_readings, tokenizer_for
from ..search_form import table_version
from ..tokenize import LinkageRules, SearchTokenizer, Tokenizer, Tokens
from .commit import interrupted_hint
from .forward import Forward
from .gapstore import GapStore
from .format import POSTING_CLASSES, default_ids_path, load_manifest
from .hashing import ID_DIGEST_BYTES, ForwardCipher, IdHasher, TokenHasher, input_digest, sidecar_mac_key
from .ids import IdMapping
from .keys import KeyFile, resolve_key_path
from .levels import DeltaLevel, Level, TwinLevel, UpdatedLevel, coded_from_words, sequences
from .lookup import PostingClasses
from .manifest import ArraySpec, IndexManifest, LevelFiles
from .packing import flag_words_length


class LargeKWarning(UserWarning):
    """A threshold k above the collection's size: every phrase found in it is linkable."""


def _map_array(path: Path, spec: ArraySpec) -> np.ndarray:
    """Map one array of the (authenticated) table, after checking its size."""
    file = path / spec.name
    if not file.exists():
        raise IndexFormatError(f"index {path} is incomplete: {spec.name} is missing; rebuild it with `delink index`")
    size = file.stat().st_size
    if size != spec.bytes:
        raise IndexFormatError(
            f"index {path}: {spec.name} has {size} bytes, the manifest says {spec.bytes} (truncated or altered); "
            "rebuild it with `delink index`"
        )
    dtype = np.dtype(spec.dtype)
    if size == 0:
        return np.zeros(0, dtype=dtype)
    # A plain ndarray view of the map: the memmap subclass adds overhead to every slice.
    return np.asarray(np.memmap(file, dtype=dtype, mode="r", shape=(spec.length,)))


def _verify_checksums(path: Path, arrays: dict[str, np.ndarray], specs: tuple[ArraySpec, ...]) -> None:
    """SHA-256 of every array against the (authenticated) table, on several threads.

    hashlib releases the GIL while it hashes, so the arrays are checked in parallel.
    """
    expected = {spec.name: spec.sha256 for spec in specs}

    def digest(name: str) -> tuple[str, str]:
        return name, hashlib.sha256(arrays[name].view(np.uint8).data).hexdigest()

    with ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1)) as pool:
        for name, found in pool.map(digest, sorted(arrays, key=lambda n: -arrays[n].nbytes)):
            if found != expected[name]:
                raise IndexFormatError(f"index {path}: checksum mismatch in {name} (corrupted or altered); rebuild it with `delink index`")


class CorpusIndex:
    """A memory-mapped, keyed-hash N-gram index over an original collection (SPEC §3).

    Opening reads the manifest, refuses it unless its MAC verifies under the key (any
    edit), reads it into an ``IndexManifest`` (``manifest.py``), checks every array's size
    and, with ``verify`` (default), its SHA-256; then maps the arrays. A lookup goes to the key's shard and decodes only what it visits. The id mapping
    (``ids_file``, default ``<index>.ids.json``) is read only when ``doc_ids`` is asked.
    """

    def __init__(
        self,
        path: str | Path,
        key_file: str | Path | None = None,
        verify: bool = True,
        ids_file: str | Path | None = None,
        strict_key_permissions: bool | None = None,
    ) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise IndexFormatError(
                f"{self.path} is not an index directory; build one with `delink index`{interrupted_hint(self.path)}"
            )
        manifest = load_manifest(self.path)
        self.key_path = resolve_key_path(self.path, key_file)
        secret = KeyFile(self.key_path).secret(manifest["key_id"], strict_key_permissions)
        #: The manifest, authenticated and read into what the reader needs (``manifest.py``).
        self.spec = spec = IndexManifest.verified(self.path, manifest, secret)
        #: The manifest as read (an update writes its successor from it).
        self.manifest = spec.raw
        self.rules = spec.rules
        self.documents: int = spec.documents
        #: Positions indexed: the tokens of every reading the index holds (``tokens`` counts one reading's).
        self.positions: int = spec.positions
        self.shard_bits: int = spec.shard_bits
        arrays = {array.name: _map_array(self.path, array) for array in spec.arrays}
        if verify:
            _verify_checksums(self.path, arrays, spec.arrays)
        self.verified = verify
        #: The deltas added by ``delink index --update`` (manifest entries), oldest first.
        self.deltas: list[dict[str, Any]] = spec.raw.get("deltas", [])
        self.base_documents = spec.base_documents
        self.levels: dict[int, Level | UpdatedLevel] = {files.number: self._level(files, arrays) for files in spec.levels}
        #: Per level, each shard's twin bits (``format.twin_file``), when search rows share their exact twins'.
        self._twin_words: dict[int, list[np.ndarray]] = {}
        if spec.twins:
            for files in spec.levels:
                n, level = files.number, self.levels[files.number]
                rows: list[int] = np.diff(np.asarray(level.row_base)).tolist() if isinstance(level, Level) else []  # twins: no deltas
                self._twin_words[n] = [arrays[shard.twin] for shard in files.shards if shard.twin is not None]
                if [len(words) for words in self._twin_words[n]] != [flag_words_length(r) for r in rows]:
                    raise IndexFormatError(
                        f"index {self.path}: the twin files of level {n} do not have one bit per row; rebuild it with `delink index`"
                    )
        self._twin_levels: dict[int, TwinLevel] | None = None
        digests = [arrays[name] for name in spec.doc_id_digests]
        self.doc_id_digests = np.concatenate(digests) if self.deltas else digests[0]
        #: Each segment's forward store (base, then each delta), or None: not updatable.
        self.forward: list[Forward] | None = self._forward(arrays, secret) if spec.forward is not None else None
        self.ids_path = Path(ids_file) if ids_file is not None else default_ids_path(self.path)
        self._strict_key_permissions = strict_key_permissions  # the id mapping is checked as the key was
        self._id_hasher = IdHasher(secret)
        self._secret = secret
        self._sidecar_key = sidecar_mac_key(secret)
        self._doc_ids: list[DocId] | None = None
        self._numbers: dict[bytes, int] | None = None
        #: The readings of the rules this index holds (``linkage.readings``), with their tokens.
        self.reading_entries = spec.readings
        self.readings = check_readings(self.reading_entries)
        #: The collection's tokens under the first reading held (the exact one, unless the index holds the search one alone).
        self.tokens: int = self.reading_entries[self.readings[0]]["tokens"]
        exact = Tokenizer(self.rules)  # also what checks masks and counts the original's tokens, whatever the readings
        self.hashers = {
            reading: TokenHasher(exact if reading == "exact" else tokenizer_for(reading, self.rules), secret)
            for reading in (*token_readings(self.readings), *(() if "exact" in self.readings else ("exact",)))
        }
        self.tokenizer = exact
        self.hasher = self.hashers["exact"]
        #: The gap reading's store (``gapstore.py``), or None when the index does not hold the reading.
        self.gap: GapStore | None = (
            GapStore.open(self.path, arrays, spec.gap, secret, self.rules.max_gap)
            if "gap" in self.readings and spec.gap is not None
            else None
        )

    def sidecar_mac(self, canonical: bytes) -> str:
        """A MAC under this index's key of a manifest kept beside the index (``<index>.embeddings``):
        an edit to it is refused like an edit to the index's own manifest, by whoever holds the key."""
        return hashlib.blake2b(canonical, key=self._sidecar_key, digest_size=32).hexdigest()

    def _level(self, files: LevelFiles, arrays: dict[str, np.ndarray]) -> Level | UpdatedLevel:
        """One level's shards, each file split into its keys and postings sequences; and its deltas."""
        keys, postings = [], []
        for shard in files.shards:
            name = shard.coded.name
            try:
                coded = coded_from_words(arrays[name], shard.coded)
                key_part, = sequences(coded[:1])
                posting_parts = coded[1:]
                classes = PostingClasses.from_parts(posting_parts)
            except (ValueError, TypeError) as err:
                raise IndexFormatError(f"index {self.path}: {name} does not match its layout ({err}); rebuild it with `delink index`") from None
            keys.append(key_part)
            postings.append(classes)
            if len(arrays[shard.frequent]) != flag_words_length(len(key_part)):
                raise IndexFormatError(
                    f"index {self.path}: {shard.frequent} does not have one bit per row of {name} and their "
                    "rank directory; rebuild it with `delink index`"
                )
        frequent = [arrays[shard.frequent] for shard in files.shards]
        base = Level(keys, postings, frequent, self.shard_bits, self.base_documents, POSTING_CLASSES)
        if not files.deltas:
            return base
        deltas: list[DeltaLevel] = []
        for delta, coded_file in zip(self.spec.deltas, files.deltas):
            try:
                parts = sequences(coded_from_words(arrays[coded_file.name], coded_file))
            except (ValueError, TypeError) as err:
                raise IndexFormatError(
                    f"index {self.path}: {coded_file.name} does not match its layout ({err}); rebuild it with `delink index`"
                ) from None
            row_base = deltas[-1].stop if deltas else len(base)
            added_keys, added_postings, additions = parts
            deltas.append(DeltaLevel(added_keys, added_postings, additions, row_base=row_base, width=delta.width))
        return UpdatedLevel(base, deltas)

    def _forward(self, arrays: dict[str, np.ndarray], secret: bytes) -> list[Forward]:
        stores = []
        for segment in self.spec.forward or ():
            try:
                cipher = ForwardCipher(secret, bytes.fromhex(segment.nonce))
                where = f"index {self.path}: {segment.rows}"
                stores.append(Forward(arrays[segment.rows], arrays[segment.offsets], segment.bits, cipher, where, self.forward_room_bits))
            except ValueError as err:
                raise IndexFormatError(
                    f"index {self.path}: {segment.rows} does not match the manifest ({err}); rebuild it with `delink index`"
                ) from None
        return stores

    @property
    def doc_ids(self) -> list[DocId]:
        """The user's document ids by document number, from the id mapping kept beside the index."""
        if self._doc_ids is None:
            expected = self.spec.ids_sha256
            if expected is None:
                raise IndexFormatError(
                    f"index {self.path} was built with external ids (no id mapping): document n is the n-th "
                    "document of the corpus it was built from; document_number(id) finds an id's number"
                )
            self._doc_ids = IdMapping(self.ids_path).ids(
                self.path, self.spec.key_id, expected, self.documents, self._strict_key_permissions
            )
        return self._doc_ids

    def input_digest(self, doc_id: DocId, text: str) -> str:
        """A keyed digest of an input document (``hashing.input_digest``) under this index's key."""
        return input_digest(self._secret, doc_id, text)

    def id_digest(self, doc_id: DocId) -> bytes:
        """The keyed digest of an id, as ``doc_ids.digests`` stores it."""
        return self._id_hasher.digest(doc_id)

    def doc_id_matches(self, number: int, doc_id: DocId) -> bool:
        """Whether document ``number`` has id ``doc_id`` (keyed digest; needs no id mapping)."""
        stored = self.doc_id_digests[number : number + 1].tobytes()
        return stored == self.id_digest(doc_id)

    def document_number(self, doc_id: DocId) -> int | None:
        """The number of the document with id ``doc_id``, or None (keyed digest; needs no id mapping)."""
        if self._numbers is None:
            raw = self.doc_id_digests.tobytes()
            self._numbers = {raw[i : i + ID_DIGEST_BYTES]: n for n, i in enumerate(range(0, len(raw), ID_DIGEST_BYTES))}
        return self._numbers.get(self.id_digest(doc_id))

    @property
    def max_n(self) -> int:
        return self.rules.max_n

    def splits_scripts(self, readings: Iterable[str]) -> bool:
        """Whether these readings of the index read each letter of a script written without
        spaces as a token (version 2); an exact reading built before reads them as whole runs."""
        return all("version" in self.reading_entries[reading] for reading in readings)

    @property
    def forward_room_bits(self) -> int:
        """Bits of each token's room in the forward store (1: the segment-end flag of earlier releases)."""
        return self.spec.forward_room_bits

    @property
    def max_tokens(self) -> int:
        """The most tokens of an n-gram the index holds (``LinkageRules.levels``): its level count."""
        return len(self.levels)

    def warn_if_k_exceeds_collection(self, k: int) -> None:
        """Warn when k exceeds the collection: any phrase found in it at all is then linkable."""
        if k > self.documents:
            warnings.warn(
                f"k={k} is larger than the collection of index {self.path} ({self.documents:,} documents): "
                f"every phrase that occurs in it at all is linkable, so all of them are flagged; choose k <= {self.documents:,}",
                LargeKWarning,
                stacklevel=2,
            )

    def check_rules(self, rules: LinkageRules) -> None:
        """Refuse a query whose rules differ from those the index was built with."""
        if not rules.same_tokenization(self.rules) or rules.max_n > self.rules.max_n or rules.max_n_chars > self.rules.max_n_chars:
            raise InputError(
                f"the query rules differ from those index {self.path} was built with "
                f"(index: {self.rules.to_dict()}, query: {rules.to_dict()}); rebuild the index or use its rules"
            )

    def require_readings(self, readings: Iterable[str]) -> tuple[str, ...]:
        """``readings`` checked against those this index holds: a query never uses a reading it lacks (SPEC §8)."""
        wanted = check_readings(readings)
        missing = [r for r in wanted if r not in self.readings]
        if missing:
            raise InputError(
                f"index {self.path} holds the {describe(self.readings)} only, not the {describe(missing)} asked for; "
                f"rebuild it with `delink index <corpus> -o {self.path} --overwrite` (every reading by default), "
                f"or ask for readings={','.join(self.readings)} (docs/linkage-rules.md §8)"
            )
        if "search" in wanted and self.reading_entries["search"]["form"] != table_version():
            raise InputError(
                f"index {self.path} was built with search form {self.reading_entries['search']['form']}, this installation "
                f"reads {table_version()} (another Unicode or spacy-delink version): its search reading would not match "
                f"these texts; rebuild it with `delink index <corpus> -o {self.path} --overwrite`"
            )
        return wanted

    def levels_of(self, reading: str) -> Mapping[int, Level | UpdatedLevel | TwinLevel]:
        """The levels that answer one reading's lookups: both readings' keys live in the same
        levels, and where a search row is stored only as its exact twin's (``TwinLevel``) the
        search reading reads through the twin bits."""
        if reading not in self.readings:
            self.require_readings([reading])
        if reading == "gap":  # the gap reading looks up the search reading's n-grams
            reading = "search"
        if reading == "exact" or not self._twin_words:
            return self.levels
        if self._twin_levels is None:
            self._twin_levels = {
                n: TwinLevel(level, self._twin_words[n]) for n, level in self.levels.items() if isinstance(level, Level)
            }
        return self._twin_levels

    def tokenize(self, text: str, reading: str = "exact", tokenizer: Tokenizer | SearchTokenizer | None = None) -> tuple[Tokens, np.ndarray]:
        """Tokens of ``text`` under the index's rules and one of its readings, and their keyed digests.

        ``tokenizer``, one of that reading under the same rules (the search reading with the
        other folding table, ``alternate_tokenizer``), reads the text instead of the index's own.
        """
        hasher = self.hashers["search" if reading == "gap" else reading]  # the gap reading reads the search reading's tokens
        tokens = (tokenizer or hasher.tokenizer).tokenize(text)
        return tokens, hasher.hash_tokens(tokens)

    @cached_property
    def alternate_tokenizer(self) -> SearchTokenizer:
        """The search reading under this index's rules with the other folding table (``SearchTokenizer(alternate=True)``)."""
        return SearchTokenizer(self.rules, alternate=True)

    def bytes_on_disk(self) -> int:
        return sum(f.stat().st_size for f in self.path.rglob("*") if f.is_file())

    def copy_to(self, target: str | Path) -> None:
        """Copy the index directory (not its key, not its id mapping) to ``target``."""
        target = Path(target)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(self.path, target)
