"""The on-disk layout of an index directory, shared by the builder and the reader.

An index is a directory of raw little-endian arrays plus ``manifest.json``::

    manifest.json          format name and version, rules, key id, counts, array table
    doc_ids.json           the user's document ids, by document number
    level-<n>.keys         uint64, sorted: keyed hashes of the stored n-grams
    level-<n>.offsets      uint32/uint64, len(keys)+1: posting-list bounds (df = difference)
    level-<n>.postings     uint32: document numbers, sorted within each list

Raw arrays open with ``numpy.memmap`` in O(1) and answer lookups by binary search
without reading the whole file; the manifest records each file's byte length and
xxh3-128 checksum, so truncation is always detected and corruption when verifying.
"""
from __future__ import annotations

FORMAT_NAME = "spacy-delink-index"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DOC_IDS = "doc_ids.json"
ARRAY_KINDS = ("keys", "offsets", "postings")


def array_file(level: int, kind: str) -> str:
    return f"level-{level}.{kind}"
