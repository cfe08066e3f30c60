"""SPEC §8's search form: the text as the adversary's search engine and eyes read it.

An engine's analyzer (ICU normalizer and folding in Lucene, Elasticsearch and OpenSearch;
tantivy's tokenizer with ASCII folding) drops invisible characters, folds case and
diacritics, and a reader maps look-alike letters back. A text that is unlinkable only
because of those differences is not protected, so the search reading indexes and queries
this form. Each code point is folded on its own, in this order:

1. a Default_Ignorable_Code_Point (soft hyphen, zero-width characters, bidi controls,
   variation selectors, tag characters, fillers, ...) disappears, so the letters on both
   sides join;
2. NFKC (compatibility forms: ligatures, full-width and mathematical letters);
3. canonical decomposition (NFD) with every combining mark dropped: diacritics go;
4. case folding (``str.casefold``);
5. a non-ASCII letter or digit is replaced by the UTS #39 prototype (skeleton) of the
   letter as written — the glyph a reader sees — with steps 3–4 again until nothing
   changes, so the Cyrillic ``а``, ``В`` and ``І`` read as ``a``, ``b`` and ``i``
   (UTS #39's prototype ``l`` of a capital-I-like letter reads as the ``I`` it resembles);
6. a Latin letter with a stroke, bar or hook that has no decomposition (``ø``, ``ł``,
   ``đ``, ``ħ``) or a small capital (``ʙ``) reads as its base letter, as ASCII folding does.

Folding one code point at a time keeps every output character's origin in the text, so
search tokens report offsets into the original text. It equals folding the whole text at
once: NFKC and NFD decompose one code point at a time, and what composition or
reordering would change is combining marks, which step 3 drops.

Readings chosen where the SPEC leaves room (docs/linkage-rules.md §8):

* ASCII characters are only case-folded. UTS #39 also maps ``I``→``l``, ``1``→``l``,
  ``0``→``O`` and ``m``→``rn`` among ASCII characters; applied to both sides that would
  merge ``I`` with ``l`` but not with ``i`` (it breaks case folding) and merge real
  words (``burn``/``bum``, ``stern``/``stem``), which only raises search dfs. A non-ASCII
  look-alike of an ASCII character still reads as that character.
* Only letters and digits are replaced by prototypes: a symbol that looks like a letter
  (``×``, ``∣``) stays a symbol, as an engine's tokenizer sees it.

The prototypes come from ``data/confusables.txt`` (UTS #39 data, written by
``tools/confusables_table.py`` from ICU). The folding table of all code points is built
once (about a second) and cached on disk per Unicode version and data digest.
"""
from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
#: Default_Ignorable_Code_Point (Unicode DerivedCoreProperties), inclusive ranges.
DEFAULT_IGNORABLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
#: Rounds of step 5 before a prototype chain is cut (UTS #39 prototypes are fixed points;
#: folding case can expose one more).
_PROTOTYPE_ROUNDS = 4
_CODE_POINTS = 0x110000
_LATIN_BASE = re.compile(r"LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL )?([A-Z])(?: WITH |$)")


def is_default_ignorable(cp: int) -> bool:
    return any(first <= cp <= last for first, last in DEFAULT_IGNORABLE_RANGES)


@lru_cache(maxsize=1)
def _prototype_data() -> tuple[dict[str, str], str]:
    """The shipped UTS #39 prototypes by character, and the digest of the file."""
    raw = resources.files("spacy_delink.linkage").joinpath("data/confusables.txt").read_bytes()
    table: dict[str, str] = {}
    for line in raw.decode("utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        source, target = line.split("\t")
        table[chr(int(source, 16))] = "".join(chr(int(cp, 16)) for cp in target.split())
    return table, hashlib.sha256(raw).hexdigest()[:16]


def _without_marks(text: str) -> str:
    """NFD with combining marks and default-ignorable characters dropped (steps 1 and 3)."""
    return "".join(
        ch for ch in unicodedata.normalize("NFD", text)
        if not unicodedata.category(ch).startswith("M") and not is_default_ignorable(ord(ch))
    )


def _fold_case(text: str) -> str:
    return _without_marks(_without_marks(text).casefold())


def _latin_base(ch: str) -> str:
    """Step 6: a Latin letter with an undecomposed stroke, bar or hook, or a small capital, reads as its base letter."""
    match = _LATIN_BASE.match(unicodedata.name(ch, ""))
    return match.group(1).lower() if match else ch


def _prototypes_of(text: str, prototypes: dict[str, str]) -> str:
    """Each non-ASCII letter or digit of ``text`` replaced by its UTS #39 prototype."""
    return "".join(
        prototypes.get(c, c) if not c.isascii() and unicodedata.category(c).startswith(("L", "N")) else c for c in text
    )


def _fold_letter(ch: str, prototypes: dict[str, str]) -> str:
    """Steps 4–6 for one character left by NFKC and NFD.

    A letter maps through the prototype of the letter *as written*, the glyph a reader
    sees (``В`` → ``B``, ``в`` → ``ʙ`` → ``b``). UTS #39 gives capital-I-like letters the
    prototype ``l`` (it merges ``I`` and ``l``); from an upper-case letter that ``l`` is
    read as the capital ``I`` it resembles, so the Cyrillic ``Іvan`` folds as ``Ivan``.
    """
    if ch.isascii() or not unicodedata.category(ch).startswith(("L", "N")):
        return _fold_case(ch)
    target = prototypes.get(ch, ch)
    if target == "l" and unicodedata.category(ch) in ("Lu", "Lt"):
        target = "I"
    mapped = _fold_case(target)
    for _ in range(_PROTOTYPE_ROUNDS):
        again = _fold_case(_prototypes_of(mapped, prototypes))
        if again == mapped:
            break
        mapped = again
    return "".join(c if c.isascii() else _latin_base(c) for c in mapped)


def fold_char(ch: str) -> str:
    """The search form of one code point (module docstring): often itself, sometimes empty or several."""
    if is_default_ignorable(ord(ch)):
        return ""
    prototypes, _ = _prototype_data()
    return "".join(_fold_letter(c, prototypes) for c in _without_marks(unicodedata.normalize("NFKC", ch)))


def fold_text(text: str) -> str:
    """The search form of a whole text (what the index and every search-reading query read)."""
    starts, chars = fold_table()
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    folded, _ = fold_codes(codes, starts, chars)
    return folded.tobytes().decode("utf-32-le", "surrogatepass")


def table_version() -> str:
    """What the folding depends on, recorded by an index built with the search reading."""
    return f"unicode-{unicodedata.unidata_version}/uts39-{_prototype_data()[1]}"


def _cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "spacy-delink"


def _build_table() -> tuple[np.ndarray, np.ndarray]:
    """Every code point's search form as CSR arrays (``starts`` int64 of length 0x110001, ``chars`` uint32).

    Most code points fold to themselves: those are recognized by cheap tests (unassigned or
    private, already NFKC and NFD, no case, no prototype, not Latin) before ``fold_char``.
    """
    prototypes, _ = _prototype_data()
    lengths = np.ones(_CODE_POINTS, dtype=np.int64)
    changed: dict[int, str] = {}
    category, is_normalized = unicodedata.category, unicodedata.is_normalized
    for cp in range(_CODE_POINTS):
        ch = chr(cp)
        kind = category(ch)
        if not is_default_ignorable(cp) and (
            kind in ("Cn", "Co", "Cs")
            or (
                kind[0] != "M" and is_normalized("NFKC", ch) and is_normalized("NFD", ch) and ch.casefold() == ch
                and ch not in prototypes and not _LATIN_BASE.match(unicodedata.name(ch, ""))
            )
        ):
            continue
        folded = fold_char(ch)
        if folded != ch:
            changed[cp] = folded
            lengths[cp] = len(folded)
    starts = np.zeros(_CODE_POINTS + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    chars = np.repeat(np.arange(_CODE_POINTS, dtype=np.uint32), lengths)
    for cp, folded in changed.items():
        chars[starts[cp] : starts[cp + 1]] = [ord(c) for c in folded]
    return starts, chars


@lru_cache(maxsize=1)
def fold_table() -> tuple[np.ndarray, np.ndarray]:
    """``_build_table``, cached on disk per ``table_version`` (a read-only home only costs the build again)."""
    cache = _cache_dir() / f"searchform-{table_version().replace('/', '-')}.npz"
    try:
        with np.load(cache) as saved:
            return saved["starts"], saved["chars"]
    except (OSError, ValueError, KeyError):
        pass
    starts, chars = _build_table()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_name(f"{cache.name}.{os.getpid()}.tmp.npz")
        np.savez(tmp, starts=starts, chars=chars)
        os.replace(tmp, cache)
    except OSError:
        pass
    return starts, chars


@nb.njit(cache=True, nogil=True)
def fold_codes(codes: np.ndarray, starts: np.ndarray, chars: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The search form of ``codes`` (code points) through the table, and each output character's origin."""
    size = 0
    for code in codes:
        size += starts[code + 1] - starts[code]
    folded = np.empty(size, dtype=np.uint32)
    origin = np.empty(size, dtype=np.int64)
    at = 0
    for i in range(len(codes)):
        code = codes[i]
        for j in range(starts[code], starts[code + 1]):
            folded[at] = chars[j]
            origin[at] = i
            at += 1
    return folded, origin
