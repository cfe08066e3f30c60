"""The ``delink_rewriter`` component: rewrite until nothing is linkable, then verify (SPEC §7).

Loop, per batch of documents: detect (n-grams, plus combinations when ``arity`` >= 2)
→ ask the LLM to rephrase every flagged span (one spacy-llm call for the whole batch)
→ detect again, up to ``max_passes``. Whatever is still flagged is then masked, pass
after pass, until the text is protected; the result is checked once more before it is
returned, so an output is never marked protected unless the SPEC says it is.

The mask rule. A mask yields no tokens and breaks every n-gram across it, so masking one
token inside each minimal linkable span breaks every linkable n-gram (each contains a
minimal one) and creates none (the n-grams left are pieces of old ones). The fewest such
tokens is a minimum interval-stabbing problem, solved exactly by the greedy "stab at the
right end of the earliest-ending span"; any token between the last start and that right
end hits the same spans, and the rarest of them is masked. Combinations can reappear
from the shorter frequent pieces a mask leaves, hence the repeated detect-and-mask.

Edits are ``{start, end, original, replacement, pass, by}`` with offsets into the text as
it was *before that pass* (pass 1: the source), so replaying them pass by pass rebuilds
the output.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

import numpy as np
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy_llm.cache import BatchCache
from spacy_llm.pipeline.llm import LLMWrapper
from spacy_llm.ty import validate_type_consistency
from thinc.api import ConfigValidationError
from tqdm import tqdm

from .combinations import Detection, check_arity, detect
from .errors import DelinkError, InputError
from .io import JsonlStats, atomic_write, dumps_jsonl_line, read_jsonl
from .llm.models.mask import MaskModel
from .llm.tasks.rewrite import RESULT_KEY, RewriteTask
from .pipeline import IndexedComponent

logger = logging.getLogger("spacy_delink.rewriter")

GRANULARITIES = ("token", "span")
RISK_BEFORE_KEY = "delink.linkage_risk_before"
FACTORY = "delink_rewriter"
DEFAULT_CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spacy-delink" / "llm"


def stab(intervals: np.ndarray, rarity: np.ndarray) -> list[int]:
    """Fewest points hitting every inclusive ``[start, end]`` interval; ties go to the lowest ``rarity``.

    Intervals that contain another are dropped first (hitting the inner one hits them),
    which leaves starts and ends in the same order; then each greedy point lies in
    ``[last start <= r, r]`` for the earliest end ``r``, the window of equally good choices.
    Among equal rarities the rightmost point wins.
    """
    if not len(intervals):
        return []
    pairs = np.unique(np.asarray(intervals, dtype=np.int64).reshape(-1, 2), axis=0)
    pairs = pairs[np.lexsort((-pairs[:, 1], pairs[:, 0]))]
    later_min_end = np.minimum.accumulate(pairs[::-1, 1])[::-1]
    contains_another = np.append(later_min_end[1:] <= pairs[:-1, 1], False)
    starts, ends = pairs[~contains_another, 0], pairs[~contains_another, 1]
    chosen = []
    i = 0
    while i < len(starts):
        right = int(ends[i])
        j = int(np.searchsorted(starts, right, side="right"))
        left = int(starts[j - 1])
        window = rarity[left : right + 1]
        chosen.append(right - int(np.argmin(window[::-1])))
        i = j
    return chosen


def merge_ranges(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Union of overlapping half-open ranges, in order."""
    merged: list[list[int]] = []
    for start, end in sorted(ranges):
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(start, end) for start, end in merged]


def mask_ranges(detection: Detection, granularity: str) -> list[tuple[int, int]]:
    """Character ranges to mask: one token per flagged span ("token") or whole spans ("span")."""
    tokens = detection.analysis.tokens
    intervals = np.array([(o.token, o.token + o.n - 1) for o in detection.to_rephrase()], dtype=np.int64)
    if not len(intervals):
        return []
    if granularity == "span":
        token_runs = merge_ranges((int(a), int(b) + 1) for a, b in intervals)
        return [(int(tokens.starts[a]), int(tokens.ends[b - 1])) for a, b in token_runs]
    df = detection.analysis.levels[0].df
    return [(int(tokens.starts[t]), int(tokens.ends[t])) for t in sorted(stab(intervals, df))]


class AnsweredCache(BatchCache):
    """spacy-llm's BatchCache, minus requests the model never answered (so a rerun retries them)."""

    def add(self, doc: Doc) -> None:
        if not doc.user_data[RESULT_KEY]["rejected"]["no_response"]:
            super().add(doc)


@dataclass
class RewriteResult:
    """One document's way through the loop."""

    source: str
    text: str
    detection: Detection
    linkage_risk_before: float
    passes: int = 0
    edits: list[dict[str, Any]] = field(default_factory=list)

    @property
    def protected(self) -> bool:
        return self.detection.protected

    @property
    def masked(self) -> bool:
        return any(edit["by"] == "mask" for edit in self.edits)

    def apply(self, replacements: list[tuple[int, int, str]], by: str) -> None:
        """Apply non-overlapping replacements as a new pass (no-op when empty)."""
        if not replacements:
            return
        self.passes += 1
        pieces, cursor = [], 0
        for start, end, replacement in sorted(replacements):
            pieces += [self.text[cursor:start], replacement]
            self.edits.append(
                {"start": start, "end": end, "original": self.text[start:end], "replacement": replacement, "pass": self.passes, "by": by}
            )
            cursor = end
        pieces.append(self.text[cursor:])
        self.text = "".join(pieces)

    def record(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "protected": self.protected,
            "passes": self.passes,
            "edits": self.edits,
            "linkage_risk_before": self.linkage_risk_before,
            "linkage_risk_after": self.detection.linkage_risk,
        }


class DelinkRewriter(IndexedComponent):
    """Rewrites documents with an LLM (or masks) until they are protected at (k, arity)."""

    def __init__(
        self,
        nlp: Language,
        name: str,
        index: str,
        k: int,
        arity: int,
        key_file: Optional[str],
        verify: bool,
        copy_index: bool,
        max_passes: int,
        granularity: str,
        mask: str,
        task: RewriteTask,
        model: Callable[[Iterable[Iterable[str]]], Iterable[Iterable[str]]],
        cache_dir: Optional[str],
        cache_batch_size: int,
    ) -> None:
        super().__init__(nlp, name, index, k, key_file, verify, copy_index)
        self._llm: Optional[LLMWrapper] = None
        validate_type_consistency(task, model)
        self.task = task
        self.model = model
        self._load_settings(
            {"k": k, "arity": arity, "max_passes": max_passes, "granularity": granularity, "mask": mask,
             "cache_dir": cache_dir, "cache_batch_size": cache_batch_size}
        )
        self.vocab = nlp.vocab
        self.tokenizer = nlp.tokenizer
        self.stats: Counter[str] = Counter()

    # -- settings -------------------------------------------------------------------------

    def _settings(self) -> dict[str, Any]:
        return {
            "k": self.k, "arity": self.arity, "max_passes": self.max_passes, "granularity": self.granularity,
            "mask": self.mask, "cache_dir": self.cache_dir, "cache_batch_size": self.cache_batch_size,
        }

    def _load_settings(self, settings: dict[str, Any]) -> None:
        super()._load_settings(settings)
        arity, max_passes, granularity = settings["arity"], settings["max_passes"], settings["granularity"]
        self.arity = check_arity(arity, allow_single=True)
        if not isinstance(max_passes, int) or max_passes < 0:
            raise InputError(f"max_passes must be an integer >= 0 (0 = mask only), got {max_passes!r}")
        if granularity not in GRANULARITIES:
            raise InputError(f"granularity must be 'token' or 'span', got {granularity!r}")
        if not isinstance(settings["cache_batch_size"], int) or settings["cache_batch_size"] < 1:
            raise InputError(f"cache_batch_size must be an integer >= 1, got {settings['cache_batch_size']!r}")
        self.max_passes = max_passes
        self.granularity = granularity
        self.mask = str(settings["mask"])
        self.cache_dir = settings["cache_dir"]
        self.cache_batch_size = settings["cache_batch_size"]
        self._mask_checked = False
        self._llm = None  # its cache is tied to the prompt, which names the mask
        self.task.use_mask(self.mask)

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_llm"] = None  # rebuilt (with its cache) in each worker
        return state

    # -- the loop -------------------------------------------------------------------------

    @property
    def uses_llm(self) -> bool:
        return not isinstance(self.model, MaskModel) and self.max_passes > 0

    def _check_mask(self) -> None:
        """A mask that the index tokenizes would not break n-grams: refuse it."""
        if not self._mask_checked:
            tokens, _ = self.index.tokenize(self.mask)
            if len(tokens):
                raise InputError(
                    f"mask {self.mask!r} yields tokens under the index's rules, so it would not break n-grams; "
                    "use one matching the index's mask patterns, e.g. [REDACTED]"
                )
            self._mask_checked = True

    def _detect(self, text: str) -> Detection:
        return detect(self.index, text, self.k, self.arity)

    def cache_path(self) -> Optional[Path]:
        """Where spacy-llm caches answers: ``auto`` = one folder per prompt template and model."""
        if not self.cache_dir:
            return None
        if self.cache_dir != "auto":
            return Path(self.cache_dir)
        identity = [self.task.prompt_template, type(self.model).__name__, getattr(self.model, "url", ""), getattr(self.model, "name", "")]
        return DEFAULT_CACHE_ROOT / hashlib.sha256(json.dumps(identity).encode("utf-8")).hexdigest()[:16]

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

    def rewrite_texts(self, texts: list[str]) -> list[RewriteResult]:
        """Protect a batch of texts; the LLM passes send all their requests together."""
        self._check_mask()
        results = []
        for text in texts:
            detection = self._detect(text)
            results.append(RewriteResult(text, text, detection, detection.linkage_risk))
        llm_passes = self.max_passes if self.uses_llm else 0
        for pass_no in range(1, llm_passes + 1):
            pending = [r for r in results if not r.protected]
            if not pending:
                break
            requests = [
                self.task.request_doc(
                    self.vocab, r.text, merge_ranges((o.start, o.end) for o in r.detection.to_rephrase()), pass_no
                )
                for r in pending
            ]
            rejected: Counter[str] = Counter()
            for result, answered in zip(pending, self.llm().pipe(requests, batch_size=len(requests))):
                outcome = answered.user_data[RESULT_KEY]
                rejected.update({reason: n for reason, n in outcome["rejected"].items() if n})
                if outcome["accepted"]:
                    result.apply([(s, e, r) for s, e, r in outcome["accepted"]], "llm")
                    result.detection = self._detect(result.text)
            self.stats.update({f"rejected_{reason}": n for reason, n in rejected.items()})
            if rejected:
                logger.warning(
                    "pass %d: %d rewrite(s) rejected (%s); those spans stay flagged",
                    pass_no, sum(rejected.values()), ", ".join(f"{k} {v}" for k, v in sorted(rejected.items())),
                )
        for result in results:
            while not result.protected:
                result.apply([(s, e, self.mask) for s, e in mask_ranges(result.detection, self.granularity)], "mask")
                result.detection = self._detect(result.text)
            self._verify(result)
            self.stats["documents"] += 1
            self.stats["with_mask" if result.masked else "rewritten" if result.edits else "unchanged"] += 1
        return results

    def _verify(self, result: RewriteResult) -> None:
        """SPEC §7 on exactly the text returned (a detection of an older text would not do)."""
        if result.detection.text != result.text or not result.detection.protected:
            raise DelinkError(f"{self.name}: output failed the SPEC §7 check after {result.passes} passes (a bug; please report)")

    def _to_doc(self, result: RewriteResult) -> Doc:
        doc = self.tokenizer(result.text)
        doc._.delink_source = result.source
        doc._.delink_passes = result.passes
        doc._.delink_edits = result.edits
        doc._.protected = result.protected
        doc._.anonymity = result.detection.anonymity
        doc._.linkage_risk = result.detection.linkage_risk
        doc.user_data[RISK_BEFORE_KEY] = result.linkage_risk_before
        return doc

    def __call__(self, doc: Doc) -> Doc:
        return self._to_doc(self.rewrite_texts([doc.text])[0])

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 32) -> Iterator[Doc]:
        """Batches share LLM calls; the model runs their requests concurrently."""
        for batch in spacy.util.minibatch(stream, batch_size):
            yield from (self._to_doc(result) for result in self.rewrite_texts([doc.text for doc in batch]))

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


@Language.factory(
    FACTORY,
    default_config={
        "index": "",
        "k": 2,
        "arity": 1,
        "key_file": None,
        "verify": True,
        "copy_index": False,
        "max_passes": 5,
        "granularity": "token",
        "mask": "[REDACTED]",
        "task": {"@llm_tasks": "spacy_delink.Rewrite.v1"},
        "model": {"@llm_models": "spacy_delink.Mask.v1"},
        "cache_dir": "auto",
        "cache_batch_size": 1,
    },
)
def make_rewriter(
    nlp: Language,
    name: str,
    index: str,
    k: int,
    arity: int,
    key_file: Optional[str],
    verify: bool,
    copy_index: bool,
    max_passes: int,
    granularity: str,
    mask: str,
    task: RewriteTask,
    model: Callable[[Iterable[Iterable[str]]], Iterable[Iterable[str]]],
    cache_dir: Optional[str],
    cache_batch_size: int,
) -> DelinkRewriter:
    """``nlp.add_pipe("delink_rewriter", config={"index": "path/to/index", "k": 2, "arity": 3})``."""
    return DelinkRewriter(
        nlp, name, index, k, arity, key_file, verify, copy_index, max_passes, granularity, mask, task, model,
        cache_dir, cache_batch_size,
    )


# -- the `delink protect` command -----------------------------------------------------------


@dataclass
class ProtectSummary:
    """What `delink protect` did, for its closing line."""

    documents: int = 0
    already_done: int = 0
    rewritten: int = 0
    with_mask: int = 0
    unchanged: int = 0
    llm_calls: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    skipped_lines: list[int] = field(default_factory=list)
    repaired_last_line: bool = False
    seconds: float = 0.0


def load_rewriter(index: Path, k: int, arity: int, config: Optional[Path], key_file: Optional[Path]) -> DelinkRewriter:
    """The rewriter from a spaCy config (its ``delink_rewriter`` component) or the Mask default."""
    settings = {"index": str(index), "k": k, "arity": arity, "key_file": str(key_file) if key_file else None}
    if config is None:
        nlp = spacy.blank("en")
        rewriter = nlp.add_pipe(FACTORY, config=settings)
    else:
        if not config.exists():
            raise InputError(f"config {config} not found; pass an existing file (see configs/rewriter.cfg)")
        loaded = spacy.util.load_config(config)
        names = [n for n, c in loaded.get("components", {}).items() if c.get("factory") == FACTORY]
        if not names:
            raise InputError(f"{config}: no component with factory = \"{FACTORY}\"; see configs/rewriter.cfg")
        overrides = {f"components.{names[0]}.{key}": value for key, value in settings.items()}
        try:
            nlp = spacy.util.load_model_from_config(spacy.util.load_config(config, overrides=overrides), auto_fill=True)
        except ConfigValidationError as err:
            details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors) or str(err)
            raise InputError(f"{config}: invalid configuration ({details}); see configs/rewriter.cfg") from None
        rewriter = nlp.get_pipe(names[0])
    assert isinstance(rewriter, DelinkRewriter)
    rewriter.initialize()
    return rewriter


def done_ids(output: Path) -> tuple[set[Any], bool]:
    """Ids already in ``output``; a half-written last line (a crash) is cut off first."""
    if not output.exists():
        return set(), False
    data = output.read_bytes()
    repaired = bool(data) and not data.endswith(b"\n")
    if repaired:
        with atomic_write(output, "wb") as handle:
            handle.write(data[: data.rfind(b"\n") + 1])
    ids = set()
    for line_no, line in enumerate(output.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or "id" not in record:
            raise InputError(f"{output}:{line_no}: not a `delink protect` record; move the file away or fix the line")
        ids.add(record["id"])
    return ids, repaired


def _documents(input_path: Path, skip_invalid: bool, stats: JsonlStats) -> Iterator[tuple[Any, str]]:
    for record in read_jsonl(input_path, skip_invalid, stats):
        doc_id, text = record.get("id"), record.get("text")
        problem = (
            "missing or invalid \"id\" (a string or integer)" if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool)
            else "missing or invalid \"text\" (a string)" if not isinstance(text, str) else ""
        )
        if isinstance(text, str) and not problem:
            yield doc_id, text
        elif skip_invalid:
            stats.skipped.append(stats.lines)
        else:
            raise InputError(f"{input_path}:{stats.lines}: {problem}; fix the line or pass --skip-invalid")


def protect_file(
    rewriter: DelinkRewriter,
    input_path: Path,
    output: Path,
    batch_size: int = 16,
    skip_invalid: bool = False,
    progress: bool = True,
) -> ProtectSummary:
    """Stream ``input_path`` through the rewriter, appending one record per document to ``output``.

    Resumable: ids already in ``output`` are skipped. Each batch is flushed and fsynced
    before the next starts, so a crash loses at most the batch in flight.
    """
    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}")
    started = time.perf_counter()
    summary = ProtectSummary()
    seen, summary.repaired_last_line = done_ids(output)
    stats = JsonlStats()
    output.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(desc="protect", unit="doc", disable=not progress)
    with open(output, "a", encoding="utf-8") as handle:

        def flush(batch: list[tuple[Any, str]]) -> None:
            for (doc_id, _), result in zip(batch, rewriter.rewrite_texts([text for _, text in batch])):
                handle.write(dumps_jsonl_line({"id": doc_id, **result.record()}))
            handle.flush()
            os.fsync(handle.fileno())
            bar.update(len(batch))

        batch: list[tuple[Any, str]] = []
        for doc_id, text in _documents(input_path, skip_invalid, stats):
            if doc_id in seen:
                summary.already_done += 1
                continue
            seen.add(doc_id)
            batch.append((doc_id, text))
            if len(batch) == batch_size:
                flush(batch)
                batch = []
        if batch:
            flush(batch)
    bar.close()
    summary.documents = rewriter.stats["documents"]
    summary.rewritten = rewriter.stats["rewritten"]
    summary.with_mask = rewriter.stats["with_mask"]
    summary.unchanged = rewriter.stats["unchanged"]
    summary.llm_calls = rewriter.llm_calls()
    summary.failures = rewriter.failures()
    summary.skipped_lines = stats.skipped
    summary.seconds = time.perf_counter() - started
    return summary

