"""Learned redaction (Gusain & Leith 2025): a trainable word ranker and a divergence-based privacy estimate.

Importing this package registers the ``delink_redactor`` factory; torch and transformers load
only when a ranker or the MiniLM encoder is used.
"""
from .baselines import attack_auc, logreg_word_weights
from .component import DelinkRedactor, make_redactor
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

__all__ = [
    "DelinkRedactor",
    "DivergenceEstimate",
    "DocTensorEmbedder",
    "PrivacySettings",
    "RankerSettings",
    "TransformerEncoder",
    "attack_auc",
    "bounding_epsilon",
    "gaussian_divergence",
    "knn_divergence",
    "logreg_word_weights",
    "make_redactor",
    "paper_estimate",
    "plot_privacy_curve",
    "privacy_curve",
    "renyi_divergence",
    "train_ranker",
    "zcdp_epsilon",
]
