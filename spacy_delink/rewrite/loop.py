"""The rewrite loop: detect → ask → re-detect → mask fallback → verify (SPEC §7).

Per batch of documents: detect (n-grams, plus combinations when ``arity`` >= 2) → ask the
LLM to rephrase every flagged span (one spacy-llm call for the whole batch) → detect
again, up to ``max_passes``. Whatever is still flagged is then masked, pass after pass,
until the text is protected; the result is checked once more before it is returned, so
an output is never marked protected unless the SPEC says it is.

Edits are ``{start, end, original, replacement, pass, by}`` with offsets into the text as
it was *before that pass* (pass 1: the source), so replaying them pass by pass rebuilds
the output.
"""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from spacy.vocab import Vocab
from spacy_llm.pipeline.llm import LLMWrapper

from ..errors import DelinkError
from ..linkage.attack import Detection
from ..llm.tasks.rewrite.task import RESULT_KEY, RewriteTask
from .masking import mask_ranges, merge_ranges

logger = logging.getLogger("spacy_delink.rewriter")


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


@dataclass
class RewriteLoop:
    """One configuration of the loop; ``llm`` is None when only masking is asked for."""

    name: str
    detect: Callable[[str], Detection]
    task: RewriteTask
    vocab: Vocab
    llm: Optional[Callable[[], LLMWrapper]]
    max_passes: int
    mask: str
    granularity: str
    stats: Counter[str]

    def run(self, texts: list[str]) -> list[RewriteResult]:
        """Protect a batch of texts; the LLM passes send all their requests together."""
        results = []
        for text in texts:
            detection = self.detect(text)
            results.append(RewriteResult(text, text, detection, detection.linkage_risk))
        llm_passes = self.max_passes if self.llm is not None else 0
        for pass_no in range(1, llm_passes + 1):
            pending = [r for r in results if not r.protected]
            if not pending:
                break
            self._ask(pending, pass_no)
        for result in results:
            while not result.protected:
                result.apply([(s, e, self.mask) for s, e in mask_ranges(result.detection, self.granularity)], "mask")
                result.detection = self.detect(result.text)
            self._verify(result)
            self.stats["documents"] += 1
            self.stats["with_mask" if result.masked else "rewritten" if result.edits else "unchanged"] += 1
        return results

    def _ask(self, pending: list[RewriteResult], pass_no: int) -> None:
        """One LLM pass over every pending document; accepted rewrites are re-detected."""
        assert self.llm is not None
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
                result.detection = self.detect(result.text)
        self.stats.update({f"rejected_{reason}": n for reason, n in rejected.items()})
        if rejected:
            logger.warning(
                "pass %d: %d rewrite(s) rejected (%s); those spans stay flagged",
                pass_no, sum(rejected.values()), ", ".join(f"{k} {v}" for k, v in sorted(rejected.items())),
            )

    def _verify(self, result: RewriteResult) -> None:
        """SPEC §7 on exactly the text returned (a detection of an older text would not do)."""
        if result.detection.text != result.text or not result.detection.protected:
            raise DelinkError(f"{self.name}: output failed the SPEC §7 check after {result.passes} passes (a bug; please report)")
