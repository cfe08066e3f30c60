"""The ``delink_combinations`` component: SPEC §5 combinations and what to rephrase, on Docs."""
from __future__ import annotations

from typing import Optional

from spacy.language import Language
from spacy.tokens import Doc

from ..linkage.attack import detect
from ..linkage.combinations import check_arity, check_max_combinations
from ..linkage.strategies import DEFAULT_STRATEGY, check_strategy
from ..plugin import REPHRASE_SPANS
from .alignment import expanded_spans, set_span_values
from .base import IndexedComponent, ScoreFunction
from .extensions import record_anonymity

COMBO_LABEL = "COMBO"
REPHRASE_LABEL = "REPHRASE"
COMBINATION_SPANS = "linkable_combinations"


class CombinationDetector(IndexedComponent):
    """``delink_combinations``: groups of common phrases whose joint search singles out."""

    def __init__(
        self,
        nlp: Language,
        name: str,
        index: str,
        k: int,
        arity: int,
        max_combinations: int,
        key_file: str | None,
        verify: bool,
        copy_index: bool,
        scorer: Optional[ScoreFunction] = None,
        flagging: str = DEFAULT_STRATEGY,
    ) -> None:
        super().__init__(nlp, name, index, k, key_file, verify, copy_index, scorer)
        self.arity = check_arity(arity)
        self.max_combinations = check_max_combinations(max_combinations)
        self.flagging = check_strategy(flagging)  # what ``to_rephrase`` holds (docs/flagging.md)

    def __call__(self, doc: Doc) -> Doc:
        detection = detect(self.index, self.doc_text(doc), self.k, self.arity, self.max_combinations, self.flagging)
        result = detection.combinations
        assert result is not None  # arity >= 2
        reported = list(result.head(self.max_combinations))
        members = sorted(
            {m for combination in reported for m in combination.members},
            key=lambda m: (result.candidates[m].start, result.candidates[m].end),
        )
        aligned = expanded_spans(doc, [(result.candidates[m].start, result.candidates[m].end) for m in members], COMBO_LABEL)
        member_spans = {m: span for m, span in zip(members, aligned) if span is not None}  # in text order
        position = {member: i for i, member in enumerate(member_spans)}
        in_combinations: list[list[int]] = [[] for _ in position]
        for number, combination in enumerate(reported):
            for member in combination.members:
                if member in position:
                    in_combinations[position[member]].append(number)
        spans = list(member_spans.values())
        start_char, end_char = [span.start_char for span in spans], [span.end_char for span in spans]
        set_span_values(doc, "delink_support", start_char, end_char, [result.candidates[m].support for m in member_spans])
        set_span_values(doc, "delink_combinations", start_char, end_char, in_combinations)
        doc.spans[COMBINATION_SPANS] = spans
        doc._.delink_combinations = [
            {"members": [position[m] for m in c.members if m in position], "support": c.support} for c in reported
        ]
        doc._.delink_combination_linkable = result.combination_linkable
        rephrase = expanded_spans(doc, [(o.start, o.end) for o in detection.to_rephrase()], REPHRASE_LABEL)
        doc.spans[REPHRASE_SPANS] = [span for span in rephrase if span is not None]
        record_anonymity(doc, self.name, detection.anonymity)
        return doc
