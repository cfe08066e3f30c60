"""A deliberately naive, character-by-character reading of ../shared/SPEC-linkage.md.

It shares no code with the package: tests compare the fast index and detectors against it.
"""
from __future__ import annotations

import itertools
import re
import unicodedata
from dataclasses import dataclass

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


def tokenize(text: str) -> tuple[list[OracleToken], list[bool]]:
    """Tokens and, for each token after the first, whether the gap before it breaks."""
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


def occurrences(text: str, max_n: int) -> list[tuple[int, int, tuple[str, ...], int, int]]:
    """(first token, n, key, start char, end char) of every n-gram occurrence."""
    tokens, breaks = tokenize(text)
    found = []
    for i in range(len(tokens)):
        for n in range(1, max_n + 1):
            if i + n > len(tokens) or any(breaks[i + 1 : i + n]):
                break
            key = tuple(t.form for t in tokens[i : i + n])
            found.append((i, n, key, tokens[i].start, tokens[i + n - 1].end))
    return found


def postings(
    corpus: list[str], max_n: int, only: set[tuple[str, ...]] | None = None
) -> dict[tuple[str, ...], set[int]]:
    """Posting list of every n-gram key of the corpus (or of the keys in ``only``)."""
    index: dict[tuple[str, ...], set[int]] = {}
    for doc_no, text in enumerate(corpus):
        for _, _, key, _, _ in occurrences(text, max_n):
            if only is None or key in only:
                index.setdefault(key, set()).add(doc_no)
    return index


def assess(
    corpus: list[str], text: str, k: int, max_n: int, index: dict[tuple[str, ...], set[int]] | None = None
) -> dict[str, object]:
    """Minimal linkable set (start, end, support) and arity-1 anonymity, by definition."""
    index = postings(corpus, max_n) if index is None else index
    occ = occurrences(text, max_n)
    linkable = {(o[0], o[1]): o for o in occ if 1 <= len(index.get(o[2], ())) < k}
    minimal = []
    for (i, n), o in linkable.items():
        inner = [(a, m) for a in range(i, i + n) for m in range(1, i + n - a + 1) if (a, m) != (i, n)]
        if not any(r in linkable for r in inner):
            minimal.append((o[3], o[4], len(index[o[2]])))
    supports = [len(index[o[2]]) for o in linkable.values()]
    return {"ngrams": sorted(minimal), "anonymity": min(supports) if supports else None}


def assess_combinations(corpus: list[str], text: str, k: int, max_n: int, arity: int) -> dict[str, object]:
    """SPEC §5–6 by enumeration: candidate keys, minimal linkable combinations, anonymity."""
    index = postings(corpus, max_n)
    occ = occurrences(text, max_n)
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
    arity1 = assess(corpus, text, k, max_n)["anonymity"]
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


def linkable_combinations(corpus: list[str], text: str, k: int, max_n: int, arity: int) -> list[tuple[frozenset[tuple[str, ...]], int]]:
    """Every linkable combination (minimal or not) of the text's candidate keys, with its support."""
    index = postings(corpus, max_n)
    occ = occurrences(text, max_n)
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


def maximal_occurrences(corpus: list[str], text: str, k: int, max_n: int) -> dict[tuple[str, ...], list[tuple[int, int]]]:
    """Token ranges [first, last] of every maximal frequent occurrence, by key."""
    index = postings(corpus, max_n)
    frequent = [o for o in occurrences(text, max_n) if len(index.get(o[2], ())) >= k]
    found: dict[tuple[str, ...], list[tuple[int, int]]] = {}
    for o in frequent:
        if not any(p[0] <= o[0] and o[0] + o[1] <= p[0] + p[1] and (p[0], p[1]) != (o[0], o[1]) for p in frequent):
            found.setdefault(o[2], []).append((o[0], o[0] + o[1] - 1))
    return found
