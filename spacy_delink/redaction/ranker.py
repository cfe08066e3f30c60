"""The learned redaction ranker (Gusain & Leith 2025) and its divergence-minimizing training.

A small MLP scores every word; the lowest-scored share of a text's words is redacted. Training
makes that choice differentiable with a soft top-K mask and minimizes a kNN estimate of the KL
divergence between the redacted sentence embeddings of sensitive and safe batches, so that
the words removed are those that tell the collections apart. torch is imported lazily.
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import asdict, dataclass
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from ..errors import InputError

if TYPE_CHECKING:
    import torch
    from thinc.api import Model


@dataclass(frozen=True)
class RankerSettings:
    """Hyper-parameters of the ranker network and its training run."""

    hidden_width: int = 128
    dropout: float = 0.1
    temperature: float = 200.0
    knn_k: int = 10
    batch_size: int = 128
    epochs: int = 30
    patience: int = 5
    learning_rate: float = 3e-4
    validation_share: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        checks = {
            "hidden_width": self.hidden_width >= 1,
            "dropout": 0.0 <= self.dropout < 1.0,
            "temperature": self.temperature > 0.0,
            "knn_k": self.knn_k >= 1,
            "batch_size": self.batch_size > self.knn_k,
            "epochs": self.epochs >= 1,
            "patience": self.patience >= 1,
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


def soft_keep_weights(
    scores: "torch.Tensor", lengths: "torch.Tensor", fraction: float, temperature: float
) -> "torch.Tensor":
    """sigmoid(T·(s − s_K)) per word, s_K the K-th smallest score of its sentence; padding gets 0."""
    import torch

    valid = torch.arange(scores.shape[1])[None, :] < lengths[:, None]
    ordered = torch.sort(torch.where(valid, scores, torch.full_like(scores, math.inf)), dim=1).values
    counts = torch.tensor([redaction_count(int(n), fraction) for n in lengths])
    threshold = ordered.gather(1, (counts - 1).clamp(min=0)[:, None]).squeeze(1)
    threshold = torch.where(counts > 0, threshold, torch.full_like(threshold, -math.inf))
    return torch.sigmoid(temperature * (scores - threshold[:, None])) * valid


def knn_kl_divergence(sample_p: "torch.Tensor", sample_q: "torch.Tensor", k: int) -> "torch.Tensor":
    """Differentiable kNN KL estimate D(P‖Q) of Wang, Kulkarni & Verdú (2009)."""
    import torch

    n, dim = sample_p.shape
    m = sample_q.shape[0]
    eye = torch.eye(n, dtype=torch.bool)
    within = torch.cdist(sample_p, sample_p).masked_fill(eye, math.inf)
    rho = torch.topk(within, k, dim=1, largest=False).values[:, -1]
    nu = torch.topk(torch.cdist(sample_p, sample_q), k, dim=1, largest=False).values[:, -1]
    return dim * torch.mean(torch.log(nu + 1e-8) - torch.log(rho + 1e-8)) + math.log(m / (n - 1))


def _pad(embeddings: Sequence[np.ndarray]) -> tuple["torch.Tensor", "torch.Tensor"]:
    import torch

    lengths = torch.tensor([len(e) for e in embeddings])
    padded = np.zeros((len(embeddings), max(int(lengths.max()), 1), embeddings[0].shape[1]), np.float32)
    for row, e in enumerate(embeddings):
        padded[row, : len(e)] = e
    return torch.from_numpy(padded), lengths


def redacted_sentence_embeddings(
    net: "torch.nn.Module", embeddings: Sequence[np.ndarray], fraction: float, temperature: float
) -> "torch.Tensor":
    """Mean of the soft-masked word vectors of each sentence, L2-normalized as the privacy estimate sees them."""
    import torch

    padded, lengths = _pad(embeddings)
    scores = net(padded).squeeze(-1)
    weights = soft_keep_weights(scores, lengths, fraction, temperature)
    means = (weights[:, :, None] * padded).sum(dim=1) / lengths.clamp(min=1)[:, None]
    return torch.nn.functional.normalize(means, dim=1)


def symmetric_loss(
    net: "torch.nn.Module",
    sensitive: Sequence[np.ndarray],
    safe: Sequence[np.ndarray],
    fraction: float,
    settings: RankerSettings,
) -> "torch.Tensor":
    """max(D(S₀‖S₁), D(S₁‖S₀)) between the redacted sentence embeddings of two batches."""
    import torch

    s0 = redacted_sentence_embeddings(net, sensitive, fraction, settings.temperature)
    s1 = redacted_sentence_embeddings(net, safe, fraction, settings.temperature)
    return torch.maximum(knn_kl_divergence(s0, s1, settings.knn_k), knn_kl_divergence(s1, s0, settings.knn_k))


@dataclass
class TrainingResult:
    """A trained network and the record of how it got there."""

    net: Any
    history: list[dict[str, float]]
    best_epoch: int
    seconds: float


def _validation_split(
    items: Sequence[np.ndarray], share: float, rng: np.random.Generator
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    order = rng.permutation(len(items))
    n_valid = max(1, int(round(share * len(items))))
    return [items[i] for i in order[n_valid:]], [items[i] for i in order[:n_valid]]


@contextmanager
def _single_threaded() -> Iterator[None]:
    """Run torch on one thread: the ranker's ops are too small to gain from more, and lose to contention."""
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
    """Train a ranker on word-embedding arrays (one per text), early-stopping on a held-out split.

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


def _train(
    sensitive: list[np.ndarray], safe: list[np.ndarray], fraction: float, settings: RankerSettings, progress: bool
) -> TrainingResult:
    import torch

    rng = np.random.default_rng(settings.seed)
    torch.manual_seed(settings.seed)
    train_0, valid_0 = _validation_split(sensitive, settings.validation_share, rng)
    train_1, valid_1 = _validation_split(safe, settings.validation_share, rng)
    width = sensitive[0].shape[1]
    net = build_ranker_net(width, settings.hidden_width, settings.dropout)
    optimizer = torch.optim.Adam(net.parameters(), lr=settings.learning_rate)
    batch = min(settings.batch_size, len(train_0), len(train_1))
    steps = min(len(train_0), len(train_1)) // batch
    history: list[dict[str, float]] = []
    best_loss, best_epoch, best_state = math.inf, 0, copy.deepcopy(net.state_dict())
    started = time.perf_counter()
    epochs = tqdm(range(1, settings.epochs + 1), desc="train ranker", unit="epoch", disable=not progress)
    for epoch in epochs:
        net.train()
        order_0, order_1 = rng.permutation(len(train_0)), rng.permutation(len(train_1))
        train_losses = []
        for step in range(steps):
            window = slice(step * batch, (step + 1) * batch)
            loss = symmetric_loss(
                net, [train_0[i] for i in order_0[window]], [train_1[i] for i in order_1[window]], fraction, settings
            )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            train_losses.append(loss.item())
        net.eval()
        with torch.no_grad():
            valid_loss = float(symmetric_loss(net, valid_0, valid_1, fraction, settings))
        history.append({"epoch": epoch, "train_loss": float(np.mean(train_losses)), "valid_loss": valid_loss})
        epochs.set_postfix(valid=f"{valid_loss:.3f}")
        if valid_loss < best_loss:
            best_loss, best_epoch, best_state = valid_loss, epoch, copy.deepcopy(net.state_dict())
        elif epoch - best_epoch >= settings.patience:
            break
    net.load_state_dict(best_state)
    net.eval()
    return TrainingResult(net=net, history=history, best_epoch=best_epoch, seconds=time.perf_counter() - started)
