"""End to end on the Text Anonymization Benchmark (../shared/data/tab), against the SPEC oracle.

Corpus: the 127 ECHR test originals plus, as distractors, the public texts whose ids are
not among them. Inputs: the originals with the manual suppression spans replaced by
``[REDACTED]``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import srsly
from typer.testing import CliRunner

import spec_oracle
from gap_adversary import Adversary
from conftest import shared_path
from spacy_delink.cli import app
from spacy_delink.pages.markup import DOCS_PER_PAGE
from tab_testbed import load_tab

pytestmark = pytest.mark.slow
#: The arity-3 protect test takes every this-many-th TAB judgment.
PROTECTED_EVERY = 4


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    benchmark = load_tab(shared_path("tab"))
    corpus, inputs = benchmark.corpus, benchmark.inputs
    tmp = tmp_path_factory.mktemp("tab")
    srsly.write_jsonl(tmp / "corpus.jsonl", [{"id": i, "text": t} for i, t in corpus])
    srsly.write_jsonl(tmp / "input.jsonl", [{"id": i, "text": t} for i, t in inputs])
    result = CliRunner().invoke(app, ["index", str(tmp / "corpus.jsonl"), "--output", str(tmp / "index")])
    assert result.exit_code == 0, result.output
    oracle_indexes = {}
    for reading in ("exact", "search"):
        wanted = {o[2] for _, text in inputs for o in spec_oracle.occurrences(text, 8, reading)}
        oracle_indexes[reading] = spec_oracle.postings([t for _, t in corpus], 8, only=wanted, reading=reading)
    return {"tmp": tmp, "corpus": corpus, "inputs": inputs, "oracle_index": oracle_indexes["exact"], "oracle_indexes": oracle_indexes}


@pytest.mark.parametrize("reading", ["exact", "search"])
@pytest.mark.parametrize("k", [2, 5])
def test_assess_agrees_with_the_spec(tab: dict[str, object], k: int, reading: str) -> None:
    tmp: Path = tab["tmp"]  # type: ignore[assignment]
    out = tmp / f"out-{k}-{reading}.jsonl"
    result = CliRunner().invoke(
        app, ["assess", str(tmp / "index"), str(tmp / "input.jsonl"), "--k", str(k), "--arity", "1", "--readings", reading,
              "--output", str(out), "--html", str(tmp / "r.html")]
    )
    assert result.exit_code == 0, result.output
    records = list(srsly.read_jsonl(out))
    inputs = tab["inputs"]  # type: ignore[assignment]
    assert [r["id"] for r in records] == [doc_id for doc_id, _ in inputs]
    corpus_texts = [t for _, t in tab["corpus"]]  # type: ignore[union-attr]
    linkable_docs = 0
    for record, (_, text) in zip(records, inputs):
        expected = spec_oracle.assess(corpus_texts, text, k, 8, index=tab["oracle_indexes"][reading], reading=reading)  # type: ignore[index]
        assert [(g["start"], g["end"], g["support"]) for g in record["ngrams"]] == expected["ngrams"]
        assert all(g["text"] == text[g["start"] : g["end"]] for g in record["ngrams"])
        assert record["anonymity"] == expected["anonymity"]
        assert record["linkage_risk"] == (0.0 if expected["anonymity"] is None else 1 / expected["anonymity"])
        assert set(record) == {"id", "k", "arity", "readings", "linkage_risk", "anonymity", "ngrams", "combinations",
                               "combination_linkable", "combination_count", "combination_groups", "combinations_capped",
                               "unread_scripts"}
        assert record["unread_scripts"] == []  # English judgments: every letter in a script the index reads
        assert record["readings"] == [reading] and all(g["readings"] == [reading] for g in record["ngrams"])
        linkable_docs += record["anonymity"] is not None
    # The manual de-identification leaves linkable phrases in most documents (the paper's point).
    assert linkable_docs > 100
    # The report carries every flagged phrase of the first page with its support (tooltips read it).
    html = (tmp / "r.html").read_text()
    shown = [json.loads(block) for block in re.findall(r'<script type="application/json" class="doc-data">(.*?)</script>', html)]
    numbers = [int(n) for n in re.findall(r'<article class="doc" id="doc-(\d+)"', html)]  # documents in rank order
    assert len(shown) == len(numbers) == min(len(records), DOCS_PER_PAGE)
    for data, number in zip(shown, numbers):
        assert data["before"]["g"] == [[g["support"], g["text"]] for g in records[number]["ngrams"]]
    assert sum(support == 1 for data in shown for support, _ in data["before"]["g"]) > 0


def exhaustive_combinations(
    corpus_size: int, text: str, k: int, arity: int, oracle_index: dict[tuple[str, ...], set[int]]
) -> dict[str, object]:
    """Every pair and triple of SPEC §5 candidates, counted without any pruning (numpy)."""
    occurrences = spec_oracle.occurrences(text, 8)
    df = {o[2]: len(oracle_index.get(o[2], ())) for o in occurrences}
    frequent = [o for o in occurrences if df[o[2]] >= k]
    spans = {(o[0], o[1]) for o in frequent}
    maximal = [
        o for o in frequent
        if (o[0] - 1, o[1] + 1) not in spans and (o[0], o[1] + 1) not in spans
    ]
    first: dict[tuple[str, ...], tuple[int, int]] = {}
    for o in sorted(maximal, key=lambda o: (o[3], o[4])):
        first.setdefault(o[2], (o[3], o[4]))
    keys = list(first)
    matrix = np.zeros((len(keys), corpus_size), dtype=np.float64)
    for row, key in enumerate(keys):
        matrix[row, sorted(oracle_index[key])] = 1
    pairs = matrix @ matrix.T
    found = set()
    supports = []
    for a, b in zip(*np.nonzero(np.triu((pairs >= 1) & (pairs < k), 1))):
        found.add((frozenset((first[keys[a]], first[keys[b]])), int(pairs[a, b])))
    supports += [s for _, s in found]
    if arity == 3:
        for a in range(len(keys)):
            triple = (matrix * matrix[a]) @ matrix.T
            for b, c in zip(*np.nonzero(np.triu((triple >= 1) & (triple < k), 1))):
                if a < b:
                    supports.append(int(triple[b, c]))
                    if min(pairs[a, b], pairs[a, c], pairs[b, c]) >= k:
                        members = frozenset((first[keys[a]], first[keys[b]], first[keys[c]]))
                        found.add((members, int(triple[b, c])))
    arity1 = spec_oracle.assess([], text, k, 8, index=oracle_index)["anonymity"]
    supports += [arity1] if arity1 is not None else []
    return {"combinations": found, "anonymity": min(supports) if supports else None, "linkable": bool(found)}


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("arity", [2, 3])
def test_combinations_agree_with_exhaustive_counting(tab: dict[str, object], k: int, arity: int) -> None:
    from spacy_delink.linkage.combinations import analyze_combinations
    from spacy_delink.linkage.ngrams import analyze
    from spacy_delink.linkage.index import CorpusIndex

    tmp: Path = tab["tmp"]  # type: ignore[assignment]
    index = CorpusIndex(tmp / "index")
    inputs = sorted(tab["inputs"], key=lambda item: len(item[1]))[:6]  # type: ignore[arg-type]
    corpus_size = len(tab["corpus"])  # type: ignore[arg-type]
    for _, text in inputs:
        expected = exhaustive_combinations(corpus_size, text, k, arity, tab["oracle_index"])  # type: ignore[arg-type]
        result = analyze_combinations(index, analyze(index, text, k), arity)
        got = {
            (frozenset((result.candidates[i].start, result.candidates[i].end) for i in c.members), c.support)
            for c in result.head()
        }
        assert got == expected["combinations"]
        assert result.anonymity == expected["anonymity"]
        assert result.combination_linkable == expected["linkable"]


def test_assess_arity_3_fills_the_schema(tab: dict[str, object]) -> None:
    tmp: Path = tab["tmp"]  # type: ignore[assignment]
    out = tmp / "out-a3.jsonl"
    args = ["assess", str(tmp / "index"), str(tmp / "input.jsonl"), "--k", "2", "--arity", "3", "--output", str(out)]
    result = CliRunner().invoke(app, [*args, "--max-combinations", "50"])
    assert result.exit_code == 0, result.output
    records = list(srsly.read_jsonl(out))
    assert all(r["arity"] == 3 and len(r["combinations"]) <= 50 for r in records)
    linkable = [r for r in records if r["combination_linkable"]]
    assert linkable, "the source documents are in the collection: combinations must single them out"
    for record in linkable[:5]:
        first = record["combinations"][0]
        assert 1 <= first["support"] < 2 and len(first["members"]) == 2
        keys = [(len(c["members"]), c["support"]) for c in record["combinations"]]
        assert keys == sorted(keys)


def test_capped_report_keeps_the_exact_head(tab: dict[str, object]) -> None:
    """With 10^5 linkable pairs per document, only the report's head is held: it must be the same."""
    from spacy_delink.linkage.combinations import analyze_combinations
    from spacy_delink.linkage.ngrams import analyze
    from spacy_delink.linkage.index import CorpusIndex

    index = CorpusIndex(tab["tmp"] / "index")  # type: ignore[operator]
    for _, text in sorted(tab["inputs"], key=lambda item: len(item[1]))[-3:]:  # type: ignore[arg-type]
        analysis = analyze(index, text, 2)
        full = analyze_combinations(index, analysis, 2)
        capped = analyze_combinations(index, analysis, 2, max_combinations=100)
        assert full.pair_count > 1000 and len(capped.pairs) < full.pair_count
        assert capped.pair_count == full.pair_count
        assert capped.head(100) == full.head(100)
        assert (capped.anonymity, capped.flagged()) == (full.anonymity, full.flagged())


@pytest.mark.parametrize("arity", [3])
def test_protected_texts_are_found_neither_by_a_search_engine_nor_by_the_rules(tab: dict[str, object], arity: int) -> None:
    """Issues #24 and #33's test: the TAB manual test set protected at k = 2 (every reading, the
    default; arity 1 is protected and checked by the oracle in test_rewriter_tab) — no output is
    singled out by a punctuation-blind, normalizing tantivy search, nor by tantivy reading the
    exact rules, nor by our exact-reading checker, nor (issue 33's "Done when") by an engine
    written without the package: a sloppy phrase around a mask (1-3 words each side, slop <= 16),
    alone or ANDed with one of the text's phrases, or a phrase across a paragraph end.

    Every fourth judgment (32 of 127, long and short alike): the whole set takes over 20
    minutes at arity 3 on two cores, and its figures are measured by the commands in
    docs/evaluate.md (the README's TAB table), not by this test."""
    from spacy_delink.evaluate.adversary import SearchEngineAdversary, engine_unavailable
    from spacy_delink.linkage.attack import detect
    from spacy_delink.linkage.index import CorpusIndex

    if engine_unavailable():
        pytest.skip(engine_unavailable())
    tmp: Path = tab["tmp"]  # type: ignore[assignment]
    chosen = tab["inputs"][::PROTECTED_EVERY]  # type: ignore[index]
    srsly.write_jsonl(tmp / f"chosen-{arity}.jsonl", [{"id": i, "text": t} for i, t in chosen])
    out = tmp / f"protected-{arity}.jsonl"
    result = CliRunner().invoke(
        app, ["protect", str(tmp / "index"), str(tmp / f"chosen-{arity}.jsonl"), "--k", "2", "--arity", str(arity), "--output", str(out)]
    )
    assert result.exit_code == 0, result.output
    records = list(srsly.read_jsonl(out))
    assert len(records) == len(chosen) and all(r["protected"] for r in records)
    index = CorpusIndex(tmp / "index")
    engine = SearchEngineAdversary((t for _, t in tab["corpus"]), index.rules, index.max_n, proximity_slop=None)  # type: ignore[union-attr]
    found = {}
    for record in records:
        verdicts = engine.attack(record["text"], [2], [arity])
        found[record["id"]] = {reading: verdicts.readings[reading][(2, arity)].linkable for reading in engine.readings}
        assert detect(index, record["text"], 2, arity, readings=("exact",)).protected
    assert [doc_id for doc_id, linked in found.items() if any(linked.values())] == []
    adversary = Adversary([text for _, text in tab["corpus"]])  # type: ignore[union-attr]
    number = {doc_id: n for n, (doc_id, _) in enumerate(tab["corpus"])}  # type: ignore[union-attr]
    before = [adversary.attack(text, number[doc_id]) for doc_id, text in tab["inputs"][:20]]  # type: ignore[index]
    assert sum(found.singled_out for found in before) >= 15  # the engine is not blind: it singles out the inputs
    singled_out = {r["id"]: adversary.attack(str(r["text"]), number[str(r["id"])]) for r in records}
    singled_out = {doc_id: found for doc_id, found in singled_out.items() if found.singled_out}
    examples = "; ".join(f"{doc_id}: {found}" for doc_id, found in list(singled_out.items())[:5])
    assert not singled_out, f"{len(singled_out)} of {len(records)} protected texts singled out, e.g. {examples}"
