"""The ``delink_risk`` component: SPEC §4's minimal linkable set on spaCy Docs.

Phrases are found on ``doc.text`` with the index's own tokenization, under every reading
checked (SPEC §8), and aligned to the pipeline's tokens by character offsets (expanding to
token boundaries), so any spaCy language and tokenizer works. A span found under several
readings, or several phrases that align to one span, is one span with the smallest
support (``span._.delink_support``) and the readings it links under (``span._.delink_readings``).
"""
from __future__ import annotations

from spacy.language import Language
from spacy.tokens import Doc

from ..linkage.gap import GapAnalysis, analyze_gap
from ..linkage.ngrams import LinkageAnalysis, alternate_analysis, analyze, minimal_across, reading_names
from ..linkage.readings import unread_scripts, warn_unread
from .alignment import align, merge_aligned, set_span_values
from .base import IndexedComponent
from .extensions import record_anonymity, set_token_risks
from .settings import RiskSettings

NGRAM_LABEL = "NGRAM"


class LinkageRiskAnnotator(IndexedComponent):
    """Marks every minimal linkable phrase and scores Doc, Span and Token."""

    def __init__(self, nlp: Language, name: str, *, settings: RiskSettings) -> None:
        super().__init__(nlp, name, settings=settings)
        self.spans_key = settings.spans_key

    def __call__(self, doc: Doc) -> Doc:
        text = self.doc_text(doc)
        index = self.index  # opened (or reopened, after an update) once per Doc
        analyses: list[LinkageAnalysis | GapAnalysis] = []
        for reading in self.readings:
            if reading == "gap":  # SPEC §9: the bridges around the masks, from the search reading's tokens
                search = analyses[-1]
                assert isinstance(search, LinkageAnalysis)
                analyses.append(analyze_gap(index, search, self.k))
                continue
            twins = analyses[0] if analyses and isinstance(analyses[0], LinkageAnalysis) and analyses[0].reading == "exact" else None
            analyses.append(analyze(index, text, self.k, exact_frequent=False, reading=reading, twins=twins))
        exact = analyses[0] if isinstance(analyses[0], LinkageAnalysis) and analyses[0].reading == "exact" else None
        alternate = alternate_analysis(index, text, self.k, self.readings, exact_frequent=False, twins=exact)
        analyses += [alternate] if alternate is not None else []  # SPEC §8: linkable under either folding table
        found = minimal_across(analyses)
        aligned = align(doc, found["start"], found["end"])
        spans, support, bits = merge_aligned(aligned, found["support"][aligned.kept], found["readings"][aligned.kept])
        set_span_values(doc, "delink_support", spans.start_char, spans.end_char, support.tolist())
        set_span_values(doc, "delink_readings", spans.start_char, spans.end_char, [reading_names(b) for b in bits.tolist()])
        doc.spans[self.spans_key] = spans.span_group(doc, self.spans_key, NGRAM_LABEL)
        set_token_risks(doc, spans.first, spans.stop, 1.0 / support)
        found_anonymity = [a for a in (analysis.anonymity() for analysis in analyses) if a is not None]
        record_anonymity(doc, self.name, min(found_anonymity) if found_anonymity else None)
        unread = unread_scripts(analyses[0].tokens.codes, index.splits_scripts(self.readings)) if analyses else []
        if unread:  # its risk of 0 would say nothing of what an engine finds
            warn_unread(unread, self.readings)
        return doc
