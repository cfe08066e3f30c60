"""Learned redaction (Gusain & Leith 2025): a trainable word ranker and a divergence-based privacy estimate.

The ``delink_redactor`` factory lives in ``spacy_delink.plugin``; the names below load on
first access, and the component imports its baselines when it trains. ``embeddings`` (shared
with the semantic checks) imports torch when used; ``privacy`` and ``baselines`` need the
``redaction`` extra and say so on import, in one line.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "attack_auc": "baselines",
    "logreg_word_weights": "baselines",
    "DelinkRedactor": "component",
    "make_redactor": ".plugin",  # registered with the other factories, in spacy_delink.plugin
    "DocTensorEmbedder": "embeddings",
    "TransformerEncoder": "embeddings",
    "PrivacySettings": "evaluation",
    "plot_privacy_curve": "evaluation",
    "privacy_curve": "evaluation",
    "DivergenceEstimate": "privacy",
    "bounding_epsilon": "privacy",
    "gaussian_divergence": "privacy",
    "knn_divergence": "privacy",
    "paper_estimate": "privacy",
    "renyi_divergence": "privacy",
    "zcdp_epsilon": "privacy",
    "RankerSettings": "ranker",
    "train_ranker": "ranker",
}

if TYPE_CHECKING:  # the same names, eagerly, for type checkers and IDEs
    from .baselines import attack_auc, logreg_word_weights
    from ..plugin import make_redactor
    from .component import DelinkRedactor
    from .embeddings import DocTensorEmbedder, TransformerEncoder
    from .evaluation import PrivacySettings, plot_privacy_curve, privacy_curve
    from .privacy import (
        DivergenceEstimate,
        bounding_epsilon,
        gaussian_divergence,
        knn_divergence,
        paper_estimate,
        renyi_divergence,
        zcdp_epsilon,
    )
    from .ranker import RankerSettings, train_ranker

__getattr__, __dir__, __all__ = lazy_exports(__name__, _EXPORTS)
