"""SPEC §1–2 and §8: the tokenizations (readings) shared by the index and every detector.

The index and the queries must tokenize identically, so this module is the single
implementation of tokens, search forms, breaking gaps and masks. Characters are
classified by one table lookup each and tokens and gaps are found in one compiled
pass (``_scan_codes``, numba) because the index build runs it over hundreds of millions
of characters: in Python, or as several numpy passes with temporaries, it is 5–40x
slower. Raw token strings are only made when asked for (``Tokens.raw``).

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

import os
import re
from abc import ABC, abstractmethod
import unicodedata
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from typing import Any

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..cachedir import cache_dir
from ..errors import InputError
from .search_form import alternate_table, fold_codes, fold_table

DEFAULT_BREAK_CHARS = '.,;:!?()[]{}"“”„«»…'
#: SPEC §2's defaults. ``\*\*\*+`` is the SPEC's ``\*{3,}`` spelled with a literal prefix,
#: which Python's regex engine scans for ~20x faster; both match the same strings.
DEFAULT_MASK_PATTERNS: tuple[str, ...] = (r"\[[A-Z][A-Z0-9_ -]*\]", r"<[A-Z][A-Z0-9_]*>", r"\*\*\*+")
#: A gap that is exactly one of these characters does not break (``3.5``, ``1,234``, ``U.S``).
DEFAULT_NON_BREAKING_SINGLE = ".,"
MAX_SUPPORTED_N = 32

_OTHER, _WORD, _BREAK = 0, 1, 2


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


@lru_cache(maxsize=1)
def _word_chars() -> np.ndarray:
    """Bool per code point: ``str.isalnum()`` or a combining mark (SPEC §1).

    ``[^\\W_]`` matches exactly the characters for which ``str.isalnum()`` is true; marks
    need ``unicodedata.category`` per code point (~0.3 s), so the table is cached on disk
    per Unicode database version.
    """
    cache = cache_dir() / f"wordchars-{unicodedata.unidata_version}.npy"
    try:
        return np.unpackbits(np.load(cache))[:0x110000].astype(bool)
    except (OSError, ValueError):
        pass  # no usable cache yet: scan once and write it
    every_char = np.arange(0x110000, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
    table = np.zeros(0x110000, dtype=bool)
    for match in re.finditer(r"[^\W_]+", every_char):
        table[match.start() : match.end()] = True
    category = unicodedata.category
    for cp, ch in enumerate(every_char):
        if category(ch)[0] == "M":
            table[cp] = True
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp.npy")
        np.save(tmp, np.packbits(table))
        os.replace(tmp, cache)
    except OSError:
        pass  # a read-only home only costs the 0.3 s scan again next time
    return table


@lru_cache(maxsize=8)
def _char_classes(break_chars: str) -> np.ndarray:
    """A uint8 class per code point: word character, break character, or other."""
    table = _word_chars().astype(np.uint8) * _WORD
    for ch in break_chars:
        if table[ord(ch)] == _WORD:
            raise InputError(f"break character {ch!r} is a word character; remove it from break_chars")
        table[ord(ch)] = _BREAK
    return table


#: SPEC §8's scripts written without spaces, as inclusive code point ranges: under the search
#: reading each of their letters is a search token of its own (a Hangul syllable, which the
#: search form spells as its jamo, one token). Their decimal digits are not listed: a number
#: reads as one token, as an engine reads it.
SPACELESS_SCRIPTS: tuple[tuple[int, int, str], ...] = (
    (0x0E01, 0x0E5B, "Thai"), (0x0E81, 0x0EDF, "Lao"), (0x1000, 0x109F, "Myanmar"), (0x1100, 0x11FF, "Hangul"),
    (0x1780, 0x17FF, "Khmer"), (0x19E0, 0x19FF, "Khmer"), (0x2E80, 0x2FDF, "Han"), (0x3005, 0x3007, "Han"),
    (0x3021, 0x3029, "Han"), (0x3038, 0x303B, "Han"), (0x3041, 0x309F, "Hiragana"), (0x30A0, 0x30FF, "Katakana"),
    (0x3131, 0x318E, "Hangul"), (0x31F0, 0x31FF, "Katakana"), (0x3400, 0x4DBF, "Han"), (0x4E00, 0x9FFF, "Han"),
    (0xA960, 0xA97F, "Hangul"), (0xA9E0, 0xA9FF, "Myanmar"), (0xAA60, 0xAA7F, "Myanmar"), (0xAC00, 0xD7A3, "Hangul"),
    (0xD7B0, 0xD7FF, "Hangul"), (0xF900, 0xFAFF, "Han"), (0xFF66, 0xFF9F, "Katakana"), (0xFFA1, 0xFFDC, "Hangul"),
    (0x1AFF0, 0x1AFFF, "Katakana"), (0x1B000, 0x1B16F, "Hiragana"), (0x20000, 0x2FA1F, "Han"), (0x30000, 0x323AF, "Han"),
)
#: Scripts also written without spaces that no reading splits into characters (SPEC §8 names
#: the eight above): a text holding their letters is never reported protected.
UNSPLIT_SCRIPTS: tuple[tuple[int, int, str], ...] = (
    (0x1950, 0x197F, "Tai Le"), (0x1980, 0x19DF, "New Tai Lue"), (0x1A00, 0x1A1F, "Buginese"), (0x1A20, 0x1AAF, "Tai Tham"),
    (0x1B00, 0x1B7F, "Balinese"), (0xA000, 0xA4CF, "Yi"), (0xA980, 0xA9DF, "Javanese"), (0x17000, 0x18AFF, "Tangut"),
    (0x1B170, 0x1B2FF, "Nushu"),
)
_ORDINARY, _SPACELESS, _HANGUL, _MARK = 0, 1, 2, 3


@lru_cache(maxsize=1)
def script_table() -> tuple[np.ndarray, tuple[str, ...]]:
    """A uint8 per code point: 0, or 1 + the index in the names of the script written without
    spaces whose letter (a letter, mark or letter number) it is; and those names. The
    ``SPACELESS_SCRIPTS`` come first, then the ``UNSPLIT_SCRIPTS``."""
    names = tuple(dict.fromkeys(name for _, _, name in SPACELESS_SCRIPTS + UNSPLIT_SCRIPTS))
    table = np.zeros(0x110000, dtype=np.uint8)
    category = unicodedata.category
    for first, last, name in SPACELESS_SCRIPTS + UNSPLIT_SCRIPTS:
        number = names.index(name) + 1
        for cp in range(first, last + 1):
            kind = category(chr(cp))
            if kind[0] in "LM" or kind == "Nl":
                table[cp] = number
    return table, names


@lru_cache(maxsize=1)
def _spaceless_kinds() -> np.ndarray:
    """A uint8 per code point: ``_ORDINARY``, ``_SPACELESS`` (a token of its own), ``_HANGUL``
    (under the search reading, a token with the other characters its syllable folded to) or
    ``_MARK`` (a combining mark of those scripts: part of the token before it)."""
    table, names = script_table()
    split = np.isin(table, [names.index(name) + 1 for _, _, name in SPACELESS_SCRIPTS])
    kinds = np.where(split, _SPACELESS, _ORDINARY).astype(np.uint8)
    kinds[table == names.index("Hangul") + 1] = _HANGUL
    marks = [cp for cp in np.flatnonzero(split).tolist() if unicodedata.category(chr(cp))[0] == "M"]
    kinds[marks] = _MARK
    return kinds


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


_NEWLINE, _SPACE, _TAB, _CR = 10, 32, 9, 13


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


@nb.njit(cache=True, nogil=True)
def _mark_ranges(flags: np.ndarray, ranges: np.ndarray) -> None:
    """Set ``flags`` to 1 over each half-open range (a masked text has hundreds)."""
    for i in range(len(ranges)):
        flags[ranges[i, 0] : ranges[i, 1]] = 1


@nb.njit(cache=True, nogil=True)
def _scan_codes(
    codes: np.ndarray, classes: np.ndarray, masked: np.ndarray, single: np.ndarray, paragraph_breaks: bool, kinds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Token starts, ends, segment starts and character flags of a text's code points (SPEC §1–2).

    ``classes`` maps a code point to ``_OTHER``, ``_WORD`` or ``_BREAK``; ``masked`` marks
    the characters inside masks; ``single`` lists the code points that do not break when
    they are a whole gap alone. A gap breaks when it holds a break character, a masked
    character, or (with ``paragraph_breaks``) a newline, then only spaces, tabs or
    carriage returns, then a newline — unless it is exactly one unmasked ``single``. A
    letter of a script written without spaces (``kinds``) is a token of its own with the
    combining marks after it, and a run of other word characters ends where one starts,
    with no gap before the next piece (docs/languages.md).
    """
    size = len(codes)
    capacity = size + 1  # every character can be a token of its own
    starts = np.empty(capacity, dtype=np.int64)
    ends = np.empty(capacity, dtype=np.int64)
    segment_start = np.empty(capacity, dtype=np.bool_)
    spaceless = np.empty(capacity, dtype=np.bool_)
    count = 0
    gap_breaks = True
    i = 0
    while i < size:  # a gap, then the token after it: two tight loops, not one branching per character
        gap_length = 0
        gap_code = np.uint32(0)
        gap_masked = False
        newline_open = False
        while i < size:
            code = codes[i]
            is_masked = masked[i] != 0
            kind = classes[code]
            if kind == _WORD and not is_masked:
                break
            gap_length += 1
            gap_code = code
            if is_masked:
                gap_breaks = True
                gap_masked = True
            elif kind == _BREAK:
                gap_breaks = True
            if paragraph_breaks:
                if code == _NEWLINE:
                    if newline_open:
                        gap_breaks = True
                    newline_open = True
                elif code != _SPACE and code != _TAB and code != _CR:
                    newline_open = False
            i += 1
        if i == size:
            break
        breaks = gap_breaks or count == 0
        if count and gap_length == 1 and not gap_masked:
            for allowed in single:
                if gap_code == allowed:
                    breaks = False
        segment_start[count] = breaks
        starts[count] = i
        kind = kinds[codes[i]]
        spaceless[count] = kind != _ORDINARY
        i += 1
        if kind == _ORDINARY:
            while i < size and classes[codes[i]] == _WORD and masked[i] == 0 and kinds[codes[i]] == _ORDINARY:
                i += 1
        else:
            while i < size and masked[i] == 0 and kinds[codes[i]] == _MARK:
                i += 1
        ends[count] = i
        count += 1
        gap_breaks = False
    return starts[:count], ends[:count], segment_start[:count], spaceless[:count]  # views: the pages past ``count`` are never touched


@nb.njit(cache=True, nogil=True)
def _scan_search(
    codes: np.ndarray, origin: np.ndarray, text_codes: np.ndarray, classes: np.ndarray, masked: np.ndarray, kinds: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The search reading's tokens of a text's search form (SPEC §8): starts, ends, segment
    starts and whether each is a character of a script written without spaces.

    ``classes`` tells word characters; ``kinds`` (``_spaceless_kinds``) splits them: a
    character of a script written without spaces is a token alone (the characters that one
    Hangul syllable of ``text_codes`` folded to, ``origin``, are one token: its jamo, some
    read as Han or Katakana look-alikes), and a run of other word
    characters ends where such a character starts, with no gap before the next piece. Only
    a mask breaks a gap: punctuation and paragraph ends join, as in an engine's field.
    """
    size = len(codes)
    starts = np.empty(size, dtype=np.int64)
    ends = np.empty(size, dtype=np.int64)
    segment_start = np.empty(size, dtype=np.bool_)
    spaceless = np.empty(size, dtype=np.bool_)
    count = 0
    gap_breaks = True
    i = 0
    while i < size:
        if classes[codes[i]] != _WORD or masked[i] != 0:
            if masked[i] != 0:
                gap_breaks = True
            i += 1
            continue
        kind = _HANGUL if kinds[text_codes[origin[i]]] == _HANGUL else kinds[codes[i]]
        segment_start[count] = gap_breaks
        starts[count] = i
        spaceless[count] = kind != _ORDINARY
        i += 1
        if kind == _ORDINARY:
            while i < size and classes[codes[i]] == _WORD and masked[i] == 0 and kinds[codes[i]] == _ORDINARY:
                i += 1
        elif kind == _HANGUL:  # whatever letters the syllable's jamo fold to (look-alikes: Han, Katakana)
            while i < size and origin[i] == origin[i - 1] and classes[codes[i]] == _WORD and masked[i] == 0:
                i += 1
        ends[count] = i
        count += 1
        gap_breaks = False
    return starts[:count], ends[:count], segment_start[:count], spaceless[:count]


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
