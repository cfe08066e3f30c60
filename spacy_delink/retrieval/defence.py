"""The opt-in ranked-retrieval defence: mask words until the source ranks at least K (``--retrieval K``).

After the phrase rules hold, the released text is read as the adversary's query (its
search-reading words, masks removed, ``bm25``), under each reading of document lengths
(exact, and an engine's one-byte fieldnorm: ``bm25.LENGTHS``); the rank reported is the
adversary's best of the two, and the masking below runs for whichever reading still fails. While fewer than K − 1 other documents
score strictly higher than the source (ties count for the adversary), one word of the
text is masked everywhere it occurs: the word whose contribution to the source's score,
less its contribution to the (K − 1)-th best other document's, is largest. Contributions
are exact (``QueryPostings.contributions``), and that difference is what masking the
word lowers the gap by *per changed token* (each occurrence is one clause of the query
and one token of the text), so the greedy choice is the most gap closed per token
changed. The scores are recomputed after each choice, since the document in (K − 1)-th
place can change. Masking a word everywhere (not only as often as the gap needs) also
removes it from a query that counts each word once.

A source that scores 0 matches none of the query's words: an engine does not return it
at all, so it is counted last (rank N) and needs no masking. A document that scores
exactly as the source on every word left (a twin: same words, same length) can never be
lifted above it, so it is passed over as a target; should too few others remain, the
text is refused rather than reported ranked.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import DelinkError, InputError
from ..linkage.tokenize import Tokens
from .bm25 import LENGTHS, Bm25Statistics, QueryPostings


def check_retrieval_rank(rank: int) -> int:
    """``--retrieval K``: 0 is off, else K >= 2 (K = 1 asks nothing) and at most the collection."""
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0 or rank == 1:
        raise InputError(f"retrieval must be 0 (off) or an integer K >= 2 (the source ranked K-th or lower), got {rank!r}")
    return rank


def source_rank(scores: np.ndarray, source: int) -> int:
    """The source's rank for the adversary: 1 + others scoring strictly higher; N when it matches nothing."""
    if scores[source] <= 0:
        return len(scores)
    return 1 + int(np.count_nonzero(scores > scores[source]))


@dataclass
class RetrievalGuard:
    """Ranks a text's source under BM25 and chooses the words to mask so that it ranks at least ``rank``."""

    statistics: Bm25Statistics
    #: A text's search-reading tokens and their keyed digests (``CorpusIndex.tokenize(text, "search")``).
    tokenize: Callable[[str], tuple[Tokens, np.ndarray]]
    rank: int

    def __post_init__(self) -> None:
        check_retrieval_rank(self.rank)
        if self.rank > self.statistics.documents:
            raise InputError(
                f"retrieval {self.rank}: the collection holds {self.statistics.documents:,} documents, so the source cannot "
                "rank below that; choose a smaller K"
            )

    def rank_of(self, text: str, source: int) -> int:
        """The source's BM25 rank for ``text`` as the query: the best for the adversary over the length readings."""
        _, keys = self.tokenize(text)
        return min(source_rank(self.statistics.query(keys, lengths).scores(), source) for lengths in LENGTHS)

    def ranges(self, text: str, source: int) -> list[tuple[int, int]]:
        """Character ranges to mask (every occurrence of the chosen words) so that the source ranks >= ``rank``
        under every length reading (``bm25.LENGTHS``); [] when it does."""
        tokens, keys = self.tokenize(text)
        queries = [self.statistics.query(keys, lengths) for lengths in LENGTHS]
        chosen = self._choose(queries, source)
        if not chosen:
            return []
        masked = np.isin(keys, queries[0].keys[chosen])
        return list(zip(tokens.starts[masked].tolist(), tokens.ends[masked].tolist()))

    def _choose(self, queries: list[QueryPostings], source: int) -> list[int]:
        """The words to mask: greedily, for the first length reading under which the source still ranks too high.

        The readings share their terms (same keys, same order), so one word index names the same word in each.
        """
        counts = queries[0].counts.copy()
        chosen: list[int] = []
        wanted_above = self.rank - 1
        #: Per reading, documents that score exactly as the source on every word left (twins): no mask lifts them above it.
        twins: list[set[int]] = [set() for _ in queries]
        while True:
            failing = None
            for reading, query in enumerate(queries):
                scores = query.scores(counts)
                if scores[source] > 0 and np.count_nonzero(np.delete(scores, source) > scores[source]) < wanted_above:
                    failing = reading
                    break
            if failing is None:
                return chosen
            query = queries[failing]
            others = query.scores(counts)
            others[source] = -np.inf
            others[list(twins[failing])] = -np.inf
            if np.count_nonzero(others > -np.inf) < wanted_above:
                raise DelinkError(
                    f"ranked retrieval: {len(twins[failing]):,} document(s) of the collection score exactly as the source on every "
                    f"word the text has left, so masking cannot rank the source {self.rank}-th; lower --retrieval"
                )
            best_others = np.argpartition(-others, wanted_above - 1)[:wanted_above]
            target = int(best_others[np.argmin(others[best_others])])
            gain = query.contributions(source) - query.contributions(target)
            gain[counts == 0] = -np.inf
            word = int(np.argmax(gain))
            if not gain[word] > 0:  # then the target scores as the source word for word: a twin
                twins[failing].add(target)
                continue
            counts[word] = 0
            chosen.append(word)

def retrieval_settings(rank: int) -> dict[str, object]:
    """What a record protected with ``--retrieval K`` says it was checked under."""
    from .bm25 import B, K1

    return {"rank": rank, "model": "bm25", "k1": K1, "b": B, "lengths": list(LENGTHS), "reading": "search", "ties": "adversary"}
