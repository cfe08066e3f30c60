"""A deliberately naive, character-by-character reading of ../shared/SPEC-linkage.md.

It shares no code with the package: tests compare the fast index and detectors against it.
Both readings are here: the exact one (§1–§7) and the search reading (§8: the search form
of each character, phrases broken only by masks), each function taking ``reading``. Under
both, each letter of a script written without spaces is a token of its own, and n-grams
hold at most ``max_n_chars`` of them beside ``max_n`` other tokens (docs/languages.md).
The search form's tables come from the engines themselves, never from the package's data
files or functions: UTS #39 skeletons from ICU's spoof checker (PyICU), decimal digits from
ICU's character types, and ASCII folding by probing tantivy's own ``ascii_fold`` filter
character by character.
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
    #: One character of a script written without spaces (the search reading's, §8).
    character: bool = False


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


def _reading(ch: str, engine: bool) -> str | None:
    """``engine_reading``, or None for every character when the engine tables are left out."""
    return engine_reading(ch) if engine else None


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


def look_alike(text: str, engine: bool = True) -> str:
    """Each non-ASCII letter or digit read as an engine folds it (with ``engine``) or else as its prototype, then lower-cased, until nothing changes."""
    for _ in range(4):
        mapped = lower("".join((_reading(c, engine) or prototype(c)) if letter_or_digit(c) else c for c in text))
        if mapped == text:
            break
        text = mapped
    return text


def latin_base(ch: str) -> str:
    found = re.match(r"LATIN (?:SMALL |CAPITAL )?LETTER (?:SMALL CAPITAL )?([A-Z])(?: WITH |$)", unicodedata.name(ch, ""))
    return found.group(1).lower() if found else ch


def search_form(ch: str, engine: bool = True) -> str:
    """SPEC §8's search form of one character (the readings docs/linkage-rules.md §8 chose);
    without ``engine``, the form with no engine table (ASCII folding, Nd digits): what UTS #39
    and a reader's eyes, or ICU's normalizer, make of it."""
    if ignorable(ch):
        return ""
    if _reading(ch, engine) is not None:
        return lower(engine_reading(ch) or "")
    out = ""
    for c in plain(unicodedata.normalize("NFKC", ch)):
        if not letter_or_digit(c):
            out += lower(c)
            continue
        # the letter as written looks like its prototype; a capital that looks like "l" is a capital I
        target = _reading(c, engine)
        if target is None:
            target = prototype(c)
            if target == "l" and unicodedata.category(c) in ("Lu", "Lt"):
                target = "I"
        out += "".join(x if x.isascii() else latin_base(x) for x in look_alike(lower(target), engine))
    return out


def _ascii_word(text: str) -> bool:
    return text.isascii() and text.isalnum()


@lru_cache(maxsize=None)
def other_reading(ch: str) -> str | None:
    """§8 "linkable under either table": where the engine tables and UTS #39 read ``ch`` as
    different ASCII letters or digits (þ: th / p), the UTS #39 one; else None (the choice of
    docs/linkage-rules.md §8: any other reading names letters no search form holds)."""
    engine, uts39 = search_form(ch), search_form(ch, engine=False)
    return uts39 if engine != uts39 and _ascii_word(engine) and _ascii_word(uts39) else None


def text_form(ch: str, alternate: bool) -> str:
    """A text's character as the search reading reads it, with the other table's reading where ``alternate``."""
    return (other_reading(ch) if alternate else None) or search_form(ch)


#: SPEC §8's scripts written without spaces, by the Unicode blocks that hold their letters
#: (written here from the Unicode charts, not from the package).
SPACELESS_BLOCKS = {
    "Han": [(0x2E80, 0x2FDF), (0x3005, 0x3007), (0x3021, 0x3029), (0x3038, 0x303B), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
            (0xF900, 0xFAFF), (0x20000, 0x2FA1F), (0x30000, 0x323AF)],
    "Hiragana": [(0x3041, 0x309F), (0x1B000, 0x1B16F)],
    "Katakana": [(0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F), (0x1AFF0, 0x1AFFF)],
    "Hangul": [(0x1100, 0x11FF), (0x3131, 0x318E), (0xA960, 0xA97F), (0xAC00, 0xD7A3), (0xD7B0, 0xD7FF), (0xFFA1, 0xFFDC)],
    "Thai": [(0x0E01, 0x0E5B)],
    "Lao": [(0x0E81, 0x0EDF)],
    "Khmer": [(0x1780, 0x17FF), (0x19E0, 0x19FF)],
    "Myanmar": [(0x1000, 0x109F), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F)],
}


def spaceless_script(ch: str) -> str | None:
    """The script written without spaces whose letter ``ch`` is (digits are numbers: None)."""
    if unicodedata.category(ch) == "Nd":
        return None
    for script, blocks in SPACELESS_BLOCKS.items():
        if any(a <= ord(ch) <= b for a, b in blocks):
            return script
    return None


def search_tokenize(text: str, alternate: bool = False) -> tuple[list[OracleToken], list[bool]]:
    """SPEC §8's tokens (offsets into ``text``) and, after the first, whether the gap before each breaks.

    Only a mask breaks. A letter of a script written without spaces is a token alone: each
    character of the search form, except that everything one Hangul syllable of the text
    folds to is one token (the syllable). Other letters and digits run until a character
    that is not one, or such a letter. ``alternate``: the characters the tables disagree on
    read the other way (``other_reading``).
    """
    masked = masked_chars(text)
    chars = [(c, i) for i, ch in enumerate(text) for c in text_form(ch, alternate)]
    word = [c.isalnum() and not masked[i] for c, i in chars]
    tokens: list[OracleToken] = []
    bounds: list[tuple[int, int]] = []  # in ``chars``
    j = 0
    while j < len(chars):
        if not word[j]:
            j += 1
            continue
        end = j + 1
        character = True
        if spaceless_script(text[chars[j][1]]) == "Hangul":
            while end < len(chars) and word[end] and chars[end][1] == chars[j][1]:
                end += 1
        elif spaceless_script(chars[j][0]) is None:
            character = False
            while end < len(chars) and word[end] and spaceless_script(chars[end][0]) is None:
                end += 1
        tokens.append(OracleToken(chars[j][1], chars[end - 1][1] + 1, "".join(c for c, _ in chars[j:end]), character))
        bounds.append((j, end))
        j = end
    breaks = [True]
    for (_, left_end), (right_start, _) in zip(bounds, bounds[1:]):
        breaks.append(any(masked[i] for _, i in chars[left_end:right_start]))
    return tokens, breaks


def tokenize(text: str, reading: str = "exact", alternate: bool = False) -> tuple[list[OracleToken], list[bool]]:
    """Tokens and, for each token after the first, whether the gap before it breaks (``alternate``: ``search_tokenize``'s)."""
    if reading == "search":
        return search_tokenize(text, alternate)
    masked = masked_chars(text)
    word = [
        (ch.isalnum() or unicodedata.category(ch).startswith("M")) and not masked[i] for i, ch in enumerate(text)
    ]
    # A letter of a script written without spaces is a token with the combining marks after it
    # (the exact reading by character: docs/languages.md); other word characters run.
    script = [spaceless_script(ch) for ch in text]
    mark = [script[i] is not None and unicodedata.category(ch).startswith("M") for i, ch in enumerate(text)]
    tokens: list[OracleToken] = []
    i = 0
    while i < len(text):
        if not word[i]:
            i += 1
            continue
        j = i + 1
        if script[i] is None:
            while j < len(text) and word[j] and script[j] is None:
                j += 1
        else:
            while j < len(text) and word[j] and mark[j]:
                j += 1
        tokens.append(OracleToken(i, j, unicodedata.normalize("NFKC", text[i:j]).casefold(), script[i] is not None))
        i = j
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


def occurrences(
    text: str, max_n: int, reading: str = "exact", max_n_chars: int = 16, alternate: bool = False
) -> list[tuple[int, int, tuple[str, ...], int, int]]:
    """(first token, n, key, start char, end char) of every n-gram occurrence.

    An n-gram holds at most ``max_n`` ordinary tokens and at most ``max_n_chars`` characters
    of scripts written without spaces (docs/languages.md).
    """
    tokens, breaks = tokenize(text, reading, alternate)
    character = [t.character for t in tokens]
    found = []
    for i in range(len(tokens)):
        for n in range(1, len(tokens) - i + 1):
            chars = sum(character[i : i + n])
            if any(breaks[i + 1 : i + n]) or chars > max_n_chars or n - chars > max_n:
                break
            key = tuple(t.form for t in tokens[i : i + n])
            found.append((i, n, key, tokens[i].start, tokens[i + n - 1].end))
    return found


def postings(
    corpus: list[str], max_n: int, only: set[tuple[str, ...]] | None = None, reading: str = "exact", max_n_chars: int = 16
) -> dict[tuple[str, ...], set[int]]:
    """Posting list of every n-gram key of the corpus (or of the keys in ``only``)."""
    index: dict[tuple[str, ...], set[int]] = {}
    for doc_no, text in enumerate(corpus):
        for _, _, key, _, _ in occurrences(text, max_n, reading, max_n_chars):
            if only is None or key in only:
                index.setdefault(key, set()).add(doc_no)
    return index


def assess(
    corpus: list[str], text: str, k: int, max_n: int, index: dict[tuple[str, ...], set[int]] | None = None,
    reading: str = "exact", max_n_chars: int = 16, alternate: bool = False,
) -> dict[str, object]:
    """Minimal linkable set (start, end, support) and arity-1 anonymity, by definition
    (``alternate``: the text read with the other table, the collection as indexed)."""
    index = postings(corpus, max_n, reading=reading, max_n_chars=max_n_chars) if index is None else index
    occ = occurrences(text, max_n, reading, max_n_chars, alternate)
    linkable = {(o[0], o[1]): o for o in occ if 1 <= len(index.get(o[2], ())) < k}
    minimal = []
    for (i, n), o in linkable.items():
        inner = [(a, m) for a in range(i, i + n) for m in range(1, i + n - a + 1) if (a, m) != (i, n)]
        if not any(r in linkable for r in inner):
            minimal.append((o[3], o[4], len(index[o[2]])))
    supports = [len(index[o[2]]) for o in linkable.values()]
    return {"ngrams": sorted(minimal), "anonymity": min(supports) if supports else None}


def assess_combinations(
    corpus: list[str], text: str, k: int, max_n: int, arity: int, reading: str = "exact", alternate: bool = False
) -> dict[str, object]:
    """SPEC §5–6 by enumeration: candidate keys, minimal linkable combinations, anonymity."""
    index = postings(corpus, max_n, reading=reading)
    occ = occurrences(text, max_n, reading, alternate=alternate)
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
    arity1 = assess(corpus, text, k, max_n, reading=reading, alternate=alternate)["anonymity"]
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


def checked(readings: tuple[str, ...]) -> list[tuple[str, bool]]:
    """(reading, alternate) of every reading of a text that §8 checks: the search reading under either table."""
    return [(reading, False) for reading in readings] + ([("search", True)] if "search" in readings else [])


def protected(corpus: list[str], text: str, k: int, max_n: int, arity: int, readings: tuple[str, ...] = ("exact", "search")) -> bool:
    """SPEC §7 with §8: no linkable n-gram and not combination-linkable under every reading (and table)."""
    for reading, alternate in checked(readings):
        if assess(corpus, text, k, max_n, reading=reading, alternate=alternate)["ngrams"]:
            return False
        if arity >= 2 and assess_combinations(corpus, text, k, max_n, arity, reading, alternate)["combination_linkable"]:
            return False
    return True
