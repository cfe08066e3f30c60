"""The id mapping: each document number's id, kept beside the index like its key.

The index itself holds only keyed digests of the ids (``doc_ids.digests``). The mapping
is a JSON object, owner-only, with one list of ids per index key id::

    {"format": "spacy-delink-ids", "mappings": {"<key id>": ["case-001", 17, ...]}}

so it can be withheld from whoever gets the index and its key (e.g. to run assessments),
and several indexes may share one file (``store.py``). The manifest records the SHA-256
of each index's list (``ids_digest``), so a mapping from another build is refused.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ...errors import IndexFormatError
from .store import KeyedStore


def ids_digest(ids: list[Any]) -> str:
    """SHA-256 of the ids' canonical JSON: what the manifest records and readers check."""
    return hashlib.sha256(json.dumps(ids, ensure_ascii=False, separators=(",", ":")).encode("utf-8")).hexdigest()


class IdMapping(KeyedStore):
    def __init__(self, path: Path) -> None:
        super().__init__(path, "spacy-delink-ids", "mappings", "id mapping", "whoever reads it learns every document's id")

    def ids(self, index: Path, index_key_id: str, expected_digest: str, documents: int, strict: bool | None = None) -> list[Any]:
        """The ids of the index with ``index_key_id``, checked against its manifest's digest.

        Only the first ``documents`` count: ``delink index --update`` appends the new ids
        before it commits the manifest that counts them (``update.py``), so an update killed
        in between leaves ids the index in place ignores. The file's owner and mode are
        checked first, as the key file's are (``store.py``).
        """
        if not self.path.is_file():
            raise IndexFormatError(
                f"id mapping {self.path} of index {index} not found; pass the file written with the index "
                "(ids_file=..., kept beside it like the key)"
            )
        self.check_access(strict)
        ids = self.read().get(index_key_id)
        if not isinstance(ids, list):
            raise IndexFormatError(
                f"id mapping {self.path} holds no ids for index {index} (key id {index_key_id}); pass the one written with it"
            )
        ids = ids[:documents]
        if ids_digest(ids) != expected_digest:
            raise IndexFormatError(f"id mapping {self.path}: the ids of index {index} were edited; rebuild the index")
        return ids
