"""spacy-delink: protect de-identified documents against search-based linkage attacks.

The spaCy factories (``delink_risk``, ``delink_combinations``, ...) register through
entry points, so ``nlp.add_pipe("delink_risk")`` needs no import. The public names below
load on first access, which keeps ``import spacy_delink`` and ``delink --help`` fast.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    # text core: the attack
    "LinkageRules": "linkage.tokenize",
    "Tokenizer": "linkage.tokenize",
    "CorpusIndex": "linkage.index",
    "IndexBuilder": "linkage.index",
    "open_index": "linkage.index",
    "analyze": "linkage.ngrams",
    "LinkageAnalysis": "linkage.ngrams",
    "Occurrence": "linkage.ngrams",
    "analyze_combinations": "linkage.combinations",
    "CombinationAnalysis": "linkage.combinations",
    "Detection": "linkage.attack",
    "detect": "linkage.attack",
    "assess_text": "linkage.attack",
    "assess_file": "evaluate.assess",
    "assess_texts": "batch",
    "protect_texts": "batch",
    "assess_frame": "frames",
    "protect_frame": "frames",
    "InputSource": "corpus.source",
    # spaCy components
    "LinkageRiskAnnotator": "components.risk",
    "CombinationDetector": "components.combinations",
    "DelinkRewriter": "components.rewriter",
    # rewriting
    "RewriteResult": "rewrite.loop",
    "protect_file": "rewrite.protect",
    "load_rewriter": "rewrite.config",
    # the HTTP service's client (`delink serve`)
    "DelinkClient": "serve.client",
    "ServeError": "serve.client",
    # errors
    "DelinkError": "errors",
    "InputError": "errors",
    "IndexFormatError": "errors",
    # learned redaction
    "DelinkRedactor": "redaction",
    "RankerSettings": "redaction",
    "PrivacySettings": "redaction",
    "privacy_curve": "redaction",
    "renyi_divergence": "redaction",
    "zcdp_epsilon": "redaction",
    # tables
    "privacy_level": "tabular",
    "local_privacy_level": "tabular",
    "entropy_change": "tabular",
    "PrivacyReport": "tabular",
    "PrivacyMeasure": "tabular",
    # set-valued records
    "anonymize_sets": "setvalued",
    "SetAnonymization": "setvalued",
    "exact_anonymization": "setvalued",
    "lower_bound": "setvalued",
    "extend_release": "setvalued",
    "load_set_records": "setvalued",
    "verify_k_anonymous": "setvalued",
}

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from .batch import assess_texts, protect_texts
    from .components.combinations import CombinationDetector
    from .components.rewriter import DelinkRewriter
    from .components.risk import LinkageRiskAnnotator
    from .corpus.source import InputSource
    from .errors import DelinkError, IndexFormatError, InputError
    from .evaluate.assess import assess_file
    from .frames import assess_frame, protect_frame
    from .linkage.attack import Detection, assess_text, detect
    from .linkage.combinations import CombinationAnalysis, analyze_combinations
    from .linkage.index import CorpusIndex, IndexBuilder, open_index
    from .linkage.ngrams import LinkageAnalysis, Occurrence, analyze
    from .linkage.tokenize import LinkageRules, Tokenizer
    from .redaction import DelinkRedactor, PrivacySettings, RankerSettings, privacy_curve, renyi_divergence, zcdp_epsilon
    from .rewrite.loop import RewriteResult
    from .rewrite.config import load_rewriter
    from .rewrite.protect import protect_file
    from .serve.client import DelinkClient, ServeError
    from .setvalued import (
        SetAnonymization,
        anonymize_sets,
        exact_anonymization,
        extend_release,
        load_set_records,
        lower_bound,
        verify_k_anonymous,
    )
    from .tabular import PrivacyMeasure, PrivacyReport, entropy_change, local_privacy_level, privacy_level

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS, extra=("__version__",))
