"""Proximity searches read exactly on token positions: sloppy phrases around masks, phrases past max_n.

An engine answers ``"charged first"~1`` with "he charged the first applicant". tantivy's own
sloppy phrases of three or more terms cannot be the ground truth: tantivy 0.27 misses
matches depending on the other documents indexed (tantivy issues #1934, #2580). So the
evaluation reads them itself, in order, on a positional index of the collection's search
tokens (the engine's search reading): the words of L, then 1..s other words, then the words
of R, each run as consecutive tokens with no mask of the collection inside (SPEC §9's
"matches a bridge within s"; a mask of the collection takes no position).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

#: SPEC §9's G: the words a mask stretch stands for within the contract (``max_gap``).
DEFAULT_MAX_GAP = 16
#: The widest sloppy phrase tried around a mask (``"L R"~50``, an engine's NEAR/50):
#: slops above the contract's G are measured, not prevented.
DEFAULT_WIDEST_SLOP = 50
#: Words taken on each side of a mask stretch (1, 2 and 3 are all tried).
SIDE_WORDS = 3


@dataclass(frozen=True)
class Bridge:
    """The words before a mask stretch and the words after it."""

    left: tuple[str, ...]
    right: tuple[str, ...]

    def search(self, slop: int) -> str:
        """As an adversary writes it: ``*`` where the mask was, ``~slop`` the words it hid at the least."""
        return f'"{" ".join(self.left)} * {" ".join(self.right)}"~{slop}'


def bridges(runs: Sequence[Sequence[str]], masked: Sequence[bool]) -> list[Bridge]:
    """1..SIDE_WORDS words each side of every cut that only masks make, distinct."""
    found: dict[Bridge, None] = {}
    for before, after, cut in zip(runs, runs[1:], masked):
        if cut:
            for a in range(1, min(SIDE_WORDS, len(before)) + 1):
                for b in range(1, min(SIDE_WORDS, len(after)) + 1):
                    found.setdefault(Bridge(tuple(before[-a:]), tuple(after[:b])))
    return list(found)


class PositionalIndex:
    """The collection's search tokens at global positions (a run never continues past a mask or a document end)."""

    def __init__(self, documents: Iterable[Sequence[Sequence[str]]], widest: int) -> None:
        """``documents``: each document as its runs of words (cut at its masks)."""
        vocabulary: dict[str, int] = {}
        ids: list[int] = []
        owner: list[int] = []
        starts: list[int] = []
        number = -1
        for number, runs in enumerate(documents):
            for words in runs:
                starts.append(len(ids))
                ids.extend(vocabulary.setdefault(word, len(vocabulary)) for word in words)
                owner.extend([number] * len(words))
        self.size = number + 1
        self.widest = widest
        self._vocabulary = vocabulary
        used = len(ids)
        self._ids = np.full(used + 1, -1, dtype=np.int64)  # one padding token: reads past the end fail
        self._ids[:used] = ids
        self._owner = np.full(used + 1, -1, dtype=np.int64)
        self._owner[:used] = owner
        self._run_start = np.zeros(used + 1, dtype=bool)
        self._run_start[starts + [used]] = True
        self._order = np.argsort(self._ids[:used], kind="stable")
        self._bounds = np.searchsorted(self._ids[:used][self._order], np.arange(len(vocabulary) + 1))
        self._around: dict[Bridge, tuple[np.ndarray, np.ndarray]] = {}

    def _positions(self, word: str) -> np.ndarray:
        number = self._vocabulary.get(word)
        if number is None:
            return np.zeros(0, dtype=np.int64)
        return self._order[self._bounds[number] : self._bounds[number + 1]]

    def _extend(self, starts: np.ndarray, offset: int, word: str) -> np.ndarray:
        """The starts at which ``word`` follows at ``offset`` within the same run."""
        at = np.minimum(starts + offset, len(self._ids) - 1)
        return starts[(self._ids[at] == self._vocabulary.get(word, -2)) & ~self._run_start[at]]

    def phrase(self, words: Sequence[str]) -> np.ndarray:
        """Sorted start positions of a phrase."""
        starts = self._positions(words[0])
        for offset, word in enumerate(words[1:], 1):
            starts = self._extend(starts, offset, word)
        return starts

    def documents(self, starts: np.ndarray) -> np.ndarray:
        """The documents holding these sorted positions."""
        owners = self._owner[starts]
        return owners[np.concatenate([[True], owners[1:] != owners[:-1]])] if len(owners) else owners

    def around(self, bridge: Bridge) -> tuple[np.ndarray, np.ndarray]:
        """Every document matching the bridge within ``widest``, and the fewest words between
        its runs there: (documents, slops), by document."""
        cached = self._around.get(bridge)
        if cached is not None:
            return cached
        ends = self.phrase(bridge.left) + len(bridge.left) - 1
        follow = self.phrase(bridge.right)
        docs = slops = np.zeros(0, dtype=np.int64)
        if len(ends) and len(follow):
            nearest = np.searchsorted(follow, ends + 2)  # at least one word between
            ok = nearest < len(follow)
            ends, after = ends[ok], follow[nearest[ok]]
            gaps = after - ends - 1
            ok = (gaps <= self.widest) & (self._owner[ends] == self._owner[after])
            docs, gaps = self._owner[ends[ok]], gaps[ok]
            order = np.lexsort((gaps, docs))
            docs, gaps = docs[order], gaps[order]
            first = np.concatenate([[True], docs[1:] != docs[:-1]]) if len(docs) else np.zeros(0, dtype=bool)
            docs, slops = docs[first], gaps[first]
        self._around[bridge] = (docs, slops)
        return docs, slops

    def longest(self, words: Sequence[str], start: int, source: int | None, shortest: int) -> tuple[int, np.ndarray] | None:
        """The longest phrase from ``words[start]`` (at least ``shortest`` words) that some
        document holds (the source, when known): (its length, its documents), or None.
        Stops at a single document: a longer phrase cannot find fewer."""
        starts = self._positions(words[start])
        found = None
        for n in range(1, len(words) - start + 1):
            if n > 1:
                starts = self._extend(starts, n - 1, words[start + n - 1])
            docs = self.documents(starts)
            if not len(docs) or (source is not None and source not in docs):
                break
            if n >= shortest:
                found = (n, docs)
                if len(docs) == 1:
                    break
        return found
