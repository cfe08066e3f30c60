"""A deliberately naive, character-by-character reading of ../shared/SPEC-linkage.md.

It shares no code with the package: tests compare the fast index and detectors against it.
Both readings are here: the exact one (§1–§7) and the search reading (§8: the search form
of each character, phrases broken only by masks and paragraph ends), each function taking
``reading``. The search form's tables come from the engines themselves, never from the
package's data files or functions: UTS #39 skeletons from ICU's spoof checker (PyICU),
decimal digits from ICU's character types, and ASCII folding by probing tantivy's own
``ascii_fold`` filter character by character.
"""
from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

BREAK_CHARS = set('.,;:!?()[]{}"“”„«»…')
MASK_PATTERNS = [r"\[[A-Z][A-Z0-9_ -]*\]", r"<[A-Z][A-Z0-9_]*>", r"\*{3,}"]


@dataclass(frozen=True)
class OracleToken:
    start: int
    end: int
    form: str


def masked_chars(text: str) -> list[bool]:
    masked = [False] * len(text)
    for pattern in MASK_PATTERNS:
        for match in re.finditer(pattern, text):
            for i in range(match.start(), match.end()):
                masked[i] = True
    return masked


#: SPEC §8's Default_Ignorable code points (with U+FFF0–FFF8, the rest of the Unicode property).
IGNORABLE = [
    (0x00AD, 0x00AD), (0x034F, 0x034F), (0x061C, 0x061C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF),
]


@lru_cache(maxsize=1)
def _icu():  # type: ignore[no-untyped-def]
    try:
        import icu
    except ImportError as err:  # the test extra installs it
        raise ImportError("the SPEC oracle reads UTS #39 and Nd digits from ICU: pip install icukit-pyicu") from err
    return icu


@lru_cache(maxsize=1)
def _ascii_fold():  # type: ignore[no-untyped-def]
    import tantivy

    return tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw()).filter(tantivy.Filter.ascii_fold()).build()


@lru_cache(maxsize=1)
def _spoof_checker():  # type: ignore[no-untyped-def]
    return _icu().SpoofChecker()


def prototype(ch: str) -> str:
    """UTS #39's prototype of one character, as ICU's spoof checker computes its skeleton."""
    return str(_spoof_checker().getSkeleton(0, ch))


def ascii_folded(ch: str) -> str | None:
    """What tantivy's ascii_fold filter makes of ``ch`` when that holds an ASCII letter or digit (§8), else None."""
    out = "".join(_ascii_fold().analyze(ch))
    return out if out != ch and any(c.isalnum() for c in out) else None


def nd_digit(ch: str) -> str | None:
    """The ASCII digit of a decimal digit of any script (Unicode Nd, by ICU), else None."""
    icu = _icu()
    if icu.Char.charType(ch) != icu.UCharCategory.DECIMAL_DIGIT_NUMBER:
        return None
    return str(icu.Char.digit(ch, 10))


def engine_reading(ch: str) -> str | None:
    """§8's folding: ASCII folding, else the Nd digit (both win over a look-alike prototype)."""
    return ascii_folded(ch) or nd_digit(ch)


_IGNORABLE_CODE_POINTS = frozenset(cp for first, last in IGNORABLE for cp in range(first, last + 1))


def ignorable(ch: str) -> bool:
    return ord(ch) in _IGNORABLE_CODE_POINTS


def plain(text: str) -> str:
    """Decomposed, without combining marks or ignorable characters."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c)[0] != "M" and not ignorable(c))


def lower(text: str) -> str:
    return plain(plain(text).casefold())


def letter_or_digit(ch: str) -> bool:
    return not ch.isascii() and unicodedata.category(ch)[0] in "LN"


def look_alike(text: str) -> str:
    """Each non-ASCII letter or digit read as an engine folds it or else as its prototype, then lower-cased, until nothing changes."""
    for _ in range(4):
        mapped = lower("".join((engine_reading(c) or prototype(c)) if letter_or_digit(c) else c for c in text))
        if mapped == text:
            break
        text = mapped
    return text


def latin_base(ch: str) -> str:
    found = re.match(r"LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL )?([A-Z])(?: WITH |$)", unicodedata.name(ch, ""))
    return found.group(1).lower() if found else ch


def search_form(ch: str) -> str:
    """SPEC §8's search form of one character (the readings docs/linkage-rules.md §8 chose)."""
    if ignorable(ch):
        return ""
    if engine_reading(ch) is not None:
        return lower(engine_reading(ch) or "")
    out = ""
    for c in plain(unicodedata.normalize("NFKC", ch)):
        if not letter_or_digit(c):
            out += lower(c)
            continue
        # the letter as written looks like its prototype; a capital that looks like "l" is a capital I
        target = engine_reading(c)
        if target is None:
            target = prototype(c)
            if target == "l" and unicodedata.category(c) in ("Lu", "Lt"):
                target = "I"
        out += "".join(x if x.isascii() else latin_base(x) for x in look_alike(lower(target)))
    return out


def search_tokenize(text: str) -> tuple[list[OracleToken], list[bool]]:
    """SPEC §8's tokens (offsets into ``text``) and, after the first, whether the gap before each breaks."""
    masked = masked_chars(text)
    chars = [(c, i) for i, ch in enumerate(text) for c in search_form(ch)]
    word = [c.isalnum() and not masked[i] for c, i in chars]
    tokens: list[OracleToken] = []
    bounds: list[tuple[int, int]] = []  # in ``chars``
    j = 0
    while j < len(chars):
        if word[j]:
            end = j
            while end < len(chars) and word[end]:
                end += 1
            tokens.append(OracleToken(chars[j][1], chars[end - 1][1] + 1, "".join(c for c, _ in chars[j:end])))
            bounds.append((j, end))
            j = end
        else:
            j += 1
    breaks = [True]
    for (_, left_end), (right_start, _) in zip(bounds, bounds[1:]):
        gap = chars[left_end:right_start]
        breaks.append(any(masked[i] for _, i in gap) or re.search(r"\n[ \t\r]*\n", "".join(c for c, _ in gap)) is not None)
    return tokens, breaks


def tokenize(text: str, reading: str = "exact") -> tuple[list[OracleToken], list[bool]]:
    """Tokens and, for each token after the first, whether the gap before it breaks."""
    if reading == "search":
        return search_tokenize(text)
    masked = masked_chars(text)
    word = [
        (ch.isalnum() or unicodedata.category(ch).startswith("M")) and not masked[i] for i, ch in enumerate(text)
    ]
    tokens: list[OracleToken] = []
    i = 0
    while i < len(text):
        if word[i]:
            j = i
            while j < len(text) and word[j]:
                j += 1
            tokens.append(OracleToken(i, j, unicodedata.normalize("NFKC", text[i:j]).casefold()))
            i = j
        else:
            i += 1
    breaks = [True]
    for left, right in zip(tokens, tokens[1:]):
        gap = text[left.end : right.start]
        has_mask = any(masked[left.end : right.start])
        if has_mask:
            breaks.append(True)
        elif gap in (".", ","):
            breaks.append(False)
        else:
            breaks.append(any(c in BREAK_CHARS for c in gap) or re.search(r"\n[ \t\r]*\n", gap) is not None)
    return tokens, breaks


def occurrences(text: str, max_n: int, reading: str = "exact") -> list[tuple[int, int, tuple[str, ...], int, int]]:
    """(first token, n, key, start char, end char) of every n-gram occurrence."""
    tokens, breaks = tokenize(text, reading)
    found = []
    for i in range(len(tokens)):
        for n in range(1, max_n + 1):
            if i + n > len(tokens) or any(breaks[i + 1 : i + n]):
                break
            key = tuple(t.form for t in tokens[i : i + n])
            found.append((i, n, key, tokens[i].start, tokens[i + n - 1].end))
    return found


def postings(
    corpus: list[str], max_n: int, only: set[tuple[str, ...]] | None = None, reading: str = "exact"
) -> dict[tuple[str, ...], set[int]]:
    """Posting list of every n-gram key of the corpus (or of the keys in ``only``)."""
    index: dict[tuple[str, ...], set[int]] = {}
    for doc_no, text in enumerate(corpus):
        for _, _, key, _, _ in occurrences(text, max_n, reading):
            if only is None or key in only:
                index.setdefault(key, set()).add(doc_no)
    return index


def assess(
    corpus: list[str], text: str, k: int, max_n: int, index: dict[tuple[str, ...], set[int]] | None = None,
    reading: str = "exact",
) -> dict[str, object]:
    """Minimal linkable set (start, end, support) and arity-1 anonymity, by definition."""
    index = postings(corpus, max_n, reading=reading) if index is None else index
    occ = occurrences(text, max_n, reading)
    linkable = {(o[0], o[1]): o for o in occ if 1 <= len(index.get(o[2], ())) < k}
    minimal = []
    for (i, n), o in linkable.items():
        inner = [(a, m) for a in range(i, i + n) for m in range(1, i + n - a + 1) if (a, m) != (i, n)]
        if not any(r in linkable for r in inner):
            minimal.append((o[3], o[4], len(index[o[2]])))
    supports = [len(index[o[2]]) for o in linkable.values()]
    return {"ngrams": sorted(minimal), "anonymity": min(supports) if supports else None}


def assess_combinations(corpus: list[str], text: str, k: int, max_n: int, arity: int, reading: str = "exact") -> dict[str, object]:
    """SPEC §5–6 by enumeration: candidate keys, minimal linkable combinations, anonymity."""
    index = postings(corpus, max_n, reading=reading)
    occ = occurrences(text, max_n, reading)
    frequent = [o for o in occ if len(index.get(o[2], ())) >= k]
    maximal = [
        o
        for o in frequent
        if not any(
            p[0] <= o[0] and o[0] + o[1] <= p[0] + p[1] and (p[0], p[1]) != (o[0], o[1]) for p in frequent
        )
    ]
    candidates: dict[tuple[str, ...], tuple[int, int]] = {}
    for o in sorted(maximal, key=lambda o: (o[3], o[4])):
        candidates.setdefault(o[2], (o[3], o[4]))
    keys = list(candidates)
    linkable_sets = []
    for size in range(2, arity + 1):
        for combo in itertools.combinations(keys, size):
            support = len(set.intersection(*(index[key] for key in combo)))
            if 1 <= support < k:
                linkable_sets.append((frozenset(combo), support))
    minimal = [
        (combo, support)
        for combo, support in linkable_sets
        if not any(other < combo for other, _ in linkable_sets)
    ]
    arity1 = assess(corpus, text, k, max_n, reading=reading)["anonymity"]
    supports = [s for _, s in linkable_sets] + ([arity1] if arity1 is not None else [])
    # The report order: size, then support, then the members' start offsets.
    report = sorted(
        ([candidates[key] for key in sorted(combo, key=candidates.__getitem__)], support) for combo, support in minimal
    )
    report.sort(key=lambda item: (len(item[0]), item[1], [start for start, _ in item[0]]))
    # The paper's flag: each minimal combination's shortest member (fewest tokens, then earliest).
    flagged = {
        candidates[min(combo, key=lambda key: (len(key), candidates[key]))] for combo, _ in minimal
    }
    return {
        "combinations": {
            (frozenset(candidates[key] for key in combo), support) for combo, support in minimal
        },
        "report": report,
        "flagged": flagged,
        "combination_linkable": bool(linkable_sets),
        "anonymity": min(supports) if supports else None,
    }


def linkable_combinations(
    corpus: list[str], text: str, k: int, max_n: int, arity: int, reading: str = "exact"
) -> list[tuple[frozenset[tuple[str, ...]], int]]:
    """Every linkable combination (minimal or not) of the text's candidate keys, with its support."""
    index = postings(corpus, max_n, reading=reading)
    occ = occurrences(text, max_n, reading)
    frequent = [o for o in occ if len(index.get(o[2], ())) >= k]
    maximal = {
        o[2]
        for o in frequent
        if not any(p[0] <= o[0] and o[0] + o[1] <= p[0] + p[1] and (p[0], p[1]) != (o[0], o[1]) for p in frequent)
    }
    found = []
    for size in range(2, arity + 1):
        for combo in itertools.combinations(sorted(maximal), size):
            support = len(set.intersection(*(index[key] for key in combo)))
            if 1 <= support < k:
                found.append((frozenset(combo), support))
    return found


def maximal_occurrences(
    corpus: list[str], text: str, k: int, max_n: int, reading: str = "exact"
) -> dict[tuple[str, ...], list[tuple[int, int]]]:
    """Token ranges [first, last] of every maximal frequent occurrence, by key."""
    index = postings(corpus, max_n, reading=reading)
    frequent = [o for o in occurrences(text, max_n, reading) if len(index.get(o[2], ())) >= k]
    found: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for o in frequent:
        if not any(p[0] <= o[0] and o[0] + o[1] <= p[0] + p[1] and (p[0], p[1]) != (o[0], o[1]) for p in frequent):
            found.setdefault(o[2], []).append((o[0], o[0] + o[1] - 1))
    return found


def protected(corpus: list[str], text: str, k: int, max_n: int, arity: int, readings: tuple[str, ...] = ("exact", "search")) -> bool:
    """SPEC §7 with §8: no linkable n-gram and not combination-linkable under every reading."""
    for reading in readings:
        if assess(corpus, text, k, max_n, reading=reading)["ngrams"]:
            return False
        if arity >= 2 and assess_combinations(corpus, text, k, max_n, arity, reading)["combination_linkable"]:
            return False
    return True
