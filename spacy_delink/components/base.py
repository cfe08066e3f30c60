"""What every index-backed spaCy component shares: lazy index opening and serialization.

The index is opened on first use (or in ``initialize``), never at construction, so
``spacy.load`` stays cheap and forked ``n_process`` workers map it themselves. Components
naming the same index and key share one open :class:`CorpusIndex` per process.

Serialization (``nlp.to_disk``): by default the pipeline *references* the index by its
absolute path; with ``copy_index=True`` the index directory is copied into the
component's folder so the pipeline travels with it. The secret key is never copied: its
absolute path is recorded, and ``$DELINK_KEY_FILE`` overrides it when loading elsewhere.
"""
from __future__ import annotations

import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import srsly
from spacy.language import Language
from spacy.tokens import Doc

from ..linkage.ngrams import check_k
from ..errors import InputError
from .extensions import register_extensions
from ..linkage.index import CorpusIndex, open_index
from ..linkage.index.hashing import KEY_ENV

COPIED_INDEX_DIR = "index"


class IndexedComponent(ABC):
    """Base for components that query a :class:`CorpusIndex` at threshold ``k``."""

    def __init__(
        self,
        nlp: Language,
        name: str,
        index: str,
        k: int,
        key_file: str | None,
        verify: bool,
        copy_index: bool,
    ) -> None:
        register_extensions()
        self.name = name
        self.index_path = index
        self.k = check_k(k)
        self.key_file = key_file
        self.verify = verify
        self.copy_index = copy_index
        self._index: CorpusIndex | None = None

    @property
    def index(self) -> CorpusIndex:
        if self._index is None:
            if not self.index_path:
                raise InputError(
                    f"component {self.name!r} has no index; pass config={{'index': 'path/to/index'}} "
                    "(build one with `delink index`)"
                )
            self._index = open_index(self.index_path, self.key_file, self.verify)
        return self._index

    def initialize(self, get_examples: Callable[[], Iterable[Any]] | None = None, *, nlp: Language | None = None) -> None:
        """Open the index now, so a bad path or key fails at ``nlp.initialize()``."""
        _ = self.index

    @abstractmethod
    def __call__(self, doc: Doc) -> Doc:
        """Annotate (or rewrite) one document."""

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        for doc in stream:
            yield self(doc)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_index"] = None  # memory maps do not pickle; workers reopen lazily
        return state

    def _settings(self) -> dict[str, Any]:
        """Component-specific settings to serialize besides the index reference."""
        return {"k": self.k}

    def _load_settings(self, settings: dict[str, Any]) -> None:
        self.k = check_k(settings["k"])

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        index = self.index
        config = {
            "index": None if self.copy_index else str(index.path.resolve()),
            "copied": self.copy_index,
            "key_file": str(index.key_path.resolve()),
            "verify": self.verify,
            **self._settings(),
        }
        if self.copy_index:
            index.copy_to(path / COPIED_INDEX_DIR)
        srsly.write_json(path / "cfg.json", config)

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> "IndexedComponent":
        path = Path(path)
        config = srsly.read_json(path / "cfg.json")
        self.index_path = str(path / COPIED_INDEX_DIR) if config["copied"] else config["index"]
        self.key_file = os.environ.get(KEY_ENV) or config["key_file"]
        self.verify = config["verify"]
        self.copy_index = config["copied"]
        self._load_settings(config)
        self._index = None
        return self
