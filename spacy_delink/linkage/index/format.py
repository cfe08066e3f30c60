"""The on-disk layout of an index (format 5), shared by the builder, the commit and the reader.

An index is a directory of raw little-endian arrays plus ``manifest.json``::

    manifest.json                    format name and version, rules, readings, key id, counts, array table, MAC
    doc_ids.digests                  |S16, by document number: keyed digests of the documents' ids
    shard-<s>.level-<n>.ef           uint64 words: the shard's stored n-grams of length n
                                     (n = 1..max_n, and with the search reading up to
                                     max_n + max_n_chars: ``level_count``),
                                     Elias–Fano coded keys, then postings in classes by df
                                     (``lookup.py``, ``POSTING_CLASSES``), then the df-1
                                     n-grams' documents, packed
    shard-<s>.level-<n>.frequent     uint64 words: one bit per stored n-gram, df >= 2, then
                                     a rank directory over those bits (``packing.flag_words``)
    shard-<s>.level-<n>.twin         uint64 words, with both readings and no forward store:
                                     one bit per stored n-gram, it also answers for its
                                     search-reading twin (``twin_file``)
    forward.rows, forward.offsets    only in an updatable index: each document's tokens as
                                     level-1 rows, sealed with AES-256-GCM-SIV (``forward.py``)
    delta-<d>/                       only after ``delink index --update``: one delta each
                                     (``update.py``): doc_ids.digests, forward.*, and per
                                     level ``level-<n>.ef`` (keys, postings, additions)

An index with deltas is format 8 (a format-7 reader must not answer from its base
alone); ``delink compact`` merges them and writes format 7 again. Both are read; formats
3 to 6 (before the search reading's family bit in every key, SPEC §8) are refused with a
request to rebuild: their keys would silently miss every lookup.
The forward store has a version of its own, the manifest's ``forward.cipher``
(``FORWARD_CIPHER``), which covers the deltas' stores too (an update refuses any other):
a store without one was sealed with the BLAKE2b keystream of earlier releases and is
refused with a request to rebuild.

The n-gram keys are split into ``2 ** shard_bits`` shards by their top bits (``shard_of``),
so a lookup goes to one shard. Each shard-level file is Elias–Fano sequences — the
sorted keys, the (rank, document) postings of the rows with df 2 up to the first class
floor, and for each class of more frequent rows their ranks and postings — then the
packed documents of the df-1 rows, whose layouts the manifest records (``CODED_PARTS``).

Kept apart, beside the directory (never inside it, so the directory can be shared alone):
``<index>.key`` (the secret, ``keys.py``) and, unless the index was built with external
ids, ``<index>.ids.json`` (the id of each document number, ``ids.py``).

Files open with ``numpy.memmap`` in O(1) and a lookup decodes only the buckets and rows
it visits. The manifest records each array's length, byte size and SHA-256, and the SHA-256 of the ids (``doc_ids.ids_sha256``); its canonical form (``canonical_bytes``: every
field but ``mac``, sorted keys, no whitespace, ASCII) carries a keyed BLAKE2b MAC under a
subkey of the index secret (``hashing.manifest_mac``). So a reader that holds the key
detects any edit of the manifest (the MAC), any truncation (sizes), and any change to an
array or to the id mapping (checksums, when verifying). Opening checks, in order: the
format and version, the table's shape, the key, the MAC, and only then uses a field,
read once into a ``manifest.IndexManifest``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...errors import IndexFormatError
from ..readings import READING_VERSION, READINGS
from ..search_form import table_version
from .packing import flag_words
from .hashing import ForwardCipher, mac_matches, manifest_mac

FORMAT_NAME = "spacy-delink-index"
FORMAT_VERSION = 8
#: The format of an index without deltas: what every build and compaction writes.
BASE_FORMAT_VERSION = 7
MANIFEST = "manifest.json"
DOC_ID_DIGESTS = "doc_ids.digests"
GAP_VOCABULARY = "gap.vocabulary"
GAP_ROWS = "gap.rows"
GAP_OFFSETS = "gap.offsets"
#: The gap store's arrays (``gapstore.py``), in an index that holds the gap reading (SPEC §9).
GAP_ARRAYS = (GAP_VOCABULARY, GAP_ROWS, GAP_OFFSETS)
FORWARD_ROWS = "forward.rows"
FORWARD_OFFSETS = "forward.offsets"
#: How ``forward.rows`` is sealed: the forward store's version.
FORWARD_CIPHER = ForwardCipher.NAME
#: The lowest df of each class of frequent rows whose postings a shard-level file codes
#: apart (``lookup.PostingClasses``): a few classes a factor 4 apart take the postings of
#: the full scale corpus from 3.6 to 3.0 bytes per token (a factor 16: 2 MB more).
POSTING_CLASSES = (16, 64, 256, 1024, 4096)
#: The coded parts of a shard-level file, in file order: Elias-Fano sequences, then the
#: df-1 rows' documents packed (``PACKED_PARTS``).
CODED_PARTS = ("keys", "postings", *(f"{kind}-{floor}" for floor in POSTING_CLASSES for kind in ("rows", "postings")), "singles")
PACKED_PARTS = ("singles",)
#: ... and of a delta's level file.
DELTA_PARTS = ("keys", "postings", "additions")
_DELTA_FIELDS = ("first_document", "documents", "tokens", "forward_bits")
LAYOUT_FIELDS = ("count", "low_bits", "buckets", "sample_shift")
PACKED_FIELDS = ("count", "width")
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


def reading_entries(readings: Sequence[str], tokens: dict[str, int], levels: int) -> dict[str, dict[str, Any]]:
    """The manifest's ``readings``: each reading the index holds, its tokens, and for the
    search reading the version of its search form (Unicode and UTS #39 data), which a
    query must share, the version of its tokens and the levels stored (``level_count``)."""
    entries: dict[str, dict[str, Any]] = {}
    for reading in readings:
        counted = "search" if reading == "gap" else reading  # the gap reading reads the search reading's tokens
        entries[reading] = {"tokens": int(tokens.get(counted, 0)), "version": READING_VERSION, "levels": levels}
        if reading == "search":
            entries[reading]["form"] = table_version()
    return entries


def level_count(manifest: dict[str, Any]) -> int:
    """The levels an (already shape-checked) manifest's index stores: max_n, or with the search
    reading up to max_n + max_n_chars (``LinkageRules.levels``) when the collection holds
    longer n-grams (text written without spaces). A longer n-gram is in no document."""
    return max(int(entry.get("levels", manifest["rules"]["max_n"])) for entry in manifest_readings(manifest).values())


def manifest_readings(manifest: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The readings an (authenticated) manifest holds; an index built before §8 holds the exact one."""
    return manifest.get("readings") or {"exact": {"tokens": manifest["tokens"]}}


def _check_readings(manifest_path: Path, manifest: dict[str, Any]) -> None:
    readings = manifest.get("readings")
    if readings is None:
        return
    if not isinstance(manifest.get("twins", False), bool) or (manifest.get("twins") and not {"exact", "search"} <= set(readings)):
        raise IndexFormatError(f"{manifest_path}: field 'twins' is malformed; rebuild the index with `delink index`")
    if not (
        isinstance(readings, dict) and readings and set(readings) <= set(READINGS)
        and all(isinstance(v, dict) and _natural(v.get("tokens")) for v in readings.values())
        and ("search" not in readings or isinstance(readings["search"].get("form"), str))
    ):
        raise IndexFormatError(f"{manifest_path}: field 'readings' is malformed; rebuild the index with `delink index`")
    if "gap" in readings and ("search" not in readings or not isinstance(manifest.get("gap"), dict)):
        raise IndexFormatError(f"{manifest_path}: field 'readings' names the gap reading without its store; rebuild the index with `delink index`")
    if "search" in readings and readings["search"].get("version") != READING_VERSION:
        raise IndexFormatError(
            f"index {manifest_path.parent} holds an older search reading (version {readings['search'].get('version', 1)}, this "
            f"spacy-delink reads version {READING_VERSION}: phrases across paragraph ends, one token per character of "
            "Chinese, Japanese, Korean, Thai, Lao, Khmer and Myanmar, docs/linkage-rules.md §8); rebuild it with "
            f"`delink index <corpus> -o {manifest_path.parent} --overwrite`"
        )
    for name, entry in readings.items():
        if "version" not in entry and "levels" not in entry:
            continue  # an exact reading built before version 2: it reads whole runs (``CorpusIndex.splits_scripts``)
        max_n_chars, levels = manifest["rules"].get("max_n_chars"), entry.get("levels")
        if not (
            entry.get("version") == READING_VERSION and isinstance(max_n_chars, int) and not isinstance(max_n_chars, bool)
            and max_n_chars >= 1 and isinstance(levels, int) and not isinstance(levels, bool) and 1 <= levels <= 64
        ):
            raise IndexFormatError(
                f"{manifest_path}: readings.{name} (version, levels) or rules.max_n_chars is missing or malformed; "
                "rebuild the index with `delink index`"
            )


def shard_file(shard: int, level: int) -> str:
    """The file of one shard's stored n-grams of length ``level``."""
    return f"shard-{shard:04d}.level-{level}.ef"


def shard_of(keys: np.ndarray, shard_bits: int) -> np.ndarray:
    """The shard of each key: its top ``shard_bits`` bits."""
    if shard_bits == 0:
        return np.zeros(len(keys), dtype=np.int64)
    return (keys >> np.uint64(64 - shard_bits)).astype(np.int64)


def frequent_file(shard: int, level: int) -> str:
    """One bit per row of ``shard_file(shard, level)``: whether that n-gram's df is at least 2.

    At k = 2 this bit is all a lookup needs beyond the key's row, so it reads one word
    instead of searching the postings for the row's bounds.
    """
    return f"shard-{shard:04d}.level-{level}.frequent"


def twin_file(shard: int, level: int) -> str:
    """One bit per row of ``shard_file(shard, level)``: whether it also answers for its search-reading twin.

    Written by builds that hold both readings (not updatable ones): a search n-gram whose
    documents are its exact twin's is not stored again (``ngram_keys.shared_twins``).
    """
    return f"shard-{shard:04d}.level-{level}.twin"


def frequent_words(df: np.ndarray) -> np.ndarray:
    """The ``frequent_file`` words for rows with these dfs: bit ``r % 64`` of word ``r // 64``,
    then the bits' rank directory (``packing.flag_words``)."""
    return flag_words(np.asarray(df) >= 2)


def part_fields(part: str) -> tuple[str, ...]:
    """The manifest fields of one coded part's layout."""
    return PACKED_FIELDS if part in PACKED_PARTS else LAYOUT_FIELDS


def array_names(level_total: int, shard_bits: int, twins: bool = False) -> list[str]:
    """Every array an index of these dimensions lists, id digests first."""
    levels = [(s, n) for n in range(1, level_total + 1) for s in range(1 << shard_bits)]
    return [
        DOC_ID_DIGESTS, *(shard_file(s, n) for s, n in levels), *(frequent_file(s, n) for s, n in levels),
        *(twin_file(s, n) for s, n in levels if twins),
    ]


def delta_folder(number: int) -> str:
    """The folder of the ``number``-th delta (from 1) inside the index directory."""
    return f"delta-{number:04d}"


def delta_level_file(folder: str, level: int) -> str:
    return f"{folder}/level-{level}.ef"


def delta_arrays(folder: str, level_total: int) -> list[str]:
    """Every array one delta lists."""
    return [f"{folder}/{DOC_ID_DIGESTS}", f"{folder}/{FORWARD_ROWS}", f"{folder}/{FORWARD_OFFSETS}",
            *(delta_level_file(folder, n) for n in range(1, level_total + 1))]


def coded_parts(name: str) -> tuple[str, ...]:
    """The Elias-Fano sequences an array of the table holds, in file order (none: a plain array)."""
    if name.endswith(".ef"):
        return DELTA_PARTS if "/" in name else CODED_PARTS
    return ()


def required_arrays(manifest: dict[str, Any]) -> list[str]:
    """Every array an (already shape-checked) manifest must list."""
    names = array_names(level_count(manifest), manifest["shard_bits"], manifest.get("twins") is True)
    if manifest.get("forward") is not None:
        names += [FORWARD_ROWS, FORWARD_OFFSETS]
    if "gap" in manifest_readings(manifest):
        names += [manifest["gap"].get("folder", "") + name for name in GAP_ARRAYS]
    for delta in manifest.get("deltas", []):
        names += delta_arrays(delta["name"], level_count(manifest))
    return names


def default_ids_path(index_dir: str | Path) -> Path:
    """``<index>.ids.json`` beside the index directory, like its key."""
    index_dir = Path(index_dir)
    return index_dir.with_name(index_dir.name + ".ids.json")


def sidecar_of_format(path: Path, format_name: str, manifest: str = "manifest.json") -> bool:
    """Whether ``path`` holds a side index (embeddings, BM25 statistics) of ``format_name``: one a rebuild may replace."""
    try:
        return json.loads((path / manifest).read_text(encoding="utf-8")).get("format") == format_name
    except (OSError, ValueError, AttributeError):
        return False


def _read_json(manifest_path: Path, rebuild: str) -> Any:
    """The JSON in ``manifest_path``, or a one-line ``IndexFormatError`` that ends with ``rebuild``."""
    try:
        return json.loads(manifest_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise IndexFormatError(f"{manifest_path} is not valid JSON ({err}); {rebuild}") from None


def read_sidecar_manifest(path: Path, format_name: str, kind: str, build: str, rebuild: str, manifest: str = "manifest.json") -> dict[str, Any]:
    """A side index's manifest as a dict of ``format_name``, or a one-line ``IndexFormatError``
    (missing: ``build`` says how to make one; unreadable: ``rebuild``); the caller checks the rest."""
    manifest_path = path / manifest
    if not manifest_path.exists():
        raise IndexFormatError(f"no {kind} index at {path}; {build}")
    data = _read_json(manifest_path, rebuild)
    if not isinstance(data, dict) or data.get("format") != format_name:
        raise IndexFormatError(f"{path} is not a spacy-delink {kind} index")
    return data


def canonical_bytes(manifest: dict[str, Any]) -> bytes:
    """The bytes the MAC covers: every field but ``mac``, in one deterministic JSON form.

    The fields go through JSON once first, so a dict with integer keys (levels: 1, 2, ..., 10)
    is sorted as the strings it is read back as ("1", "10", "2"), at the build as when opened.
    """
    fields = json.loads(json.dumps({name: value for name, value in manifest.items() if name != "mac"}, allow_nan=False))
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
    manifest = _read_json(manifest_path, "rebuild the index with `delink index`")
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
    if version < BASE_FORMAT_VERSION:
        raise IndexFormatError(
            f"{path} uses index format {version} of an older spacy-delink (format {BASE_FORMAT_VERSION} adds the "
            "search reading's keys, docs/linkage-rules.md §8); rebuild it with `delink index ... --overwrite`"
        )
    for name, kind in _FIELDS.items():
        if not isinstance(manifest.get(name), kind) or isinstance(manifest.get(name), bool):
            raise IndexFormatError(f"{manifest_path}: field {name!r} is missing or malformed; rebuild the index with `delink index`")
    max_n = manifest["rules"].get("max_n")
    if not isinstance(max_n, int) or max_n < 1:
        raise IndexFormatError(f"{manifest_path}: rules.max_n is missing or malformed; rebuild the index with `delink index`")
    if not 0 <= manifest["shard_bits"] <= 16:
        raise IndexFormatError(f"{manifest_path}: shard_bits is out of range; rebuild the index with `delink index`")
    _check_updates(manifest_path, manifest, version)
    _check_readings(manifest_path, manifest)
    for name in required_arrays(manifest):
        spec = manifest["arrays"].get(name)
        if not isinstance(spec, dict):
            raise IndexFormatError(f"index {path}: manifest lacks {name}; rebuild it with `delink index`")
        for field, kind in _ARRAY_FIELDS.items():
            if not isinstance(spec.get(field), kind):
                raise IndexFormatError(f"index {path}: manifest entry {name} lacks {field!r}; rebuild it with `delink index`")
        for part in coded_parts(name):
            layout = spec.get(part)
            if not isinstance(layout, dict) or not all(
                isinstance(layout.get(f), int) and not isinstance(layout.get(f), bool) and layout[f] >= 0 for f in part_fields(part)
            ):
                raise IndexFormatError(f"index {path}: manifest entry {name} lacks its {part} layout; rebuild it with `delink index`")
    return manifest


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _nonce(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{32}", value) is not None


def _check_updates(manifest_path: Path, manifest: dict[str, Any], version: int) -> None:
    """The shape of the forward store's and the deltas' fields (``FORMAT_VERSION`` iff there are deltas)."""
    rebuild = "rebuild the index with `delink index`"
    forward = manifest.get("forward")
    if forward is not None and not (
        isinstance(forward, dict) and _natural(forward.get("bits")) and forward["bits"] >= 2 and _nonce(forward.get("nonce"))
        and (_natural(forward.get("room_bits", 1)) and 1 <= forward.get("room_bits", 1) < forward["bits"])
    ):
        raise IndexFormatError(f"{manifest_path}: field 'forward' is malformed; {rebuild}")
    if forward is not None and forward.get("cipher") != FORWARD_CIPHER:
        index = manifest_path.parent
        if "cipher" not in forward:
            raise IndexFormatError(
                f"index {index} was built with the old forward-store cipher (a BLAKE2b keystream, now AES-256-GCM-SIV); "
                f"rebuild it with `delink index <corpus> -o {index} --updatable --overwrite`"
            )
        raise IndexFormatError(
            f"index {index} seals its forward store with {forward['cipher']!r}, unknown to this spacy-delink; upgrade spacy-delink"
        )
    deltas = manifest.get("deltas", [])
    if not isinstance(deltas, list) or (version == BASE_FORMAT_VERSION) != (not deltas):
        raise IndexFormatError(f"{manifest_path}: field 'deltas' does not fit format {version}; {rebuild}")
    for number, delta in enumerate(deltas, start=1):
        if not (
            isinstance(delta, dict) and delta.get("name") == delta_folder(number) and all(_natural(delta.get(f)) for f in _DELTA_FIELDS)
            and _nonce(delta.get("forward_nonce"))
        ):
            raise IndexFormatError(f"{manifest_path}: delta {number} is malformed; {rebuild}")
    gap = manifest.get("gap")
    if gap is not None and not (
        isinstance(gap, dict) and _natural(gap.get("bits")) and gap["bits"] >= 2 and _nonce(gap.get("nonce"))
        and _natural(gap.get("tokens")) and gap.get("cipher") == FORWARD_CIPHER
        and gap.get("folder", "") in ("", *(f"{delta_folder(n)}/" for n in range(1, len(manifest.get("deltas", [])) + 1)))
    ):
        raise IndexFormatError(f"{manifest_path}: field 'gap' is malformed; {rebuild}")
    if deltas and forward is None:
        raise IndexFormatError(f"{manifest_path}: deltas without a forward store; {rebuild}")


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
