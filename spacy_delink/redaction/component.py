"""The ``delink_redactor`` spaCy component: mask the share of a text's words that most reveals its source.

Four interchangeable ways to rank words (lowest score = redacted first): ``ranker`` (the
learned network), ``logreg`` (TF-IDF logistic regression, largest |weight| first: words
that point to either collection), ``logreg_d0`` (the paper's baseline: largest weight
towards the sensitive collection first) and ``random``. Each sets
``token._.delink_redaction_score``, ``doc.spans["redacted"]`` and
``doc._.delink_redacted_text``, and is saved and loaded with the pipeline.

The component works in ``nlp.pipe(texts, n_process=2)``: it pickles as data (the ranker
as bytes, the encoder reloaded in the worker) and runs torch on one thread in a forked
worker, whose inherited thread pool would otherwise hang.
"""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import numpy as np
import srsly
from spacy.language import Language
from spacy.tokens import Doc, Span, Token
from spacy.util import from_disk as read_parts
from spacy.util import minibatch
from spacy.util import to_disk as write_parts

from ..components.extensions import register
from ..errors import DelinkError, InputError
from ..io.jsonl import read_jsonl
from .embeddings import EMBEDDERS, WordEmbedder, fork_safe_torch, make_word_embedder, word_token_indices
from .ranker import RankerSettings, build_ranker_net, redaction_count, train_ranker, wrap_ranker

METHODS = ("ranker", "logreg", "logreg_d0", "random")
LOGREG_METHODS = ("logreg", "logreg_d0")
SPAN_KEY = "redacted"
SPAN_LABEL = "REDACTED"

register(Token, "delink_redaction_score")
register(Doc, "delink_redacted_text")


def texts_from_jsonl(path: str | Path, text_field: str = "text") -> list[str]:
    """The ``text_field`` strings of a JSONL file, naming file and record on a missing field."""
    texts = []
    for number, record in enumerate(read_jsonl(path), start=1):
        value = record.get(text_field)
        if not isinstance(value, str):
            raise InputError(f"{path}: record {number} has no string field {text_field!r}; add it or pass --text-field")
        texts.append(value)
    if not texts:
        raise InputError(f"{path}: no records; the file must hold one JSON object with a text per line")
    return texts


class DelinkRedactor:
    """Redacts the lowest-scored ``fraction`` of every Doc's words (⌈fraction·n⌉ of n words)."""

    def __init__(
        self,
        nlp: Language,
        name: str = "delink_redactor",
        method: str = "ranker",
        fraction: float = 0.2,
        embedder: str = "minilm",
        model_path: str | None = None,
        mask_token: str = "[MASK]",
        seed: int = 0,
    ) -> None:
        if method not in METHODS:
            raise InputError(f"delink_redactor: method={method!r} is unknown; use one of {', '.join(METHODS)}")
        if not 0.0 <= fraction <= 1.0:
            raise InputError(f"delink_redactor: fraction={fraction} must lie in [0, 1] (the share of words to mask)")
        if embedder not in EMBEDDERS:
            raise InputError(f"delink_redactor: embedder={embedder!r} is unknown; use one of {', '.join(EMBEDDERS)}")
        if not mask_token:
            raise InputError("delink_redactor: mask_token must not be empty")
        self.nlp = nlp
        self.name = name
        self.method = method
        self.fraction = fraction
        self.embedder_name = embedder
        self.model_path = model_path
        self.mask_token = mask_token
        self.seed = seed
        self.word_weights: dict[str, float] = {}
        self.ranker: Any = None
        self.ranker_shape: dict[str, Any] = {}
        self.training: dict[str, Any] = {}
        self._embedder: WordEmbedder | None = None

    @property
    def is_trained(self) -> bool:
        return self.method == "random" or bool(self.word_weights) or self.ranker is not None

    def __getstate__(self) -> dict[str, Any]:
        """Pickle as data (spaCy's ``n_process`` workers under spawn): the ranker as bytes, no loaded encoder."""
        state = dict(self.__dict__)
        state["_embedder"] = None
        if self.ranker is not None:
            state["ranker"] = self.ranker.to_bytes()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        if isinstance(state.get("ranker"), bytes):
            state["ranker"] = self._empty_ranker(state["ranker_shape"]).from_bytes(state["ranker"])
        self.__dict__.update(state)

    @staticmethod
    def _empty_ranker(shape: dict[str, Any]) -> Any:
        return wrap_ranker(build_ranker_net(shape["width"], shape["hidden_width"], shape["dropout"]))

    @property
    def embedder(self) -> WordEmbedder:
        """The word embedder, loaded on first use (the baselines never need it)."""
        if self._embedder is None:
            self._embedder = make_word_embedder(
                self.embedder_name, self.model_path, self.ranker_shape.get("width")
            )
        return self._embedder

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Any]] | None = None,
        *,
        nlp: Language | None = None,
        sensitive_path: str | None = None,
        safe_path: str | None = None,
        text_field: str = "text",
    ) -> None:
        """Train from two JSONL files named in ``[initialize.components.<name>]`` (nothing for ``random``)."""
        if self.method == "random":
            return
        if not sensitive_path or not safe_path:
            raise InputError(
                f"{self.name} (method={self.method}) needs sensitive_path and safe_path in "
                f"[initialize.components.{self.name}], or a call to .fit()"
            )
        pipeline = nlp or self.nlp
        sensitive = list(pipeline.pipe(texts_from_jsonl(sensitive_path, text_field), disable=[self.name]))
        safe = list(pipeline.pipe(texts_from_jsonl(safe_path, text_field), disable=[self.name]))
        self.fit(sensitive, safe)

    def fit(
        self,
        sensitive: Sequence[Doc],
        safe: Sequence[Doc],
        settings: RankerSettings = RankerSettings(),
        progress: bool = False,
        sensitive_embeddings: Sequence[np.ndarray] | None = None,
        safe_embeddings: Sequence[np.ndarray] | None = None,
    ) -> dict[str, Any]:
        """Learn word scores from sensitive and safe Docs; returns a summary of the training.

        Precomputed word embeddings (one array per Doc) skip re-encoding when one corpus
        trains several redactors.
        """
        if not sensitive or not safe:
            raise InputError(f"{self.name}: training needs Docs on both the sensitive and the safe side")
        if self.method in LOGREG_METHODS:
            from .baselines import logreg_word_weights  # scikit-learn: not for every pipeline spaCy builds

            self.word_weights = logreg_word_weights(
                [[doc[i].text for i in word_token_indices(doc)] for doc in sensitive],
                [[doc[i].text for i in word_token_indices(doc)] for doc in safe],
                seed=self.seed,
            )
            self.training = {"method": self.method, "vocabulary": len(self.word_weights)}
        elif self.method == "ranker":
            if self.fraction == 0.0:
                raise InputError(f"{self.name}: fraction=0 redacts nothing, so there is no ranker to train")
            if sensitive_embeddings is None:
                sensitive_embeddings = self.embedder.embed_docs(sensitive, progress)
            if safe_embeddings is None:
                safe_embeddings = self.embedder.embed_docs(safe, progress)
            result = train_ranker(sensitive_embeddings, safe_embeddings, self.fraction, settings, progress)
            width = next(e.shape[1] for e in sensitive_embeddings if len(e))
            self.ranker_shape = {"width": width, "hidden_width": settings.hidden_width, "dropout": settings.dropout}
            self.ranker = wrap_ranker(result.net)
            self.training = {
                "method": "ranker",
                "settings": settings.to_dict(),
                "steps": result.steps,
                "seconds": round(result.seconds, 3),
                "history": result.history,
            }
        return self.training

    def word_scores(self, docs: Sequence[Doc], embeddings: Sequence[np.ndarray] | None = None) -> list[np.ndarray]:
        """One score per word of each Doc; the lowest ones are redacted first."""
        if not self.is_trained:
            raise DelinkError(
                f"{self.name} (method={self.method}) is not trained; run nlp.initialize() with "
                "sensitive_path/safe_path, call .fit(), or load a trained pipeline"
            )
        if self.method == "random":
            return [
                np.random.default_rng([self.seed, zlib.crc32(doc.text.encode("utf-8"))]).random(
                    len(word_token_indices(doc))
                )
                for doc in docs
            ]
        if self.method in LOGREG_METHODS:
            weigh = abs if self.method == "logreg" else float
            return [
                -np.array([weigh(self.word_weights.get(doc[i].text.lower(), 0.0)) for i in word_token_indices(doc)])
                for doc in docs
            ]
        embeddings = embeddings if embeddings is not None else self.embedder.embed_docs(docs)
        lengths = [len(e) for e in embeddings]
        if not sum(lengths):
            return [np.zeros(0) for _ in docs]
        fork_safe_torch()
        stacked = np.ascontiguousarray(np.concatenate(embeddings), dtype=np.float32)
        scores = np.asarray(self.ranker.predict(stacked)).reshape(-1)
        return np.split(scores.astype(np.float64), np.cumsum(lengths)[:-1])

    def annotate(self, doc: Doc, scores: np.ndarray) -> Doc:
        """Set the scores, mask the lowest-scored words and collapse adjacent masks into one."""
        words = word_token_indices(doc)
        if len(scores) != len(words):
            raise DelinkError(f"{self.name}: got {len(scores)} scores for a Doc of {len(words)} words")
        for index, score in zip(words, scores):
            doc[index]._.delink_redaction_score = float(score)
        count = redaction_count(len(words), self.fraction)
        redacted = np.zeros(len(words), dtype=bool)
        redacted[np.argsort(scores, kind="stable")[:count]] = True
        spans: list[Span] = []
        position = 0
        while position < len(words):
            if not redacted[position]:
                position += 1
                continue
            end = position
            while end + 1 < len(words) and redacted[end + 1]:
                end += 1
            spans.append(Span(doc, words[position], words[end] + 1, label=SPAN_LABEL))
            position = end + 1
        doc.spans[SPAN_KEY] = spans
        pieces, cursor = [], 0
        for span in spans:
            pieces += [doc.text[cursor : span.start_char], self.mask_token]
            cursor = span.end_char
        pieces.append(doc.text[cursor:])
        doc._.delink_redacted_text = "".join(pieces)
        return doc

    def __call__(self, doc: Doc) -> Doc:
        return self.annotate(doc, self.word_scores([doc])[0])

    def pipe(self, stream: Iterable[Doc], batch_size: int = 32) -> Iterator[Doc]:
        """Score Docs in batches, so the encoder runs on many texts at once."""
        for batch in minibatch(stream, size=batch_size):
            yield from (self.annotate(doc, scores) for doc, scores in zip(batch, self.word_scores(batch)))

    def _state(self) -> dict[str, Any]:
        return {"method": self.method, "ranker_shape": self.ranker_shape, "training": self.training}

    def _load_state(self, state: dict[str, Any], source: str) -> None:
        """Take the saved data, refusing data saved for another method than the config names."""
        if state["method"] != self.method:
            raise InputError(f"{source}: saved for method={state['method']} but the pipeline config says {self.method}")
        self.ranker_shape, self.training = state["ranker_shape"], state["training"]

    def to_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> None:
        serializers: dict[str, Callable[[Path], Any]] = {"cfg.json": lambda p: srsly.write_json(p, self._state())}
        if self.word_weights:
            serializers["word_weights.json"] = lambda p: srsly.write_json(p, self.word_weights)
        if self.ranker is not None:
            serializers["ranker.bin"] = lambda p: p.write_bytes(self.ranker.to_bytes())
        write_parts(path, serializers, exclude)

    def from_disk(self, path: str | Path, *, exclude: Iterable[str] = ()) -> "DelinkRedactor":
        path = Path(path)
        self._load_state(srsly.read_json(path / "cfg.json"), str(path))
        readers: dict[str, Callable[[Path], Any]] = {}
        if (path / "word_weights.json").exists():
            readers["word_weights.json"] = lambda p: setattr(self, "word_weights", srsly.read_json(p))
        if (path / "ranker.bin").exists():
            model = self._empty_ranker(self.ranker_shape)
            readers["ranker.bin"] = lambda p: setattr(self, "ranker", model.from_bytes(p.read_bytes()))
        read_parts(path, readers, exclude)
        return self

    def to_bytes(self, *, exclude: Iterable[str] = ()) -> bytes:
        """The same data as :meth:`to_disk`, for ``nlp.to_bytes()``."""
        ranker = self.ranker.to_bytes() if self.ranker is not None else None
        return srsly.msgpack_dumps({"cfg": self._state(), "word_weights": self.word_weights, "ranker": ranker})

    def from_bytes(self, data: bytes, *, exclude: Iterable[str] = ()) -> "DelinkRedactor":
        message = srsly.msgpack_loads(data)
        self._load_state(message["cfg"], f"{self.name} bytes")
        self.word_weights = dict(message["word_weights"])
        self.ranker = None if message["ranker"] is None else self._empty_ranker(self.ranker_shape).from_bytes(message["ranker"])
        return self


def train_pipeline(
    sensitive_texts: Sequence[str],
    safe_texts: Sequence[str],
    method: str = "ranker",
    fraction: float = 0.2,
    settings: RankerSettings = RankerSettings(),
    base: Language | None = None,
    embedder: str = "minilm",
    progress: bool = False,
) -> Language:
    """A pipeline ending in a trained ``delink_redactor`` (a blank English one unless ``base`` is given).

    The texts run through ``base`` first, so ``embedder="spacy"`` sees its tok2vec output.
    """
    import spacy

    nlp = base if base is not None else spacy.blank("en")
    sensitive = list(nlp.pipe(sensitive_texts))
    safe = list(nlp.pipe(safe_texts))
    config = {"method": method, "fraction": fraction, "embedder": embedder, "seed": settings.seed}
    redactor = nlp.add_pipe("delink_redactor", config=config)
    redactor.fit(sensitive, safe, settings, progress)  # type: ignore[attr-defined]
    return nlp
