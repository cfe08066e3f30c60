"""SPEC §1–2 and §8: the tokenizations (readings) shared by the index and every detector.

The index and the queries must tokenize identically, so this module is the single
implementation of tokens, search forms, breaking gaps and masks. Characters are
classified by one table lookup each (``characters``) and tokens and gaps are found in one
compiled pass per reading (``token_scan``, numba). Raw token strings are only made when
asked for (``Tokens.raw``).

Readings of the SPEC where it leaves room (each the one that finds more linkages, or
the only literal one, and each covered by ``tests/test_tokenization.py``):

* a combining mark is a word character even where ``str.isalnum()`` is false, so
  ``cafe\u0301`` stays one token, as ``café`` does;
* masks are the union of all patterns' matches, merged where they overlap or touch;
  a mask's characters never start or end a token, and its gap always breaks, also
  when the gap is a single ``.`` or ``,`` covered by a mask;
* the search form skips NFKC for ASCII tokens (NFKC is the identity there);
* a letter of a script written without spaces is a token of its own (``SPACELESS_SCRIPTS``),
  under the search reading as SPEC §8 says and under the exact reading too, with the
  combining marks after it: the search form maps some of those letters to look-alikes
  (士 reads 土), so only an exact reading by character finds a phrase that an engine
  without that mapping finds (SPEC §8: linkable under either reading). Under the search
  reading a Hangul syllable is one token although its search form spells it as jamo.
  Their decimal digits are not split (a number is one token), and an n-gram holds at
  most ``max_n`` other tokens and at most ``max_n_chars`` such characters, both bounds
  at once (``Tokens.remaining``; docs/languages.md).
"""
from __future__ import annotations

import re
import unicodedata
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..errors import InputError
from .characters import _char_classes, _spaceless_kinds
from .search_form import alternate_table, fold_codes, fold_table
from .token_scan import _mark_ranges, _scan_codes, _scan_search

DEFAULT_BREAK_CHARS = '.,;:!?()[]{}"“”„«»…'
#: SPEC §2's defaults. ``\*\*\*+`` is the SPEC's ``\*{3,}`` spelled with a literal prefix,
#: which Python's regex engine scans for ~20x faster; both match the same strings.
DEFAULT_MASK_PATTERNS: tuple[str, ...] = (r"\[[A-Z][A-Z0-9_ -]*\]", r"<[A-Z][A-Z0-9_]*>", r"\*\*\*+")
#: A gap that is exactly one of these characters does not break (``3.5``, ``1,234``, ``U.S``).
DEFAULT_NON_BREAKING_SINGLE = ".,"
MAX_SUPPORTED_N = 32


#: The widest ``max_gap`` (SPEC §9's G) the gap reading's kernels take.
MAX_GAP = 64


@dataclass(frozen=True)
class LinkageRules:
    """The configurable rules of SPEC §1–3; an index records them and refuses other rules."""

    max_n: int = 8
    #: SPEC §8: the longest n-gram of the search reading counts at most this many characters
    #: of scripts written without spaces (``SPACELESS_SCRIPTS``), besides at most ``max_n``
    #: other tokens (docs/languages.md).
    max_n_chars: int = 16
    #: SPEC §9's G: the most tokens a mask stretch stands for in a sloppy phrase around it.
    max_gap: int = 16
    break_chars: str = DEFAULT_BREAK_CHARS
    non_breaking_single: str = DEFAULT_NON_BREAKING_SINGLE
    paragraph_breaks: bool = True
    mask_patterns: tuple[str, ...] = DEFAULT_MASK_PATTERNS
    normalization: str | None = "NFKC"
    casefold: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.max_n <= MAX_SUPPORTED_N:
            raise InputError(f"max_n must be between 1 and {MAX_SUPPORTED_N}, got {self.max_n}")
        if not isinstance(self.max_n_chars, int) or isinstance(self.max_n_chars, bool) or not 1 <= self.max_n_chars <= MAX_SUPPORTED_N:
            raise InputError(f"max_n_chars must be an integer between 1 and {MAX_SUPPORTED_N}, got {self.max_n_chars!r}")
        if not isinstance(self.max_gap, int) or isinstance(self.max_gap, bool) or not 1 <= self.max_gap <= MAX_GAP:
            raise InputError(f"max_gap must be an integer between 1 and {MAX_GAP}, got {self.max_gap!r} (tokens a mask may hide, SPEC §9)")
        if self.normalization not in (None, "NFC", "NFD", "NFKC", "NFKD"):
            raise InputError(f"normalization must be NFC, NFD, NFKC, NFKD or None, got {self.normalization!r}")
        for pattern in self.mask_patterns:
            try:
                re.compile(pattern)
            except re.error as err:
                raise InputError(f"invalid mask pattern {pattern!r}: {err}") from None
        object.__setattr__(self, "mask_patterns", tuple(self.mask_patterns))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["mask_patterns"] = list(self.mask_patterns)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LinkageRules":
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise InputError(f"unknown linkage rule option(s): {', '.join(sorted(unknown))}")
        values = dict(data)
        if "mask_patterns" in values:
            values["mask_patterns"] = tuple(values["mask_patterns"])
        return cls(**values)

    def same_tokenization(self, other: "LinkageRules") -> bool:
        """True when both rules produce the same tokens, segments and search forms."""
        mine, theirs = self.to_dict(), other.to_dict()
        for bound in ("max_n", "max_n_chars", "max_gap"):
            mine.pop(bound)
            theirs.pop(bound)
        return mine == theirs

    @property
    def levels(self) -> int:
        """The most tokens an n-gram can hold: ``max_n``, and up to ``max_n_chars``
        one-character tokens of scripts written without spaces beside them."""
        return self.max_n + self.max_n_chars


@dataclass
class Tokens:
    """The tokens of one text: offsets, where segments (join-runs) start, and the masks.

    ``segment_start[i]`` is true when the gap before token ``i`` breaks (or ``i`` is the
    first token); an n-gram may start at ``i`` only if ``remaining[i] >= n``: the most
    tokens from ``i`` on that stay in its segment and within the rules' bounds (``max_n``
    tokens, and under the search reading ``max_n_chars`` more that are characters of
    scripts written without spaces, flagged in ``spaceless``). ``codes`` are the text's
    code points.

    ``starts`` and ``ends`` are always offsets into ``text``. A token's key is made of
    ``form_codes[form_starts[i]:form_ends[i]]``: the text's own code points under the exact
    reading, its search form (``search_form``) under the search reading.
    """

    starts: np.ndarray
    ends: np.ndarray
    segment_start: np.ndarray
    text: str
    codes: np.ndarray
    masks: list[tuple[int, int]] = field(default_factory=list)
    #: The search reading's folded code points and token bounds in them (None: the text's own).
    folded: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    #: Per token, whether it is one character of a script written without spaces (None: none is).
    spaceless: np.ndarray | None = None
    #: The rules' bounds on an n-gram (``LinkageRules.max_n``, ``max_n_chars``).
    max_n: int = MAX_SUPPORTED_N
    max_n_chars: int = MAX_SUPPORTED_N

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def forms(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(form_codes, form_starts, form_ends)``: the code points each token's key is made of."""
        return self.folded if self.folded is not None else (self.codes, self.starts, self.ends)

    def form(self, i: int) -> str:
        """Token ``i`` as its key reads it (before the exact reading's per-token normalization)."""
        codes, starts, ends = self.forms
        return codes[starts[i] : ends[i]].tobytes().decode("utf-32-le", "surrogatepass")

    @cached_property
    def raw(self) -> list[str]:
        """Each token's text as it appears."""
        text = self.text
        return [text[s:e] for s, e in zip(self.starts.tolist(), self.ends.tolist())]

    @property
    def remaining(self) -> np.ndarray:
        """The longest n-gram that may start at each position (its segment and the bounds allow it)."""
        if self.spaceless is None or not self.spaceless.any():
            return np.minimum(_segment_room(self.segment_start), self.max_n)
        return _bounded_room(self.segment_start, self.spaceless, self.max_n, self.max_n_chars)


@nb.njit(cache=True, nogil=True)
def _segment_room(segment_start: np.ndarray) -> np.ndarray:
    """``Tokens.remaining`` in one backward pass (the build runs it on every token)."""
    room = np.empty(len(segment_start), dtype=np.int64)
    run = 0
    for i in range(len(segment_start) - 1, -1, -1):
        run += 1
        room[i] = run
        if segment_start[i]:
            run = 0
    return room


@nb.njit(cache=True, nogil=True)
def _bounded_room(segment_start: np.ndarray, spaceless: np.ndarray, max_n: int, max_n_chars: int) -> np.ndarray:
    """``Tokens.remaining`` with characters of scripts written without spaces: the longest
    window from each position that stays in its segment with at most ``max_n`` other tokens
    and ``max_n_chars`` such characters (two pointers: each window is one longer or shorter
    than the last)."""
    size = len(segment_start)
    room = np.empty(size, dtype=np.int64)
    end = 0
    words = 0
    chars = 0
    for i in range(size):
        if end < i + 1:  # the window at i always holds token i
            end = i + 1
            words = 0 if spaceless[i] else 1
            chars = 1 if spaceless[i] else 0
        while end < size and not segment_start[end]:
            if spaceless[end]:
                if chars == max_n_chars:
                    break
                chars += 1
            else:
                if words == max_n:
                    break
                words += 1
            end += 1
        room[i] = end - i
        if spaceless[i]:
            chars -= 1
        else:
            words -= 1
    return room


class _MaskedTokenizer(ABC):
    """What both readings share: masks (SPEC §2, found on the text as written) and batching."""

    #: The reading this tokenizer implements (``readings.READINGS``).
    reading = ""

    def __init__(self, rules: LinkageRules | None = None) -> None:
        self.rules = rules or LinkageRules()
        self._mask_res = [re.compile(p) for p in self.rules.mask_patterns]

    def mask_spans(self, text: str) -> list[tuple[int, int]]:
        """The union of all mask-pattern matches, as merged, sorted character intervals."""
        spans: list[tuple[int, int]] = []
        for pattern in self._mask_res:
            spans.extend(map(re.Match.span, pattern.finditer(text)))
        spans.sort()
        merged: list[tuple[int, int]] = []
        for start, end in spans:
            if start == end:
                continue
            if merged and start <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
            else:
                merged.append((start, end))
        return merged

    def tokenize(self, text: str) -> Tokens:
        """Tokens, segment starts and masks of ``text`` (SPEC §1–2, or §8 for the search reading)."""
        return self._scan(text, self.mask_spans(text))

    def tokenize_batch(self, texts: list[str]) -> tuple[Tokens, np.ndarray]:
        """Tokens of several texts in one vectorized pass, and each text's token count.

        The texts are joined by a paragraph end; masks are found per text (a pattern never
        spans two texts) and every text's first token starts a new segment (the search
        reading joins across paragraph ends, so the separator alone would not keep two
        texts apart), so each text is tokenized exactly as alone. Offsets refer to the
        joined text.
        """
        separator = "\n\n"
        masks: list[tuple[int, int]] = []
        text_starts = []
        offset = 0
        for text in texts:
            text_starts.append(offset)
            masks.extend((start + offset, end + offset) for start, end in self.mask_spans(text))
            offset += len(text) + len(separator)
        tokens = self._scan(separator.join(texts), masks)
        first_token = np.searchsorted(tokens.starts, np.array(text_starts, dtype=np.int64))
        counts = np.diff(np.append(first_token, len(tokens)))
        tokens.segment_start[first_token[counts > 0]] = True
        return tokens, counts

    @abstractmethod
    def _scan(self, text: str, masks: list[tuple[int, int]]) -> Tokens:
        """The tokens of ``text`` with the characters of ``masks`` masked."""

    @staticmethod
    def _codes_and_masked(text: str, masks: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        """The text's code points and a flag per code point inside a mask."""
        try:
            data = text.encode("utf-32-le")
        except UnicodeEncodeError:  # lone surrogates: kept as their code points (the strict codec is ~1.5x faster)
            data = text.encode("utf-32-le", "surrogatepass")
        codes = np.frombuffer(data, dtype=np.uint32)
        masked = np.zeros(len(codes), dtype=np.uint8)
        if masks:
            _mark_ranges(masked, np.array(masks, dtype=np.int64).reshape(-1, 2))
        return codes, masked


class Tokenizer(_MaskedTokenizer):
    """Tokenizes text under one set of :class:`LinkageRules`: the exact reading (SPEC §1–2)."""

    reading = "exact"

    def __init__(self, rules: LinkageRules | None = None) -> None:
        super().__init__(rules)
        self._classes = _char_classes(self.rules.break_chars)
        self._single = np.array(sorted({ord(c) for c in self.rules.non_breaking_single}), dtype=np.uint32)
        self._kinds = _spaceless_kinds()

    @property
    def folds_ascii(self) -> bool:
        """Whether a token's key lower-cases its ASCII letters (``search_form`` does, with ``casefold``)."""
        return self.rules.casefold

    def _scan(self, text: str, masks: list[tuple[int, int]]) -> Tokens:
        codes, masked = self._codes_and_masked(text, masks)
        starts, ends, segment_start, spaceless = _scan_codes(
            codes, self._classes, masked, self._single, self.rules.paragraph_breaks, self._kinds
        )
        return Tokens(
            starts=starts, ends=ends, segment_start=segment_start, text=text, codes=codes, masks=masks, spaceless=spaceless,
            max_n=self.rules.max_n, max_n_chars=self.rules.max_n_chars,
        )

    def search_form(self, raw: str) -> str:
        """SPEC §1: ``NFKC(token).casefold()`` (per the configured rules)."""
        form = raw
        if self.rules.normalization and not raw.isascii():  # NFKC leaves ASCII unchanged
            form = unicodedata.normalize(self.rules.normalization, form)  # type: ignore[arg-type]
        return form.casefold() if self.rules.casefold else form

    #: What a token's key is made of: its search form.
    key_form = search_form


class SearchTokenizer(_MaskedTokenizer):
    """The search reading (SPEC §8): runs of letters and digits of the text's search form,
    one token per character of a script written without spaces, broken only by masks
    (punctuation and paragraph ends join, as in an engine's phrase query over one field).

    Masks are found on the text as written (a pattern such as ``[PERSON]`` needs its
    capitals) and mask the folded characters they produced; offsets refer to the text.

    With ``alternate``, the characters on whose reading the folding tables disagree read
    the other way (``search_form.alternate_readings``: ``þ`` as ``p``, not ``th``): the
    same tokens, with other keys, for the query side of SPEC §8's "linkable under either
    table" (``ngrams.alternate_analysis``). An index is always built without it.
    """

    reading = "search"
    #: Keys are made of folded text: lower case already.
    folds_ascii = True

    def __init__(self, rules: LinkageRules | None = None, alternate: bool = False) -> None:
        super().__init__(rules)
        self.alternate = alternate
        self._classes = _char_classes("")
        self._kinds = _spaceless_kinds()
        self._table = alternate_table() if alternate else fold_table()

    def _scan(self, text: str, masks: list[tuple[int, int]]) -> Tokens:
        codes, masked = self._codes_and_masked(text, masks)
        folded, origin = fold_codes(codes, *self._table)
        form_starts, form_ends, segment_start, spaceless = _scan_search(folded, origin, codes, self._classes, masked[origin], self._kinds)
        starts = origin[form_starts]
        ends = origin[form_ends - 1] + 1
        return Tokens(
            starts=starts, ends=ends, segment_start=segment_start, text=text, codes=codes, masks=masks,
            folded=(folded, form_starts, form_ends), spaceless=spaceless, max_n=self.rules.max_n,
            max_n_chars=self.rules.max_n_chars,
        )

    @staticmethod
    def key_form(raw: str) -> str:
        """A search token is folded already: its key is the token itself."""
        return raw
