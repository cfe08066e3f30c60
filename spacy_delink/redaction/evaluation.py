"""ε against redaction level per method (Figure 2 of Gusain & Leith), plus a TF-IDF attack's AUC.

Each redactor is trained on a train split and judged on a test split it never saw. The
mechanism is applied to both collections, as in differential privacy: the question is
whether the *outputs* for sensitive and safe inputs can be told apart.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import IO, Any, Sequence

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from tqdm import tqdm

from ..errors import InputError
from .baselines import attack_auc
from .component import METHODS, DelinkRedactor
from .embeddings import TransformerEncoder, word_token_indices
from .privacy import prepare_embeddings, renyi_divergence, zcdp_epsilon
from .ranker import RankerSettings, redaction_count


@dataclass(frozen=True)
class PrivacySettings:
    """How the privacy of each redacted test split is measured."""

    alpha: float = 2.0
    delta: float | None = None
    knn_k: int | None = None
    pca_dim: int | None = None
    n_bootstrap: int = 200
    attack_folds: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "alpha": self.alpha > 1.0,
            "delta": self.delta is None or 0.0 < self.delta < 1.0,
            "knn_k": self.knn_k is None or self.knn_k >= 1,
            "pca_dim": self.pca_dim is None or self.pca_dim >= 1,
            "n_bootstrap": self.n_bootstrap >= 0,
            "attack_folds": self.attack_folds >= 2,
        }
        for name, ok in checks.items():
            if not ok:
                raise InputError(f"privacy setting {name}={getattr(self, name)!r} is out of range; see PrivacySettings")


def split_texts(texts: Sequence[str], test_share: float, seed: int) -> tuple[list[str], list[str]]:
    """A seeded train/test split of one collection (no text lands on both sides)."""
    if not 0.0 < test_share < 1.0:
        raise InputError(f"test_share={test_share} must lie strictly between 0 and 1")
    order = np.random.default_rng(seed).permutation(len(texts))
    n_test = int(round(test_share * len(texts)))
    if n_test < 2 or len(texts) - n_test < 2:
        raise InputError(f"{len(texts)} texts are too few to split with test_share={test_share}")
    return [texts[i] for i in order[n_test:]], [texts[i] for i in order[:n_test]]


def sample_texts(texts: Sequence[str], limit: int | None, seed: int) -> list[str]:
    """At most ``limit`` texts, drawn without replacement in a seeded order (all of them if no limit)."""
    if limit is None or limit >= len(texts):
        return list(texts)
    if limit < 1:
        raise InputError(f"--max-texts {limit}: must be at least 1")
    return [texts[i] for i in np.sort(np.random.default_rng(seed).permutation(len(texts))[:limit])]


def parse_fractions(text: str) -> list[float]:
    """'0.1,0.2,0.4' → [0.1, 0.2, 0.4], each in (0, 1]."""
    try:
        fractions = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--fractions {text!r}: expected comma-separated numbers such as 0.1,0.2,0.4") from None
    if not fractions or any(not 0.0 < f <= 1.0 for f in fractions):
        raise InputError(f"--fractions {text!r}: give one or more shares of words in (0, 1]")
    return sorted(set(fractions))


def measure_privacy(
    sensitive: Sequence[str], safe: Sequence[str], encoder: TransformerEncoder, settings: PrivacySettings
) -> dict[str, float]:
    """Divergence, ε (with bootstrap bounds) and attack AUC between two sets of (redacted) texts."""
    sample_p, sample_q = prepare_embeddings(
        encoder.sentence_embeddings(sensitive), encoder.sentence_embeddings(safe), settings.pca_dim, settings.seed
    )
    estimate = renyi_divergence(
        sample_p, sample_q, settings.alpha, settings.knn_k, settings.n_bootstrap, seed=settings.seed
    )
    delta = settings.delta if settings.delta is not None else 1.0 / (len(sensitive) + len(safe))
    return {
        "divergence": estimate.divergence,
        "divergence_low": estimate.low,
        "divergence_high": estimate.high,
        "epsilon": zcdp_epsilon(estimate.divergence, settings.alpha, delta),
        "epsilon_low": zcdp_epsilon(estimate.low, settings.alpha, delta),
        "epsilon_high": zcdp_epsilon(estimate.high, settings.alpha, delta),
        "delta": delta,
        "k": estimate.k,
        "attack_auc": attack_auc(sensitive, safe, settings.attack_folds, settings.seed),
    }


def privacy_curve(
    nlp: Language,
    train: tuple[Sequence[str], Sequence[str]],
    test: tuple[Sequence[str], Sequence[str]],
    methods: Sequence[str],
    fractions: Sequence[float],
    ranker_settings: RankerSettings = RankerSettings(),
    privacy_settings: PrivacySettings = PrivacySettings(),
    encoder: TransformerEncoder | None = None,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """One row per (method, fraction), plus an unredacted reference row (method "none").

    ``train`` and ``test`` are (sensitive, safe) text pairs. Word embeddings are computed
    once per split and shared by every ranker.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise InputError(f"--method {','.join(unknown) or '(none)'}: choose from {', '.join(METHODS)}")
    encoder = encoder or TransformerEncoder()
    train_docs = [list(nlp.pipe(texts)) for texts in train]
    test_docs = [list(nlp.pipe(texts)) for texts in test]
    need_embeddings = "ranker" in methods
    train_embeddings = [encoder.embed_docs(docs, progress) if need_embeddings else None for docs in train_docs]
    test_embeddings = [encoder.embed_docs(docs, progress) if need_embeddings else None for docs in test_docs]
    rows = [{"method": "none", "fraction": 0.0, "redacted_share": 0.0, "train_seconds": 0.0,
             **measure_privacy(test[0], test[1], encoder, privacy_settings)}]
    jobs = [(method, fraction) for method in methods for fraction in fractions]
    for method, fraction in tqdm(jobs, desc="redaction levels", disable=not progress):
        redactor = DelinkRedactor(nlp, method=method, fraction=fraction, seed=ranker_settings.seed)
        started = time.perf_counter()
        redactor.fit(train_docs[0], train_docs[1], ranker_settings, False, train_embeddings[0], train_embeddings[1])
        train_seconds = time.perf_counter() - started
        redacted = [
            [redactor.annotate(doc, scores)._.delink_redacted_text for doc, scores in zip(docs, redactor.word_scores(docs, embeddings))]
            for docs, embeddings in zip(test_docs, test_embeddings)
        ]
        rows.append({
            "method": method,
            "fraction": fraction,
            "redacted_share": redacted_share(test_docs[0] + test_docs[1], fraction),
            "train_seconds": round(train_seconds, 3),
            **measure_privacy(redacted[0], redacted[1], encoder, privacy_settings),
        })
    return rows


def redacted_share(docs: Sequence[Doc], fraction: float) -> float:
    """The share of all words masked at ``fraction`` (above it, because counts round up per text)."""
    lengths = [len(word_token_indices(doc)) for doc in docs]
    return sum(redaction_count(n, fraction) for n in lengths) / max(sum(lengths), 1)


def plot_privacy_curve(rows: Sequence[dict[str, Any]], handle: IO[bytes], title: str = "") -> None:
    """ε against the share of words redacted, one line per method, bootstrap bounds shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.0, 4.0))
    reference = next((row for row in rows if row["method"] == "none"), None)
    for method in [m for m in METHODS if any(row["method"] == m for row in rows)]:
        points = [row for row in rows if row["method"] == method]
        if reference is not None:
            points = [reference, *points]
        x = [row["fraction"] for row in points]
        axes.plot(x, [row["epsilon"] for row in points], marker="o", label=method)
        axes.fill_between(x, [row["epsilon_low"] for row in points], [row["epsilon_high"] for row in points], alpha=0.2)
    axes.set_xlabel("share of words redacted")
    axes.set_ylabel("ε (zCDP, δ = 1/n)")
    axes.set_title(title or "privacy of redacted texts")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(handle, format="png", dpi=120)
    plt.close(figure)
