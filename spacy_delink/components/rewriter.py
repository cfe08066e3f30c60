"""The ``delink_rewriter`` component: the rewrite loop (``rewrite.loop``) on spaCy Docs."""
from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy_llm.pipeline.llm import LLMWrapper
from spacy_llm.ty import validate_type_consistency

from ..cachedir import cache_dir
from ..errors import InputError
from ..linkage.attack import Detection, detect
from ..linkage.strategies import check_strategy
from ..linkage.combinations import check_arity
from ..llm.cache import AnsweredCache
from ..llm.models.generalize.model import GeneralizeModel
from ..llm.models.mask import MaskModel
from ..llm.tasks.rewrite.fidelity import word_document_frequencies
from ..llm.tasks.rewrite.task import RewriteTask
from ..rewrite.loop import RewriteLoop, RewriteResult
from ..rewrite.masking import GRANULARITIES
from ..retrieval.defence import RetrievalGuard, check_retrieval_rank
from .base import IndexedComponent
from .extensions import carry_over, record_anonymity
from .settings import RewriterSettings

RISK_BEFORE_KEY = "delink.linkage_risk_before"
#: ``doc.user_data`` key of the source's id in the collection, which ``retrieval`` needs.
SOURCE_ID_KEY = "delink.source_id"
#: ``doc.user_data`` key of the source's BM25 rank for the rewritten text (with ``retrieval``).
RETRIEVAL_RANK_KEY = "delink.retrieval_rank"
FACTORY = "delink_rewriter"


def resolve_threads(threads: int) -> int:
    """The documents masked at once: ``threads``, or with 0 one per CPU this process may run on."""
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 0:
        raise InputError(f"threads must be an integer >= 0 (0 = one per CPU), got {threads!r}")
    if threads:
        return threads
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class DelinkRewriter(IndexedComponent):
    """Rewrites documents with an LLM (or masks) until they are protected at (k, arity)."""

    def __init__(
        self,
        nlp: Language,
        name: str,
        *,
        settings: RewriterSettings,
        task: RewriteTask,
        model: Callable[[Iterable[Iterable[str]]], Iterable[Iterable[str]]],
    ) -> None:
        super().__init__(nlp, name, settings=settings)
        #: Ranked retrieval (docs/evaluate.md): 0 off, else mask until each text's source ranks >= this under BM25.
        self.retrieval = check_retrieval_rank(settings.retrieval)
        self._guard: Optional[RetrievalGuard] = None
        self._guard_index: Any = None
        self.keep_source = settings.keep_source
        self.flagging = check_strategy(settings.flagging)
        self.threads = resolve_threads(settings.threads)
        validate_type_consistency(task, model)
        self.task = task
        self.model = model
        self.arity = check_arity(settings.arity, allow_single=True)
        if not isinstance(settings.max_passes, int) or settings.max_passes < 0:
            raise InputError(f"max_passes must be an integer >= 0 (0 = mask only), got {settings.max_passes!r}")
        if settings.granularity not in GRANULARITIES:
            raise InputError(f"granularity must be 'token' or 'span', got {settings.granularity!r}")
        if not isinstance(settings.cache_batch_size, int) or settings.cache_batch_size < 1:
            raise InputError(f"cache_batch_size must be an integer >= 1, got {settings.cache_batch_size!r}")
        self.max_passes = settings.max_passes
        self.granularity = settings.granularity
        self.mask = str(settings.mask)
        self.cache_dir = settings.cache_dir
        self.cache_batch_size = settings.cache_batch_size
        self._mask_checked = False
        self._llm: Optional[LLMWrapper] = None  # built on the first LLM pass: its cache is tied to the prompt, which names the mask
        self.task.use_mask(self.mask)
        if settings.require_llm and not self.uses_llm:
            raise InputError(
                "require_llm needs an LLM: set model to spacy_delink.OpenAICompatible.v1 or LlamaCpp.v1 (e.g. `--config openai`) "
                "and max_passes >= 1; the Mask model rewrites nothing"
            )
        self.require_llm = settings.require_llm
        self.vocab = nlp.vocab
        self.tokenizer = nlp.tokenizer
        self.stats: Counter[str] = Counter()

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_llm"] = None  # rebuilt (with its cache) in each worker
        state["_guard"] = state["_guard_index"] = None  # reopened beside the worker's index
        return state

    # -- the loop -------------------------------------------------------------------------

    def initialize(self, get_examples: Callable[[], Iterable[Any]] | None = None, *, nlp: Language | None = None) -> None:
        """Open the index, and let a model that reads a file check it (``LlamaCpp.v1``'s GGUF), so a bad path fails now."""
        super().initialize(get_examples, nlp=nlp)
        if self.retrieval:
            self.retrieval_guard()  # a missing or edited <index>.retrieval fails now, before any input is read
        check = getattr(self.model, "check", None)
        if self.uses_llm and callable(check):
            check()

    @property
    def uses_llm(self) -> bool:
        model = self.model.then if isinstance(self.model, GeneralizeModel) else self.model
        return not isinstance(model, MaskModel) and self.max_passes > 0

    def _check_mask(self) -> None:
        """A mask that the index tokenizes would not break n-grams: refuse it."""
        if not self._mask_checked:
            if any(len(self.index.tokenize(self.mask, reading)[0]) for reading in self.readings):
                raise InputError(
                    f"mask {self.mask!r} yields tokens under the index's rules, so it would not break n-grams; "
                    "use one matching the index's mask patterns, e.g. [REDACTED]"
                )
            self._mask_checked = True

    def _detect(self, text: str, carried: Sequence[int] = ()) -> Detection:
        """The detection the loop works from; ``carried``: sources found on the text's earlier versions (SPEC §9)."""
        return detect(self.index, text, self.k, self.arity, flagging=self.flagging, readings=self.readings, carried=carried)

    def still_protected(self, text: str, source_id: Any = None) -> bool:
        """SPEC §7 (every reading checked) for ``text`` under this component's (k, arity) and index now;
        with ``retrieval``, also its source (``source_id``) ranked at least that low under BM25."""
        protected = detect(
            self.index, text, self.k, self.arity, flagging=self.flagging, exact_frequent=False, readings=self.readings
        ).protected
        if not protected or not self.retrieval:
            return protected
        guard = self.retrieval_guard()
        return guard.rank_of(text, self.source_numbers([source_id])[0]) >= guard.rank

    def retrieval_guard(self) -> RetrievalGuard:
        """The BM25 statistics beside the index (``<index>.retrieval``), opened on first use and again for a reopened index."""
        from ..retrieval.store import open_retrieval_index, search_tokens

        index = self.index
        if self._guard is None or self._guard_index is not index:
            self._guard = RetrievalGuard(open_retrieval_index(index), lambda text: search_tokens(index, text), self.retrieval)
            self._guard_index = index
        return self._guard

    def source_numbers(self, source_ids: Sequence[Any]) -> list[int]:
        """Each source id's document number in the index; an unknown or missing one is refused (ranked retrieval needs it)."""
        numbers = []
        for source_id in source_ids:
            number = None if source_id is None else self.index.document_number(source_id)
            if number is None:
                raise InputError(
                    f"{self.name}: retrieval={self.retrieval} needs each text's source in the collection, and "
                    f"{source_id!r} is not an id of index {self.index.path}; give the source's id (the record's id, or "
                    "doc.user_data['delink.source_id']) or set retrieval to 0"
                )
            numbers.append(number)
        return numbers

    def cache_path(self) -> Optional[Path]:
        """Where spacy-llm caches answers: ``auto`` = one folder per prompt template and model."""
        if not self.cache_dir:
            return None
        if self.cache_dir != "auto":
            return Path(self.cache_dir)
        identity = [self.task.prompt_template, type(self.model).__name__, getattr(self.model, "url", ""), getattr(self.model, "name", "")]
        return cache_dir("llm") / hashlib.sha256(json.dumps(identity).encode("utf-8")).hexdigest()[:16]

    def llm(self) -> LLMWrapper:
        """spacy-llm's own component around our task and model (built on first LLM pass)."""
        if self._llm is None:
            path = self.cache_path()
            cache = AnsweredCache(path=path, batch_size=self.cache_batch_size, max_batches_in_mem=4)
            try:
                self._llm = LLMWrapper(
                    name=f"{self.name}.llm", vocab=self.vocab, task=self.task, model=self.model, cache=cache, save_io=False
                )
            except ValueError as err:  # BatchCache refuses a folder filled with another prompt template
                raise InputError(f"cache_dir {path}: {str(err).rstrip('.')}; delete it or set another cache_dir") from None
        return self._llm

    def rewrite_texts(self, texts: list[str], source_ids: Optional[Sequence[Any]] = None) -> list[RewriteResult]:
        """Protect a batch of texts (see ``rewrite.loop``); ``source_ids``: each one's source, which ``retrieval`` needs."""
        self._check_mask()
        ids = list(source_ids) if source_ids is not None else [None] * len(texts)
        sources: list[Optional[int]]
        if self.retrieval:
            sources = list(self.source_numbers(ids))
        else:  # the gap reading reads a source the collection holds; an id it does not hold says nothing
            sources = [None if source_id is None else self.index.document_number(source_id) for source_id in ids]
        self.task.use_document_frequencies(partial(word_document_frequencies, self.index))
        loop = RewriteLoop(
            name=self.name,
            detect=self._detect,
            task=self.task,
            vocab=self.vocab,
            llm=self.llm if self.uses_llm else None,
            max_passes=self.max_passes,
            mask=self.mask,
            granularity=self.granularity,
            stats=self.stats,
            require_llm=self.require_llm,
            failures=self.failures,
            threads=self.threads,
            retrieval=self.retrieval_guard() if self.retrieval else None,
            generalizer=getattr(self.model, "generalizer", None),
        )
        return loop.run(texts, sources)

    def _protected_here(self, result: RewriteResult) -> bool:
        """SPEC §7 passed on exactly ``result.text`` under this component's (k, arity, readings) and index (``_detect``)."""
        detection = result.detection
        return (
            detection.text == result.text and detection.k == self.k and detection.arity == self.arity
            and detection.readings == self.readings and detection.index is self.index and detection.protected
            and (not self.retrieval or (result.retrieval_rank is not None and result.retrieval_rank >= self.retrieval))
        )

    def published_edits(self, edits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The edits as they may leave the component: each one's ``original`` (a source phrase) only with ``keep_source``."""
        return edits if self.keep_source else [{k: v for k, v in e.items() if k != "original"} for e in edits]

    def _to_doc(self, source: Doc, result: RewriteResult) -> Doc:
        """A new Doc on the rewritten text, keeping what ``extensions.carry_over`` says of ``source``.

        The input text travels (``doc._.delink_source``, each edit's ``original``) only with
        ``keep_source``: it holds the very phrases that made it linkable, so a Doc or DocBin
        that kept it would not be protected at all.
        """
        doc = self.tokenizer(result.text)
        if doc.text != result.text:
            raise InputError(
                f"{self.name}: the pipeline's tokenizer changed the text it was given, and the rewriter vouches only "
                "for the exact text it checked; use a tokenizer whose Doc.text equals its input"
            )
        carry_over(source, doc)
        doc._.delink_source = result.source if self.keep_source else None
        doc._.delink_edits = self.published_edits(result.edits)
        doc._.delink_passes = result.passes
        doc._.delink_protected = self._protected_here(result)
        record_anonymity(doc, self.name, result.detection.anonymity)
        doc.user_data[RISK_BEFORE_KEY] = result.linkage_risk_before
        if result.retrieval_rank is not None:
            doc.user_data[RETRIEVAL_RANK_KEY] = result.retrieval_rank
        return doc

    def __call__(self, doc: Doc) -> Doc:
        return self._to_doc(doc, self.rewrite_texts([self.doc_text(doc)], [doc.user_data.get(SOURCE_ID_KEY)])[0])

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 32) -> Iterator[Doc]:
        """Batches share LLM calls; the model runs their requests concurrently."""
        for batch in spacy.util.minibatch(stream, batch_size):
            results = self.rewrite_texts([self.doc_text(doc) for doc in batch], [doc.user_data.get(SOURCE_ID_KEY) for doc in batch])
            yield from (self._to_doc(doc, result) for doc, result in zip(batch, results))

    def llm_calls(self) -> int:
        """Prompts the model answered (cache hits excluded) when it counts them."""
        stats = getattr(self.model, "stats", None)
        return int(stats.get("calls", 0)) if stats is not None else 0

    def failures(self) -> Counter[str]:
        """Failed model calls by kind, plus rejected rewrites by reason."""
        model_stats = getattr(self.model, "stats", None) or {}
        counts: Counter[str] = Counter({k: v for k, v in model_stats.items() if k.startswith("failed_") and v})
        counts.update({k: v for k, v in self.stats.items() if k.startswith("rejected_") and v})
        return counts
