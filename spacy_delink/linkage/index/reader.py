"""Opening an index directory and answering document-frequency and posting-list lookups."""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from ...errors import IndexFormatError, InputError
from ..tokenize import LinkageRules, Tokenizer, Tokens
from .format import ARRAY_KINDS, DOC_IDS, FORMAT_NAME, FORMAT_VERSION, MANIFEST, array_file
from .hashing import TokenHasher, read_key, resolve_key_path


@dataclass
class Level:
    """The stored n-grams of one length: sorted keys, posting bounds, postings."""

    keys: np.ndarray
    offsets: np.ndarray
    postings: np.ndarray

    def lookup(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row of each key in this level (-1 when not stored) and its document frequency (0)."""
        if not len(self.keys) or not len(keys):
            return np.full(len(keys), -1, dtype=np.int64), np.zeros(len(keys), dtype=np.int64)
        # Sorted needles let binary search reuse the last bound and stay cache-warm (~2x).
        order = np.argsort(keys)
        rows = np.empty(len(keys), dtype=np.int64)
        rows[order] = np.searchsorted(self.keys, keys[order])
        np.minimum(rows, len(self.keys) - 1, out=rows)
        missing = self.keys[rows] != keys
        df = self.offsets[rows + 1].astype(np.int64)
        df -= self.offsets[rows]
        df[missing] = 0
        rows[missing] = -1
        return rows, df

    def documents(self, row: int) -> np.ndarray:
        """Document numbers of one row's posting list (sorted)."""
        return np.asarray(self.postings[int(self.offsets[row]) : int(self.offsets[row + 1])])


def _map_array(path: Path, spec: dict[str, Any], verify: bool) -> np.ndarray:
    file = path / str(spec["file"])
    if not file.exists():
        raise IndexFormatError(f"index {path} is incomplete: {file.name} is missing; rebuild it")
    size = file.stat().st_size
    if size != int(spec["bytes"]):
        raise IndexFormatError(
            f"index {path}: {file.name} has {size} bytes, the manifest says {spec['bytes']} (truncated or altered); rebuild it"
        )
    dtype = np.dtype(str(spec["dtype"]))
    if size == 0:
        return np.zeros(0, dtype=dtype)
    # A plain ndarray view of the map: the memmap subclass adds overhead to every slice.
    array = np.asarray(np.memmap(file, dtype=dtype, mode="r", shape=(int(spec["length"]),)))
    if verify and xxhash.xxh3_128(array.view(np.uint8).data).hexdigest() != spec["xxh3_128"]:
        raise IndexFormatError(f"index {path}: checksum mismatch in {file.name} (corrupted); rebuild it")
    return array


class CorpusIndex:
    """A memory-mapped, keyed-hash N-gram index over an original collection (SPEC §3).

    Opening reads only the manifest and maps the arrays; with ``verify`` (default) each
    array's checksum is checked once. Lookups touch only the pages binary search visits.
    """

    def __init__(self, path: str | Path, key_file: str | Path | None = None, verify: bool = True) -> None:
        self.path = Path(path)
        manifest_path = self.path / MANIFEST
        if not self.path.is_dir():
            raise IndexFormatError(f"{self.path} is not an index directory; build one with `delink index`")
        if not manifest_path.exists():
            raise IndexFormatError(f"{self.path} has no {MANIFEST} (missing or half-written index); rebuild it")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise IndexFormatError(f"{manifest_path} is not valid JSON ({err}); rebuild the index") from None
        if manifest.get("format") != FORMAT_NAME:
            raise IndexFormatError(f"{self.path} is not a spacy-delink index (format {manifest.get('format')!r})")
        version = manifest.get("format_version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise IndexFormatError(
                f"{self.path} uses index format {version}, newer than this spacy-delink supports ({FORMAT_VERSION}); upgrade spacy-delink"
            )
        self.manifest = manifest
        self.rules = LinkageRules.from_dict(manifest["rules"])
        self.documents: int = int(manifest["documents"])
        self.tokens: int = int(manifest["tokens"])
        doc_ids_file = self.path / DOC_IDS
        if not doc_ids_file.exists():
            raise IndexFormatError(f"index {self.path} is incomplete: {DOC_IDS} is missing; rebuild it")
        self._doc_ids_file = doc_ids_file
        self._doc_ids: list[str] | None = None
        self.levels: dict[int, Level] = {}
        arrays = manifest["arrays"]
        for n in range(1, self.rules.max_n + 1):
            specs = []
            for kind in ARRAY_KINDS:
                name = array_file(n, kind)
                if name not in arrays:
                    raise IndexFormatError(f"index {self.path}: manifest lacks {name}; rebuild it")
                specs.append(_map_array(self.path, arrays[name], verify))
            self.levels[n] = Level(*specs)
        if verify and xxhash.xxh3_128(doc_ids_file.read_bytes()).hexdigest() != manifest["doc_ids_xxh3_128"]:
            raise IndexFormatError(f"index {self.path}: checksum mismatch in {DOC_IDS} (corrupted); rebuild it")
        self.key_path = resolve_key_path(self.path, key_file)
        self.tokenizer = Tokenizer(self.rules)
        self.hasher = TokenHasher(self.tokenizer, read_key(self.key_path, manifest["key_id"]))

    @property
    def doc_ids(self) -> list[str]:
        """The user's document ids by document number (loaded on first use)."""
        if self._doc_ids is None:
            self._doc_ids = json.loads(self._doc_ids_file.read_text(encoding="utf-8"))
        return self._doc_ids

    @property
    def max_n(self) -> int:
        return self.rules.max_n

    def check_rules(self, rules: LinkageRules) -> None:
        """Refuse a query whose rules differ from those the index was built with."""
        if not rules.same_tokenization(self.rules) or rules.max_n > self.rules.max_n:
            raise InputError(
                f"the query rules differ from those index {self.path} was built with "
                f"(index: {self.rules.to_dict()}, query: {rules.to_dict()}); rebuild the index or use its rules"
            )

    def tokenize(self, text: str) -> tuple[Tokens, np.ndarray]:
        """Tokens of ``text`` under the index's rules and their keyed digests."""
        tokens = self.tokenizer.tokenize(text)
        return tokens, self.hasher.hash_tokens(tokens)

    def bytes_on_disk(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())

    def copy_to(self, target: str | Path) -> None:
        """Copy the index directory (not its key) to ``target``."""
        target = Path(target)
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(self.path, target)
