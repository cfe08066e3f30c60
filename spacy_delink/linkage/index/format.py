"""The on-disk layout of an index (format 3), shared by the builder, the commit and the reader.

An index is a directory of raw little-endian arrays plus ``manifest.json``::

    manifest.json                    format name and version, rules, key id, counts, array table, MAC
    doc_ids.digests                  |S16, by document number: keyed digests of the documents' ids
    shard-<s>.level-<n>.ef           uint64 words: the shard's stored n-grams of length n,
                                     Elias–Fano coded keys then postings (``codec.py``)

The n-gram keys are split into ``2 ** shard_bits`` shards by their top bits (``shards.py``),
so a lookup goes to one shard. Each shard-level file is two Elias–Fano sequences — the
sorted keys and the (row, document) postings — whose layouts the manifest records.

Kept apart, beside the directory (never inside it, so the directory can be shared alone):
``<index>.key`` (the secret, ``keys.py``) and, unless the index was built with external
ids, ``<index>.ids.json`` (the id of each document number, ``ids.py``).

Files open with ``numpy.memmap`` in O(1) and a lookup decodes only the buckets and rows
it visits. The manifest records each array's length, byte size and SHA-256, and the SHA-256 of the ids (``doc_ids.ids_sha256``); its canonical form (``canonical_bytes``: every
field but ``mac``, sorted keys, no whitespace, ASCII) carries a keyed BLAKE2b MAC under a
subkey of the index secret (``hashing.manifest_mac``). So a reader that holds the key
detects any edit of the manifest (the MAC), any truncation (sizes), and any change to an
array or to the id mapping (checksums, when verifying). Opening checks, in order: the
format and version, the table's shape, the key, the MAC, and only then uses a field.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...errors import IndexFormatError
from .hashing import mac_matches, manifest_mac

FORMAT_NAME = "spacy-delink-index"
FORMAT_VERSION = 3
MANIFEST = "manifest.json"
DOC_ID_DIGESTS = "doc_ids.digests"
#: The Elias-Fano sequences of a shard-level file, in file order.
CODED_PARTS = ("keys", "postings")
LAYOUT_FIELDS = ("count", "low_bits", "buckets", "sample_shift")
#: The only reduction readers implement (builder.py, step 3).
REDUCTION = "prefix-suffix-df1"
#: Id modes: ``keyed`` writes the id mapping beside the index, ``external`` writes none.
ID_MODES = ("keyed", "external")
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "format": str,
    "format_version": int,
    "rules": dict,
    "key_id": str,
    "documents": int,
    "tokens": int,
    "reduction": str,
    "shard_bits": int,
    "doc_ids": dict,
    "arrays": dict,
    "summary": dict,
    "mac": str,
}
_ARRAY_FIELDS: dict[str, type] = {"dtype": str, "length": int, "bytes": int, "sha256": str}


def shard_file(shard: int, level: int) -> str:
    """The file of one shard's stored n-grams of length ``level``."""
    return f"shard-{shard:04d}.level-{level}.ef"


def array_names(max_n: int, shard_bits: int) -> list[str]:
    """Every array an index of these dimensions lists, id digests first."""
    return [DOC_ID_DIGESTS, *(shard_file(s, n) for n in range(1, max_n + 1) for s in range(1 << shard_bits))]


def default_ids_path(index_dir: str | Path) -> Path:
    """``<index>.ids.json`` beside the index directory, like its key."""
    index_dir = Path(index_dir)
    return index_dir.with_name(index_dir.name + ".ids.json")


def canonical_bytes(manifest: dict[str, Any]) -> bytes:
    """The bytes the MAC covers: every field but ``mac``, in one deterministic JSON form."""
    fields = {name: value for name, value in manifest.items() if name != "mac"}
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode("ascii")


def sign(manifest: dict[str, Any], secret: bytes) -> dict[str, Any]:
    """The manifest with its ``mac`` field set."""
    return {**manifest, "mac": manifest_mac(secret, canonical_bytes(manifest))}


def load_manifest(path: Path) -> dict[str, Any]:
    """Parse ``path/manifest.json`` and check its format, version and shape (not yet its MAC).

    Nothing here trusts a value beyond refusing: the caller verifies the MAC with the key
    named by ``key_id`` before using any field.
    """
    manifest_path = path / MANIFEST
    if not path.is_dir():
        raise IndexFormatError(f"{path} is not an index directory; build one with `delink index`")
    if not manifest_path.exists():
        raise IndexFormatError(f"{path} has no {MANIFEST} (missing or half-written index); rebuild it with `delink index`")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise IndexFormatError(f"{manifest_path} is not valid JSON ({err}); rebuild the index with `delink index`") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise IndexFormatError(f"{path} is not a spacy-delink index (format {found!r})")
    version = manifest.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise IndexFormatError(f"{manifest_path} has no valid format_version; rebuild the index with `delink index`")
    if version > FORMAT_VERSION:
        raise IndexFormatError(
            f"{path} uses index format {version}, newer than this spacy-delink supports ({FORMAT_VERSION}); upgrade spacy-delink"
        )
    if version < FORMAT_VERSION:
        raise IndexFormatError(
            f"{path} uses index format {version} of an older spacy-delink (format 3 adds compressed, sharded levels); "
            "rebuild it with `delink index ... --overwrite`"
        )
    for name, kind in _FIELDS.items():
        if not isinstance(manifest.get(name), kind) or isinstance(manifest.get(name), bool):
            raise IndexFormatError(f"{manifest_path}: field {name!r} is missing or malformed; rebuild the index with `delink index`")
    max_n = manifest["rules"].get("max_n")
    if not isinstance(max_n, int) or max_n < 1:
        raise IndexFormatError(f"{manifest_path}: rules.max_n is missing or malformed; rebuild the index with `delink index`")
    if not 0 <= manifest["shard_bits"] <= 16:
        raise IndexFormatError(f"{manifest_path}: shard_bits is out of range; rebuild the index with `delink index`")
    for name in array_names(max_n, manifest["shard_bits"]):
        spec = manifest["arrays"].get(name)
        if not isinstance(spec, dict):
            raise IndexFormatError(f"index {path}: manifest lacks {name}; rebuild it with `delink index`")
        for field, kind in _ARRAY_FIELDS.items():
            if not isinstance(spec.get(field), kind):
                raise IndexFormatError(f"index {path}: manifest entry {name} lacks {field!r}; rebuild it with `delink index`")
        if name == DOC_ID_DIGESTS:
            continue
        for part in CODED_PARTS:
            layout = spec.get(part)
            if not isinstance(layout, dict) or not all(
                isinstance(layout.get(f), int) and not isinstance(layout.get(f), bool) and layout[f] >= 0 for f in LAYOUT_FIELDS
            ):
                raise IndexFormatError(f"index {path}: manifest entry {name} lacks its {part} layout; rebuild it with `delink index`")
    return manifest


def verify_mac(path: Path, manifest: dict[str, Any], secret: bytes) -> None:
    """Refuse a manifest whose MAC does not match: an edit, a corruption, or another index's key."""
    try:
        authentic = mac_matches(secret, canonical_bytes(manifest), manifest["mac"])
    except ValueError:  # a non-finite number: never written by a build
        authentic = False
    if not authentic:
        raise IndexFormatError(
            f"index {path}: {MANIFEST} fails authentication: it was edited or damaged after the build; "
            "an index is used only as built: rebuild it with `delink index`"
        )


def manifest_key_id(path: Path) -> str | None:
    """The key id a directory's manifest names (any format), or None: which build is in place."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    value = manifest.get("key_id") if isinstance(manifest, dict) else None
    return value if isinstance(value, str) else None
