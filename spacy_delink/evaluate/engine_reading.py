"""How the independent engine reads a text: its search phrases, and the words it indexes of an original.

Two readings of a text (SPEC §8), each its own tantivy index:

* ``search`` — the adversary's ordinary engine, what ``delink evaluate`` reports as
  "tantivy". Each text is normalized to its search form (``fold_text``), every character
  that is not a letter or digit becomes a space (the analyzer's character filter: the
  SPEC's letters and digits are Python's, and tantivy's Unicode tables are newer), and
  tantivy's simple tokenizer splits it. A phrase query matches consecutive positions
  whatever punctuation lay between ("intent to supply. He" holds the phrase "supply he").
  Phrases break only at masks (SPEC §2, found on the text as written, folded after), on
  both sides; paragraph ends join (an engine indexes a document as one field): the
  released text is cut at its masks into the runs of words a person can type, and in an
  indexed original each mask is a ``SENTINEL`` token no query holds.
* ``exact`` — SPEC §1–§7's reading, for comparing our exact reading with an engine:
  phrases also end at punctuation, tantivy lower-cases (where the rules apply NFKC and
  case folding) and drops tokens over 40 characters; each original is indexed as one
  field value per piece (tantivy leaves a position between values, so no exact phrase
  matches across two).
"""
from __future__ import annotations

import re
import unicodedata
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from ..linkage.search_form import fold_text
from ..linkage.characters import SPACELESS_SCRIPTS, script_table

#: tantivy's default text analysis, spelled out, for the exact reading.
MAX_TOKEN_CHARS = 40
#: The token that fills a mask in an indexed original under the search reading. Search
#: tokens are case-folded, so they never contain an ASCII capital: no query matches it.
SENTINEL = "BREAK"
_PARAGRAPH_END = re.compile(r"\n[ \t\r]*\n")
_NOT_LETTER_OR_DIGIT = re.compile(r"[\W_]+")  # the complement of str.isalnum()


@lru_cache(maxsize=1)
def _spaceless_letter() -> re.Pattern[str]:
    """One letter of a script written without spaces (SPEC §8): a search token of its own."""
    table, names = script_table()
    split = np.isin(table, [names.index(name) + 1 for _, _, name in SPACELESS_SCRIPTS])
    edges = np.flatnonzero(np.diff(np.concatenate([[0], split.astype(np.int8), [0]])))
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b - 1))}" for a, b in zip(edges[::2], edges[1::2])) + "]")


@dataclass(frozen=True)
class Search:
    """One phrase the adversary types (a tantivy phrase query, or a term query for one word)."""

    words: tuple[str, ...]

    def __str__(self) -> str:
        return " ".join(self.words)


@dataclass
class Segmented:
    """A text as a reading cuts it: runs of words no phrase crosses, and which cuts only masks make.

    ``masked[i]`` is true when only masks lie between ``runs[i]`` and ``runs[i + 1]``: a
    sloppy phrase may bridge them. Always false under the exact reading.
    """

    runs: list[list[str]]
    masked: list[bool]


def _mask_spans(text: str, patterns: Sequence[re.Pattern[str]]) -> list[tuple[int, int]]:
    """The union of the patterns' matches as sorted, merged character ranges (SPEC §2)."""
    spans = sorted(match.span() for pattern in patterns for match in pattern.finditer(text) if match.end() > match.start())
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _is_word(ch: str) -> bool:
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


class Reading(ABC):
    """How the engine reads a text: its analyzer, an original's field values, a released text's runs."""

    name = ""

    @abstractmethod
    def analyzer(self) -> Any:
        """The tantivy text analyzer of this reading."""

    @abstractmethod
    def index_values(self, text: str) -> list[str]:
        """An original as the field values tantivy indexes (no phrase query matches across a break)."""

    @abstractmethod
    def segments(self, text: str, analyzer: Any) -> Segmented:
        """A released text as runs of the analyzer's words."""


@dataclass(frozen=True)
class ExactReading(Reading):
    """SPEC §1–2's breaks (punctuation, paragraph ends, masks), re-implemented with regexes."""

    break_chars: str
    non_breaking_single: str
    paragraph_breaks: bool
    mask_patterns: tuple[str, ...]
    name = "exact"

    @classmethod
    def from_rules(cls, rules: Any) -> "ExactReading":
        return cls(rules.break_chars, rules.non_breaking_single, rules.paragraph_breaks, tuple(rules.mask_patterns))

    def analyzer(self) -> Any:
        import tantivy

        return (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
            .filter(tantivy.Filter.lowercase())
            .build()
        )

    def pieces(self, text: str) -> list[str]:
        """The text cut at every break; masks are cut out entirely."""
        cut = np.zeros(len(text) + 1, dtype=bool)
        masked = np.zeros(len(text), dtype=bool)
        for start, end in _mask_spans(text, [re.compile(p) for p in self.mask_patterns]):
            masked[start:end] = True
        cut[: len(text)] |= masked
        if self.break_chars:
            for match in re.finditer("[" + re.escape(self.break_chars) + "]", text):
                i = match.start()
                lone = (
                    text[i] in self.non_breaking_single
                    and 0 < i < len(text) - 1
                    and _is_word(text[i - 1])
                    and _is_word(text[i + 1])
                    and not masked[i - 1]
                    and not masked[i + 1]
                )
                if not lone:
                    cut[i] = True
        if self.paragraph_breaks:
            for match in _PARAGRAPH_END.finditer(text):
                cut[match.start() : match.end()] = True
        pieces, start = [], 0
        for i in np.flatnonzero(cut[: len(text)]).tolist() + [len(text)]:
            if i > start:
                pieces.append(text[start:i])
            start = i + 1
        return pieces

    def index_values(self, text: str) -> list[str]:
        return self.pieces(text)  # one value per piece: tantivy leaves a position between values

    def segments(self, text: str, analyzer: Any) -> Segmented:
        runs = [words for words in (analyzer.analyze(piece) for piece in self.pieces(text)) if words]
        return Segmented(runs, [False] * max(len(runs) - 1, 0))


@dataclass(frozen=True)
class SearchReading(Reading):
    """SPEC §8: the search form, letters and digits only, one word per letter of a script written
    without spaces (each cut apart on the text as written, so a Hangul syllable stays one word),
    breaks at masks only: an engine indexes a document as one field, across paragraph ends."""

    mask_patterns: tuple[str, ...]
    name = "search"

    @classmethod
    def from_rules(cls, rules: Any) -> "SearchReading":
        return cls(tuple(rules.mask_patterns))

    def analyzer(self) -> Any:
        """tantivy's simple tokenizer alone: the search form is case-folded already, and no
        token is dropped for its length (tantivy itself skips one over 65,530 bytes)."""
        import tantivy

        return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).build()

    def pieces(self, text: str) -> list[tuple[str, bool]]:
        """``(piece, after a mask)``: the search form between masks, letters and digits only;
        the flag says whether a mask separates it from the piece before."""
        patterns = [re.compile(p) for p in self.mask_patterns]
        found: list[tuple[str, bool]] = []
        start, after_mask = 0, False
        for mask_start, mask_end in _mask_spans(text, patterns) + [(len(text), len(text))]:
            apart = _spaceless_letter().sub(r" \g<0> ", text[start:mask_start])
            found.append((_NOT_LETTER_OR_DIGIT.sub(" ", fold_text(apart)), after_mask))
            start, after_mask = mask_end, True
        return found

    def index_values(self, text: str) -> list[str]:
        """One value: the pieces joined by a sentinel token, which no query's words hold, so
        a phrase query's words sit at consecutive positions of one piece (tantivy runs no
        sloppy phrase: ``proximity`` reads those on positions)."""
        return [f" {SENTINEL} ".join(piece for piece, _ in self.pieces(text))]

    def runs(self, text: str, analyzer: Any) -> list[list[str]]:
        """An original as its runs of words between masks (the positional index's input)."""
        return [words for words in (analyzer.analyze(piece) for piece, _ in self.pieces(text)) if words]

    def segments(self, text: str, analyzer: Any) -> Segmented:
        runs: list[list[str]] = []
        masked: list[bool] = []
        only_masks = True  # since the last run with words
        for piece, after_mask in self.pieces(text):
            only_masks = only_masks and (after_mask or not runs)
            words = analyzer.analyze(piece)
            if not words:
                continue
            if runs:
                masked.append(only_masks)
            runs.append(words)
            only_masks = True
        return Segmented(runs, masked)
