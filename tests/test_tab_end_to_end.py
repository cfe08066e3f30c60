"""End to end on the Text Anonymization Benchmark (../shared/data/tab), against the SPEC oracle.

Corpus: the 127 ECHR test originals plus, as distractors, the public texts whose ids are
not among them. Inputs: the originals with the manual suppression spans replaced by
``[REDACTED]``.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import srsly
from typer.testing import CliRunner

import spec_oracle
from conftest import shared_path
from spacy_delink.cli import app

pytestmark = pytest.mark.slow


def redact(text: str, spans: list[list[object]]) -> str:
    merged: list[list[int]] = []
    for start, end in sorted((int(s), int(e)) for s, e, *_ in spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        text = text[:start] + "[REDACTED]" + text[end:]
    return text


@pytest.fixture(scope="module")
def tab(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    originals = json.loads(shared_path("tab", "TAB_test_BK=Original.json").read_text())
    public = json.loads(shared_path("tab", "TAB_all_BK=Public10%.json").read_text())
    suppression = json.loads(shared_path("tab", "TAB_test_Manual_Supression.json").read_text())
    corpus = list(originals.items()) + [(i, t) for i, t in public.items() if i not in originals]
    inputs = [(doc_id, redact(text, suppression.get(doc_id, []))) for doc_id, text in originals.items()]
    tmp = tmp_path_factory.mktemp("tab")
    srsly.write_jsonl(tmp / "corpus.jsonl", [{"id": i, "text": t} for i, t in corpus])
    srsly.write_jsonl(tmp / "input.jsonl", [{"id": i, "text": t} for i, t in inputs])
    result = CliRunner().invoke(app, ["index", str(tmp / "corpus.jsonl"), "--output", str(tmp / "index")])
    assert result.exit_code == 0, result.output
    wanted = {o[2] for _, text in inputs for o in spec_oracle.occurrences(text, 8)}
    oracle_index = spec_oracle.postings([t for _, t in corpus], 8, only=wanted)
    return {"tmp": tmp, "corpus": corpus, "inputs": inputs, "oracle_index": oracle_index}


@pytest.mark.parametrize("k", [2, 5])
def test_assess_agrees_with_the_spec(tab: dict[str, object], k: int) -> None:
    tmp: Path = tab["tmp"]  # type: ignore[assignment]
    out = tmp / f"out-{k}.jsonl"
    result = CliRunner().invoke(
        app, ["assess", str(tmp / "index"), str(tmp / "input.jsonl"), "--k", str(k), "--output", str(out), "--html", str(tmp / "r.html")]
    )
    assert result.exit_code == 0, result.output
    records = list(srsly.read_jsonl(out))
    inputs = tab["inputs"]  # type: ignore[assignment]
    assert [r["id"] for r in records] == [doc_id for doc_id, _ in inputs]
    corpus_texts = [t for _, t in tab["corpus"]]  # type: ignore[union-attr]
    linkable_docs = 0
    for record, (_, text) in zip(records, inputs):
        expected = spec_oracle.assess(corpus_texts, text, k, 8, index=tab["oracle_index"])  # type: ignore[arg-type]
        assert [(g["start"], g["end"], g["support"]) for g in record["ngrams"]] == expected["ngrams"]
        assert all(g["text"] == text[g["start"] : g["end"]] for g in record["ngrams"])
        assert record["anonymity"] == expected["anonymity"]
        assert record["linkage_risk"] == (0.0 if expected["anonymity"] is None else 1 / expected["anonymity"])
        assert set(record) == {"id", "k", "arity", "linkage_risk", "anonymity", "ngrams", "combinations", "combination_linkable"}
        linkable_docs += record["anonymity"] is not None
    # The manual de-identification leaves linkable phrases in most documents (the paper's point).
    assert linkable_docs > 100
    html = (tmp / "r.html").read_text()
    assert html.count("df=1") >= sum(g["support"] == 1 for r in records[:3] for g in r["ngrams"]) > 0
