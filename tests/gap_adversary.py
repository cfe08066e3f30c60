"""An adversary who searches around masks and across paragraph ends, written from issue 33 alone.

It shares no code with the package: the search form of each character is the SPEC oracle's
(``spec_oracle.search_form``: ICU and tantivy probed character by character, cached per
distinct character), masks are the oracle's patterns, and the searches are read here on a
positional index of the collection in numpy.

The searches (an engine's sloppy phrase ``"L R"~s``, read exactly: the words of L, then 1..s
other words, then the words of R, in that order):

* **around a mask**: L = the last 1-3 words before a stretch of masks, R = the first 1-3
  after it, s <= ``MAX_GAP``; the searcher reads it at the smallest slop that reaches the
  source (any larger slop only adds documents);
* **ANDed with a phrase**: such a search AND one of the text's own phrases (<= ``MAX_N``
  words between masks, paragraph ends joined);
* **across a paragraph end**: a phrase of <= ``MAX_N`` words of the text that holds a
  paragraph end.

A text's source is *singled out* when a search returns exactly one document, the source.
tantivy's own sloppy phrases of three or more terms are not used: tantivy 0.27 misses such
matches depending on the other documents indexed (tantivy issues #1934, #2580).
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

import spec_oracle

#: The SPEC's defaults: words in a phrase, words a mask stands for, words each side of a mask.
MAX_N = 8
MAX_GAP = 16
SIDE_WORDS = 3
_PARAGRAPH_END = re.compile(r"\n[ \t\r]*\n")
_MASK = re.compile("|".join(f"(?:{pattern})" for pattern in spec_oracle.MASK_PATTERNS))


class _FoldTable(dict):  # type: ignore[type-arg]
    """``str.translate`` table: each character as its search form, anything but a letter or digit
    as a space, a letter of a script written without spaces as a word of its own."""

    def __missing__(self, code: int) -> str:
        ch = chr(code)
        form = spec_oracle.search_form(ch)
        if spec_oracle.spaceless_script(ch):
            value = " " + "".join(c for c in form if c.isalnum()) + " "
        else:
            value = "".join(c if c.isalnum() and not spec_oracle.spaceless_script(c) else f" {c} " if c.isalnum() else " " for c in form)
        self[code] = value
        return value


_FOLD = _FoldTable()


@dataclass
class Run:
    """Search tokens between two mask stretches; ``paragraph[i]``: a paragraph end lies before token i."""

    words: list[str] = field(default_factory=list)
    paragraph: list[bool] = field(default_factory=list)


def runs(text: str) -> list[Run]:
    """The text cut at its masks (consecutive masks are one stretch), each piece as search tokens."""
    found: list[Run] = []
    for piece in _MASK.split(text):
        run = Run()
        for number, paragraph in enumerate(_PARAGRAPH_END.split(piece)):
            words = paragraph.translate(_FOLD).split()
            run.words += words
            run.paragraph += [number > 0 and i == 0 for i in range(len(words))]
        if run.words:
            found.append(run)
    return found


class Collection:
    """Every document's search tokens at global positions, with postings per word."""

    def __init__(self, documents: Sequence[str]) -> None:
        vocabulary: dict[str, int] = {}
        ids: list[int] = []
        owner: list[int] = []
        starts: list[int] = []  # positions where a run starts: no phrase crosses into them
        for number, text in enumerate(documents):
            for run in runs(text):
                starts.append(len(ids))
                ids += [vocabulary.setdefault(word, len(vocabulary)) for word in run.words]
                owner += [number] * len(run.words)
        self.vocabulary = vocabulary
        self.size = len(documents)
        pad = MAX_N + SIDE_WORDS + MAX_GAP + 2  # reads past the end land on the padding
        self.ids = np.concatenate([np.asarray(ids, dtype=np.int64), np.full(pad, -1)])
        self.owner = np.concatenate([np.asarray(owner, dtype=np.int64), np.full(pad, -1)])
        self.run_start = np.zeros(len(self.ids), dtype=bool)
        self.run_start[starts] = True
        self.run_start[len(ids) :] = True
        order = np.argsort(self.ids[: len(ids)], kind="stable")
        bounds = np.searchsorted(self.ids[: len(ids)][order], np.arange(len(vocabulary) + 1))
        self._postings = order
        self._bounds = bounds

    def positions(self, word: str) -> np.ndarray:
        """Sorted positions of one word."""
        number = self.vocabulary.get(word)
        if number is None:
            return np.zeros(0, dtype=np.int64)
        return self._postings[self._bounds[number] : self._bounds[number + 1]]

    def extend(self, starts: np.ndarray, offset: int, word: str) -> np.ndarray:
        """The phrase starts at which ``word`` follows at ``offset``, in the same run."""
        number = self.vocabulary.get(word, -2)
        at = starts + offset
        return starts[(self.ids[at] == number) & ~self.run_start[at]]

    def phrase(self, words: Sequence[str]) -> np.ndarray:
        """Sorted start positions of a phrase (consecutive tokens of one run)."""
        starts = self.positions(words[0])
        for offset, word in enumerate(words[1:], 1):
            starts = self.extend(starts, offset, word)
        return starts

    def documents(self, starts: np.ndarray) -> np.ndarray:
        """The documents holding these positions (sorted positions: their owners come sorted)."""
        owners = self.owner[starts]
        return owners[np.concatenate([[True], owners[1:] != owners[:-1]])] if len(owners) else owners

    def around(self, left: Sequence[str], right: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Each document holding ``left``, then 1..MAX_GAP words, then ``right``, with its
        smallest number of words between them: (documents, gaps)."""
        ends = self.phrase(left) + len(left) - 1
        follow = self.phrase(right)
        if not len(ends) or not len(follow):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        nearest = np.searchsorted(follow, ends + 2)
        ok = nearest < len(follow)
        ends, nearest = ends[ok], follow[nearest[ok]]
        gaps = nearest - ends - 1
        ok = (gaps <= MAX_GAP) & (self.owner[ends] == self.owner[nearest])
        docs, gaps = self.owner[ends[ok]], gaps[ok]
        order = np.lexsort((gaps, docs))
        docs, gaps = docs[order], gaps[order]
        first = np.ones(len(docs), dtype=bool)
        first[1:] = docs[1:] != docs[:-1]
        return docs[first], gaps[first]


@dataclass
class Findings:
    """How one text's source is singled out (each a witness search, or None)."""

    around_mask: str | None = None
    around_mask_and_phrase: str | None = None
    across_paragraph: str | None = None

    @property
    def singled_out(self) -> bool:
        return any((self.around_mask, self.around_mask_and_phrase, self.across_paragraph))


class Adversary:
    """The searches of the module docstring against one collection."""

    def __init__(self, documents: Sequence[str]) -> None:
        self.collection = Collection(documents)
        self._around: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[np.ndarray, np.ndarray]] = {}

    def _bridge(self, left: tuple[str, ...], right: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        key = (left, right)
        if key not in self._around:
            self._around[key] = self.collection.around(left, right)
        return self._around[key]

    def attack(self, text: str, source: int) -> Findings:
        """The searches against ``text``, whose source is document number ``source``."""
        found = Findings()
        pieces = runs(text)
        bridges: list[tuple[str, np.ndarray]] = []  # (search, documents at the source's slop), source not alone
        for before, after in zip(pieces, pieces[1:]):
            for a in range(1, min(SIDE_WORDS, len(before.words)) + 1):
                for b in range(1, min(SIDE_WORDS, len(after.words)) + 1):
                    left, right = tuple(before.words[-a:]), tuple(after.words[:b])
                    docs, gaps = self._bridge(left, right)
                    at = np.flatnonzero(docs == source)
                    if not len(at):
                        continue
                    slop = int(gaps[at[0]])
                    reached = docs[gaps <= slop]
                    search = f'"{" ".join(left)} {" ".join(right)}"~{slop}'
                    if len(reached) == 1:
                        found.around_mask = found.around_mask or search
                    else:
                        bridges.append((search, reached))
        phrases: list[tuple[str, np.ndarray]] = []  # per start: the longest phrase the source holds
        for run in pieces:
            for i in range(len(run.words)):
                starts = self.collection.positions(run.words[i])
                longest: tuple[str, np.ndarray] | None = None
                for n in range(1, min(MAX_N, len(run.words) - i) + 1):
                    if n > 1:
                        starts = self.collection.extend(starts, n - 1, run.words[i + n - 1])
                    docs = self.collection.documents(starts)
                    if source not in docs:
                        break
                    longest = (" ".join(run.words[i : i + n]), docs)
                    if len(docs) == 1 and any(run.paragraph[i + 1 : i + n]):
                        found.across_paragraph = found.across_paragraph or f'"{longest[0]}"'
                if longest is not None:
                    phrases.append(longest)
        if bridges and phrases and found.around_mask_and_phrase is None:
            found.around_mask_and_phrase = self._and(bridges, phrases, source)
        return found

    def _and(self, bridges: list[tuple[str, np.ndarray]], phrases: list[tuple[str, np.ndarray]], source: int) -> str | None:
        """A search around a mask AND a phrase that together return only the source, or None."""
        size = self.collection.size

        def matrix(sets: list[tuple[str, np.ndarray]]) -> np.ndarray:
            rows = np.zeros((len(sets), size), dtype=np.float32)
            for row, (_, docs) in enumerate(sets):
                rows[row, docs] = 1.0
            rows[:, source] = 0.0  # every set holds the source: count the others
            return rows

        others = matrix(bridges) @ matrix(phrases).T
        hit = np.argwhere(others == 0)
        if not len(hit):
            return None
        b, p = hit[0]
        return f'{bridges[b][0]} AND "{phrases[p][0]}"'
