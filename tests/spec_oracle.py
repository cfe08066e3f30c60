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

The gap reading (SPEC §9, with the choices of notes/GAP.md where the SPEC is silent) is
enumerated here too, by brute force over every bridge, document and placement; it reads texts
with ``search_tokenize`` only:

- ``segments(text)``: the token indices of each run of search tokens between mask stretches.
- ``bridges(text, max_n)``: every ``Bridge`` of the text (token range ``first``..``last``,
  ``runs`` of search forms, ``start``/``end`` = first token's start, last token's end).
- ``min_gap(document, runs, s)``: the smallest total gap within ``s`` with which a document
  holds the runs (m_d), or None; ``documents_within`` / ``df_within(corpus, runs, s)``: which /
  how many documents match within ``s`` (df_s).
- ``found_sources(corpus, text, max_gap)``: the documents holding all the text's segments in
  order, each gap 1..max_gap tokens.
- ``assess_gap(corpus, text, k, max_n, arity=1, max_gap=16, source=None)``: a dict with
  ``source`` ("given" | "found" | "several" | "unknown"), ``sources`` (document indices),
  ``bridges`` (every linkable bridge as (start, end, support, slop, rule), sorted), ``minimal``
  (the linkable bridges minimal by token range among the search reading's linkable n-grams
  and the linkable bridges), ``combinations`` (the minimal linkable combinations holding a
  bridge: (frozenset of members (start, end, slop; None for an n-gram), support)),
  ``combination_linkable`` (some linkable combination of 2..arity candidates holds a
  bridge), ``anonymity`` (the smallest support over linkable bridges and those combinations,
  or None) and ``max_gap``.
- ``protected(corpus, text, k, max_n, arity, readings, max_gap=16, source=None)``: with
  ``readings=("exact", "search", "gap")`` SPEC §7 under all three. The default stays
  ("exact", "search") until the package's default readings hold "gap", so the tests that
  compare the package with it today keep comparing like with like.

N-grams of scripts written without spaces keep ``max_n_chars`` = 16 here; a bridge counts each
of their characters as one of its max_n tokens (GAP.md 1).

Choices of this reference where neither the SPEC nor GAP.md decides (each the reading that
finds more linkages, or one that changes no decision): a bridge linkable under several sources
reports its smallest support and, among the sources giving it, the smallest slop; a known
source that does not match a bridge within G gives that bridge no reading (neither linkable nor
a candidate); a found source must hold each segment with no collection mask inside (as a run);
a combination never holds two readings of one bridge (their document sets are nested, so such a
combination adds no support and no minimal combination).
"""
from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Iterator

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


def _run_end(word: list[bool], start: int, joins: Callable[[int], bool]) -> int:
    """The end of the token at ``start``: the word characters after it run while ``joins`` holds."""
    end = start + 1
    while end < len(word) and word[end] and joins(end):
        end += 1
    return end


def _word_runs(word: list[bool], run_end: Callable[[int], int]) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each token, left to right: a word character starts one, ``run_end`` ends it."""
    start = 0
    while start < len(word):
        if not word[start]:
            start += 1
            continue
        end = run_end(start)
        yield start, end
        start = end


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

    def run_end(j: int) -> int:
        if spaceless_script(text[chars[j][1]]) == "Hangul":
            return _run_end(word, j, lambda end: chars[end][1] == chars[j][1])
        if spaceless_script(chars[j][0]) is None:
            return _run_end(word, j, lambda end: spaceless_script(chars[end][0]) is None)
        return j + 1

    for j, end in _word_runs(word, run_end):
        character = spaceless_script(text[chars[j][1]]) == "Hangul" or spaceless_script(chars[j][0]) is not None
        tokens.append(OracleToken(chars[j][1], chars[end - 1][1] + 1, "".join(c for c, _ in chars[j:end]), character))
        bounds.append((j, end))
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

    def run_end(i: int) -> int:
        return _run_end(word, i, (lambda j: script[j] is None) if script[i] is None else (lambda j: mark[j]))

    for i, j in _word_runs(word, run_end):
        tokens.append(OracleToken(i, j, unicodedata.normalize("NFKC", text[i:j]).casefold(), script[i] is not None))
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
    """(reading, alternate) of every n-gram reading of a text that §8 checks: the search reading under either table."""
    token_readings = [reading for reading in readings if reading != "gap"]
    return [(reading, False) for reading in token_readings] + ([("search", True)] if "search" in readings else [])


def protected(
    corpus: list[str], text: str, k: int, max_n: int, arity: int, readings: tuple[str, ...] = ("exact", "search"),
    max_gap: int = 16, source: int | None = None,
) -> bool:
    """SPEC §7 with §8 and §9: no linkable n-gram or bridge and not combination-linkable under
    every reading named (and folding table); "gap" adds bridges and combinations with bridges."""
    if "gap" in readings:
        found = assess_gap(corpus, text, k, max_n, arity, max_gap, source)
        if found["bridges"] or found["combination_linkable"]:
            return False
    for reading, alternate in checked(readings):
        if assess(corpus, text, k, max_n, reading=reading, alternate=alternate)["ngrams"]:
            return False
        if arity >= 2 and assess_combinations(corpus, text, k, max_n, arity, reading, alternate)["combination_linkable"]:
            return False
    return True


# -- SPEC §9: the gap reading ------------------------------------------------------------------


@dataclass(frozen=True)
class Bridge:
    """Token runs of a text, consecutive runs separated by exactly one mask stretch (SPEC §9)."""

    #: Indices of the first and last token among the text's search tokens (its token range).
    first: int
    last: int
    runs: tuple[tuple[str, ...], ...]
    start: int
    end: int

    @property
    def stretches(self) -> int:
        return len(self.runs) - 1


@lru_cache(maxsize=4096)
def _search_forms(text: str) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """Search forms of the text's tokens and, per token, whether a mask precedes it (cached: corpora are read per bridge)."""
    tokens, breaks = search_tokenize(text)
    return tuple(t.form for t in tokens), tuple(breaks[: len(tokens)])


def segments(text: str) -> list[list[int]]:
    """Token indices of the runs of search tokens between mask stretches (a mask before the first
    token or after the last separates nothing: GAP.md 1)."""
    found: list[list[int]] = []
    for i, masked_before in enumerate(_search_forms(text)[1]):
        if masked_before:  # always true of the first token
            found.append([])
        found[-1].append(i)
    return found


def bridges(text: str, max_n: int) -> list[Bridge]:
    """Every bridge: a suffix of one segment, the whole segments after it, a prefix of a later
    segment, at most max_n tokens in all (a character of a script written without spaces is one)."""
    tokens, _ = search_tokenize(text)
    segs = segments(text)
    found = []
    for a, b in itertools.combinations(range(len(segs)), 2):
        for first in segs[a]:
            for last in segs[b]:
                runs = [range(first, segs[a][-1] + 1), *segs[a + 1 : b], range(segs[b][0], last + 1)]
                if sum(len(run) for run in runs) <= max_n:
                    forms = tuple(tuple(tokens[i].form for i in run) for run in runs)
                    found.append(Bridge(first, last, forms, tokens[first].start, tokens[last].end))
    return found


def _placements(document: str, runs: tuple[tuple[str, ...], ...]) -> list[tuple[int, ...]]:
    """The tokens between consecutive runs, for every way the document holds the runs in order,
    each as consecutive search tokens with no mask inside, at least one token between (GAP.md 2)."""
    forms, masked_before = _search_forms(document)

    def holds(run: tuple[str, ...], at: int) -> bool:
        return forms[at : at + len(run)] == run and not any(masked_before[at + 1 : at + len(run)])

    starts = [[at for at in range(len(forms)) if holds(run, at)] for run in runs]
    found = []
    for chosen in itertools.product(*starts):
        gaps = tuple(chosen[i + 1] - chosen[i] - len(runs[i]) for i in range(len(runs) - 1))
        if all(gap >= 1 for gap in gaps):
            found.append(gaps)
    return found


def min_gap(document: str, runs: tuple[tuple[str, ...], ...], s: int) -> int | None:
    """m_d: the smallest total gap, at most s, with which the document matches the runs, else None."""
    return min((sum(gaps) for gaps in _placements(document, runs) if sum(gaps) <= s), default=None)


def documents_within(corpus: list[str], runs: tuple[tuple[str, ...], ...], s: int) -> frozenset[int]:
    return frozenset(d for d, document in enumerate(corpus) if min_gap(document, runs, s) is not None)


def df_within(corpus: list[str], runs: tuple[tuple[str, ...], ...], s: int) -> int:
    """df_s of SPEC §9."""
    return len(documents_within(corpus, runs, s))


def found_sources(corpus: list[str], text: str, max_gap: int) -> list[int]:
    """Documents holding every segment of the text in order, each gap 1..max_gap tokens (GAP.md 4)."""
    forms, _ = _search_forms(text)
    runs = tuple(tuple(forms[i] for i in segment) for segment in segments(text))
    if len(runs) < 2:
        return []
    return [
        d for d, document in enumerate(corpus) if any(all(gap <= max_gap for gap in gaps) for gaps in _placements(document, runs))
    ]


@dataclass(frozen=True)
class _Candidate:
    """One candidate of a combination: what it is (an n-gram key or a bridge's runs), its documents, how it is reported."""

    item: tuple[str, tuple[object, ...]]
    documents: frozenset[int]
    member: tuple[int, int, int | None]


def _check_gap_settings(k: int, max_n: int, arity: int, max_gap: int) -> None:
    for name, value, low, high in (("k", k, 2, None), ("max_n", max_n, 1, None), ("arity", arity, 1, 3), ("max_gap", max_gap, 1, 16)):
        if value < low or (high is not None and value > high):
            bound = f"between {low} and {high}" if high is not None else f"at least {low}"
            raise ValueError(f"spec_oracle.assess_gap: {name}={value} must be {bound}")


def assess_gap(
    corpus: list[str], text: str, k: int, max_n: int, arity: int = 1, max_gap: int = 16, source: int | None = None
) -> dict[str, object]:
    """SPEC §9 by enumeration (the module docstring lists what the dict holds)."""
    _check_gap_settings(k, max_n, arity, max_gap)
    if source is not None:
        sources = [source] if 0 <= source < len(corpus) else []  # an id not in the collection: unknown
        how = "given" if sources else "unknown"
    else:
        sources = found_sources(corpus, text, max_gap)
        how = {0: "unknown", 1: "found"}.get(len(sources), "several")
    rule = "source" if sources else "unknown"

    def readings(m: list[int | None], for_combinations: bool) -> list[tuple[int, frozenset[int]]]:
        """(slop, documents) of each way the bridge is read (GAP.md 5 and 6). A known source that
        does not hold the bridge leaves it unlinkable, and (the reading that finds more) a
        candidate read at every slop, as with an unknown source."""
        held = [m[d] for d in sources if m[d] is not None]
        if held:
            slops = sorted(set(held))
        else:
            least = min((m_d for m_d in m if m_d is not None), default=None)
            if least is None or (sources and not for_combinations):
                slops = []
            else:
                slops = list(range(least, max_gap + 1)) if for_combinations else [least]
        distinct: dict[frozenset[int], int] = {}
        for s in slops:
            distinct.setdefault(frozenset(d for d, m_d in enumerate(m) if m_d is not None and m_d <= s), s)
        return [(s, documents) for documents, s in distinct.items() if not for_combinations or len(documents) >= k]

    tokens, _ = search_tokenize(text)
    index = postings(corpus, max_n, reading="search")
    linkable_ranges = {
        (i, i + n - 1) for i, n, key, _, _ in occurrences(text, max_n, "search") if 1 <= len(index.get(key, ())) < k
    }
    linkable: dict[Bridge, tuple[int, int]] = {}
    frequent: dict[Bridge, list[tuple[int, frozenset[int]]]] = {}
    for bridge in bridges(text, max_n):
        m = [min_gap(document, bridge.runs, max_gap) for document in corpus]
        linking = [(len(documents), s) for s, documents in readings(m, False) if len(documents) < k]
        if linking:
            linkable[bridge] = min(linking)  # (support, slop)
            linkable_ranges.add((bridge.first, bridge.last))
        elif bridge.stretches == 1 and readings(m, True):
            frequent[bridge] = readings(m, True)

    def strictly_inside(inner: tuple[int, int], outer: tuple[int, int]) -> bool:
        return outer[0] <= inner[0] and inner[1] <= outer[1] and inner != outer

    def entry(bridge: Bridge) -> tuple[int, int, int, int, str]:
        return (bridge.start, bridge.end, *linkable[bridge], rule)

    minimal = [
        entry(b) for b in linkable if not any(strictly_inside(r, (b.first, b.last)) for r in linkable_ranges)
    ]

    # Combinations (§5 with §9): the search reading's candidates and the maximal frequent bridges, once per reading.
    candidates = []
    for key, ranges in maximal_occurrences(corpus, text, k, max_n, "search").items():
        first, last = min(ranges)
        candidates.append(_Candidate(("ngram", key), frozenset(index[key]), (tokens[first].start, tokens[last].end, None)))
    seen: set[tuple[tuple[str, ...], ...]] = set()
    for bridge in sorted(frequent, key=lambda b: (b.start, b.end)):
        if bridge.runs in seen:
            continue
        seen.add(bridge.runs)
        for s, documents in frequent[bridge]:
            # GAP.md 6 as the lead refined it: a version is left out only when a bridge around it
            # is read with the very same documents (a shorter bridge read at the slop that reaches
            # the source can narrow further than the wider one: it stays a candidate).
            same_set_around = any(
                strictly_inside((bridge.first, bridge.last), (o.first, o.last)) and any(d == documents for _, d in frequent[o])
                for o in frequent
            )
            if not same_set_around:
                candidates.append(_Candidate(("bridge", bridge.runs), documents, (bridge.start, bridge.end, s)))
    linkable_combinations = []
    for size in range(2, arity + 1):
        for combo in itertools.combinations(candidates, size):
            if len({c.item for c in combo}) < size:
                continue
            support = len(frozenset.intersection(*(c.documents for c in combo)))
            if 1 <= support < k:
                linkable_combinations.append((frozenset(combo), support))
    with_bridge = [(combo, support) for combo, support in linkable_combinations if any(c.item[0] == "bridge" for c in combo)]
    minimal_combinations = {
        (frozenset(c.member for c in combo), support)
        for combo, support in with_bridge
        if not any(other < combo for other, _ in linkable_combinations)
    }
    supports = [support for support, _ in linkable.values()] + [support for _, support in with_bridge]
    return {
        "source": how,
        "sources": sources,
        "max_gap": max_gap,
        "bridges": sorted(entry(b) for b in linkable),
        "minimal": sorted(minimal),
        "combinations": minimal_combinations,
        "combination_linkable": bool(with_bridge),
        "anonymity": min(supports, default=None),
    }
