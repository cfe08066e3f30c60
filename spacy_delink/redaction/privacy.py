"""Privacy estimate of a redaction: a Rényi divergence between redacted collections, as (ε, δ).

Three estimators of D_α(P‖Q) between two samples of sentence embeddings:

* ``gaussian`` (the default) fits one Gaussian per side with a shared (pooled) covariance
  and returns the closed form D_α = α·Δ²/2, Δ² the Mahalanobis distance of the means,
  debiased for the sample size and dimension (the Hotelling T² correction), with an exact
  confidence interval from the noncentral F distribution. It is unbiased on Gaussians at
  d = 384 and n = 300 per side, which no nearest-neighbour estimator here is; it is blind
  to differences that show only in the covariance or in higher moments.
* ``knn`` is the nearest-neighbour-ratio estimator of Noshad et al. (2017): the share of
  each side among a point's k ≈ √n neighbours estimates the density ratio there. It sees
  any kind of difference in principle but is biased towards 0 at these sample sizes
  (docs/companions.md has the table).
* ``paper`` is the estimator of Gusain & Leith's own code: k = 5 neighbour counts within
  the radius of a point's k-th neighbour on its own side, duplicates merged after
  rounding, the larger direction, clipped at 0.

The conversion to (ε, δ) goes through zero-concentrated DP (Bun & Steinke 2016):
ρ = D_α/α, ε = ρ + 2·√(ρ·ln(1/δ)) (exact for the Gaussian model, where D_α = α·ρ at
every α); :func:`bounding_epsilon` is the paper's route through a line ξ + ρ·α over
several orders.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping

import numpy as np

from ..extras import require_extra

require_extra("redaction", "the redaction ε estimate")  # before SciPy's own ImportError

from scipy.optimize import brentq
from scipy.spatial import cKDTree
from scipy.stats import ncf
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_limits

from ..errors import InputError

QUERY_CHUNK = 1024
ESTIMATORS = ("gaussian", "knn", "paper")
# Eigenvalues of the pooled covariance below this share of the largest one span no variance.
_RANK_TOLERANCE = 1e-10
# The paper's orders for the (ξ, ρ) line and its neighbour count and rounding.
PAPER_ALPHAS = (2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)
PAPER_K = 5
PAPER_ROUNDING = 5


@dataclass(frozen=True)
class DivergenceEstimate:
    """A symmetric Rényi divergence max(D_α(P‖Q), D_α(Q‖P)) with a confidence interval.

    ``low``/``high`` bound ``divergence`` at the estimator's ``confidence``: exact under
    the Gaussian model for ``gaussian``, a bootstrap for the others (which describes
    resampling noise only, not the estimator's bias). ``dimensions`` is the dimension the
    estimate worked in (the rank of the pooled covariance for ``gaussian``).
    """

    divergence: float
    low: float
    high: float
    forward: float
    backward: float
    alpha: float
    estimator: str
    dimensions: int
    k: int | None = None

    def to_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def _check_samples(name: str, sample: np.ndarray) -> np.ndarray:
    sample = np.asarray(sample, dtype=np.float64)
    if sample.ndim != 2 or len(sample) < 2:
        raise InputError(f"{name}: expected a 2-D array of at least 2 points, got shape {sample.shape}")
    if not np.all(np.isfinite(sample)):
        raise InputError(f"{name}: contains NaN or infinite values; clean the embeddings first")
    return sample


def _check_pair(sample_p: np.ndarray, sample_q: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    if not alpha > 1.0:
        raise InputError(f"alpha={alpha}: the Rényi order must be greater than 1 (zCDP conversion needs α > 1)")
    sample_p = _check_samples("sample_p", sample_p)
    sample_q = _check_samples("sample_q", sample_q)
    if sample_p.shape[1] != sample_q.shape[1]:
        raise InputError(f"the samples have different dimensions ({sample_p.shape[1]} vs {sample_q.shape[1]})")
    return sample_p, sample_q


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise InputError(f"confidence={confidence} must lie strictly between 0 and 1")


# ---------------------------------------------------------------- the Gaussian estimator


def _noncentrality_bound(f_observed: float, dfn: int, dfd: int, tail: float) -> float:
    """The noncentrality λ at which P_λ(F ≤ f_observed) = tail (0 if already below at λ = 0)."""
    if ncf.cdf(f_observed, dfn, dfd, 0.0) <= tail:
        return 0.0
    upper = max(1.0, f_observed * dfn)
    while ncf.cdf(f_observed, dfn, dfd, upper) > tail:
        upper *= 2.0
    return float(brentq(lambda lam: ncf.cdf(f_observed, dfn, dfd, lam) - tail, 0.0, upper, xtol=1e-10, rtol=1e-10))


def gaussian_divergence(
    sample_p: np.ndarray, sample_q: np.ndarray, alpha: float = 2.0, confidence: float = 0.95
) -> DivergenceEstimate:
    """D_α = α·Δ²/2 between Gaussians with a shared covariance fitted to the two samples.

    With m the squared Mahalanobis distance of the sample means under the pooled
    covariance, N = n_p + n_q points, d dimensions and c = 1/n_p + 1/n_q,
    Δ̂² = (N − d − 3)/(N − 2)·m − d·c is unbiased, and (N − d − 1)/(d(N − 2))·m/c follows a
    noncentral F(d, N − d − 1) with noncentrality Δ²/c, which gives the interval. The work
    happens in the span of the pooled covariance (d = its rank), so duplicate points are
    fine; two samples that differ where neither varies are told apart surely (D = ∞).
    """
    sample_p, sample_q = _check_pair(sample_p, sample_q, alpha)
    _check_confidence(confidence)
    n_p, n_q = len(sample_p), len(sample_q)
    n = n_p + n_q
    difference = sample_p.mean(axis=0) - sample_q.mean(axis=0)
    centred = np.vstack([sample_p - sample_p.mean(axis=0), sample_q - sample_q.mean(axis=0)])
    with threadpool_limits(1):  # a d x d decomposition gains nothing from threads and loses much to a busy machine
        eigenvalues, eigenvectors = np.linalg.eigh(centred.T @ centred / (n - 2))
    # Float noise (e.g. one text encoded in two batches) must not count as variance or as a
    # difference: both are measured against the points' own squared size.
    tolerance = _RANK_TOLERANCE * max(float(np.mean(np.vstack([sample_p, sample_q]) ** 2)) * sample_p.shape[1], 1e-300)
    kept = eigenvalues > tolerance
    coordinates = eigenvectors.T @ difference
    dimensions = int(kept.sum())
    if float((coordinates[~kept] ** 2).sum()) > tolerance:
        inf = math.inf
        return DivergenceEstimate(inf, inf, inf, inf, inf, alpha, "gaussian", dimensions)
    if dimensions == 0:  # both samples are one and the same point
        return DivergenceEstimate(0.0, 0.0, 0.0, 0.0, 0.0, alpha, "gaussian", 0)
    dfd = n - dimensions - 1
    if dfd < 3:
        raise InputError(
            f"the Gaussian estimate needs more points than dimensions: {n} points in {dimensions} dimensions; "
            f"add texts or project on fewer PCA axes (--pca {max(1, n - 8)} or less)"
        )
    spread = 1.0 / n_p + 1.0 / n_q
    mahalanobis = float((coordinates[kept] ** 2 / eigenvalues[kept]).sum())
    unbiased = (n - dimensions - 3) / (n - 2) * mahalanobis - dimensions * spread
    f_observed = dfd / (dimensions * (n - 2)) * mahalanobis / spread
    tail = (1.0 - confidence) / 2.0
    low = spread * _noncentrality_bound(f_observed, dimensions, dfd, 1.0 - tail)
    high = spread * _noncentrality_bound(f_observed, dimensions, dfd, tail)
    divergence = alpha / 2.0 * unbiased
    return DivergenceEstimate(
        divergence, alpha / 2.0 * low, alpha / 2.0 * high, divergence, divergence, alpha, "gaussian", dimensions
    )


# ---------------------------------------------------------------- nearest-neighbour estimators


def default_k(n_smaller: int) -> int:
    """k ≈ √n: large enough to average out the neighbour counts, small enough to stay local."""
    return max(1, int(round(math.sqrt(n_smaller))))


def neighbour_ratio_terms(sample_p: np.ndarray, sample_q: np.ndarray, k: int) -> np.ndarray:
    """Per-point estimates of p(x)/q(x) at every point x of ``sample_p`` (Noshad et al.).

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


def _percentile_interval(boot: np.ndarray, confidence: float) -> tuple[float, float]:
    if boot.size == 0:
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(boot, [tail, 100.0 - tail])
    return float(low), float(high)


def knn_divergence(
    sample_p: np.ndarray,
    sample_q: np.ndarray,
    alpha: float = 2.0,
    k: int | None = None,
    n_bootstrap: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> DivergenceEstimate:
    """Symmetric neighbour-ratio Rényi divergence with a bootstrap of the per-point terms.

    The bootstrap resamples the ratio terms rather than the points, because resampled
    points would be exact duplicates and inflate their own neighbour counts.
    """
    sample_p, sample_q = _check_pair(sample_p, sample_q, alpha)
    _check_confidence(confidence)
    k = default_k(min(len(sample_p), len(sample_q))) if k is None else k
    forward_terms = neighbour_ratio_terms(sample_p, sample_q, k)
    backward_terms = neighbour_ratio_terms(sample_q, sample_p, k)
    forward = float(_renyi_from_ratios(forward_terms, alpha))
    backward = float(_renyi_from_ratios(backward_terms, alpha))
    rng = np.random.default_rng(seed)
    boot = np.maximum(
        _renyi_from_ratios(forward_terms[rng.integers(0, len(forward_terms), (n_bootstrap, len(forward_terms)))], alpha),
        _renyi_from_ratios(backward_terms[rng.integers(0, len(backward_terms), (n_bootstrap, len(backward_terms)))], alpha),
    )
    low, high = _percentile_interval(boot, confidence)
    return DivergenceEstimate(max(forward, backward), low, high, forward, backward, alpha, "knn", sample_p.shape[1], k)


def paper_log_moments(
    sample_p: np.ndarray, sample_q: np.ndarray, alphas: tuple[float, ...], k: int = PAPER_K, rounding: int = PAPER_ROUNDING
) -> np.ndarray:
    """D_α(P‖Q) at each α as Gusain & Leith's code estimates it (not clipped).

    Points are rounded to ``rounding`` decimals and merged with their counts. Around each
    distinct Q point y, r is the distance to its k-th distinct Q neighbour; k_q counts the
    Q points among y and those k neighbours, k_p the P points within r. Then
    D_α = log Σ_y w_y·((k_p/Σk_p)/(k_q/Σk_q))^α / (α − 1) with w_y = k_q/Σk_q (the
    volume terms cancel because both counts share one radius).
    """
    p_points, p_counts = np.unique(np.round(sample_p, rounding), axis=0, return_counts=True)
    q_points, q_counts = np.unique(np.round(sample_q, rounding), axis=0, return_counts=True)
    neighbours = min(k + 1, len(q_points))
    distances, indices = cKDTree(q_points).query(q_points, neighbours)
    distances, indices = distances.reshape(len(q_points), -1), indices.reshape(len(q_points), -1)
    k_q = q_counts[indices].sum(axis=1).astype(np.float64)
    radius = distances.max(axis=1)
    p_tree = cKDTree(p_points)
    k_p = np.array(
        [p_counts[members].sum() for members in p_tree.query_ball_point(q_points, radius)], dtype=np.float64
    )
    if k_p.sum() == 0:  # no P point near any Q point: the samples do not overlap
        return np.full(len(alphas), math.inf)
    weight = k_q / k_q.sum()
    ratio = (k_p / k_p.sum()) / weight
    with np.errstate(divide="ignore"):
        return np.array([math.log(float((weight * ratio**alpha).sum())) / (alpha - 1.0) for alpha in alphas])


def paper_estimate(
    sample_p: np.ndarray,
    sample_q: np.ndarray,
    alpha: float = 2.0,
    n_bootstrap: int = 25,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[DivergenceEstimate, dict[float, float]]:
    """The paper's estimator: max of both directions of :func:`paper_log_moments`, clipped at 0.

    Its value is the mean over ``n_bootstrap`` resamples of both samples (with
    replacement, duplicates merged like any other), as in the paper's code; ``low``/``high``
    are percentiles of those resamples. The second result holds the same mean at every
    order of :data:`PAPER_ALPHAS` (and ``alpha``), for :func:`bounding_epsilon`.
    """
    _check_confidence(confidence)
    alphas = tuple(sorted({*PAPER_ALPHAS, float(alpha)}))
    boot = _paper_bootstrap(sample_p, sample_q, alphas, n_bootstrap, seed)
    values = boot[:, alphas.index(float(alpha))]
    low, high = _percentile_interval(values, confidence)
    value = float(values.mean())
    estimate = DivergenceEstimate(value, low, high, value, value, alpha, "paper", np.shape(sample_p)[1], PAPER_K)
    return estimate, dict(zip(alphas, boot.mean(axis=0).tolist()))


def _paper_bootstrap(
    sample_p: np.ndarray, sample_q: np.ndarray, alphas: tuple[float, ...], n_bootstrap: int, seed: int
) -> np.ndarray:
    """(n_bootstrap, len(alphas)) clipped symmetric paper divergences over resamples."""
    sample_p, sample_q = _check_pair(sample_p, sample_q, min(alphas))
    if n_bootstrap < 1:
        raise InputError(f"n_bootstrap={n_bootstrap}: the paper's estimate averages at least one resample")
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n_bootstrap):
        p = sample_p[rng.integers(0, len(sample_p), len(sample_p))]
        q = sample_q[rng.integers(0, len(sample_q), len(sample_q))]
        rows.append(np.maximum(np.maximum(paper_log_moments(p, q, alphas), paper_log_moments(q, p, alphas)), 0.0))
    return np.array(rows)


def renyi_divergence(
    sample_p: np.ndarray,
    sample_q: np.ndarray,
    alpha: float = 2.0,
    estimator: str = "gaussian",
    *,
    k: int | None = None,
    n_bootstrap: int | None = None,
    confidence: float = 0.95,
    seed: int = 0,
) -> DivergenceEstimate:
    """The symmetric Rényi divergence by the named ``estimator`` (see the module docstring)."""
    if estimator == "gaussian":
        return gaussian_divergence(sample_p, sample_q, alpha, confidence)
    if estimator == "knn":
        return knn_divergence(sample_p, sample_q, alpha, k, 200 if n_bootstrap is None else n_bootstrap, confidence, seed)
    if estimator == "paper":
        return paper_estimate(sample_p, sample_q, alpha, 25 if n_bootstrap is None else n_bootstrap, confidence, seed)[0]
    raise InputError(f"estimator={estimator!r} is unknown; use one of {', '.join(ESTIMATORS)}")


# ---------------------------------------------------------------- embeddings and ε


def prepare_embeddings(
    sample_p: np.ndarray,
    sample_q: np.ndarray,
    pca_dim: int | None = None,
    seed: int = 0,
    explained_variance: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalize both samples and optionally project them on a PCA fitted to their union.

    ``pca_dim`` keeps that many axes; ``explained_variance`` (the paper's route, 0.9 there)
    keeps the fewest axes that explain that share of the variance.
    """
    sample_p = _check_samples("sample_p", sample_p)
    sample_q = _check_samples("sample_q", sample_q)
    if pca_dim and explained_variance is not None:
        raise InputError("give a PCA dimension or an explained-variance share, not both")

    def normalize(rows: np.ndarray) -> np.ndarray:
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        return rows / np.where(norms > 0.0, norms, 1.0)

    sample_p, sample_q = normalize(sample_p), normalize(sample_q)
    pooled = np.vstack([sample_p, sample_q])
    if pca_dim:
        if pca_dim > min(sample_p.shape[1], len(pooled)):
            raise InputError(f"pca_dim={pca_dim} exceeds the embedding dimension or the number of points")
        pca = PCA(n_components=pca_dim, random_state=seed).fit(pooled)
    elif explained_variance is not None:
        if not 0.0 < explained_variance <= 1.0:
            raise InputError(f"explained_variance={explained_variance} must lie in (0, 1]")
        pca = PCA(random_state=seed).fit(pooled)
        kept = int(np.searchsorted(np.cumsum(pca.explained_variance_ratio_), explained_variance - 1e-12) + 1)
        pca = PCA(n_components=min(kept, pca.n_components_), random_state=seed).fit(pooled)
    else:
        return sample_p, sample_q
    return pca.transform(sample_p), pca.transform(sample_q)


def _check_delta(delta: float) -> float:
    if not 0.0 < delta < 1.0:
        raise InputError(f"delta={delta} must lie strictly between 0 and 1")
    return math.log(1.0 / delta)


def zcdp_epsilon(divergence: float, alpha: float, delta: float) -> float:
    """(ε, δ) from a Rényi divergence through ρ-zCDP: ρ = D_α/α, ε = ρ + 2·√(ρ·ln(1/δ)).

    A negative divergence estimate (sampling noise around 0) counts as 0.
    """
    if not alpha > 1.0:
        raise InputError(f"alpha={alpha}: the Rényi order must be greater than 1")
    log_term = _check_delta(delta)
    rho = max(divergence, 0.0) / alpha
    return rho + 2.0 * math.sqrt(rho * log_term)


def bounding_epsilon(divergences: Mapping[float, float], delta: float) -> tuple[float, float, float]:
    """(ε, ξ, ρ) from divergences at several orders, by the paper's route through a line ξ + ρ·α.

    (ξ, ρ)-zCDP (D_α ≤ ξ + ρ·α for every α > 1) implies (ξ + ρ + 2√(ρ ln 1/δ), δ)-DP
    (Bun & Steinke 2016, Prop. 1.3). Only finitely many orders are measured, so a line
    that merely bounds them (a flat one at their maximum, say) says nothing beyond the
    largest. Here ρ is the slope between the two largest orders, the growth the data show
    at the top of the grid, and ξ the smallest intercept that puts every measured order
    under the line. The paper takes the line through the knee of the curve and the next
    order (raised by 0.1) instead; neither is a proof.
    """
    log_term = _check_delta(delta)
    alphas = sorted(divergences)
    if not alphas or alphas[0] <= 1.0:
        raise InputError("the bounding line needs divergences at one or more orders α > 1")
    values = [max(divergences[a], 0.0) for a in alphas]
    if not all(math.isfinite(v) for v in values):
        return math.inf, math.inf, math.inf
    if len(alphas) == 1:
        rho = values[0] / alphas[0]
    else:
        rho = max(0.0, (values[-1] - values[-2]) / (alphas[-1] - alphas[-2]))
    xi = max(0.0, max(v - rho * a for a, v in zip(alphas, values)))
    return xi + rho + 2.0 * math.sqrt(rho * log_term), xi, rho