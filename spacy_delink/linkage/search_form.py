"""SPEC §8's search form: the text as the adversary's search engine and eyes read it.

An engine's analyzer (ICU normalizer and folding in Lucene, Elasticsearch and OpenSearch;
tantivy's tokenizer with ASCII folding) drops invisible characters, folds case and
diacritics, and a reader maps look-alike letters back. A text that is unlinkable only
because of those differences is not protected, so the search reading indexes and queries
this form. Each code point is folded on its own, in this order:

1. a Default_Ignorable_Code_Point (soft hyphen, zero-width characters, bidi controls,
   variation selectors, tag characters, fillers, ...) disappears, so the letters on both
   sides join;
2. a character that ASCII folding (Lucene's ASCIIFoldingFilter, tantivy's ``ascii_fold``)
   maps to ASCII letters or digits reads as that mapping, case-folded (``ǝ`` → ``e``,
   ``þ`` → ``th``, ``⓳`` → ``19``); a decimal digit of any script (Unicode Nd) reads as
   its ASCII digit (``١`` → ``1``), as ICU's folding reads it;
3. otherwise NFKC (compatibility forms: ligatures, full-width and mathematical letters);
4. canonical decomposition (NFD) with every combining mark dropped: diacritics go;
5. case folding (``str.casefold``);
6. a non-ASCII letter or digit left is read as step 2 reads it, or else replaced by the
   UTS #39 prototype (skeleton) of the letter as written — the glyph a reader sees — with
   steps 4–5 again until nothing changes, so the Cyrillic ``а``, ``В`` and ``І`` read as
   ``a``, ``b`` and ``i`` (UTS #39's prototype ``l`` of a capital-I-like letter reads as the
   ``I`` it resembles);
7. a Latin letter with a stroke, bar or hook that has no decomposition (``ø``, ``ł``,
   ``đ``, ``ħ``) or a small capital (``ʙ``) reads as its base letter, as ASCII folding does.

Folding one code point at a time keeps every output character's origin in the text, so
search tokens report offsets into the original text. It equals folding the whole text at
once: NFKC and NFD decompose one code point at a time, and what composition or
reordering would change is combining marks, which step 4 drops.

Readings chosen where the SPEC leaves room (docs/linkage-rules.md §8):

* Where ASCII folding or the Nd digit and UTS #39 disagree (``þ``: ``th`` vs ``p``,
  ``ɛ``: ``e`` vs ``c``, ``١``: ``1`` vs ``l``), the ASCII folding or the digit wins in
  the search form, which the index holds: an engine applies it to the original and the
  query alike. SPEC §8 makes a text linkable under either table, so a query holding such
  a character is also read the other way (``alternate_readings``, ``alternate_table``;
  ``ngrams.alternate_analysis``; ``tools/compare_folding_tables.py`` lists them).
* ASCII folding's mappings to punctuation alone (``«`` → ``"``) are not applied: a search
  token holds letters and digits only, so they change no search.
* ASCII characters are only case-folded. UTS #39 also maps ``I``→``l``, ``1``→``l``,
  ``0``→``O`` and ``m``→``rn`` among ASCII characters; applied to both sides that would
  merge ``I`` with ``l`` but not with ``i`` (it breaks case folding) and merge real
  words (``burn``/``bum``, ``stern``/``stem``), which only raises search dfs. A non-ASCII
  look-alike of an ASCII character still reads as that character.
* Only letters and digits are replaced by prototypes: a symbol that looks like a letter
  (``×``, ``∣``) stays a symbol, as an engine's tokenizer sees it.

The tables ship in ``data/`` (UTS #39 prototypes by ``tools/confusables_table.py`` from
ICU; ASCII folding and Nd digits by ``tools/folding_tables.py`` from tantivy and ICU) and
are refused unless their SHA-256 is the one in ``TABLE_DIGESTS``. The folding table of all
code points is built once (about a second); it is cached on disk only where the package
knows the digest the build must have (``BUILT_DIGESTS``, per Unicode version of Python's
``unicodedata``), and a cache that does not match it is rebuilt, never used.
"""
from __future__ import annotations

import hashlib
import os
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numba as nb
import numpy as np

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..cachedir import cache_dir
from ..errors import DelinkError

#: Default_Ignorable_Code_Point (Unicode DerivedCoreProperties), inclusive ranges.
DEFAULT_IGNORABLE_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5),
    (0x180B, 0x180F), (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164),
    (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
)
#: Rounds of step 6 before a prototype chain is cut (UTS #39 prototypes are fixed points;
#: folding case can expose one more).
_PROTOTYPE_ROUNDS = 4
_CODE_POINTS = 0x110000
#: SHA-256 of each shipped table file (printed by tools/folding_tables.py): any other content is refused.
TABLE_DIGESTS = {
    "ascii_folding.txt": "17fc8558233ed33cc5b8e5ad1ddec73dccfa06480c6229910dc5a64a7ee45e19",
    "decimal_digits.txt": "7f943e8c4fb3377619521bf618f33f52a440cfe3f7b7631b3d23570068a9015f",
    "confusables.txt": "2cb257e1e4a91e036de32e0330e5a6171c98907e67e34609dcfa24be10688a11",
}
#: SHA-256 of the built table (``_table_digest``) per ``unicodedata.unidata_version``
#: (printed by tools/folding_tables.py): only such a table is cached on disk.
BUILT_DIGESTS: dict[str, str] = {
    "14.0.0": "85b18feca7df8b350448d8c47541b4f12772b70724807e6d62e666c1866025c5",  # Python 3.11
}
_LATIN_BASE = re.compile(r"LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL )?([A-Z])(?: WITH |$)")


def is_default_ignorable(cp: int) -> bool:
    return any(first <= cp <= last for first, last in DEFAULT_IGNORABLE_RANGES)


class TableError(DelinkError):
    """A shipped folding table that is not the one this package was released with."""


@dataclass(frozen=True)
class FoldTables:
    """The verified tables the search form is built from, each by character."""

    #: UTS #39 prototypes (``data/confusables.txt``).
    prototypes: dict[str, str]
    #: ASCII folding's mapping, kept where it holds an ASCII letter or digit (``data/ascii_folding.txt``).
    ascii: dict[str, str]
    #: Decimal digits of every script, as ASCII digits (``data/decimal_digits.txt``).
    digits: dict[str, str]


def _verified_table(name: str) -> dict[str, str]:
    """``data/<name>`` as ``{character: output}``, refused unless its SHA-256 is ``TABLE_DIGESTS[name]``."""
    raw = resources.files("spacy_delink.linkage").joinpath(f"data/{name}").read_bytes()
    if hashlib.sha256(raw).hexdigest() != TABLE_DIGESTS[name]:
        raise TableError(
            f"spacy_delink/linkage/data/{name} is not the table this spacy-delink shipped (SHA-256 differs): "
            "the search reading refuses to run on an altered table; reinstall spacy-delink"
        )
    table: dict[str, str] = {}
    for line in raw.decode("utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        source, target = line.split("\t")
        table[chr(int(source, 16))] = "".join(chr(int(cp, 16)) for cp in target.split())
    return table


@lru_cache(maxsize=1)
def fold_tables() -> FoldTables:
    ascii_folding = _verified_table("ascii_folding.txt")
    return FoldTables(
        prototypes=_verified_table("confusables.txt"),
        ascii={ch: out for ch, out in ascii_folding.items() if any(c.isalnum() for c in out)},
        digits=_verified_table("decimal_digits.txt"),
    )


def _without_marks(text: str) -> str:
    """NFD with combining marks and default-ignorable characters dropped (steps 1 and 4)."""
    return "".join(
        ch for ch in unicodedata.normalize("NFD", text)
        if not unicodedata.category(ch).startswith("M") and not is_default_ignorable(ord(ch))
    )


def _fold_case(text: str) -> str:
    return _without_marks(_without_marks(text).casefold())


def _latin_base(ch: str) -> str:
    """Step 7: a Latin letter with an undecomposed stroke, bar or hook, or a small capital, reads as its base letter."""
    match = _LATIN_BASE.match(unicodedata.name(ch, ""))
    return match.group(1).lower() if match else ch


def _engine_reading(ch: str, tables: FoldTables) -> str | None:
    """Step 2: what ASCII folding or the Nd digit table reads ``ch`` as, or None when neither maps it."""
    return tables.ascii.get(ch) or tables.digits.get(ch)


def _read_as(text: str, tables: FoldTables) -> str:
    """Step 6: each non-ASCII letter or digit of ``text`` as step 2 reads it, else as its UTS #39 prototype."""
    return "".join(
        (_engine_reading(c, tables) or tables.prototypes.get(c, c))
        if not c.isascii() and unicodedata.category(c).startswith(("L", "N")) else c
        for c in text
    )


def _fold_letter(ch: str, tables: FoldTables) -> str:
    """Steps 5–7 for one character left by NFKC and NFD.

    A letter maps through the prototype of the letter *as written*, the glyph a reader
    sees (``В`` → ``B``, ``в`` → ``ʙ`` → ``b``). UTS #39 gives capital-I-like letters the
    prototype ``l`` (it merges ``I`` and ``l``); from an upper-case letter that ``l`` is
    read as the capital ``I`` it resembles, so the Cyrillic ``Іvan`` folds as ``Ivan``.
    """
    if ch.isascii() or not unicodedata.category(ch).startswith(("L", "N")):
        return _fold_case(ch)
    target = _engine_reading(ch, tables)
    if target is None:
        target = tables.prototypes.get(ch, ch)
        if target == "l" and unicodedata.category(ch) in ("Lu", "Lt"):
            target = "I"
    mapped = _fold_case(target)
    for _ in range(_PROTOTYPE_ROUNDS):
        again = _fold_case(_read_as(mapped, tables))
        if again == mapped:
            break
        mapped = again
    return "".join(c if c.isascii() else _latin_base(c) for c in mapped)


def fold_char(ch: str, tables: FoldTables | None = None) -> str:
    """The search form of one code point (module docstring): often itself, sometimes empty or several.

    ``tables`` other than the shipped ones (``fold_tables``) serve ``alternate_readings``.
    """
    if is_default_ignorable(ord(ch)):
        return ""
    tables = tables or fold_tables()
    engine = _engine_reading(ch, tables)
    if engine is not None:
        return _fold_case(engine)
    return "".join(_fold_letter(c, tables) for c in _without_marks(unicodedata.normalize("NFKC", ch)))


#: The code points of ASCII letters and digits as the search form writes them (lower case).
_ASCII_ALNUM = np.zeros(128, dtype=bool)
_ASCII_ALNUM[[ord(c) for c in "0123456789abcdefghijklmnopqrstuvwxyz"]] = True


@lru_cache(maxsize=1)
def alternate_readings() -> dict[str, str]:
    """The characters whose search form the engine tables decide against UTS #39, and their other reading.

    SPEC §8: where two tables disagree on a character, a text is linkable if it is linkable
    under either. Step 2 (ASCII folding, Nd digits) wins in the search form; this is the
    search form of each such character without step 2 — NFKC, marks dropped, case folded,
    UTS #39 prototypes, the reading of a reader's eyes and of ICU's normalizer (``þ``:
    ``th`` / ``p``, ``ɛ``: ``e`` / ``c``, ``١``: ``1`` / ``l``, ``ẛ``: ``f`` / ``s``; also
    letters that reach such a character through their prototype, ``Ϸ`` → ``þ``). Only
    characters both of whose readings are ASCII letters or digits are listed: then each
    reading is a run of word characters, so a text's search tokens have the same bounds
    under both, and any other reading (``ð`` → ``∂``, ``ꜩ`` → ``tȝ``) names a string that
    no text's search form holds, so it could never be found.
    """
    starts, chars = fold_table()
    lengths = np.diff(starts)
    owner = np.repeat(np.arange(_CODE_POINTS, dtype=np.int64), lengths)
    not_alnum = np.zeros(_CODE_POINTS, dtype=bool)
    not_alnum[owner[(chars >= 128) | ~_ASCII_ALNUM[np.minimum(chars, 127)]]] = True
    candidates = np.flatnonzero((lengths > 0) & ~not_alnum)
    tables = fold_tables()
    uts39 = FoldTables(prototypes=tables.prototypes, ascii={}, digits={})
    found: dict[str, str] = {}
    for cp in candidates[candidates >= 128].tolist():
        other = fold_char(chr(cp), uts39)
        if other and other.isascii() and other.isalnum() and other != chars[starts[cp] : starts[cp + 1]].tobytes().decode("utf-32-le"):
            found[chr(cp)] = other
    return found


@lru_cache(maxsize=1)
def _alternate_flags() -> np.ndarray:
    """Bool per code point: whether ``alternate_readings`` lists it."""
    flags = np.zeros(_CODE_POINTS, dtype=bool)
    flags[[ord(ch) for ch in alternate_readings()]] = True
    return flags


def holds_alternate(codes: np.ndarray) -> bool:
    """Whether a text's code points hold a character of ``alternate_readings``."""
    return bool(len(codes)) and bool(_alternate_flags()[codes].any())


@lru_cache(maxsize=1)
def alternate_table() -> tuple[np.ndarray, np.ndarray]:
    """``fold_table`` with each character of ``alternate_readings`` read the other way (same CSR layout)."""
    starts, chars = fold_table()
    other = {ord(ch): np.array([ord(c) for c in reading], dtype=np.uint32) for ch, reading in alternate_readings().items()}
    lengths = np.diff(starts)
    for cp, reading in other.items():
        lengths[cp] = len(reading)
    new_starts = np.zeros_like(starts)
    np.cumsum(lengths, out=new_starts[1:])
    pieces: list[np.ndarray] = []
    copied = 0
    for cp in sorted(other):
        pieces += [chars[copied : starts[cp]], other[cp]]
        copied = starts[cp + 1]
    pieces.append(chars[copied:])
    return new_starts, np.concatenate(pieces)


def fold_text(text: str) -> str:
    """The search form of a whole text (what the index and every search-reading query read)."""
    starts, chars = fold_table()
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    folded, _ = fold_codes(codes, starts, chars)
    return folded.tobytes().decode("utf-32-le", "surrogatepass")


def table_version() -> str:
    """What the folding depends on, recorded by an index built with the search reading.

    The digest of the built table itself: any change of a shipped table, of the folding
    rules or of Python's Unicode data changes it, so an index built before is refused.
    """
    return f"unicode-{unicodedata.unidata_version}/fold-{_table_digest(*fold_table())[:16]}"


def _table_digest(starts: np.ndarray, chars: np.ndarray) -> str:
    """SHA-256 of a built table: its two arrays as little-endian int64 and uint32."""
    digest = hashlib.sha256(np.ascontiguousarray(starts, dtype="<i8").tobytes())
    digest.update(np.ascontiguousarray(chars, dtype="<u4").tobytes())
    return digest.hexdigest()


def _build_table() -> tuple[np.ndarray, np.ndarray]:
    """Every code point's search form as CSR arrays (``starts`` int64 of length 0x110001, ``chars`` uint32).

    Most code points fold to themselves: those are recognized by cheap tests (unassigned or
    private, already NFKC and NFD, no case, in no table, not Latin) before ``fold_char``.
    """
    tables = fold_tables()
    lengths = np.ones(_CODE_POINTS, dtype=np.int64)
    changed: dict[int, str] = {}
    category, is_normalized = unicodedata.category, unicodedata.is_normalized
    for cp in range(_CODE_POINTS):
        ch = chr(cp)
        kind = category(ch)
        if ch not in tables.ascii and ch not in tables.digits and not is_default_ignorable(cp) and (
            kind in ("Cn", "Co", "Cs")
            or (
                kind[0] != "M" and is_normalized("NFKC", ch) and is_normalized("NFD", ch) and ch.casefold() == ch
                and ch not in tables.prototypes and not _LATIN_BASE.match(unicodedata.name(ch, ""))
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


def _cached_table(cache: Path, expected: str) -> tuple[np.ndarray, np.ndarray] | None:
    """The table saved at ``cache`` when its digest is ``expected``; None when absent, unreadable or altered."""
    try:
        with np.load(cache, allow_pickle=False) as saved:
            starts, chars = saved["starts"], saved["chars"]
    except (OSError, ValueError, KeyError, EOFError):
        return None
    if starts.dtype != np.int64 or chars.dtype != np.uint32 or _table_digest(starts, chars) != expected:
        return None
    return starts, chars


@lru_cache(maxsize=1)
def fold_table() -> tuple[np.ndarray, np.ndarray]:
    """``_build_table``, cached on disk where ``BUILT_DIGESTS`` says what the build must be.

    The cache is read only when its digest is the shipped one, and written only when the
    build has it: an edited cache is rebuilt and replaced, never used. Under a Unicode
    version the package has no digest for, the table is built in memory on every run.
    The shipped tables are verified first, also when the cache answers.
    """
    fold_tables()  # the shipped tables are verified on every run, cache or not: an edited one is refused
    expected = BUILT_DIGESTS.get(unicodedata.unidata_version)
    cache = cache_dir() / f"searchform-{unicodedata.unidata_version}-{(expected or 'unknown')[:16]}.npz"
    if expected is not None:
        found = _cached_table(cache, expected)
        if found is not None:
            return found
    starts, chars = _build_table()
    if expected is None or _table_digest(starts, chars) != expected:
        return starts, chars
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
