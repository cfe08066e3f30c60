"""The logistic-regression baselines (``logreg``: largest |weight|; ``logreg_d0``: largest weight towards D0)
and the attacker: both logistic regression on TF-IDF features."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..extras import require_extra

require_extra("redaction", "the redaction baselines")  # before scikit-learn's own ImportError

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline

from ..errors import InputError


def _lowercase_words(words: Sequence[str]) -> list[str]:
    return [word.lower() for word in words]


def logreg_word_weights(
    sensitive_words: Sequence[Sequence[str]], safe_words: Sequence[Sequence[str]], seed: int = 0
) -> dict[str, float]:
    """Per-word logistic-regression weights toward the sensitive collection (positive = sensitive).

    The component ranks by |weight| (``logreg``: a word marking either side reveals the
    source) or by the weight itself (``logreg_d0``, the paper's baseline).

    Features are TF-IDF over the same lowercased words the redactor sees, so every weight maps
    back to a word that can be masked.
    """
    if not sensitive_words or not safe_words:
        raise InputError("the logistic-regression baseline needs texts on both the sensitive and the safe side")
    vectorizer = TfidfVectorizer(analyzer=_lowercase_words)
    features = vectorizer.fit_transform([*sensitive_words, *safe_words])
    labels = np.r_[np.ones(len(sensitive_words)), np.zeros(len(safe_words))]
    classifier = LogisticRegression(max_iter=2000, random_state=seed).fit(features, labels)
    return dict(zip(vectorizer.get_feature_names_out().tolist(), classifier.coef_[0].tolist()))


def attack_auc(sensitive_texts: Sequence[str], safe_texts: Sequence[str], folds: int = 5, seed: int = 0) -> float:
    """Cross-validated ROC AUC of a TF-IDF (1–2-gram) logistic-regression attacker telling the sides apart.

    0.5 means the attacker cannot tell; 1.0 means it always can.
    """
    if min(len(sensitive_texts), len(safe_texts)) < folds:
        raise InputError(f"the attack needs at least {folds} texts per side for {folds}-fold cross-validation")
    attacker = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
        LogisticRegression(max_iter=2000, random_state=seed),
    )
    labels = np.r_[np.ones(len(sensitive_texts)), np.zeros(len(safe_texts))]
    splits = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    scores = cross_val_score(attacker, [*sensitive_texts, *safe_texts], labels, cv=splits, scoring="roc_auc")
    return float(np.mean(scores))
