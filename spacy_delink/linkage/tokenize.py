"""SPEC §1–2: the search tokenization shared by the index and every detector.

The index and the queries must tokenize identically, so this module is the single
implementation of tokens, search forms, breaking gaps and masks. It is vectorized
with numpy (one table lookup per character) because the index build runs it over
millions of tokens: classifying characters one by one in Python, or with a regular
expression whose class lists every combining mark, is 10–40x slower.

Readings of the SPEC where it leaves room (each the one that finds more linkages, or
the only literal one, and each covered by ``tests/test_tokenization.py``):

* a combining mark is a word character even where ``str.isalnum()`` is false, so
  ``cafe\u0301`` stays one token, as ``café`` does;
* masks are the union of all patterns' matches, merged where they overlap or touch;
  a mask's characters never start or end a token, and its gap always breaks, also
  when the gap is a single ``.`` or ``,`` covered by a mask;
* the search form skips NFKC for ASCII tokens (NFKC is the identity there).
"""
from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InputError

DEFAULT_BREAK_CHARS = '.,;:!?()[]{}"“”„«»…'
#: SPEC §2's defaults. ``\*\*\*+`` is the SPEC's ``\*{3,}`` spelled with a literal prefix,
#: which Python's regex engine scans for ~20x faster; both match the same strings.
DEFAULT_MASK_PATTERNS: tuple[str, ...] = (r"\[[A-Z][A-Z0-9_ -]*\]", r"<[A-Z][A-Z0-9_]*>", r"\*\*\*+")
#: A gap that is exactly one of these characters does not break (``3.5``, ``1,234``, ``U.S``).
DEFAULT_NON_BREAKING_SINGLE = ".,"
PARAGRAPH_END = re.compile(r"\n[ \t\r]*\n")
MAX_SUPPORTED_N = 32

_OTHER, _WORD, _BREAK = 0, 1, 2


@dataclass(frozen=True)
class LinkageRules:
    """The configurable rules of SPEC §1–3; an index records them and refuses other rules."""

    max_n: int = 8
    break_chars: str = DEFAULT_BREAK_CHARS
    non_breaking_single: str = DEFAULT_NON_BREAKING_SINGLE
    paragraph_breaks: bool = True
    mask_patterns: tuple[str, ...] = DEFAULT_MASK_PATTERNS
    normalization: str | None = "NFKC"
    casefold: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.max_n <= MAX_SUPPORTED_N:
            raise InputError(f"max_n must be between 1 and {MAX_SUPPORTED_N}, got {self.max_n}")
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
        mine.pop("max_n")
        theirs.pop("max_n")
        return mine == theirs


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spacy-delink"


@lru_cache(maxsize=1)
def _word_chars() -> np.ndarray:
    """Bool per code point: ``str.isalnum()`` or a combining mark (SPEC §1).

    ``[^\\W_]`` matches exactly the characters for which ``str.isalnum()`` is true; marks
    need ``unicodedata.category`` per code point (~0.3 s), so the table is cached on disk
    per Unicode database version.
    """
    cache = _cache_dir() / f"wordchars-{unicodedata.unidata_version}.npy"
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


@dataclass
class Tokens:
    """The tokens of one text: offsets, raw strings, and where segments (join-runs) start.

    ``segment_start[i]`` is true when the gap before token ``i`` breaks (or ``i`` is the
    first token); an n-gram may start at ``i`` only if ``remaining[i] >= n``, the number
    of tokens from ``i`` to the end of its segment.
    """

    starts: np.ndarray
    ends: np.ndarray
    raw: list[str]
    segment_start: np.ndarray
    masks: list[tuple[int, int]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.raw)

    @property
    def remaining(self) -> np.ndarray:
        """Tokens from each position to the end of its segment (inclusive)."""
        count = len(self.raw)
        if count == 0:
            return np.zeros(0, dtype=np.int64)
        seg_ids = np.cumsum(self.segment_start) - 1
        seg_ends = np.flatnonzero(np.append(self.segment_start[1:], True)) + 1
        return seg_ends[seg_ids] - np.arange(count)


class Tokenizer:
    """Tokenizes text under one set of :class:`LinkageRules`."""

    def __init__(self, rules: LinkageRules | None = None) -> None:
        self.rules = rules or LinkageRules()
        self._classes = _char_classes(self.rules.break_chars)
        self._mask_res = [re.compile(p) for p in self.rules.mask_patterns]
        self._single = {ord(c) for c in self.rules.non_breaking_single}

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
        """Tokens, segment starts and masks of ``text`` (SPEC §1–2)."""
        return self._scan(text, self.mask_spans(text))

    def tokenize_batch(self, texts: list[str]) -> tuple[Tokens, np.ndarray]:
        """Tokens of several texts in one vectorized pass, and each text's token count.

        The texts are joined by a paragraph end; masks are found per text (a pattern never
        spans two texts) and every text's first token starts a new segment, so each text is
        tokenized exactly as alone. Offsets refer to the joined text.
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

    def _scan(self, text: str, masks: list[tuple[int, int]]) -> Tokens:
        codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        classes = self._classes[codes]
        is_word = classes == _WORD
        for start, end in masks:
            is_word[start:end] = False
        edges = np.diff(is_word.view(np.int8), prepend=np.int8(0), append=np.int8(0))
        starts = np.flatnonzero(edges == 1)
        ends = np.flatnonzero(edges == -1)
        count = len(starts)
        segment_start = np.zeros(count, dtype=bool)
        if count:
            segment_start[0] = True
            events = [np.flatnonzero(classes == _BREAK)]
            if self.rules.paragraph_breaks and "\n" in text:
                events.append(np.fromiter((m.start() for m in PARAGRAPH_END.finditer(text)), dtype=np.int64))
            if masks:
                events.append(np.fromiter((s for s, _ in masks), dtype=np.int64, count=len(masks)))
            breaking = self._breaking_gaps(codes, starts, ends, events, masks)
            segment_start[breaking] = True
        raw = [text[s:e] for s, e in zip(starts.tolist(), ends.tolist())]
        return Tokens(starts=starts, ends=ends, raw=raw, segment_start=segment_start, masks=masks)

    def _breaking_gaps(
        self,
        codes: np.ndarray,
        starts: np.ndarray,
        ends: np.ndarray,
        events: list[np.ndarray],
        masks: list[tuple[int, int]],
    ) -> np.ndarray:
        """Indices ``j`` of tokens whose preceding gap breaks, from break-event positions."""
        positions = np.concatenate(events).astype(np.int64)
        gap_after = np.searchsorted(starts, positions, side="right")  # token following the event's gap
        inner = (gap_after > 0) & (gap_after < len(starts))
        positions, gap_after = positions[inner], gap_after[inner]
        if self._single and len(positions):
            # A gap of exactly one '.' or ',' joins, unless a mask covers that character.
            event_codes = codes[positions]
            one_char = np.zeros(len(positions), dtype=bool)
            for code in self._single:
                one_char |= event_codes == code
            one_char &= starts[gap_after] - ends[gap_after - 1] == 1
            if masks and one_char.any():
                mask_starts = np.fromiter((s for s, _ in masks), dtype=np.int64, count=len(masks))
                single = np.flatnonzero(one_char)
                at = np.minimum(np.searchsorted(mask_starts, positions[single]), len(mask_starts) - 1)
                one_char[single[mask_starts[at] == positions[single]]] = False
            gap_after = gap_after[~one_char]
        return gap_after

    def search_form(self, raw: str) -> str:
        """SPEC §1: ``NFKC(token).casefold()`` (per the configured rules)."""
        form = raw
        if self.rules.normalization and not raw.isascii():  # NFKC leaves ASCII unchanged
            form = unicodedata.normalize(self.rules.normalization, form)  # type: ignore[arg-type]
        return form.casefold() if self.rules.casefold else form
