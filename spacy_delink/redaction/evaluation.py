"""ε against redaction level per method (Figure 2 of Gusain & Leith), plus a TF-IDF attack's AUC.

Each redactor is trained on a train split and judged on a test split it never saw. The
mechanism is applied to both collections, as in differential privacy: the question is
whether the *outputs* for sensitive and safe inputs can be told apart. Every figure is
measured over several random splits (each with its own training run) and reported as
mean and standard deviation: one split's confidence interval describes that split's
sampling noise only, and different splits of the same data disagree by more.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import IO, Any, Sequence

import numpy as np
from spacy.language import Language
from spacy.tokens import Doc
from tqdm import tqdm

from ..errors import InputError
from .baselines import attack_auc
from .component import METHODS, DelinkRedactor
from .embeddings import TransformerEncoder, word_token_indices
from .privacy import ESTIMATORS, bounding_epsilon, paper_estimate, prepare_embeddings, renyi_divergence, zcdp_epsilon
from .ranker import RankerSettings, redaction_count

# The paper keeps the fewest PCA axes that explain this share of the variance.
PAPER_EXPLAINED_VARIANCE = 0.9
# Figures averaged over the splits of one (method, fraction) row.
SPLIT_FIGURES = ("divergence", "epsilon", "epsilon_high", "attack_auc")


@dataclass(frozen=True)
class PrivacySettings:
    """How the privacy of each redacted test split is measured (see :mod:`.privacy` for the estimators)."""

    alpha: float = 2.0
    delta: float | None = None
    estimator: str = "gaussian"
    knn_k: int | None = None
    pca_dim: int | None = None
    n_bootstrap: int | None = None  # resamples for the knn (200) and paper (25) estimators
    confidence: float = 0.95
    attack_folds: int = 5
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "alpha": self.alpha > 1.0,
            "delta": self.delta is None or 0.0 < self.delta < 1.0,
            "estimator": self.estimator in ESTIMATORS,
            "knn_k": self.knn_k is None or self.knn_k >= 1,
            "pca_dim": self.pca_dim is None or self.pca_dim >= 1,
            "n_bootstrap": self.n_bootstrap is None or self.n_bootstrap >= 1,
            "confidence": 0.0 < self.confidence < 1.0,
            "attack_folds": self.attack_folds >= 2,
        }
        for name, ok in checks.items():
            if not ok:
                raise InputError(f"privacy setting {name}={getattr(self, name)!r} is out of range; see PrivacySettings")


def split_texts(texts: Sequence[str], test_share: float, seed: int) -> tuple[list[int], list[int]]:
    """Indices of a seeded train/test split of one collection (no text lands on both sides)."""
    if not 0.0 < test_share < 1.0:
        raise InputError(f"test_share={test_share} must lie strictly between 0 and 1")
    order = np.random.default_rng(seed).permutation(len(texts))
    n_test = int(round(test_share * len(texts)))
    if n_test < 2 or len(texts) - n_test < 2:
        raise InputError(f"{len(texts)} texts are too few to split with test_share={test_share}")
    return order[n_test:].tolist(), order[:n_test].tolist()


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


def measure_embeddings(sample_p: np.ndarray, sample_q: np.ndarray, settings: PrivacySettings) -> dict[str, float]:
    """Divergence and ε (point and bounds) between two sets of sentence embeddings.

    ``epsilon_high`` comes from the upper end of the divergence's interval, the figure to
    quote when erring on the side of caution. The ``paper`` estimator converts through the
    line ξ + ρ·α over several orders, its point estimate only.
    """
    n = len(sample_p) + len(sample_q)
    delta = settings.delta if settings.delta is not None else 1.0 / n
    paper = settings.estimator == "paper"
    explained = PAPER_EXPLAINED_VARIANCE if paper and settings.pca_dim is None else None
    sample_p, sample_q = prepare_embeddings(sample_p, sample_q, settings.pca_dim, settings.seed, explained)
    if paper:
        bootstrap = 25 if settings.n_bootstrap is None else settings.n_bootstrap
        estimate, by_alpha = paper_estimate(sample_p, sample_q, settings.alpha, bootstrap, settings.confidence, settings.seed)
        epsilon = bounding_epsilon(by_alpha, delta)[0]
    else:
        estimate = renyi_divergence(
            sample_p, sample_q, settings.alpha, settings.estimator,
            k=settings.knn_k, n_bootstrap=settings.n_bootstrap, confidence=settings.confidence, seed=settings.seed,
        )
        epsilon = zcdp_epsilon(estimate.divergence, settings.alpha, delta)
    return {
        "divergence": estimate.divergence,
        "divergence_low": estimate.low,
        "divergence_high": estimate.high,
        "epsilon": epsilon,
        "epsilon_low": zcdp_epsilon(estimate.low, settings.alpha, delta),
        "epsilon_high": zcdp_epsilon(estimate.high, settings.alpha, delta),
        "delta": delta,
        "dimensions": estimate.dimensions,
    }


def measure_privacy(
    sensitive: Sequence[str], safe: Sequence[str], encoder: TransformerEncoder, settings: PrivacySettings
) -> dict[str, float]:
    """:func:`measure_embeddings` of two sets of (redacted) texts, plus the TF-IDF attack's AUC."""
    figures = measure_embeddings(encoder.sentence_embeddings(sensitive), encoder.sentence_embeddings(safe), settings)
    figures["attack_auc"] = attack_auc(sensitive, safe, settings.attack_folds, settings.seed)
    return figures


def _summarize(method: str, fraction: float, splits: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean and standard deviation over splits of each figure, with the splits themselves."""
    row: dict[str, Any] = {"method": method, "fraction": fraction}
    for key in ("redacted_share", "train_seconds"):
        if key in splits[0]:
            row[key] = float(np.mean([split[key] for split in splits]))
    for key in SPLIT_FIGURES:
        values = np.array([split[key] for split in splits if key in split], dtype=np.float64)
        if values.size:
            row[key] = float(values.mean())
            row[f"{key}_sd"] = float(values.std(ddof=1)) if values.size > 1 else 0.0
    row["splits"] = splits
    return row


def privacy_curve(
    nlp: Language,
    texts: tuple[Sequence[str], Sequence[str]],
    methods: Sequence[str],
    fractions: Sequence[float],
    test_share: float = 0.3,
    repeats: int = 3,
    ranker_settings: RankerSettings = RankerSettings(),
    privacy_settings: PrivacySettings = PrivacySettings(),
    encoder: TransformerEncoder | None = None,
    progress: bool = False,
) -> list[dict[str, Any]]:
    """One row per (method, fraction), plus the unredacted test sets ("none") and a floor.

    ``texts`` is the (sensitive, safe) pair. Split r (r < ``repeats``) draws its train/test
    split, trains every redactor and seeds the random one with ``seed + r``. The "floor"
    row compares as many unredacted safe *train* texts as there are sensitive test texts
    with the safe test texts: two samples of one collection, so the truth is 0 and any ε
    there is the estimator's noise at this sample size. Word embeddings are computed once.
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise InputError(f"--method {','.join(unknown) or '(none)'}: choose from {', '.join(METHODS)}")
    if repeats < 1:
        raise InputError(f"--repeats {repeats}: measure over at least one split")
    encoder = encoder or TransformerEncoder()
    docs = [list(nlp.pipe(side)) for side in texts]
    embeddings = [encoder.embed_docs(side, progress) if "ranker" in methods else None for side in docs]
    by_row: dict[tuple[str, float], list[dict[str, Any]]] = {}
    jobs = [(method, fraction) for method in methods for fraction in fractions]
    for repeat in tqdm(range(repeats), desc="splits", disable=not progress):
        seed = privacy_settings.seed + repeat
        measure = replace(privacy_settings, seed=seed)
        splits = [split_texts(side, test_share, seed + 7919 * side_no) for side_no, side in enumerate(texts)]
        test_texts = [[texts[s][i] for i in splits[s][1]] for s in (0, 1)]
        floor_size = min(len(test_texts[0]), len(splits[1][0]))
        floor_texts = [texts[1][i] for i in np.random.default_rng(seed).permutation(splits[1][0])[:floor_size]]
        by_row.setdefault(("none", 0.0), []).append(
            {"seed": seed, "redacted_share": 0.0, **measure_privacy(test_texts[0], test_texts[1], encoder, measure)}
        )
        by_row.setdefault(("floor", 0.0), []).append(
            {"seed": seed, **measure_privacy(floor_texts, test_texts[1], encoder, measure)}
        )
        train_docs = [[docs[s][i] for i in splits[s][0]] for s in (0, 1)]
        test_docs = [[docs[s][i] for i in splits[s][1]] for s in (0, 1)]

        def pick(side: int, part: int) -> list[np.ndarray] | None:
            """The word embeddings of one side's train (0) or test (1) part, if computed."""
            found = embeddings[side]
            return None if found is None else [found[i] for i in splits[side][part]]

        for method, fraction in tqdm(jobs, desc=f"split {repeat + 1}", disable=not progress, leave=False):
            redactor = DelinkRedactor(nlp, method=method, fraction=fraction, seed=seed)
            started = time.perf_counter()
            redactor.fit(train_docs[0], train_docs[1], replace(ranker_settings, seed=seed), False, pick(0, 0), pick(1, 0))
            train_seconds = time.perf_counter() - started
            redacted = [
                [
                    redactor.annotate(doc, scores)._.delink_redacted_text
                    for doc, scores in zip(test_docs[s], redactor.word_scores(test_docs[s], pick(s, 1)))
                ]
                for s in (0, 1)
            ]
            by_row.setdefault((method, fraction), []).append({
                "seed": seed,
                "redacted_share": redacted_share(test_docs[0] + test_docs[1], fraction),
                "train_seconds": round(train_seconds, 3),
                **measure_privacy(redacted[0], redacted[1], encoder, measure),
            })
    return [_summarize(method, fraction, splits) for (method, fraction), splits in by_row.items()]


def redacted_share(docs: Sequence[Doc], fraction: float) -> float:
    """The share of all words masked at ``fraction`` (above it, because counts round up per text)."""
    lengths = [len(word_token_indices(doc)) for doc in docs]
    return sum(redaction_count(n, fraction) for n in lengths) / max(sum(lengths), 1)


def plot_privacy_curve(rows: Sequence[dict[str, Any]], handle: IO[bytes], title: str = "") -> None:
    """ε (mean over splits) against the share of words redacted, one line per method, ± one SD shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.0, 4.0))
    reference = next((row for row in rows if row["method"] == "none"), None)
    floor = next((row for row in rows if row["method"] == "floor"), None)
    for method in [m for m in METHODS if any(row["method"] == m for row in rows)]:
        points = [row for row in rows if row["method"] == method]
        if reference is not None:
            points = [reference, *points]
        x = np.array([row["fraction"] for row in points])
        mean = np.array([row["epsilon"] for row in points])
        spread = np.array([row.get("epsilon_sd", 0.0) for row in points])
        axes.plot(x, mean, marker="o", label=method)
        axes.fill_between(x, mean - spread, mean + spread, alpha=0.2)
    if floor is not None:
        axes.axhline(floor["epsilon"], color="grey", linestyle=":", label="floor (safe vs safe)")
    axes.set_xlabel("share of words redacted")
    axes.set_ylabel("ε (zCDP, δ = 1/n), mean ± sd over splits")
    axes.set_title(title or "privacy of redacted texts")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(handle, format="png", dpi=120)
    plt.close(figure)
