"""Privacy estimate of a redaction: a kNN Rényi divergence between redacted collections, as (ε, δ).

The divergence follows the nearest-neighbour-ratio idea of Noshad et al. (2017): in the
pooled sample, the share of each collection among a point's k nearest neighbours estimates
the density ratio there, with no volume or dimension term, so it stays usable on sentence
embeddings. The conversion goes through zero-concentrated DP (Bun & Steinke 2016).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from sklearn.decomposition import PCA

from ..errors import InputError

QUERY_CHUNK = 1024


@dataclass(frozen=True)
class DivergenceEstimate:
    """A symmetric Rényi divergence with its percentile-bootstrap interval."""

    divergence: float
    low: float
    high: float
    forward: float
    backward: float
    alpha: float
    k: int

    def to_dict(self) -> dict[str, float]:
        return asdict(self)


def _check_samples(name: str, sample: np.ndarray) -> np.ndarray:
    sample = np.asarray(sample, dtype=np.float64)
    if sample.ndim != 2 or len(sample) < 2:
        raise InputError(f"{name}: expected a 2-D array of at least 2 points, got shape {sample.shape}")
    if not np.all(np.isfinite(sample)):
        raise InputError(f"{name}: contains NaN or infinite values; clean the embeddings first")
    return sample


def default_k(n_smaller: int) -> int:
    """k ≈ √n: large enough to average out the neighbour counts, small enough to stay local."""
    return max(1, int(round(math.sqrt(n_smaller))))


def neighbour_ratio_terms(sample_p: np.ndarray, sample_q: np.ndarray, k: int) -> np.ndarray:
    """Per-point estimates of p(x)/q(x) at every point x of ``sample_p``.

    All points tied with the k-th nearest distance are counted, so duplicate points (common
    once most words are masked) weigh by their multiplicity instead of by array order; the
    point itself is left out and both counts are smoothed by one.
    """
    sample_p = _check_samples("sample_p", sample_p)
    sample_q = _check_samples("sample_q", sample_q)
    n_p, n_q = len(sample_p), len(sample_q)
    if not 1 <= k < n_p + n_q - 1:
        raise InputError(f"k={k} must lie between 1 and {n_p + n_q - 2} (the pooled sample size minus 2)")
    pooled = np.vstack([sample_p, sample_q])
    pooled_sq = np.einsum("ij,ij->i", pooled, pooled)
    from_p = np.arange(len(pooled)) < n_p
    ratios = np.empty(n_p)
    for start in range(0, n_p, QUERY_CHUNK):
        queries = sample_p[start : start + QUERY_CHUNK]
        sq_dist = pooled_sq[None, :] - 2.0 * queries @ pooled.T + pooled_sq[start : start + len(queries), None]
        np.maximum(sq_dist, 0.0, out=sq_dist)
        rows = np.arange(len(queries))
        sq_dist[rows, start + rows] = np.inf
        radius = np.partition(sq_dist, k - 1, axis=1)[:, k - 1]
        inside = sq_dist <= radius[:, None] * (1.0 + 1e-9) + 1e-12
        count_p = inside[:, from_p].sum(axis=1)
        count_q = inside[:, ~from_p].sum(axis=1)
        ratios[start : start + len(queries)] = ((count_p + 1.0) / n_p) / ((count_q + 1.0) / (n_q + 1.0))
    return ratios


def _renyi_from_ratios(ratios: np.ndarray, alpha: float) -> np.ndarray:
    """D_α(P‖Q) = log E_P[(p/q)^(α−1)] / (α−1), along the last axis."""
    return np.log(np.mean(ratios ** (alpha - 1.0), axis=-1)) / (alpha - 1.0)


def renyi_divergence(
    sample_p: np.ndarray,
    sample_q: np.ndarray,
    alpha: float = 2.0,
    k: int | None = None,
    n_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> DivergenceEstimate:
    """Symmetric kNN Rényi divergence max(D_α(P‖Q), D_α(Q‖P)) with a bootstrap interval.

    The bootstrap resamples the per-point ratio terms rather than the points, because
    resampled points would be exact duplicates and inflate their own neighbour counts.
    """
    if not alpha > 1.0:
        raise InputError(f"alpha={alpha}: the Rényi order must be greater than 1 (zCDP conversion needs α > 1)")
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence={confidence} must lie strictly between 0 and 1")
    sample_p = _check_samples("sample_p", sample_p)
    sample_q = _check_samples("sample_q", sample_q)
    if sample_p.shape[1] != sample_q.shape[1]:
        raise InputError(f"the samples have different dimensions ({sample_p.shape[1]} vs {sample_q.shape[1]})")
    k = default_k(min(len(sample_p), len(sample_q))) if k is None else k
    forward_terms = neighbour_ratio_terms(sample_p, sample_q, k)
    backward_terms = neighbour_ratio_terms(sample_q, sample_p, k)
    forward = float(_renyi_from_ratios(forward_terms, alpha))
    backward = float(_renyi_from_ratios(backward_terms, alpha))
    rng = np.random.default_rng(seed)
    boot_forward = _renyi_from_ratios(
        forward_terms[rng.integers(0, len(forward_terms), (n_bootstrap, len(forward_terms)))], alpha
    )
    boot_backward = _renyi_from_ratios(
        backward_terms[rng.integers(0, len(backward_terms), (n_bootstrap, len(backward_terms)))], alpha
    )
    boot = np.maximum(boot_forward, boot_backward)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(boot, [tail, 100.0 - tail]) if n_bootstrap > 0 else (math.nan, math.nan)
    return DivergenceEstimate(
        divergence=max(forward, backward),
        low=float(low),
        high=float(high),
        forward=forward,
        backward=backward,
        alpha=alpha,
        k=k,
    )


def prepare_embeddings(
    sample_p: np.ndarray, sample_q: np.ndarray, pca_dim: int | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalize both samples and optionally project them on a PCA fitted to their union."""
    sample_p = _check_samples("sample_p", sample_p)
    sample_q = _check_samples("sample_q", sample_q)

    def normalize(rows: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms > 0.0, norms, 1.0)

    sample_p, sample_q = normalize(sample_p), normalize(sample_q)
    if pca_dim:
        if pca_dim > min(sample_p.shape[1], len(sample_p) + len(sample_q)):
            raise InputError(f"pca_dim={pca_dim} exceeds the embedding dimension or the number of points")
        pca = PCA(n_components=pca_dim, random_state=seed).fit(np.vstack([sample_p, sample_q]))
        sample_p, sample_q = pca.transform(sample_p), pca.transform(sample_q)
    return sample_p, sample_q


def zcdp_epsilon(divergence: float, alpha: float, delta: float) -> float:
    """(ε, δ) from a Rényi divergence through ρ-zCDP: ρ = D_α/α, ε = ρ + 2·√(ρ·ln(1/δ)).

    A negative divergence estimate (sampling noise around 0) counts as 0.
    """
    if not alpha > 1.0:
        raise InputError(f"alpha={alpha}: the Rényi order must be greater than 1")
    if not 0.0 < delta < 1.0:
        raise InputError(f"delta={delta} must lie strictly between 0 and 1")
    rho = max(divergence, 0.0) / alpha
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))
