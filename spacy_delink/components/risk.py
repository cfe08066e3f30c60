"""The ``delink_risk`` component: SPEC §4's minimal linkable set on spaCy Docs.

Phrases are found on ``doc.text`` with the index's own tokenization and aligned to the
pipeline's tokens by character offsets (expanding to token boundaries), so any spaCy
language and tokenizer works.
"""
from __future__ import annotations

from typing import Optional

from spacy.language import Language
from spacy.tokens import Doc

from ..linkage.ngrams import analyze
from .alignment import align, set_span_values
from .base import IndexedComponent, ScoreFunction
from .extensions import record_anonymity, set_token_risks

NGRAM_LABEL = "NGRAM"


class LinkageRiskAnnotator(IndexedComponent):
    """Marks every minimal linkable phrase and scores Doc, Span and Token."""

    def __init__(
        self,
        nlp: Language,
        name: str,
        index: str,
        k: int,
        key_file: str | None,
        verify: bool,
        copy_index: bool,
        spans_key: str,
        scorer: Optional[ScoreFunction] = None,
    ) -> None:
        super().__init__(nlp, name, index, k, key_file, verify, copy_index, scorer)
        self.spans_key = spans_key

    def __call__(self, doc: Doc) -> Doc:
        analysis = analyze(self.index, self.doc_text(doc), self.k, exact_frequent=False)
        found = analysis.minimal_arrays()
        aligned = align(doc, found["start"], found["end"])
        support = found["support"][aligned.kept]
        set_span_values(doc, "delink_support", aligned.start_char, aligned.end_char, support.tolist())
        doc.spans[self.spans_key] = aligned.span_group(doc, self.spans_key, NGRAM_LABEL)
        set_token_risks(doc, aligned.first, aligned.stop, 1.0 / support)
        record_anonymity(doc, self.name, analysis.anonymity())
        return doc
