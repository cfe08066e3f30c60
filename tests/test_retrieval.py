"""Ranked retrieval (issue 38): BM25 statistics, the defence `protect --retrieval K`, the independent tantivy check."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import srsly

from spacy_delink.errors import DelinkError, IndexFormatError, InputError
from spacy_delink.evaluate.ranked import RankedAdversary
from spacy_delink.linkage.index import CorpusIndex
from spacy_delink.linkage.tokenize import LinkageRules
from spacy_delink.retrieval.bm25 import B, K1, Bm25Statistics, fieldnorm
from spacy_delink.retrieval.defence import RetrievalGuard, check_retrieval_rank, source_rank
from spacy_delink.retrieval.store import open_retrieval_index, retrieval_path, search_tokens

WORDS = [f"w{i}" for i in range(40)]


def _brute_force(documents: list[list[str]], query: list[str], lengths: Callable[[int], int]) -> list[float]:
    """BM25 straight from its definition, word by word."""
    n = len(documents)
    average = sum(len(d) for d in documents) / n
    scores = []
    for document in documents:
        total = 0.0
        for word in query:
            df = sum(word in d for d in documents)
            tf = document.count(word)
            if df and tf:
                idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
                total += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * lengths(len(document)) / average))
        scores.append(total)
    return scores


def _random_collection(seed: int, documents: int = 30) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    return [list(rng.choice(WORDS, size=int(rng.integers(1, 120)), p=_zipf())) for _ in range(documents)]


def _zipf() -> np.ndarray:
    weights = 1.0 / np.arange(1, len(WORDS) + 1)
    return weights / weights.sum()


def _keys(words: list[str]) -> np.ndarray:
    return np.array([int(w[1:]) + 1 for w in words], dtype=np.uint64)


@pytest.mark.parametrize("seed", range(5))
def test_scores_are_bm25_word_for_word(seed: int) -> None:
    documents = _random_collection(seed)
    statistics = Bm25Statistics.from_documents([_keys(d) for d in documents])
    query = documents[0][:25] + ["w39", "w39"]
    exact = statistics.query(_keys(query)).scores()
    assert np.allclose(exact, _brute_force(documents, query, lambda length: length))
    quantized = statistics.query(_keys(query), "fieldnorm").scores()
    table = dict(zip(range(200), fieldnorm(np.arange(200)).tolist()))
    assert np.allclose(quantized, _brute_force(documents, query, lambda length: table[length]))


def test_fieldnorm_is_lucenes_one_byte_length() -> None:
    # Exact below 24; then the length less 24 keeps its 4 most significant bits (SmallFloat.intToByte4, rounded down).
    lengths = np.array([0, 23, 24, 31, 39, 40, 41, 42, 55, 56, 59, 60, 100, 1000])
    assert fieldnorm(lengths).tolist() == [0, 23, 24, 31, 39, 40, 40, 42, 54, 56, 56, 60, 96, 984]


@pytest.mark.parametrize("seed", range(3))
def test_fieldnorm_scores_are_tantivys(seed: int) -> None:
    """On plain lower-case words both tokenize alike: our fieldnorm reading must give tantivy's own scores."""
    documents = _random_collection(seed)
    statistics = Bm25Statistics.from_documents([_keys(d) for d in documents])
    adversary = RankedAdversary((" ".join(d) for d in documents), LinkageRules().mask_patterns)
    query = documents[3][:40]
    ours = statistics.query(_keys(query), "fieldnorm").scores()
    theirs = adversary.scores(" ".join(query))
    assert np.allclose(ours, theirs, rtol=1e-5, atol=1e-5)
    exact = statistics.query(_keys(query)).scores()
    assert not np.allclose(exact, theirs, rtol=1e-5, atol=1e-5)  # the exact lengths are not what an engine scores


def test_rank_counts_ties_for_the_adversary_and_an_unmatched_source_last() -> None:
    assert source_rank(np.array([2.0, 2.0, 1.0]), 0) == 1
    assert source_rank(np.array([2.0, 3.0, 3.0]), 0) == 3
    assert source_rank(np.array([0.0, 1.0, 0.0]), 0) == 3


@pytest.mark.parametrize("rank", [2, 5, 10])
@pytest.mark.parametrize("seed", range(4))
def test_guard_masks_until_the_source_ranks_k_under_both_length_readings(rank: int, seed: int) -> None:
    documents = _random_collection(seed, documents=40)
    statistics = Bm25Statistics.from_documents([_keys(d) for d in documents])
    source = 7
    text = " ".join(documents[source])
    adversary = RankedAdversary((" ".join(d) for d in documents), LinkageRules().mask_patterns)

    def tokenize(text: str) -> tuple[Any, np.ndarray]:
        starts, ends, words = [], [], []
        position = 0
        for word in text.split(" "):
            if word.startswith("w"):
                starts.append(position)
                ends.append(position + len(word))
                words.append(word)
            position += len(word) + 1

        class Found:
            pass

        found = Found()
        found.starts, found.ends = np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)  # type: ignore[attr-defined]
        return found, _keys(words)

    guard = RetrievalGuard(statistics, tokenize, rank)
    assert guard.rank_of(text, source) == 1
    ranges = guard.ranges(text, source)
    assert ranges
    masked = text
    for start, end in sorted(ranges, reverse=True):
        masked = masked[:start] + "[REDACTED]" + masked[end:]
    assert guard.rank_of(masked, source) >= rank
    assert guard.ranges(masked, source) == []
    assert adversary.rank(masked, source).rank >= rank  # tantivy agrees: its lengths are the fieldnorm reading
    # every occurrence of a chosen word goes
    chosen = {text[s:e] for s, e in ranges}
    assert not chosen & set(masked.split(" "))


def test_guard_refuses_when_twins_leave_too_few_documents() -> None:
    documents = [["w1", "w2", "w3"], ["w1", "w2", "w3"], ["w1", "w2", "w3"]]
    statistics = Bm25Statistics.from_documents([_keys(d) for d in documents])

    def tokenize(text: str) -> tuple[Any, np.ndarray]:
        class Found:
            starts = np.array([0, 3, 6])
            ends = np.array([2, 5, 8])

        return Found(), _keys(text.split(" "))

    with pytest.raises(DelinkError, match="score exactly as the source"):
        RetrievalGuard(statistics, tokenize, 3).ranges("w1 w2 w3", 0)


@pytest.mark.parametrize("bad", [1, -1, True, "2"])
def test_retrieval_setting_is_checked(bad: Any) -> None:
    with pytest.raises(InputError, match="retrieval must be 0"):
        check_retrieval_rank(bad)


CORPUS = [
    {"id": f"d{i}", "text": text}
    for i, text in enumerate([
        "The applicant farmed beets near the river Mura and sold them at the market in Lendava.",
        "The applicant sold the farm near the river and moved to the town.",
        "The market in the town sold beets and apples from the farms near the river.",
        "The court held that the applicant had sold the farm lawfully.",
        "The river flooded the farm and the market twice that year.",
        "The applicant complained that the market was closed by the town.",
        "Beets and apples were sold at the market by the farmers of the valley.",
        "The town council closed the market near the river after the flood.",
    ])
]


@pytest.fixture
def ranked_index(tmp_path: Path, delink: Callable[..., Any]) -> Path:
    corpus = tmp_path / "corpus.jsonl"
    srsly.write_jsonl(corpus, CORPUS)
    result = delink("index", corpus, "-o", tmp_path / "index", "--retrieval")
    assert result.returncode == 0, result.stderr
    assert retrieval_path(tmp_path / "index").is_dir()
    return tmp_path / "index"


def test_protect_retrieval_writes_ranked_records_and_resumes(ranked_index: Path, tmp_path: Path, delink: Callable[..., Any]) -> None:
    # Under the gap reading (SPEC §9) the phrase rules alone took the former text, "The applicant farmed beets near the
    # river [LOC] and sold them at the market in [LOC].", to "The [REDACTED] the [REDACTED] the [REDACTED].", where d0
    # already ranks last: the ranked-retrieval step had nothing left to do. This one keeps "The applicant [REDACTED]
    # and [REDACTED]." under the phrase rules, which still ranks d0 2nd, so the step must mask.
    text = "The applicant farmed beets near [LOC] and sold them."
    released = tmp_path / "released.jsonl"
    srsly.write_jsonl(released, [{"id": "d0", "text": text}])
    output = tmp_path / "out.jsonl"
    result = delink("protect", ranked_index, released, "-o", output, "--retrieval", 3)
    assert result.returncode == 0, result.stderr
    (record,) = srsly.read_jsonl(output)
    assert record["retrieval_rank"] >= 3 and record["protected"]
    assert record["protected_under"]["retrieval"]["rank"] == 3
    assert any(edit["by"] == "retrieval" for edit in record["edits"])
    index = CorpusIndex(ranked_index)
    guard = RetrievalGuard(open_retrieval_index(index), lambda text: search_tokens(index, text), 3)
    assert guard.rank_of(record["text"], index.document_number("d0")) == record["retrieval_rank"]
    # A resumed run re-checks the rank: a record edited back to the released text is redone.
    record["text"] = text
    output.write_text(json.dumps(record) + "\n")
    again = delink("protect", ranked_index, released, "-o", output, "--retrieval", 3)
    assert again.returncode == 0, again.stderr
    assert "1 not protected" in again.stderr
    (redone,) = srsly.read_jsonl(output)
    assert redone["retrieval_rank"] >= 3


def test_protect_retrieval_refuses_an_unknown_source_in_one_line(ranked_index: Path, tmp_path: Path, delink: Callable[..., Any]) -> None:
    released = tmp_path / "released.jsonl"
    srsly.write_jsonl(released, [{"id": "elsewhere", "text": "The farm near the river."}])
    result = delink("protect", ranked_index, released, "-o", tmp_path / "out.jsonl", "--retrieval", 2)
    assert result.returncode != 0
    assert len(result.stderr_lines) == 1 and "not an id of index" in result.stderr
    assert not (tmp_path / "out.jsonl").exists()


def test_protect_retrieval_needs_the_statistics(index: Path, tmp_path: Path, delink: Callable[..., Any]) -> None:
    released = tmp_path / "released.jsonl"
    srsly.write_jsonl(released, [{"id": "a", "text": "The farm near the river."}])
    result = delink("protect", index, released, "-o", tmp_path / "out.jsonl", "--retrieval", 2)
    assert result.returncode != 0 and "no retrieval index" in result.stderr and "--retrieval" in result.stderr


def test_edited_statistics_are_refused(ranked_index: Path) -> None:
    index = CorpusIndex(ranked_index)
    folder = retrieval_path(ranked_index)
    tfs = folder / "tfs.npy"
    original = tfs.read_bytes()
    tfs.write_bytes(original[:-4] + b"\x09\x00\x00\x00")
    with pytest.raises(IndexFormatError, match="checksum"):
        open_retrieval_index(index)
    tfs.write_bytes(original)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["documents"] = 9
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError):
        open_retrieval_index(index)


def test_rewriter_component_takes_the_source_from_user_data(ranked_index: Path) -> None:
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("delink_rewriter", config={"index": str(ranked_index), "k": 2, "arity": 1, "retrieval": 2})
    doc = nlp.make_doc("The market in the town sold beets and apples from the farms near the river.")
    doc.user_data["delink.source_id"] = "d2"
    out = nlp.get_pipe("delink_rewriter")(doc)
    assert out._.delink_protected and out.user_data["delink.retrieval_rank"] >= 2
    with pytest.raises(InputError, match="needs each text's source"):
        nlp("The market in the town.")


def test_assess_records_the_rank_of_the_source_and_its_margin(ranked_index: Path, tmp_path: Path, delink: Callable[..., Any]) -> None:
    released = tmp_path / "released.jsonl"
    text = "The applicant farmed beets near the river [LOC] and sold them at the market in [LOC]."
    srsly.write_jsonl(released, [
        {"id": "d0", "text": text},
        {"id": "r1", "text": text, "source": "d0"},
        {"id": "r2", "text": text, "source": "nowhere"},
    ])
    output = tmp_path / "assess.jsonl"
    result = delink("assess", ranked_index, released, "-o", output)
    assert result.returncode == 0, result.stderr
    first, second, _ = srsly.read_jsonl(output)
    assert (first["retrieval_source"], first["retrieval_rank"]) == ("d0", 1) and first["retrieval_margin"] > 0
    assert second["retrieval_rank"] is None  # its id is not in the collection, and no --source-field
    result = delink("assess", ranked_index, released, "-o", output, "--source-field", "source")
    assert result.returncode != 0 and "source" in result.stderr  # the first line has no source field: refused, nothing written
    srsly.write_jsonl(released, [{"id": "r1", "text": text, "source": "d0"}, {"id": "r2", "text": text, "source": "nowhere"}])
    result = delink("assess", ranked_index, released, "-o", output, "--source-field", "source")
    assert result.returncode == 0, result.stderr
    named, unknown = srsly.read_jsonl(output)
    assert named["retrieval_source"] == "d0" and named["retrieval_rank"] == 1
    assert unknown["retrieval_rank"] is None


def test_assess_source_field_needs_the_statistics(index: Path, inputs: Path, tmp_path: Path, delink: Callable[..., Any]) -> None:
    result = delink("assess", index, inputs, "-o", tmp_path / "a.jsonl", "--source-field", "source")
    assert result.returncode != 0 and "--retrieval" in result.stderr


def test_evaluate_ranks_the_source_before_and_after(ranked_index: Path, tmp_path: Path, delink: Callable[..., Any]) -> None:
    released = tmp_path / "released.jsonl"
    srsly.write_jsonl(released, [
        {"id": "d0", "text": "The applicant farmed beets near the river [LOC] and sold them at the market in [LOC]."},
        {"id": "d6", "text": "Beets and apples were sold at the market by the farmers of the [LOC]."},
    ])
    protected = tmp_path / "protected.jsonl"
    assert delink("protect", ranked_index, released, "-o", protected, "--retrieval", 3, "--arity", 1).returncode == 0
    result = delink(
        "evaluate", ranked_index, "--original", tmp_path / "corpus.jsonl", "--deidentified", released, "--protected", protected,
        "--k", 2, "--arity", 1, "--no-semantic", "--output", tmp_path / "evaluation",
    )
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "evaluation" / "metrics.json").read_text())
    ranked = metrics["ranked"]
    assert ranked["available"] and ranked["before"]["top1"] == 1.0
    index = CorpusIndex(ranked_index)
    adversary = RankedAdversary((row["text"] for row in CORPUS), index.rules.mask_patterns)
    records = {r["id"]: r for r in srsly.read_jsonl(protected)}
    for row in metrics["per_document"]:
        expected = adversary.rank(records[row["id"]]["text"], index.document_number(row["id"])).rank
        assert row["ranked"]["after"]["rank"] == expected >= 2
    assert metrics["linkage"][0]["after"]["ranked"]["top1"] == ranked["after"]["top1"] == 0.0
    assert "ranked retrieval (BM25, tantivy)" in result.stderr


@pytest.mark.parametrize("seed", range(3))
def test_window_scores_are_the_best_and_mean_window_matches(seed: int) -> None:
    """semantic.chunks against a loop over every pair of windows (ranks: ties count for the adversary)."""
    from spacy_delink.semantic.chunks import ranks_from_scores, window_scores
    from spacy_delink.semantic.encoder import Windows

    rng = np.random.default_rng(seed)
    queries = Windows(rng.normal(size=(9, 6)), rng.integers(1, 5, 9).astype(float), np.array([0, 0, 1, 1, 1, 2, 2, 2, 2]))
    documents = Windows(rng.normal(size=(11, 6)), np.ones(11), rng.integers(0, 5, 11))
    scores = window_scores(queries, documents, 3, 5)
    q, d = queries.unit_vectors(), documents.unit_vectors()
    for i in range(3):
        for j in range(5):
            pairs = q[queries.owners == i] @ d[documents.owners == j].T
            if pairs.size:
                assert scores["best"][i, j] == pytest.approx(pairs.max(), abs=1e-5)
                assert scores["mean"][i, j] == pytest.approx(pairs.max(axis=1).mean(), abs=1e-5)
            else:  # a document without windows (empty) is never the most similar
                assert scores["best"][i, j] == -1.0
    tied = np.array([[0.5, 0.5, 0.2], [0.1, 0.9, 0.9]], dtype=np.float32)
    ranks, own = ranks_from_scores(tied, np.array([0, 2]))
    assert ranks.tolist() == [1, 1] and own.tolist() == pytest.approx([0.5, 0.9])


def test_document_vectors_are_the_mean_of_every_window() -> None:
    from spacy_delink.semantic.encoder import Windows

    windows = Windows(np.array([[2.0, 0.0], [0.0, 4.0], [3.0, 3.0]]), np.array([2.0, 2.0, 3.0]), np.array([0, 0, 1]))
    vectors = windows.document_vectors(3)
    assert vectors[0] == pytest.approx(np.array([1.0, 2.0]) / np.sqrt(5.0))
    assert vectors[1] == pytest.approx(np.array([1.0, 1.0]) / np.sqrt(2.0))
    assert vectors[2].tolist() == [0.0, 0.0]  # no window: no direction


def test_the_semantic_attack_is_the_reading_that_finds_most_sources() -> None:
    from spacy_delink.semantic.chunks import strongest

    def summary(top1: float, top10: float) -> dict[str, dict[str, float]]:
        return {"before": {"top1": 1.0, "top10": 1.0}, "after": {"top1": top1, "top10": top10}}

    assert strongest({"document": summary(0.1, 0.5), "best": summary(0.3, 0.4), "mean": summary(0.2, 0.9)}, "after") == "best"
    assert strongest({"document": summary(0.3, 0.5), "best": summary(0.3, 0.6), "mean": summary(0.3, 0.6)}, "after") == "best"
    assert strongest({"document": summary(0.3, 0.6), "best": summary(0.3, 0.6), "mean": summary(0.3, 0.6)}, "before") == "document"
