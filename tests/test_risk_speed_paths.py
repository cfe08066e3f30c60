"""The fast paths of ``delink_risk`` give exactly what the straightforward ones give.

``delink_risk`` builds ``doc.text`` from a compiled cache of token texts, selects the
minimal set from all levels' lookups at once, writes its spans into a ``SpanGroup`` by
moving one ``Span`` over them, and paints token risks in one compiled pass. Each is
checked here against the plain reading — ``doc.text``, one mask per level, a ``Span``
per phrase with ``span._`` writes, the SPEC's brute force — on random texts, through
``Doc.to_bytes`` and ``DocBin`` as well.
"""
from __future__ import annotations

import pickle
import random
import re
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span, SpanGroup

import spec_oracle
from spacy_delink.components.alignment import DocText, align
from spacy_delink.components.extensions import TOKEN_RISK_KEY, register_extensions
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.linkage.ngrams import LinkageAnalysis, analyze
from spacy_delink.linkage.scores import risk_from_anonymity
from spacy_delink.linkage.tokenize import LinkageRules

RULES = LinkageRules(max_n=4)
WORDS = ["farm", "river", "Mura", "sold", "the", "near", "Ljubljana", "1994", "naïve", "café", "x😀", "U.S", "naive", "Sl\u00adovenia"]
SEPARATORS = [" ", " ", " ", "  ", ", ", ". ", "\n", "-", "'s "]


def _text(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(SEPARATORS) for _ in range(words)).rstrip(" ")


@pytest.fixture(scope="module")
def corpus_index(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], Path]:
    rng = random.Random(14)
    corpus = [_text(rng, rng.randint(3, 40)) for _ in range(8)]
    path = tmp_path_factory.mktemp("speed") / "index"
    IndexBuilder(RULES, progress=False).build([(f"d{i}", t) for i, t in enumerate(corpus)], path)
    return corpus, path


def _expected(doc: Doc, corpus: list[str], k: int) -> tuple[list[Span], list[float], int | None]:
    """The spans, token risks and anonymity by the plain path: the SPEC's brute force under both
    readings, one ``Span`` per distinct expanded range (``char_span(..., "expand")``) with the
    smallest support of the phrases it covers and their readings, the highest covering risk per token."""
    found: dict[tuple[int, int], tuple[Span, int, list[str]]] = {}
    anonymities = []
    for reading in ("exact", "search"):
        oracle = spec_oracle.assess(corpus, doc.text, k, RULES.max_n, reading=reading)
        if oracle["anonymity"] is not None:
            anonymities.append(oracle["anonymity"])
        for start, end, support in oracle["ngrams"]:
            span = doc.char_span(start, end, label="NGRAM", alignment_mode="expand")
            if span is None or not len(span):
                continue
            key = (span.start_char, span.end_char)
            _, known, readings = found.get(key, (span, support, []))
            found[key] = (span, min(known, support), readings + [reading] if reading not in readings else readings)
    spans, risks = [], [0.0] * len(doc)
    for key in sorted(found):
        span, support, readings = found[key]
        span._.delink_support = support
        span._.delink_readings = readings
        spans.append(span)
        for i in range(span.start, span.end):
            risks[i] = max(risks[i], 1.0 / support)
    return spans, risks, min(anonymities) if anonymities else None


def _described(spans: list[Span] | SpanGroup) -> list[tuple[object, ...]]:
    return [
        (s.start, s.end, s.start_char, s.end_char, s.label_, s.kb_id, s.id, s._.delink_support, s._.delink_risk, list(s._.delink_readings))  # a DocBin gives a list back as a tuple
        for s in spans
    ]


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("coarse", [False, True])
def test_component_equals_the_plain_path(corpus_index: tuple[list[str], Path], k: int, coarse: bool) -> None:
    """Spans (offsets, label, ids), span/token/doc values and the group's bytes equal the plain
    path's, on spaCy's tokens and on coarser ones (several phrases expand to one span);
    and they come back the same through ``Doc.to_bytes`` and ``DocBin``."""
    corpus, path = corpus_index
    nlp = spacy.blank("en")
    if coarse:
        nlp.tokenizer = lambda text: Doc(nlp.vocab, words=(words := re.findall("[^ ]+| ", text)), spaces=[False] * len(words))
    nlp.add_pipe("delink_risk", config={"index": str(path), "k": k})
    rng = random.Random(k + 10 * coarse)
    texts = [*corpus, " ".join(corpus), *(_text(rng, rng.randint(0, 30)) for _ in range(40))]
    docs = list(nlp.pipe(texts))
    stored = DocBin(store_user_data=True, docs=docs).to_bytes()
    for doc, again, text in zip(docs, DocBin().from_bytes(stored).get_docs(nlp.vocab), texts):
        assert doc.text == text
        plain = nlp.make_doc(doc.text)
        spans, risks, anonymity = _expected(plain, corpus, k)
        group = doc.spans["linkable"]
        assert group.name == "linkable" and group.attrs == {}
        straightforward = SpanGroup(doc, name="linkable", spans=[Span(doc, s.start, s.end, label="NGRAM") for s in spans])
        assert group.to_bytes() == straightforward.to_bytes()
        assert _described(group) == _described(spans)
        assert [t._.delink_risk for t in doc] == risks
        assert (doc._.delink_anonymity, doc._.delink_risk) == (anonymity, risk_from_anonymity(anonymity))
        for copy in (Doc(nlp.vocab).from_bytes(doc.to_bytes()), again):
            assert _described(copy.spans["linkable"]) == _described(group)
            assert [t._.delink_risk for t in copy] == risks and list(copy.user_data[TOKEN_RISK_KEY]) == doc.user_data[TOKEN_RISK_KEY]
            assert copy._.delink_anonymity == anonymity


def test_span_group_equals_a_group_of_spans() -> None:
    """``Alignment.span_group`` stores what ``SpanGroup(doc, spans=[Span(...), ...])`` does, byte for byte."""
    nlp = spacy.blank("en")
    rng = random.Random(2)
    for _ in range(50):
        doc = nlp.make_doc(_text(rng, rng.randint(1, 25)))
        ranges = [(a, b) for a, b in ((rng.randint(0, len(doc.text)), rng.randint(0, len(doc.text))) for _ in range(20)) if a < b]
        aligned = align(doc, np.array([a for a, _ in ranges], dtype=np.int64), np.array([b for _, b in ranges], dtype=np.int64))
        group = aligned.span_group(doc, "key", "LABEL")
        assert group.to_bytes() == SpanGroup(doc, name="key", spans=aligned.spans(doc, "LABEL")).to_bytes()
        assert [(s.start, s.end, s.start_char, s.end_char, s.text) for s in group] == [
            (s.start, s.end, s.start_char, s.end_char, s.text) for s in aligned.spans(doc, "LABEL")
        ]


def _per_level(analysis: LinkageAnalysis, minimal: bool) -> dict[str, list[int]]:
    """The minimal (or maximal frequent) occurrences, one mask per level, sorted by start then end."""
    k, rows = analysis.k, []
    for level in analysis.levels:
        if minimal:
            mask = (level.df >= 1) & (level.df < k)
            if level.n > 1:
                shorter = analysis.df_of(level.n - 1)
                mask &= (shorter[level.positions] >= k) & (shorter[level.positions + 1] >= k)
        else:
            mask = level.df >= k
            if level.n < len(analysis.levels):
                longer = analysis.df_of(level.n + 1)
                mask &= (longer[level.positions] < k) & ((level.positions == 0) | (longer[np.maximum(level.positions - 1, 0)] < k))
        for j in np.flatnonzero(mask).tolist():
            token = int(level.positions[j])
            start, end = int(analysis.tokens.starts[token]), int(analysis.tokens.ends[token + level.n - 1])
            rows.append((start, end, token, level.n, int(level.df[j]), int(level.rows[j])))
    rows.sort()
    names = ("start", "end", "token", "n", "support", "row")
    return {name: [row[i] for row in rows] for i, name in enumerate(names)}


@pytest.mark.parametrize("exact", [True, False])
def test_selections_equal_one_mask_per_level(corpus_index: tuple[list[str], Path], exact: bool) -> None:
    """``minimal_arrays``, ``maximal_columns`` and ``anonymity`` (all levels at once) equal the
    per-level selection and the smallest linkable df of any level, for k = 2..5."""
    corpus, path = corpus_index
    index = CorpusIndex(path)
    rng = random.Random(7)
    for text in [*corpus, " ".join(corpus), "", *(_text(rng, rng.randint(0, 30)) for _ in range(30))]:
        for k in range(2, 6):
            analysis = analyze(index, text, k, exact_frequent=exact)
            for minimal in (True, False):
                got = analysis.minimal_arrays() if minimal else analysis.maximal_columns()
                assert all(column.dtype == np.int64 for column in got.values())
                assert {name: column.tolist() for name, column in got.items()} == _per_level(analysis, minimal)
            linkable = [int(d) for level in analysis.levels for d in level.df.tolist() if 1 <= d < k]
            assert analysis.anonymity() == (min(linkable) if linkable else None)
            if exact:
                assert analysis.anonymity() == spec_oracle.assess(corpus, text, k, RULES.max_n)["anonymity"]


def test_doc_text_cache_on_random_texts_and_copies() -> None:
    """``DocText`` is ``doc.text`` on random texts (astral and combining characters, runs of
    spaces, newlines), with a cache that keeps emptying itself or never does, and a pickled
    copy starts empty and reads alike."""
    register_extensions()
    nlp = spacy.blank("en")
    rng = random.Random(9)
    alphabet = ["a", "B", "é", "e\u0301", "😀", "\u00a0", " ", " ", "  ", "\n", "\t", ".", "-", "ǅ", "\u200b", "ß"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))) for _ in range(300)]
    for limit in (3, 40, 1 << 18):
        cache = DocText(limit=limit)
        for text in texts:
            doc = nlp.make_doc(text)
            assert cache(doc) == doc.text == text
        copy = pickle.loads(pickle.dumps(cache))
        assert copy.limit == limit
        assert [copy(nlp.make_doc(text)) for text in texts[:20]] == texts[:20]
