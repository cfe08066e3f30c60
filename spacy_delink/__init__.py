"""spacy-delink: protect de-identified documents against search-based linkage attacks.

Importing the package registers the spaCy factories (also available through entry points).
"""
from __future__ import annotations

from .assess import assess_text
from .detection import LinkageAnalysis, Occurrence, analyze
from .errors import DelinkError, IndexFormatError, InputError
from .index import CorpusIndex, IndexBuilder, open_index
from .risk import LinkageRiskAnnotator
from .tokenization import LinkageRules, Tokenizer

__version__ = "0.1.0"

__all__ = [
    "CorpusIndex",
    "DelinkError",
    "IndexBuilder",
    "IndexFormatError",
    "InputError",
    "LinkageAnalysis",
    "LinkageRiskAnnotator",
    "LinkageRules",
    "Occurrence",
    "Tokenizer",
    "analyze",
    "assess_text",
    "open_index",
]
