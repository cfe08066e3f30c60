"""Our attack's verdict on a text at each (k, arity): linkable, its anonymity, and whether the attack succeeds.

An attack *succeeds* when a smallest candidate set contains the true source: some search the
adversary can run returns a set of that size holding the source (with several smallest sets,
this is the adversary's best case).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..linkage.attack import Detection, ReadingDetection, detect
from ..linkage.index import CorpusIndex
from ..linkage.readings import DEFAULT_READINGS


def source_in_smallest(index: CorpusIndex, detection: Detection, source: int) -> bool:
    """Whether some candidate set of the smallest size (the anonymity) contains ``source``,
    under any reading checked.

    A set holds the source only if every phrase searched occurs in it, so only phrases and
    candidates whose posting lists contain the source need be combined.
    """
    smallest = detection.anonymity
    if smallest is None:
        return False
    return any(_source_in_smallest_part(index, part, smallest, source) for part in detection.parts)


def _has(documents: np.ndarray, source: int) -> bool:
    at = int(np.searchsorted(documents, source))
    return at < len(documents) and int(documents[at]) == source


def _source_in_smallest_part(index: CorpusIndex, part: ReadingDetection, smallest: int, source: int) -> bool:
    """``source_in_smallest`` under one reading."""
    levels = index.levels_of(part.reading)

    def holds(n: int, row: int) -> bool:
        return _has(levels[n].documents(row), source)

    for level in part.analysis.levels:
        rows = np.unique(level.rows[level.df == smallest])
        if any(holds(level.n, int(row)) for row in rows):
            return True
    combinations = part.combinations
    if combinations is None:
        return False
    # Each candidate's posting list as the search used it (a bridge's comes with it, not from the levels).
    lists = combinations.postings
    chosen = [i for i, documents in enumerate(lists) if _has(documents, source)]
    if len(chosen) < 2:
        return False
    postings = [lists[i] for i in chosen]
    members = [combinations.candidates[i] for i in chosen]
    universe = np.unique(np.concatenate(postings))
    matrix = np.zeros((len(members), len(universe)), dtype=np.float32)
    for row, posting in enumerate(postings):
        matrix[row, np.searchsorted(universe, posting)] = 1.0
    pairs = matrix @ matrix.T
    if (np.triu(pairs, 1) == smallest).any():
        return True
    if combinations.arity >= 3:
        for a in range(len(members) - 2):
            sub = matrix[a + 1 :, matrix[a] > 0]
            if (np.triu(sub @ sub.T, 1) == smallest).any():
                return True
    return False


def our_verdicts(
    index: CorpusIndex, text: str, source: int, cells: list[tuple[int, int]], readings: Sequence[str] = DEFAULT_READINGS
) -> dict[tuple[int, int], dict[str, Any]]:
    """Our attack's verdict on one text at each (k, arity), under ``readings``."""
    verdicts = {}
    for k, arity in cells:
        detection = detect(index, text, k, arity, max_combinations=0, readings=readings, carried=(source,))  # the source is known here
        anonymity = detection.anonymity
        verdicts[(k, arity)] = {
            "linkable": not detection.protected,
            "anonymity": anonymity,
            "success": source_in_smallest(index, detection, source) if anonymity is not None else False,
        }
    return verdicts
