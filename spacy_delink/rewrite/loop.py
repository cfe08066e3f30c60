"""The rewrite loop: detect → generalize → ask → re-detect → mask fallback → verify (SPEC §7).

Per batch of documents: detect (n-grams, plus combinations when ``arity`` >= 2) →
generalize flagged numbers and dates when the model has a generalizer → ask the
LLM to rephrase every flagged span (one spacy-llm call for the whole batch) → detect
again, up to ``max_passes``. Whatever is still flagged is then masked, pass after pass,
until the text is protected, each hidden stretch written as one mask whatever its length
(``masking.one_mask_per_stretch``: merged with the masks beside it); the result is checked
once more before it is returned, so an output is never marked protected unless the SPEC
says it is.

Edits are ``{start, end, original, replacement, pass, by}`` with offsets into the text as
it was *before that pass* (pass 1: the source), so replaying them pass by pass rebuilds
the output.
"""
from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional, Sequence

from spacy.tokens import Doc
from spacy.vocab import Vocab
from spacy_llm.pipeline.llm import LLMWrapper

from ..errors import DelinkError
from ..linkage.attack import Detection
from ..linkage.readings import unread_message
from ..llm.tasks.rewrite.task import RESULT_KEY, RewriteTask
from ..retrieval.defence import RetrievalGuard
from .masking import mask_ranges, merge_ranges, one_mask_per_stretch

if TYPE_CHECKING:
    from ..llm.models.generalize import Generalizer

logger = logging.getLogger("spacy_delink.rewriter")
#: How a document can come out of the loop; ``RewriteLoop.run`` counts each in its stats.
OUTCOMES = ("rewritten", "with_mask", "unchanged")


@dataclass
class RewriteResult:
    """One document's way through the loop."""

    source: str
    text: str
    detection: Detection
    linkage_risk_before: float
    passes: int = 0
    edits: list[dict[str, Any]] = field(default_factory=list)
    #: Spans (their text) the model answered with the mask: left to the mask fallback, not asked again.
    declined: set[str] = field(default_factory=set)
    #: The source's document number in the index, for the ranked-retrieval step (None: unknown).
    source_number: Optional[int] = None
    #: The source's BM25 rank for the output text, once the ranked-retrieval step checked it.
    retrieval_rank: Optional[int] = None

    @property
    def protected(self) -> bool:
        return self.detection.protected

    @property
    def masked(self) -> bool:
        return any(edit["by"] == "mask" for edit in self.edits)

    def apply(self, replacements: list[tuple[int, int, str]], by: str) -> None:
        """Apply non-overlapping replacements as a new pass.

        Every pass counts, also one that changes nothing (an LLM pass whose answers were
        all rejected or never came): ``passes`` says how often the document went through
        detect → change, so its edits' ``pass`` numbers may skip the passes without edits.
        """
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
        record = {
            "text": self.text,
            "protected": self.protected,
            "passes": self.passes,
            "edits": self.edits,
            "linkage_risk_before": self.linkage_risk_before,
            "linkage_risk_after": self.detection.linkage_risk,
        }
        if self.retrieval_rank is not None:
            record["retrieval_rank"] = self.retrieval_rank
        return record


@dataclass
class RewriteLoop:
    """One configuration of the loop; ``llm`` is None when only masking is asked for."""

    name: str
    #: Detects a text; the second argument: sources found on its earlier versions (``Detection.known_sources``).
    detect: Callable[[str, Sequence[int]], Detection]
    task: RewriteTask
    vocab: Vocab
    llm: Optional[Callable[[], LLMWrapper]]
    max_passes: int
    mask: str
    granularity: str
    stats: Counter[str]
    #: An LLM pass in which a span got no answer (endpoint down, failed call) is an error, not a mask.
    require_llm: bool = False
    #: The model's failure counts, for the require_llm error message.
    failures: Callable[[], Counter[str]] = Counter
    #: Detect again after a mask pass incrementally (``Detection.after_mask``); False detects
    #: from scratch after every pass (the same outputs, slower: the peer in bench_flagging.py).
    incremental: bool = True
    #: Documents detected and masked at once. Each document's passes are its own, so the
    #: outputs are the same for any number; the compiled searches and covers release the
    #: GIL, so threads overlap them (docs/flagging.md). LLM requests go out together anyway.
    threads: int = 1
    #: Ranked retrieval (``retrieval.defence``, opt-in): once the phrase rules hold, mask until the
    #: source ranks at least ``retrieval.rank``; every text then needs its source's number.
    retrieval: Optional[RetrievalGuard] = None
    #: Generalizes flagged numbers and dates before any LLM pass or mask (``models.generalize``).
    generalizer: Optional["Generalizer"] = None

    def run(self, texts: list[str], sources: Optional[list[Optional[int]]] = None) -> list[RewriteResult]:
        """Protect a batch of texts (``sources``: each one's document number when known: read as its source by
        the gap reading, and needed by ``retrieval``); the LLM passes send all their requests together."""
        sources = [None] * len(texts) if sources is None else sources
        if self.retrieval is not None and any(source is None for source in sources):
            raise DelinkError(f"{self.name}: ranked retrieval needs every text's source (a bug: the caller checks this)")
        # Longest first, so that no thread is left with a long document at the end of a batch.
        longest_first = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        with self._documents_at_once(len(texts)) as each:
            # A text's known source (its id names a document of the collection) is read as a source from the start (SPEC §9).
            first = [(texts[i], () if sources[i] is None else (sources[i],)) for i in longest_first]
            found = dict(zip(longest_first, each(lambda pair: self.detect(*pair), first)))
            results = [
                RewriteResult(text, text, found[i], found[i].linkage_risk, source_number=sources[i]) for i, text in enumerate(texts)
            ]
            if self.generalizer is not None:
                for kinds in list(each(self._generalize, [results[i] for i in longest_first])):
                    self.stats.update(kinds)
            llm_passes = self.max_passes if self.llm is not None else 0
            for pass_no in range(1, llm_passes + 1):
                pending = [r for r in results if not r.protected]
                if not pending:
                    break
                self._ask(pending, pass_no)
            list(each(self._finish, [results[i] for i in longest_first]))  # list: raises the first error here
        for result in results:
            self.stats["documents"] += 1
            self.stats["with_mask" if result.masked else "rewritten" if result.edits else "unchanged"] += 1
        return results

    @contextmanager
    def _documents_at_once(self, documents: int) -> Iterator[Callable[..., Iterator[Any]]]:
        """``map`` over the documents, on ``threads`` threads when there is more than one of each."""
        if self.threads <= 1 or documents <= 1:
            yield map
            return
        with ThreadPoolExecutor(min(self.threads, documents), thread_name_prefix="delink-protect") as pool:
            yield pool.map

    def _generalize(self, result: RewriteResult) -> list[str]:
        """Generalize what is flagged as one pass (``by: "generalize"``); the kinds generalized, for the stats."""
        assert self.generalizer is not None
        if result.protected:
            return []
        carried = result.detection.known_sources
        chosen, detection = self.generalizer.generalize(result.text, result.detection, lambda text: self.detect(text, carried))
        if chosen:
            result.apply([(start, end, form) for start, end, form, _ in chosen], "generalize")
            result.detection = detection
        return [f"generalized_{kind}" for _, _, _, kind in chosen]

    def _finish(self, result: RewriteResult) -> None:
        self._mask_until_protected(result)
        if self.retrieval is not None:
            self._mask_until_ranked(result, self.retrieval)
        self._merge_masks(result)
        self._verify(result)

    def _merge_masks(self, result: RewriteResult) -> None:
        """Write each stretch of masks that no mask pass merged (the input's own, ``[PERSON] [DATE]``)
        as one mask, as one more pass: no output shows how many things a stretch hides."""
        written = one_mask_per_stretch(result.text, [], result.detection, self.mask)
        if not written:
            return
        result.apply(written, "mask")
        if self.incremental:  # no token changed: the same detection, of the merged text
            result.detection = result.detection.after_mask([(s, e) for s, e, _ in written], result.text, None)
        else:
            result.detection = self.detect(result.text, result.detection.known_sources)

    def _mask_until_ranked(self, result: RewriteResult, guard: RetrievalGuard) -> None:
        """Mask the words the guard chooses until the source ranks >= K, the phrase rules holding after each pass.

        Masking for the ranking can change what the phrase rules find (other candidates for
        combinations), and masking for the rules changes the query: so the two alternate
        until both hold. Each retrieval pass masks at least one word the text still holds,
        so this ends.
        """
        assert result.source_number is not None
        while True:
            ranges = guard.ranges(result.text, result.source_number)
            if not ranges:
                break
            result.apply(one_mask_per_stretch(result.text, merge_ranges(ranges), result.detection, self.mask), "retrieval")
            result.detection = self.detect(result.text, result.detection.known_sources)
            self._mask_until_protected(result)
        result.retrieval_rank = guard.rank_of(result.text, result.source_number)

    def _mask_until_protected(self, result: RewriteResult) -> None:
        """Mask what the flagging strategy chooses (``linkage.cover``), pass after pass.

        Between mask passes the detection is updated incrementally (``Detection.after_mask``:
        only what the mask can change is computed); once it finds nothing, the text is
        detected from scratch, and masking goes on from that detection should it still find
        something. Without ``incremental``, every pass ends in a detection from scratch.
        """
        if result.detection.unread_scripts:  # no mask makes such a text protected: its phrases were never looked up
            raise DelinkError(f"{self.name}: {unread_message(result.detection.unread_scripts, result.detection.readings)}")
        while not result.protected:
            ranges = mask_ranges(result.detection, self.granularity)
            if not ranges:
                raise DelinkError(f"{self.name}: the {result.detection.flagging} cover chose nothing to mask in a linkable text (a bug; please report)")
            written = one_mask_per_stretch(result.text, ranges, result.detection, self.mask)
            result.apply(written, "mask")
            if not self.incremental:
                result.detection = self.detect(result.text, result.detection.known_sources)
                continue
            detection = result.detection.after_mask([(s, e) for s, e, _ in written], result.text, self.granularity)
            result.detection = self.detect(result.text, detection.known_sources) if detection.protected else detection
            if detection.protected and not result.protected:
                logger.warning("%s: a full detection found what the incremental one missed; masking on", self.name)

    def _ask(self, pending: list[RewriteResult], pass_no: int) -> None:
        """One LLM pass over every pending document; accepted rewrites are re-detected.

        Spans whose several-span prompt failed as a whole (``RETRY_ALONE``) are asked
        again, one per prompt, before the pass ends; their retry's outcome is the one counted.
        A span the model answers with the mask itself is declined: the whole span masked
        changes more tokens than the mask fallback, which masks the fewest that break
        every linkable search (bench_llm_rewrite: 193 against 41 tokens at arity 3), so it
        is left to the fallback and not asked again.
        """
        assert self.llm is not None
        asks = [
            (r, [(s, e) for s, e in merge_ranges((o.start, o.end) for o in r.detection.to_rephrase()) if r.text[s:e] not in r.declined])
            for r in pending
        ]
        asks = [(r, spans) for r, spans in asks if spans]
        if not asks:
            return
        pending = [r for r, _ in asks]
        requests = [self.task.request_doc(self.vocab, r.text, spans, pass_no) for r, spans in asks]
        outcomes = self._answers(requests)
        retried = [(i, [(s, e) for s, e, _ in outcome["retry"]]) for i, outcome in enumerate(outcomes) if outcome["retry"]]
        if retried:
            again = self._answers(
                [self.task.request_doc(self.vocab, pending[i].text, spans, pass_no, per_prompt=1) for i, spans in retried]
            )
            for (i, _), outcome in zip(retried, again):
                first = outcomes[i]
                rejected = Counter(first["rejected"])
                rejected.subtract(Counter(reason for _, _, reason in first["retry"]))
                rejected.update(outcome["rejected"])
                outcomes[i] = {"accepted": first["accepted"] + outcome["accepted"], "rejected": dict(rejected)}
                self.stats["retried_alone"] += len(first["retry"])
        rejected_all: Counter[str] = Counter()
        for outcome in outcomes:
            rejected_all.update({reason: n for reason, n in outcome["rejected"].items() if n})
        self.stats.update({f"rejected_{reason}": n for reason, n in rejected_all.items()})
        if self.require_llm and rejected_all["no_response"]:
            asked = sum(len(outcome["accepted"]) + sum(outcome["rejected"].values()) for outcome in outcomes)
            model = ", ".join(f"{k} {v}" for k, v in sorted(self.failures().items()) if not k.startswith("rejected_"))
            raise DelinkError(
                f"{self.name}: require_llm is set but {rejected_all['no_response']} of {asked} span(s) in LLM pass {pass_no} "
                f"got no answer from the model ({model or 'empty answers'}); nothing of this batch is written. "
                "Check the endpoint (docs/llm.md) or drop --require-llm / require_llm to fall back to masks"
            )
        for result, outcome in zip(pending, outcomes):
            rewrites = [(s, e, r) for s, e, r in outcome["accepted"] if r.strip() != self.mask]
            declined = {result.text[s:e] for s, e, r in outcome["accepted"] if r.strip() == self.mask}
            result.declined |= declined
            self.stats["declined_to_mask"] += len(declined)
            result.apply(rewrites, "llm")
            if rewrites:
                result.detection = self.detect(result.text, result.detection.known_sources)
        if rejected_all:
            logger.warning(
                "pass %d: %d rewrite(s) rejected (%s); those spans stay flagged",
                pass_no, sum(rejected_all.values()), ", ".join(f"{k} {v}" for k, v in sorted(rejected_all.items())),
            )

    def _answers(self, requests: list[Doc]) -> list[dict[str, Any]]:
        """The task's verdicts on a list of request Docs (one spacy-llm call for all of them)."""
        assert self.llm is not None
        return [answered.user_data[RESULT_KEY] for answered in self.llm().pipe(requests, batch_size=len(requests))]

    def _verify(self, result: RewriteResult) -> None:
        """SPEC §7 on exactly the text returned (a detection of an older text would not do)."""
        if result.detection.text != result.text or not result.detection.protected:
            raise DelinkError(f"{self.name}: output failed the protection check (docs/linkage-rules.md §7) after {result.passes} passes (a bug; please report)")
        if self.retrieval is not None:
            assert result.source_number is not None
            rank = self.retrieval.rank_of(result.text, result.source_number)
            if rank < self.retrieval.rank or rank != result.retrieval_rank:
                raise DelinkError(f"{self.name}: output ranks its source {rank}-th under BM25, not >= {self.retrieval.rank} (a bug; please report)")
