"""What every index-backed spaCy component shares: lazy index opening, serialization, scoring.

The index is opened on first use (or in ``initialize``), never at construction, so
``spacy.load`` stays cheap and forked ``n_process`` workers map it themselves. Components
naming the same index and key share one open :class:`CorpusIndex` per process, and open it
again when it changes on disk (``delink index --update``, ``delink compact``, a rebuild).

Settings live in the config only (``index``, ``k``, ``key_file``, ``copy_index``, ...):
``nlp.to_disk`` writes ``config.cfg`` and each component writes *data* only, which is
nothing unless ``copy_index = true``: then the index directory is copied into the
component's folder and ``from_disk`` reads that copy, so the pipeline travels with it.
A relative ``index`` or ``key_file`` in a saved pipeline's config is read from the
pipeline's folder (wherever it was loaded from), so ``spacy.load`` works from any working
directory; in a pipeline built from a config in code, from the working directory. The two
readings meet in ``to_disk``: a relative path is saved in ``config.cfg`` as the path from the
pipeline's folder to what it names now, so the saved pipeline finds the very index (and key)
it was built with, from anywhere.
``to_bytes`` carries no data; a component with ``copy_index = true`` refuses it, because
an index is a directory of memory-mapped arrays that bytes cannot stand in for. The
secret key is never serialized: ``key_file`` (a setting) names it, else ``$DELINK_KEY_FILE``,
else ``<index>.key`` beside the configured index; on load ``$DELINK_KEY_FILE`` takes
precedence, for a pipeline moved to a machine where the key lives elsewhere.
"""
from __future__ import annotations

import os
import shutil
import warnings
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from spacy.language import Language
from spacy.tokens import Doc
from spacy.util import from_bytes as read_bytes
from spacy.util import from_disk as read_parts
from spacy.util import load_config
from spacy.util import to_bytes as write_bytes
from spacy.util import to_disk as write_parts

from ..errors import InputError
from ..linkage.index import CorpusIndex, open_index
from ..linkage.index.keys import KEY_ENV, resolve_key_path
from ..linkage.ngrams import check_k
from ..linkage.readings import check_readings
from .alignment import DocText
from .extensions import register_extensions
from .settings import IndexSettings

if TYPE_CHECKING:
    from spacy.training import Example

#: The component folder's only data: the copied index (``copy_index = true``).
COPIED_INDEX_DIR = "index"


class IndexedComponent(ABC):
    """Base for components that query a :class:`CorpusIndex` at threshold ``k``."""

    def __init__(self, nlp: Language, name: str, *, settings: IndexSettings) -> None:
        register_extensions()
        self.name = name
        self.configured_index = settings.index
        #: The configured index as a path: relative ones read from a loaded pipeline's folder (``_from_pipeline``).
        self.index_location = settings.index
        self.index_path = settings.index  # what is opened: the configured index, or the pipeline's copy
        self.k = check_k(settings.k)
        #: The readings of the rules checked (SPEC §8); the index must hold each of them.
        self.readings = check_readings(settings.readings)
        self.key_file = settings.key_file
        #: ``key_file`` as configured (``key_file`` itself may become ``$DELINK_KEY_FILE`` on load).
        self.configured_key_file = settings.key_file
        self.verify = settings.verify
        self.copy_index = settings.copy_index
        self.scorer = settings.scorer
        #: The folder a saved pipeline was loaded from (``from_disk``), which relative paths are read from.
        self._pipeline: Path | None = None
        self._index: CorpusIndex | None = None
        self.doc_text = DocText()

    @property
    def key_path(self) -> Path:
        """``key_file``, else ``$DELINK_KEY_FILE``, else beside the configured index (a copy has no key)."""
        return resolve_key_path(self.index_location or self.index_path, self.key_file)

    @property
    def index(self) -> CorpusIndex:
        """The index as it is on disk now: opened on first use, and opened again when an update,
        a compaction or a rebuild has replaced it since (``open_index`` compares the manifest
        in place with the one opened), so no answer ever comes from an index that is gone."""
        if self._index is None:
            if not self.index_path:
                raise InputError(
                    f"component {self.name!r} has no index; pass config={{'index': 'path/to/index'}} "
                    "(build one with `delink index`)"
                )
            if not Path(self.index_path).is_dir():
                where = (
                    f"the folder of the loaded pipeline, {self._pipeline}" if self._pipeline is not None
                    else f"the working directory, {Path.cwd()}"
                )
                raise InputError(
                    f"component {self.name!r}: index {self.index_path} not found (a relative path is read from "
                    f"{where}); set components.{self.name}.index in the config "
                    "or save the pipeline with copy_index = true"
                )
        index = open_index(self.index_path, self.key_path, self.verify)
        if index is not self._index:
            index.require_readings(self.readings)
            self._index = index
        return index

    def initialize(self, get_examples: Callable[[], Iterable[Any]] | None = None, *, nlp: Language | None = None) -> None:
        """Open the index now, so a bad path or key fails at ``nlp.initialize()``."""
        _ = self.index

    @abstractmethod
    def __call__(self, doc: Doc) -> Doc:
        """Annotate (or rewrite) one document."""

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 128) -> Iterator[Doc]:
        for doc in stream:
            yield self(doc)

    def score(self, examples: Iterable["Example"], **kwargs: Any) -> dict[str, Any]:
        """``nlp.evaluate`` calls this; the ``scorer`` setting decides what is reported."""
        return self.scorer(examples, **kwargs) if self.scorer is not None else {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_index"] = None  # memory maps do not pickle; workers reopen lazily
        return state

    # -- serialization: data only ----------------------------------------------------------

    def _copy_index(self, target: Path) -> None:
        """Copy the index into ``target`` via a sibling temporary folder (never over its own source)."""
        source = self.index.path.resolve()
        if target.resolve() == source:
            return
        staging = target.with_name(target.name + ".tmp")
        self.index.copy_to(staging)
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)

    def _use_copy(self, copied: Path) -> None:
        if not copied.is_dir():
            raise InputError(
                f"{copied.parent}: copy_index = true but the pipeline holds no copied index ({copied}); save it "
                f"again with copy_index = true, or set components.{self.name}.copy_index = false to use the "
                "configured index"
            )
        self.index_path = str(copied)

    def _from_pipeline(self, value: str | None) -> str | None:
        """A configured path as a loaded pipeline reads it: a relative one from the pipeline's folder."""
        if not value or self._pipeline is None or Path(value).is_absolute():
            return value
        return str(self._pipeline / value)

    def _loaded(self) -> None:
        """After loading: reopen lazily; ``$DELINK_KEY_FILE`` wins over the configured key path."""
        self._index = None
        self.key_file = os.environ.get(KEY_ENV) or self._from_pipeline(self.key_file)

    def _location(self, value: str) -> Path:
        """Where a configured relative path points now: from the loaded pipeline's folder, else the working directory."""
        return (self._pipeline or Path.cwd()) / value

    def _portable_settings(self, pipeline: Path) -> dict[str, str]:
        """The relative ``index`` and ``key_file`` as the pipeline saved to ``pipeline`` must hold them to name
        the same files: paths from its folder (absolute ones, and ones that already do, are left as they are).
        With ``copy_index`` the copy is read, but the key is still found beside the configured index."""
        settings = {}
        for setting, value in (("index", self.configured_index), ("key_file", self.configured_key_file)):
            if not value or Path(value).is_absolute():
                continue
            try:
                saved = os.path.relpath(self._location(value).absolute(), pipeline.absolute())
            except ValueError:  # another drive (Windows): no relative path leads there
                saved = str(self._location(value).absolute())
            if Path(saved) != Path(value):
                settings[setting] = saved
        return settings

    def _store_portable_references(self, pipeline: Path) -> None:
        """Rewrite this component's relative paths in the saved ``config.cfg`` (spaCy writes it before the
        components' folders) so that the pipeline loaded from ``pipeline`` reads the index it was built with.

        A component saved alone (no ``config.cfg`` beside its folder) cannot fix its config: it warns with
        the value to set instead. Saving warns, too, when the index is missing, the one case the loaded
        pipeline will fail on.
        """
        from ..io.files import atomic_write

        settings = self._portable_settings(pipeline)
        config_path = pipeline / "config.cfg"
        if settings and config_path.is_file():
            config = load_config(config_path, interpolate=False)
            section = config.get("components", {}).get(self.name)
            if section is not None:
                section.update(settings)
                with atomic_write(config_path) as handle:
                    handle.write(config.to_str())
                settings = {}
        if "index" in settings:
            warnings.warn(
                f"component {self.name!r}: the saved pipeline {pipeline} will read its relative index "
                f"{self.configured_index!r} from its own folder, where there is none; set components.{self.name}.index "
                f"to {settings['index']!r} (relative to the pipeline) or an absolute path, or save with copy_index = true",
                stacklevel=3,
            )
        if not self.copy_index and self.configured_index and not Path(self.index_location).is_dir():
            warnings.warn(
                f"component {self.name!r}: index {self.index_location} does not exist, so the saved pipeline {pipeline} "
                "will fail on its first document until the index is built there (`delink index`)",
                stacklevel=3,
            )

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        """Write data only (settings are in ``config.cfg``): the index copy with ``copy_index``."""
        serializers: dict[str, Callable[[Path], None]] = {}
        if self.copy_index:
            if not self.index_path:
                raise InputError(
                    f"component {self.name!r}: copy_index = true but no index is configured; set "
                    f"components.{self.name}.index or copy_index = false"
                )
            serializers[COPIED_INDEX_DIR] = self._copy_index
        self._store_portable_references(Path(path).parent)
        write_parts(path, serializers, exclude)

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> "IndexedComponent":
        """Read the index copy when the config says ``copy_index``; everything else comes from the config,
        relative paths from the pipeline's folder (the parent of this component's)."""
        self._pipeline = Path(path).absolute().parent
        self.index_location = self.index_path = self._from_pipeline(self.configured_index) or ""
        readers: dict[str, Callable[[Path], None]] = {COPIED_INDEX_DIR: self._use_copy} if self.copy_index else {}
        read_parts(path, readers, exclude)
        self._loaded()
        return self

    def to_bytes(self, *, exclude: Iterable[str] = ()) -> bytes:
        """No data (the config holds the index reference); refused with ``copy_index``."""
        if self.copy_index:
            raise InputError(
                f"component {self.name!r}: copy_index = true needs nlp.to_disk (an index is a folder of "
                "memory-mapped arrays, not bytes); use to_disk, or set copy_index = false to serialize "
                "the index reference only"
            )
        return write_bytes({}, exclude)

    def from_bytes(self, bytes_data: bytes, *, exclude: Iterable[str] = ()) -> "IndexedComponent":
        read_bytes(bytes_data, {}, exclude)
        self._pipeline = None
        self.index_location = self.index_path = self.configured_index
        self._loaded()
        return self
