"""An index's manifest, authenticated and parsed once into what opening the index needs.

``format.load_manifest`` checks the manifest's shape and ``format.verify_mac`` its MAC;
``IndexManifest.verified`` does both steps' last one and reads every field the reader uses
into one frozen object: the arrays to map and their checksums, each level's shard files
and their parts' layouts, the deltas, the forward store's segments, the readings. The
reader (``reader.py``) then maps and checks the arrays from it alone, without going back
to the manifest's dict or to ``format.py``'s names for its files.

Nothing here refuses a value but the reduction: the shape was checked before the MAC and
the MAC before any field is used, and what only the arrays can tell (sizes, checksums,
layouts against words) the reader checks as it maps them, in the order it always has.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ...errors import IndexFormatError
from ..tokenize import LinkageRules
from .format import (
    CODED_PARTS,
    DELTA_PARTS,
    DOC_ID_DIGESTS,
    FORWARD_OFFSETS,
    FORWARD_ROWS,
    PACKED_PARTS,
    REDUCTION,
    delta_level_file,
    frequent_file,
    level_count,
    manifest_readings,
    part_fields,
    required_arrays,
    shard_file,
    twin_file,
    verify_mac,
)


@dataclass(frozen=True)
class ArraySpec:
    """One entry of the array table: how to map the array and what its SHA-256 must be."""

    name: str
    dtype: str
    length: int
    bytes: int
    sha256: str


@dataclass(frozen=True)
class CodedPart:
    """One coded part of a level file, in file order: its layout's fields as the manifest gives them."""

    name: str
    packed: bool
    fields: Mapping[str, int]


@dataclass(frozen=True)
class CodedFile:
    """A level file (a shard's or a delta's) and its coded parts in file order."""

    name: str
    parts: tuple[CodedPart, ...]


@dataclass(frozen=True)
class ShardFiles:
    """One shard's files of one level: its level file, its frequent bits and, when written, its twin bits."""

    coded: CodedFile
    frequent: str
    twin: str | None


@dataclass(frozen=True)
class LevelFiles:
    """The files of one level: each shard's (``shard_bits`` of them) and each delta's, oldest first."""

    number: int
    shards: tuple[ShardFiles, ...]
    deltas: tuple[CodedFile, ...]


@dataclass(frozen=True)
class DeltaSegment:
    """One delta's documents (``update.py``): its level files number their postings in ``width`` documents."""

    first_document: int
    documents: int

    @property
    def width(self) -> int:
        """The number of documents once the delta is added (at least 1)."""
        return max(1, self.first_document + self.documents)


@dataclass(frozen=True)
class ForwardSegment:
    """The forward store of the base or of one delta: its two arrays and how its rows are sealed."""

    rows: str
    offsets: str
    bits: int
    nonce: str


@dataclass(frozen=True)
class IndexManifest:
    """What an authenticated manifest says about its index, read once (module docstring)."""

    #: The manifest as read (``CorpusIndex.manifest``: an update writes its successor from it).
    raw: dict[str, Any]
    key_id: str
    rules: LinkageRules
    documents: int
    #: Positions indexed: the tokens of every reading the index holds.
    positions: int
    shard_bits: int
    #: Documents of the base (the rest are the deltas').
    base_documents: int
    #: The readings the index holds (``linkage.readings``), with their tokens.
    readings: dict[str, dict[str, Any]]
    #: The SHA-256 of the id mapping, or None: built with external ids.
    ids_sha256: str | None
    #: Every array the index must have, in the order they are mapped.
    arrays: tuple[ArraySpec, ...]
    #: The id digests' arrays: the base's, then each delta's.
    doc_id_digests: tuple[str, ...]
    levels: tuple[LevelFiles, ...]
    deltas: tuple[DeltaSegment, ...]
    #: Whether search rows with their exact twin's documents are stored once (``format.twin_file``).
    twins: bool
    #: The forward store's segments (base, then each delta), or None: not updatable.
    forward: tuple[ForwardSegment, ...] | None
    #: Bits of each token's room in the forward store (1: the segment-end flag of earlier releases).
    forward_room_bits: int
    #: The gap store's entry (``gapstore.GapStore.open``), or None: the index does not hold the gap reading.
    gap: dict[str, Any] | None

    @classmethod
    def verified(cls, path: Path, manifest: dict[str, Any], secret: bytes) -> IndexManifest:
        """The manifest of the index at ``path`` (``format.load_manifest``'s, shape-checked),
        once its MAC verifies under ``secret`` and its reduction is the one this reader implements."""
        verify_mac(path, manifest, secret)
        if manifest["reduction"] != REDUCTION:
            raise IndexFormatError(f"index {path} uses reduction {manifest['reduction']!r}, unknown to this spacy-delink")
        rules = LinkageRules.from_dict(manifest["rules"])
        specs = manifest["arrays"]
        deltas = manifest.get("deltas", [])
        twins = bool(manifest.get("twins"))
        forward = manifest.get("forward")
        ids_sha256 = manifest["doc_ids"].get("ids_sha256")
        readings = manifest_readings(manifest)

        def coded(name: str, parts: tuple[str, ...]) -> CodedFile:
            return CodedFile(name, tuple(
                CodedPart(part, part in PACKED_PARTS, {f: specs[name][part][f] for f in part_fields(part)}) for part in parts
            ))

        levels = tuple(
            LevelFiles(
                n,
                tuple(
                    ShardFiles(coded(shard_file(s, n), CODED_PARTS), frequent_file(s, n), twin_file(s, n) if twins else None)
                    for s in range(1 << manifest["shard_bits"])
                ),
                tuple(coded(delta_level_file(delta["name"], n), DELTA_PARTS) for delta in deltas),
            )
            for n in range(1, level_count(manifest) + 1)
        )
        segments = None
        if forward is not None:
            stores = [("", forward["bits"], forward["nonce"]), *((f"{d['name']}/", d["forward_bits"], d["forward_nonce"]) for d in deltas)]
            segments = tuple(ForwardSegment(prefix + FORWARD_ROWS, prefix + FORWARD_OFFSETS, bits, nonce) for prefix, bits, nonce in stores)
        return cls(
            raw=manifest,
            key_id=manifest["key_id"],
            rules=rules,
            documents=manifest["documents"],
            positions=manifest["tokens"],
            shard_bits=manifest["shard_bits"],
            base_documents=deltas[0]["first_document"] if deltas else manifest["documents"],
            readings=readings,
            ids_sha256=ids_sha256 if isinstance(ids_sha256, str) else None,
            arrays=tuple(
                ArraySpec(name, specs[name]["dtype"], specs[name]["length"], specs[name]["bytes"], specs[name]["sha256"])
                for name in required_arrays(manifest)
            ),
            doc_id_digests=(DOC_ID_DIGESTS, *(f"{d['name']}/{DOC_ID_DIGESTS}" for d in deltas)),
            levels=levels,
            deltas=tuple(DeltaSegment(d["first_document"], d["documents"]) for d in deltas),
            twins=twins,
            forward=segments,
            forward_room_bits=int(forward.get("room_bits", 1)) if forward else 1,
            gap=manifest.get("gap") if "gap" in readings else None,
        )
