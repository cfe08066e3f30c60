"""The learned redaction ranker (Gusain & Leith 2025) and its divergence-minimizing training.

A small MLP scores every word; the lowest-scored share of a text's words is redacted.
Training makes that choice differentiable with a soft top-K mask and minimizes a
divergence between the redacted sentence embeddings of sensitive and safe batches, so
that the words removed are those that tell the collections apart. torch is imported lazily.

Three choices differ from the paper's code, each because the paper's version failed on a
corpus with one planted word that only sensitive texts hold (docs/companions.md has the
runs): the soft mask is centred between the K-th and the (K+1)-th smallest score (the
paper centres it on the K-th, which leaves that word half kept and gives no push to
widen the gap), its temperature is annealed from 1 to its final value over the first
half of training (at a steep temperature a word far above the threshold gets no
gradient), and the learning rate decays on a cosine over a fixed number of steps, the
model of the last step being kept (the held-out estimate is too noisy to pick an epoch
by: selecting on it kept epoch 1 for one seed). The default loss is the Gaussian
divergence the privacy estimate uses; the paper's kNN KL estimate is the ``knn`` option
(it prefers masking long word vectors over the planted word on some corpora).
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from ..errors import InputError

if TYPE_CHECKING:
    import torch
    from thinc.api import Model

LOSSES = ("gaussian", "knn")


@dataclass(frozen=True)
class RankerSettings:
    """Hyper-parameters of the ranker network and its training run.

    A run takes ``epochs`` × max(⌊n/batch⌋, ``min_steps_per_epoch``) optimizer steps,
    n the smaller side's training texts, so small corpora still train for long enough.
    """

    hidden_width: int = 128
    dropout: float = 0.1
    temperature: float = 200.0
    start_temperature: float = 1.0
    loss: str = "gaussian"
    knn_k: int = 10
    batch_size: int = 128
    epochs: int = 30
    min_steps_per_epoch: int = 10
    learning_rate: float = 1e-3
    validation_share: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "hidden_width": self.hidden_width >= 1,
            "dropout": 0.0 <= self.dropout < 1.0,
            "temperature": self.temperature > 0.0,
            "start_temperature": 0.0 < self.start_temperature <= self.temperature,
            "loss": self.loss in LOSSES,
            "knn_k": self.knn_k >= 1,
            "batch_size": self.batch_size > self.knn_k,
            "epochs": self.epochs >= 1,
            "min_steps_per_epoch": self.min_steps_per_epoch >= 1,
            "learning_rate": self.learning_rate > 0.0,
            "validation_share": 0.0 < self.validation_share < 1.0,
        }
        for name, ok in checks.items():
            if not ok:
                raise InputError(f"ranker setting {name}={getattr(self, name)!r} is out of range; see RankerSettings")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def redaction_count(n_words: int, fraction: float) -> int:
    """Words to redact in a text: ⌈fraction·n⌉, so any positive fraction redacts something."""
    return min(n_words, math.ceil(fraction * n_words - 1e-9))


def build_ranker_net(width: int, hidden_width: int, dropout: float) -> "torch.nn.Module":
    """Four linear layers (tanh, tanh, tanh, sigmoid) mapping a word vector to a keep-score in (0, 1)."""
    import torch.nn as nn

    layers: list[nn.Module] = []
    for n_in in (width, hidden_width, hidden_width):
        layers += [nn.Linear(n_in, hidden_width), nn.Tanh(), nn.Dropout(dropout)]
    layers += [nn.Linear(hidden_width, 1), nn.Sigmoid()]
    return nn.Sequential(*layers)


def wrap_ranker(net: "torch.nn.Module") -> "Model":
    """The thinc view of the network: (n_words, width) in, (n_words, 1) keep-scores out."""
    from thinc.api import PyTorchWrapper

    return PyTorchWrapper(net)


def _valid_mask(scores: "torch.Tensor", lengths: "torch.Tensor") -> "torch.Tensor":
    import torch

    return torch.arange(scores.shape[1])[None, :] < lengths[:, None]


def _counts(lengths: "torch.Tensor", fraction: float) -> "torch.Tensor":
    import torch

    return torch.tensor([redaction_count(int(n), fraction) for n in lengths])


def soft_keep_weights(
    scores: "torch.Tensor", lengths: "torch.Tensor", fraction: float, temperature: float
) -> "torch.Tensor":
    """sigmoid(T·(s − t)) per word, t halfway between the K-th and (K+1)-th smallest score of its text.

    K = ⌈fraction·n⌉; a text with every word redacted keeps nothing, padding weighs 0.
    """
    import torch

    valid = _valid_mask(scores, lengths)
    ordered = torch.sort(torch.where(valid, scores, torch.full_like(scores, math.inf)), dim=1).values
    counts = _counts(lengths, fraction)
    last_redacted = ordered.gather(1, (counts - 1).clamp(min=0)[:, None]).squeeze(1)
    first_kept = ordered.gather(1, counts.clamp(max=scores.shape[1] - 1)[:, None]).squeeze(1)
    threshold = torch.where(counts < lengths, (last_redacted + first_kept) / 2, torch.full_like(last_redacted, math.inf))
    threshold = torch.where(counts > 0, threshold, torch.full_like(threshold, -math.inf))
    return torch.sigmoid(temperature * (scores - threshold[:, None])) * valid


def hard_keep_weights(scores: "torch.Tensor", lengths: "torch.Tensor", fraction: float) -> "torch.Tensor":
    """1 for kept words, 0 for the ⌈fraction·n⌉ lowest-scored ones (ties: the earlier word first), as the component redacts."""
    import torch

    valid = _valid_mask(scores, lengths)
    order = torch.argsort(torch.where(valid, scores, torch.full_like(scores, math.inf)), dim=1, stable=True)
    rank = torch.empty_like(order)
    rank.scatter_(1, order, torch.arange(scores.shape[1]).expand_as(order).contiguous())
    return ((rank >= _counts(lengths, fraction)[:, None]) & valid).to(scores.dtype)


def knn_kl_divergence(sample_p: "torch.Tensor", sample_q: "torch.Tensor", k: int) -> "torch.Tensor":
    """Differentiable kNN KL estimate D(P‖Q) of Wang, Kulkarni & Verdú (2009), the paper's loss."""
    import torch

    n, dim = sample_p.shape
    m = sample_q.shape[0]
    eye = torch.eye(n, dtype=torch.bool)
    within = torch.cdist(sample_p, sample_p).masked_fill(eye, math.inf)
    rho = torch.topk(within, k, dim=1, largest=False).values[:, -1]
    nu = torch.topk(torch.cdist(sample_p, sample_q), k, dim=1, largest=False).values[:, -1]
    return dim * torch.mean(torch.log(nu + 1e-8) - torch.log(rho + 1e-8)) + math.log(m / (n - 1))


def gaussian_loss(sample_p: "torch.Tensor", sample_q: "torch.Tensor") -> "torch.Tensor":
    """Δᵀ Σ⁻¹ Δ (= D₂ of the shared-covariance Gaussian model) with an OAS-shrunk pooled covariance.

    Shrinkage (Chen et al. 2010's oracle approximating shrinkage, its weight held constant
    for the gradient) keeps Σ invertible when a batch has fewer texts than dimensions.
    """
    import torch

    dim = sample_p.shape[1]
    n = sample_p.shape[0] + sample_q.shape[0]
    difference = sample_p.mean(dim=0) - sample_q.mean(dim=0)
    centred = torch.cat([sample_p - sample_p.mean(dim=0), sample_q - sample_q.mean(dim=0)])
    covariance = centred.T @ centred / (n - 2)
    with torch.no_grad():
        trace = torch.trace(covariance)
        trace_sq = (covariance * covariance).sum()
        denominator = (n + 1 - 2 / dim) * (trace_sq - trace**2 / dim)
        shrink = torch.clamp(((1 - 2 / dim) * trace_sq + trace**2) / denominator.clamp(min=1e-30), max=1.0)
    target = shrink * trace.clamp(min=1e-12) / dim * torch.eye(dim, dtype=covariance.dtype)
    return difference @ torch.linalg.solve((1 - shrink) * covariance + target, difference)


def _pad(embeddings: Sequence[np.ndarray]) -> tuple["torch.Tensor", "torch.Tensor"]:
    import torch

    lengths = torch.tensor([len(e) for e in embeddings])
    padded = np.zeros((len(embeddings), max(int(lengths.max()), 1), embeddings[0].shape[1]), np.float32)
    for row, e in enumerate(embeddings):
        padded[row, : len(e)] = e
    return torch.from_numpy(padded), lengths


def redacted_sentence_embeddings(
    net: "torch.nn.Module", embeddings: Sequence[np.ndarray], fraction: float, temperature: float | None
) -> "torch.Tensor":
    """Mean of the masked word vectors of each text, L2-normalized; ``temperature=None`` masks hard."""
    import torch

    padded, lengths = _pad(embeddings)
    valid = _valid_mask(padded[:, :, 0], lengths)
    scores = torch.zeros(valid.shape, dtype=padded.dtype)
    scores = scores.masked_scatter(valid, net(padded[valid]).squeeze(-1))  # the words only, not the padding
    if temperature is None:
        weights = hard_keep_weights(scores, lengths, fraction)
    else:
        weights = soft_keep_weights(scores, lengths, fraction, temperature)
    means = (weights[:, :, None] * padded).sum(dim=1) / lengths.clamp(min=1)[:, None]
    return torch.nn.functional.normalize(means, dim=1)


def symmetric_loss(
    net: "torch.nn.Module",
    sensitive: Sequence[np.ndarray],
    safe: Sequence[np.ndarray],
    fraction: float,
    settings: RankerSettings,
    temperature: float | None,
) -> "torch.Tensor":
    """The training divergence between the redacted sentence embeddings of two batches.

    ``gaussian`` is symmetric by construction; ``knn`` takes max(D(S₀‖S₁), D(S₁‖S₀)).
    """
    import torch

    s0 = redacted_sentence_embeddings(net, sensitive, fraction, temperature)
    s1 = redacted_sentence_embeddings(net, safe, fraction, temperature)
    if settings.loss == "gaussian":
        return gaussian_loss(s0, s1)
    return torch.maximum(knn_kl_divergence(s0, s1, settings.knn_k), knn_kl_divergence(s1, s0, settings.knn_k))


@dataclass
class TrainingResult:
    """A trained network and the record of how it got there (held-out loss of the hard mask per epoch)."""

    net: Any
    history: list[dict[str, float]]
    steps: int
    seconds: float


def _validation_split(
    items: Sequence[np.ndarray], share: float, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    order = rng.permutation(len(items))
    n_valid = max(1, int(round(share * len(items))))
    return [items[i] for i in order[n_valid:]], [items[i] for i in order[:n_valid]]


@contextmanager
def _single_threaded() -> Iterator[None]:
    """Run torch on one thread: the ranker's ops are too small to gain from more, and the
    trajectory then does not depend on the machine's thread count."""
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def train_ranker(
    sensitive: Sequence[np.ndarray],
    safe: Sequence[np.ndarray],
    fraction: float,
    settings: RankerSettings = RankerSettings(),
    progress: bool = False,
) -> TrainingResult:
    """Train a ranker on word-embedding arrays (one per text); the held-out split is measured each epoch.

    Texts without words are dropped. The run is reproducible for a given ``settings.seed``.
    """
    if not 0.0 < fraction <= 1.0:
        raise InputError(f"fraction={fraction} must lie in (0, 1]: the share of words to redact")
    sensitive = [e for e in sensitive if len(e)]
    safe = [e for e in safe if len(e)]
    smallest = min(len(sensitive), len(safe))
    needed = math.ceil((settings.knn_k + 2) / settings.validation_share)
    if smallest < needed:
        raise InputError(
            f"too few non-empty texts to train the ranker ({smallest} on the smaller side, need {needed}); "
            "add texts or lower knn_k"
        )
    with _single_threaded():
        return _train(sensitive, safe, fraction, settings, progress)


def _temperature(settings: RankerSettings, step: int, total: int) -> float:
    """Geometric from ``start_temperature`` to ``temperature`` over the first half of the steps."""
    progress = min(1.0, step / max(1.0, total / 2))
    return settings.start_temperature * (settings.temperature / settings.start_temperature) ** progress


def _train(
    sensitive: list[np.ndarray], safe: list[np.ndarray], fraction: float, settings: RankerSettings, progress: bool
) -> TrainingResult:
    import torch

    rng = np.random.default_rng(settings.seed)
    torch.manual_seed(settings.seed)
    train_0, valid_0 = _validation_split(sensitive, settings.validation_share, rng)
    train_1, valid_1 = _validation_split(safe, settings.validation_share, rng)
    net = build_ranker_net(sensitive[0].shape[1], settings.hidden_width, settings.dropout)
    optimizer = torch.optim.Adam(net.parameters(), lr=settings.learning_rate)
    batch = min(settings.batch_size, len(train_0), len(train_1))
    steps = max(min(len(train_0), len(train_1)) // batch, settings.min_steps_per_epoch)
    total = settings.epochs * steps
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, total)
    history: list[dict[str, float]] = []
    started = time.perf_counter()
    step = 0
    epochs = tqdm(range(1, settings.epochs + 1), desc="train ranker", unit="epoch", disable=not progress)
    for epoch in epochs:
        net.train()
        train_losses = []
        for _ in range(steps):
            picks_0 = rng.choice(len(train_0), batch, replace=False)
            picks_1 = rng.choice(len(train_1), batch, replace=False)
            loss = symmetric_loss(
                net,
                [train_0[i] for i in picks_0],
                [train_1[i] for i in picks_1],
                fraction,
                settings,
                _temperature(settings, step, total),
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            step += 1
            train_losses.append(loss.item())
        net.eval()
        with torch.no_grad():
            valid_loss = float(symmetric_loss(net, valid_0, valid_1, fraction, settings, None))
        history.append({"epoch": epoch, "train_loss": float(np.mean(train_losses)), "valid_loss": valid_loss})
        epochs.set_postfix(valid=f"{valid_loss:.3f}")
    net.eval()
    return TrainingResult(net=net, history=history, steps=step, seconds=time.perf_counter() - started)
