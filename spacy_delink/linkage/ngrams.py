"""SPEC §4 and §6 at arity 1: linkable n-grams, the minimal linkable set, anonymity.

Lookups go level by level. Level 1 looks up every token; level n only the positions
whose (n−1)-gram prefix and suffix both occur in at least two documents. That is the
index's own reduction (see ``index.builder``) and it is lossless for every k ≥ 2:

* df is anti-monotone under containment, so an occurrence strictly contains a linkable
  one iff its prefix or suffix is linkable; a linkable occurrence is therefore minimal
  iff n = 1 or both its prefix and suffix have df ≥ k — and those are always looked up.
* an n-gram skipped because a sub-gram has df ≤ 1 has df ≤ 1 itself: it is not frequent,
  and when it is linkable the df = 1 sub-gram already sets ``anonymity`` to 1.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import numpy as np

from ..errors import InputError
from .index import CorpusIndex
from .index.ngram_keys import extend_positions
from .index.levels import TwinLevel
from .readings import READINGS
from .search_form import holds_alternate
from .scores import SupportRisk
from .tokenize import SearchTokenizer, Tokens


#: The largest threshold: the kernels hold k and document frequencies as int64 and add a df
#: (below 2^32, the most documents an index holds) to k (the triple search's bound), so every
#: such sum stays exact. Any k above the collection's size already flags every phrase found.
MAX_K = 2**62


def check_k(k: int) -> int:
    """``k`` itself, if it is an integer the kernels can compare with (``MAX_K``); else one line."""
    if not isinstance(k, int) or isinstance(k, bool) or not 2 <= k <= MAX_K:
        raise InputError(f"k must be an integer between 2 and {MAX_K:,}; got {k!r} (k = 2 means singling out)")
    return k


@dataclass
class LevelLookup:
    """The n-grams of one length that were looked up: start positions, keys, rows, df."""

    n: int
    positions: np.ndarray
    keys: np.ndarray
    rows: np.ndarray
    df: np.ndarray


_COLUMNS = ("token", "n", "start", "end", "support", "row")


@dataclass(frozen=True)
class Occurrence(SupportRisk):
    """One n-gram occurrence: token range ``[token, token + n)`` and character offsets."""

    token: int
    n: int
    start: int
    end: int
    support: int
    row: int


@dataclass
class LinkageAnalysis:
    """Every lookup for one text against one index; the SPEC outputs derive from it."""

    text: str
    tokens: Tokens
    levels: list[LevelLookup]
    k: int
    #: The reading of the rules the lookups were made under (``linkage.readings``).
    reading: str = "exact"
    #: The tokenizer that read the text when not the index's own for the reading: the search
    #: reading with the other folding table (``alternate_analysis``); None: the index's.
    tokenizer: SearchTokenizer | None = None
    df_at: dict[int, np.ndarray] = field(default_factory=dict)
    _minimal: dict[str, np.ndarray] | None = None
    _maximal: dict[str, np.ndarray] | None = None
    _stack: dict[str, np.ndarray] | None = None

    def df_of(self, n: int) -> np.ndarray:
        """df of the n-gram starting at each position (0 when absent or not looked up), length T+1."""
        table = self.df_at.get(n)
        if table is None:
            table = np.zeros(len(self.tokens) + 1, dtype=np.int64)
            if n - 1 < len(self.levels):
                level = self.levels[n - 1]
                table[level.positions] = level.df
            self.df_at[n] = table
        return table

    def _stacked(self) -> dict[str, np.ndarray]:
        """Every level's lookups end to end, level after level (int64 columns ``n``, ``token``,
        ``support``, ``row``), computed once: the selections below are then a few whole-array
        operations, not a few per level (a document's levels are small, so each numpy call
        costs more than its work)."""
        if self._stack is None:
            levels = self.levels
            self._stack = {
                "n": np.repeat(np.array([level.n for level in levels], dtype=np.int64), [len(level.positions) for level in levels]),
                "token": _joined([level.positions for level in levels]),
                "support": _joined([level.df for level in levels]),
                "row": _joined([level.rows for level in levels]),
            }
        return self._stack

    def _select_arrays(self, mask: np.ndarray) -> dict[str, np.ndarray]:
        """Columns (int64 arrays named as ``_COLUMNS``) of the lookups ``mask`` chooses (over
        ``_stacked``), in text order: by start, then end offset, which is the order of
        (token, n) since tokens do not overlap; a stable sort by token keeps the stack's
        level order, n ascending, among the lookups at one token."""
        stacked = self._stacked()
        chosen = np.flatnonzero(mask)
        token, n = stacked["token"][chosen], stacked["n"][chosen]
        order = np.argsort(token, kind="stable")
        token, n, chosen = token[order], n[order], chosen[order]
        start = self.tokens.starts[token].astype(np.int64, copy=False)
        end = self.tokens.ends[token + n - 1].astype(np.int64, copy=False)
        support, row = stacked["support"][chosen], stacked["row"][chosen]
        return dict(zip(_COLUMNS, (token, n, start, end, support, row)))

    def _per_level(self, mask_of: Callable[[LevelLookup], np.ndarray | bool]) -> np.ndarray:
        """One mask over ``_stacked`` from a mask (or one bool) per level."""
        return np.concatenate([np.zeros(0, dtype=bool), *(np.broadcast_to(mask_of(level), len(level.positions)) for level in self.levels)])

    @staticmethod
    def _objects(columns: dict[str, list[int]]) -> list[Occurrence]:
        return [Occurrence(*values) for values in zip(*(columns[name] for name in _COLUMNS))]

    def minimal_arrays(self) -> dict[str, np.ndarray]:
        """SPEC §4's minimal linkable set as int64 arrays named as ``_COLUMNS``, sorted by start then end (computed once)."""
        if self._minimal is None:
            df = self._stacked()["support"]
            mask = (df >= 1) & (df < self.k)
            if self.k > 2:  # at k = 2 the extension rule (both sub-grams df >= 2) is the test
                mask &= self._per_level(self._sub_grams_frequent)
            self._minimal = self._select_arrays(mask)
        return self._minimal

    def _sub_grams_frequent(self, level: LevelLookup) -> np.ndarray | bool:
        """Whether both (n−1)-grams of each of the level's lookups have df >= k (true at n = 1)."""
        if level.n == 1:
            return True
        shorter = self.df_of(level.n - 1)
        return (shorter[level.positions] >= self.k) & (shorter[level.positions + 1] >= self.k)

    def minimal_columns(self) -> dict[str, list[int]]:
        """``minimal_arrays`` as plain lists."""
        return {name: column.tolist() for name, column in self.minimal_arrays().items()}

    def minimal(self) -> list[Occurrence]:
        """SPEC §4's minimal linkable set, sorted by start then end offset."""
        return self._objects(self.minimal_columns())

    def maximal_columns(self) -> dict[str, np.ndarray]:
        """Every frequent occurrence (df >= k) not strictly contained in another frequent one.

        Arrays named as ``_COLUMNS``, in text order, computed once. A key can occur several
        times: SPEC §5 keeps its first occurrence as the candidate, but the adversary's search
        for the key matches them all, so whatever removes a candidate must reach every one.
        """
        if self._maximal is None:
            df = self._stacked()["support"]
            self._maximal = self._select_arrays((df >= self.k) & self._per_level(self._not_in_longer_frequent))
        return self._maximal

    def _not_in_longer_frequent(self, level: LevelLookup) -> np.ndarray | bool:
        """Whether neither (n+1)-gram containing each of the level's lookups has df >= k (true at the last level)."""
        if level.n == len(self.levels):
            return True
        longer = self.df_of(level.n + 1)
        left = np.maximum(level.positions - 1, 0)
        return (longer[level.positions] < self.k) & ((level.positions == 0) | (longer[left] < self.k))

    def without(self, removed: np.ndarray, text: str, tokens: Tokens) -> "LinkageAnalysis":
        """The analysis of ``text``: this one's text with the tokens ``removed`` masked.

        A mask yields no token and breaks every n-gram across it, so the new text's n-grams
        are exactly the old ones that avoid the masked tokens, with the same keys and df:
        nothing needs looking up again (``tokens``, of the new text, must be this text's
        tokens less ``removed``; the caller checks it).
        """
        gone = np.zeros(len(self.tokens) + 1, dtype=np.int64)
        gone[np.asarray(removed, dtype=np.int64) + 1] = 1
        before = np.cumsum(gone)  # before[i]: removed tokens among 0..i-1
        levels = []
        for level in self.levels:
            keep = before[level.positions + level.n] == before[level.positions]
            positions = level.positions[keep]
            levels.append(
                LevelLookup(level.n, positions - before[positions], level.keys[keep], level.rows[keep], level.df[keep])
            )
        while len(levels) > 1 and not len(levels[-1].positions):  # as ``analyze`` stops
            levels.pop()
        return LinkageAnalysis(text=text, tokens=tokens, levels=levels, k=self.k, reading=self.reading, tokenizer=self.tokenizer)

    def anonymity(self) -> int | None:
        """Smallest df over all linkable occurrences (SPEC §6, arity 1), or None."""
        df = self._stacked()["support"]
        linkable = df[(df >= 1) & (df < self.k)]
        return int(linkable.min()) if len(linkable) else None


def _joined(arrays: list[np.ndarray]) -> np.ndarray:
    """The arrays end to end as int64 (empty for none)."""
    return np.concatenate(arrays).astype(np.int64, copy=False) if arrays else np.zeros(0, dtype=np.int64)


def occurrence_keys(n: np.ndarray, row: np.ndarray) -> np.ndarray:
    """One int64 per n-gram key: its length and its row in that level of the index."""
    return np.asarray(n, dtype=np.int64) << 40 | np.asarray(row, dtype=np.int64)


def analyze(
    index: CorpusIndex, text: str, k: int, max_n: int | None = None, exact_frequent: bool = True, reading: str = "exact",
    twins: "LinkageAnalysis | None" = None, tokenizer: SearchTokenizer | None = None,
) -> LinkageAnalysis:
    """Look up every n-gram of ``text`` that can matter (see module docstring) under one reading.

    With ``exact_frequent=False`` a df of k or more is reported as k: every SPEC output at
    threshold k (linkable set, support, anonymity, what is frequent) is the same, and a
    frequent n-gram's posting list need not be walked to its end. ``twins``, the exact
    reading's analysis of the same text (same k and ``exact_frequent``), lends the search
    reading the lookups of the n-grams both read alike (``levels.TwinLevel``).
    ``tokenizer`` reads the text instead of the index's own for the reading (``CorpusIndex.tokenize``).
    """
    check_k(k)
    # Levels past max_n hold the search reading's n-grams with characters of scripts written
    # without spaces; ``tokens.remaining`` keeps every other n-gram within max_n.
    max_n = index.max_tokens if max_n is None else min(max_n, index.max_tokens)
    index_levels = index.levels_of(reading)
    tokens, digests = index.tokenize(text, reading, tokenizer)
    count = len(tokens)
    remaining = tokens.remaining
    levels: list[LevelLookup] = []
    positions = np.arange(count)
    keys = digests
    for n in range(1, max_n + 1):
        if n > 1:
            # Extend the (n-1)-grams at i whose suffix at i+1 is also frequent enough (>= 2).
            previous = levels[-1]
            extended, keys = extend_positions(previous.positions, previous.keys, previous.df >= 2, remaining, digests, n)
            if not len(extended):
                break
            positions = extended.astype(np.int64)
        level = index_levels[n]
        cap = 0 if exact_frequent else k
        if isinstance(level, TwinLevel) and twins is not None and n <= len(twins.levels):
            rows, df = level.lookup(keys, cap, lent=twins.levels[n - 1])
        else:
            rows, df = level.lookup(keys, cap)
        levels.append(LevelLookup(n=n, positions=positions, keys=keys, rows=rows, df=df))
    return LinkageAnalysis(text=text, tokens=tokens, levels=levels, k=k, reading=reading, tokenizer=tokenizer)


def alternate_analysis(
    index: CorpusIndex, text: str, k: int, readings: Sequence[str], exact_frequent: bool = True, twins: "LinkageAnalysis | None" = None,
) -> LinkageAnalysis | None:
    """The search reading of ``text`` with the other folding table, or None when it reads no
    differently or the search reading is not among ``readings`` (those checked, held by the index).

    SPEC §8: where two folding tables disagree on a character (``þ``: ``th`` under ASCII
    folding, ``p`` under UTS #39), a text is linkable if it is linkable under either. The
    index reads the collection with the engine tables; a text holding such a character
    (``search_form.alternate_readings``) is also looked up with them read the other way.
    Its tokens are the search reading's, with other keys, so this is one more search-reading
    analysis: what it finds links, and the text is protected only if protected under it too.
    """
    if "search" not in readings:
        return None
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if not holds_alternate(codes):
        return None
    return analyze(index, text, k, exact_frequent=exact_frequent, reading="search", twins=twins, tokenizer=index.alternate_tokenizer)


class Findings(Protocol):
    """What one reading found in a text: its minimal linkable phrases (an n-gram analysis, or
    the gap reading's bridges, ``linkage.gap``) and the reading's name."""

    reading: str

    def minimal_arrays(self) -> dict[str, np.ndarray]: ...


def minimal_across(analyses: Sequence[Findings]) -> dict[str, np.ndarray]:
    """SPEC §4's minimal linkable sets of one text under several readings, merged by character range.

    A range linkable under several readings is one entry: its smallest support and a bit
    per reading (bit i for ``readings.READINGS[i]``). int64 columns ``start``, ``end``,
    ``support``, ``readings``, sorted by start then end.
    """
    found = [analysis.minimal_arrays() for analysis in analyses]
    starts = _joined([f["start"] for f in found])
    ends = _joined([f["end"] for f in found])
    support = _joined([f["support"] for f in found])
    bits = _joined([np.full(len(f["start"]), 1 << READINGS.index(a.reading), dtype=np.int64) for f, a in zip(found, analyses)])
    order = np.lexsort((ends, starts))
    starts, ends, support, bits = starts[order], ends[order], support[order], bits[order]
    new = np.ones(len(starts), dtype=bool)
    new[1:] = (starts[1:] != starts[:-1]) | (ends[1:] != ends[:-1])
    first = np.flatnonzero(new)
    if not len(first):
        return {"start": starts, "end": ends, "support": support, "readings": bits}
    return {
        "start": starts[first],
        "end": ends[first],
        "support": np.minimum.reduceat(support, first),
        "readings": np.bitwise_or.reduceat(bits, first),
    }


def reading_names(bits: int) -> list[str]:
    """The readings a ``minimal_across`` bit set names (a new list: callers may keep it)."""
    return list(_READING_NAMES[bits])


#: ``reading_names`` of every bit set, made once (a report names them for every span).
_READING_NAMES = [tuple(reading for i, reading in enumerate(READINGS) if bits >> i & 1) for bits in range(1 << len(READINGS))]
