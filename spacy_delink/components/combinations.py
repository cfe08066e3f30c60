"""The ``delink_combinations`` component: SPEC §5 combinations and what to rephrase, on Docs.

Combinations are searched under every reading checked (SPEC §8); each one in
``doc._.delink_combinations`` names the readings it links under (one entry when several
find the same members), and ``max_combinations`` caps each reading's list.
"""
from __future__ import annotations

from typing import Any

from spacy.language import Language
from spacy.tokens import Doc, Span

from ..linkage.attack import detect
from ..linkage.combinations import check_arity, check_max_combinations
from ..linkage.strategies import check_strategy
from .alignment import expanded_spans, set_span_values
from .base import IndexedComponent
from .extensions import record_anonymity
from .settings import REPHRASE_SPANS, CombinationSettings

COMBO_LABEL = "COMBO"
REPHRASE_LABEL = "REPHRASE"
COMBINATION_SPANS = "linkable_combinations"


class CombinationDetector(IndexedComponent):
    """``delink_combinations``: groups of common phrases whose joint search singles out."""

    def __init__(self, nlp: Language, name: str, *, settings: CombinationSettings) -> None:
        super().__init__(nlp, name, settings=settings)
        self.arity = check_arity(settings.arity)
        self.max_combinations = check_max_combinations(settings.max_combinations)
        self.flagging = check_strategy(settings.flagging)  # what ``to_rephrase`` holds (docs/flagging.md)

    def __call__(self, doc: Doc) -> Doc:
        detection = detect(
            self.index, self.doc_text(doc), self.k, self.arity, self.max_combinations, self.flagging, readings=self.readings
        )
        # by part, not reading: the search reading can have two parts (``ngrams.alternate_analysis``)
        reported = [
            (number, part.reading, part.combinations, combination)
            for number, part in enumerate(detection.parts)
            if part.combinations is not None
            for combination in part.combinations.head(self.max_combinations)
        ]
        # one span per distinct member span (members of several readings, or phrases that expand to the same tokens, share it)
        candidates = {
            (number, m): result.candidates[m] for number, _, result, combination in reported for m in combination.members
        }
        keys = sorted(candidates, key=lambda key: (candidates[key].start, candidates[key].end))
        aligned = expanded_spans(doc, [(candidates[key].start, candidates[key].end) for key in keys], COMBO_LABEL)
        span_of: dict[tuple[int, int], Span] = {}
        by_offsets: dict[tuple[int, int], Span] = {}
        for key, span in zip(keys, aligned):
            if span is not None:
                span_of[key] = by_offsets.setdefault((span.start_char, span.end_char), span)
        spans = sorted(by_offsets.values(), key=lambda span: (span.start_char, span.end_char))
        position = {(span.start_char, span.end_char): i for i, span in enumerate(spans)}
        support = [min(candidates[key].support for key in span_of if span_of[key] is span) for span in spans]
        in_combinations: list[list[int]] = [[] for _ in spans]
        records: dict[tuple[int, ...], dict[str, Any]] = {}  # one per member spans: readings that find the same name both
        for number, reading, _, combination in reported:
            members = tuple(sorted({
                position[(span_of[(number, m)].start_char, span_of[(number, m)].end_char)]
                for m in combination.members if (number, m) in span_of
            }))
            record = records.get(members)
            if record is None:
                for member in members:
                    in_combinations[member].append(len(records))
                records[members] = {"members": list(members), "support": combination.support, "readings": [reading]}
            else:
                record["support"] = min(record["support"], combination.support)
                if reading not in record["readings"]:
                    record["readings"].append(reading)
        start_char, end_char = [span.start_char for span in spans], [span.end_char for span in spans]
        set_span_values(doc, "delink_support", start_char, end_char, support)
        set_span_values(doc, "delink_combinations", start_char, end_char, in_combinations)
        doc.spans[COMBINATION_SPANS] = spans
        doc._.delink_combinations = list(records.values())
        doc._.delink_combination_linkable = detection.combination_linkable
        rephrase = expanded_spans(doc, [(o.start, o.end) for o in detection.to_rephrase()], REPHRASE_LABEL)
        doc.spans[REPHRASE_SPANS] = [span for span in rephrase if span is not None]
        record_anonymity(doc, self.name, detection.anonymity)
        return doc
