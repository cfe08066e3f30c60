"""spacy-delink: protect de-identified documents against search-based linkage attacks.

The spaCy factories (``delink_risk``, ``delink_combinations``, ...) register through
entry points, so ``nlp.add_pipe("delink_risk")`` needs no import. The public names below
load on first access, which keeps ``import spacy_delink`` and ``delink --help`` fast.
"""
from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # text core
    "LinkageRules": "tokenization",
    "Tokenizer": "tokenization",
    "CorpusIndex": "index",
    "IndexBuilder": "index",
    "open_index": "index",
    "analyze": "detection",
    "LinkageAnalysis": "detection",
    "Occurrence": "detection",
    "analyze_combinations": "combinations",
    "CombinationAnalysis": "combinations",
    "Detection": "combinations",
    "detect": "combinations",
    "assess_text": "assess",
    "LinkageRiskAnnotator": "risk",
    "CombinationDetector": "combinations",
    "DelinkError": "errors",
    "InputError": "errors",
    "IndexFormatError": "errors",
    # rewriting
    "DelinkRewriter": "rewriting",
    "RewriteResult": "rewriting",
    "protect_file": "rewriting",
    "load_rewriter": "rewriting",
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

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'spacy_delink' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
