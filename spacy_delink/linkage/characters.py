"""What each code point is to the tokenizers (``linkage.tokenize``): a word, break or other
character (SPEC §1), and whether it is a letter of a script written without spaces (SPEC §8).

Each is one table over every code point, made once (the word characters cached on disk), so
the compiled scans (``token_scan``) classify a character by one lookup.
"""
from __future__ import annotations

import os
import re
import unicodedata
from functools import lru_cache

import numpy as np

from ..cachedir import cache_dir
from ..errors import InputError

_OTHER, _WORD, _BREAK = 0, 1, 2


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
