"""An independent adversary: the search-based linkage attack run with a real search engine.

It shares no code with ``spacy_delink.linkage``: the original collection goes into a
tantivy index (tantivy's own tokenizer: split on non-alphanumerics, drop tokens over 40
characters, lowercase), a phrase of a document is a tantivy phrase query, and a
combination is an AND of phrase queries. What it takes from our rules is only where a
phrase ends: not across punctuation, paragraph ends or masks (SPEC §1–2, re-implemented
here with regular expressions), on both sides — the released text is cut there into the
phrases a person would type, and each original is indexed as one field value per piece,
which tantivy never matches a phrase across (as Lucene's position gap between values).
Without that, "the river" would hit an original that only has "... the. River ...".

The attack (SPEC §4–5 semantics, counted by the engine): a phrase is linkable at k when
1 <= hits < k; the candidates of a combination are the maximal phrases with >= k hits,
one per distinct phrase; a combination of 2..arity candidates is linkable when the AND
query has 1 <= hits < k. The pair and triple counts are computed from the candidates'
hit sets (tantivy's result lists), and every linkable combination reported is confirmed
by an actual boolean AND query, so a disagreement with our index is never an artefact of
this module's set arithmetic.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ..errors import DelinkError

#: tantivy's default text analysis, spelled out so queries are tokenized the same way.
MAX_TOKEN_CHARS = 40
_FIELD = "text"
_DOC = "doc"


def engine_unavailable() -> str | None:
    """Why the independent engine cannot run here (tantivy missing), or None."""
    try:
        import tantivy  # noqa: F401
    except ImportError as err:
        return f"the independent adversary needs tantivy ({err}); install it with pip install 'spacy-delink[evaluate]'"
    return None


def _analyzer() -> Any:
    import tantivy

    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(MAX_TOKEN_CHARS))
        .filter(tantivy.Filter.lowercase())
        .build()
    )


def _is_word(ch: str) -> bool:
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


@dataclass(frozen=True)
class PhraseRules:
    """Where a typed phrase stops: punctuation, paragraph ends and masks (from the index's rules)."""

    break_chars: str
    non_breaking_single: str
    paragraph_breaks: bool
    mask_patterns: tuple[str, ...]

    @classmethod
    def from_rules(cls, rules: Any) -> "PhraseRules":
        return cls(rules.break_chars, rules.non_breaking_single, rules.paragraph_breaks, tuple(rules.mask_patterns))

    def pieces(self, text: str) -> list[str]:
        """The text cut at every break; masks are cut out entirely."""
        cut = np.zeros(len(text) + 1, dtype=bool)
        masked = np.zeros(len(text), dtype=bool)
        for pattern in self.mask_patterns:
            for match in re.finditer(pattern, text):
                masked[match.start() : match.end()] = True
        cut[: len(text)] |= masked
        if self.break_chars:
            for match in re.finditer("[" + re.escape(self.break_chars) + "]", text):
                i = match.start()
                lone = (
                    text[i] in self.non_breaking_single
                    and 0 < i < len(text) - 1
                    and _is_word(text[i - 1])
                    and _is_word(text[i + 1])
                    and not masked[i - 1]
                    and not masked[i + 1]
                )
                if not lone:
                    cut[i] = True
        if self.paragraph_breaks:
            for match in re.finditer(r"\n[ \t\r]*\n", text):
                cut[match.start() : match.end()] = True
        pieces, start = [], 0
        for i in np.flatnonzero(cut[: len(text)]).tolist() + [len(text)]:
            if i > start:
                pieces.append(text[start:i])
            start = i + 1
        return pieces


@dataclass
class EngineVerdict:
    """What the engine's attack finds in one text at one (k, arity)."""

    linkable: bool
    anonymity: int | None
    witness: dict[str, Any] | None = None  # the smallest linkable search found, for listings


@dataclass
class _Phrases:
    """Distinct phrases of a text (token tuples) with their hit counts, and their occurrences."""

    counts: dict[tuple[str, ...], int] = field(default_factory=dict)
    occurrences: list[tuple[int, int, tuple[str, ...]]] = field(default_factory=list)  # (piece, first token, key)


class SearchEngineAdversary:
    """The original collection in an in-memory tantivy index, and the attack against it."""

    def __init__(self, documents: Iterable[str], rules: Any, max_n: int) -> None:
        try:
            import tantivy
        except ImportError as err:
            raise DelinkError(f"the independent adversary needs tantivy ({err}); pip install tantivy") from None
        self._tantivy = tantivy
        self.rules = PhraseRules.from_rules(rules)
        self.max_n = max_n
        builder = tantivy.SchemaBuilder()
        builder.add_text_field(_FIELD, stored=False, tokenizer_name="delink_adversary", index_option="position")
        builder.add_unsigned_field(_DOC, stored=False, indexed=False, fast=True)
        self.schema = builder.build()
        self.analyzer = _analyzer()
        self.engine = tantivy.Index(self.schema)
        self.engine.register_tokenizer("delink_adversary", self.analyzer)
        writer = self.engine.writer(heap_size=64_000_000, num_threads=1)
        count = 0
        for number, text in enumerate(documents):
            document = tantivy.Document()
            document.add_unsigned(_DOC, number)
            for piece in self.rules.pieces(text):  # one value per piece: no phrase matches across two
                document.add_text(_FIELD, piece)
            writer.add_document(document)
            count = number + 1
        writer.commit()
        writer.wait_merging_threads()
        self.engine.reload()
        self.searcher = self.engine.searcher()
        self.documents = count
        self._hits: dict[tuple[str, ...], np.ndarray] = {}

    def _query(self, key: tuple[str, ...]) -> Any:
        if len(key) == 1:
            return self._tantivy.Query.term_query(self.schema, _FIELD, key[0])
        return self._tantivy.Query.phrase_query(self.schema, _FIELD, list(key))

    def count(self, key: tuple[str, ...]) -> int:
        """Documents matching one phrase."""
        if len(key) == 1:
            return int(self.searcher.doc_freq(_FIELD, key[0]))
        return int(self.searcher.search(self._query(key), limit=1).count)  # type: ignore[attr-defined]

    def count_all(self, keys: list[tuple[str, ...]]) -> int:
        """Documents matching every phrase: one boolean AND query."""
        tantivy = self._tantivy
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, self._query(key)) for key in keys])
        return int(self.searcher.search(query, limit=1).count)  # type: ignore[attr-defined]

    def hits(self, key: tuple[str, ...]) -> np.ndarray:
        """Sorted document numbers matching one phrase (cached)."""
        found = self._hits.get(key)
        if found is None:
            result = self.searcher.search(self._query(key), limit=max(self.documents, 1))
            numbers = self.searcher.fast_field_values(_DOC, [address for _, address in result.hits])
            found = self._hits[key] = np.sort(np.asarray(numbers, dtype=np.int64))
        return found

    def phrases(self, text: str) -> _Phrases:
        """Every phrase of ``text`` that can matter, with its hit count.

        A phrase is only searched when both its one-shorter sub-phrases hit >= 2 documents:
        otherwise it hits at most one, and that sub-phrase already shows the same (or a
        smaller) candidate set.
        """
        found = _Phrases()
        counts = found.counts
        for piece_no, piece in enumerate(self.rules.pieces(text)):
            words = [token for token in self.analyzer.analyze(piece)]
            previous: dict[int, int] = {}
            for n in range(1, self.max_n + 1):
                current: dict[int, int] = {}
                for i in range(len(words) - n + 1):
                    if n > 1 and (previous.get(i, 0) < 2 or previous.get(i + 1, 0) < 2):
                        continue
                    key = tuple(words[i : i + n])
                    if key not in counts:
                        counts[key] = self.count(key)
                    current[i] = counts[key]
                    found.occurrences.append((piece_no, i, key))
                if not current:
                    break
                previous = current
        return found

    def attack(self, text: str, ks: list[int], arities: list[int]) -> dict[tuple[int, int], EngineVerdict]:
        """The attack on one text at every (k, arity)."""
        phrases = self.phrases(text)
        verdicts: dict[tuple[int, int], EngineVerdict] = {}
        for k in ks:
            single = [(count, (key,)) for key, count in phrases.counts.items() if 1 <= count < k]
            combos = self._combinations(phrases, k, max(arities)) if max(arities) >= 2 else {}
            for arity in arities:
                found = list(single) + [combo for m, combo in combos.items() if m <= arity and combo is not None]
                if not found:
                    verdicts[(k, arity)] = EngineVerdict(False, None)
                    continue
                count, keys = min(found)
                witness = {"phrases": [" ".join(key) for key in keys], "hits": count}
                verdicts[(k, arity)] = EngineVerdict(True, count, witness)
        return verdicts

    def _candidates(self, phrases: _Phrases, k: int) -> list[tuple[str, ...]]:
        """Maximal phrases with >= k hits (not inside a longer one), one per distinct phrase."""
        frequent = [(piece, i, key) for piece, i, key in phrases.occurrences if phrases.counts[key] >= k]
        spans = {(piece, i, i + len(key)) for piece, i, key in frequent}
        chosen: dict[tuple[str, ...], None] = {}
        for piece, i, key in sorted(frequent):
            end = i + len(key)
            inside = (piece, i - 1, end) in spans or (piece, i, end + 1) in spans
            if not inside:
                chosen.setdefault(key)
        return list(chosen)

    def _combinations(self, phrases: _Phrases, k: int, arity: int) -> dict[int, tuple[int, tuple[tuple[str, ...], ...]] | None]:
        """The smallest linkable pair and (arity 3) triple: (hits, phrases), confirmed by AND queries."""
        keys = self._candidates(phrases, k)
        result: dict[int, tuple[int, tuple[tuple[str, ...], ...]] | None] = {2: None, 3: None}
        if len(keys) < 2:
            return result
        hit_sets = [self.hits(key) for key in keys]
        universe = np.unique(np.concatenate(hit_sets))
        matrix = np.zeros((len(keys), len(universe)), dtype=np.float32)
        for row, hits in enumerate(hit_sets):
            matrix[row, np.searchsorted(universe, hits)] = 1.0
        pairs = matrix @ matrix.T
        upper = np.triu(np.ones_like(pairs, dtype=bool), 1)
        linkable = upper & (pairs >= 1) & (pairs < k)
        if linkable.any():
            a, b = (int(i) for i in np.unravel_index(np.argmin(np.where(linkable, pairs, np.inf)), pairs.shape))
            result[2] = self._confirmed(int(pairs[a, b]), (keys[a], keys[b]))
        if arity >= 3 and len(keys) >= 3:
            best: tuple[int, tuple[int, int, int]] | None = None
            for a in range(len(keys) - 2):
                columns = matrix[a] > 0
                sub = matrix[a + 1 :, columns]
                triples = sub @ sub.T  # |a ∩ b ∩ c| for b, c after a
                inner = np.triu(np.ones_like(triples, dtype=bool), 1) & (triples >= 1) & (triples < k)
                if inner.any():
                    b, c = (int(i) for i in np.unravel_index(np.argmin(np.where(inner, triples, np.inf)), triples.shape))
                    support = int(triples[b, c])
                    if best is None or support < best[0]:
                        best = (support, (a, a + 1 + b, a + 1 + c))
                    if support == 1:
                        break
            if best is not None:
                result[3] = self._confirmed(best[0], tuple(keys[i] for i in best[1]))
        return result

    def _confirmed(self, support: int, keys: tuple[tuple[str, ...], ...]) -> tuple[int, tuple[tuple[str, ...], ...]]:
        engine_count = self.count_all(list(keys))
        if engine_count != support:
            raise DelinkError(f"tantivy counts {engine_count} documents for AND of {keys} but its hit lists give {support} (a bug)")
        return support, keys
