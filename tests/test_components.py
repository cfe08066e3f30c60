"""spaCy conventions of the delink components: order-free scores, config-only settings,
data-only serialization, what a rewritten Doc keeps, factory metadata, scorers, extensions.

Every expected score comes from the SPEC oracle (tests/spec_oracle.py), never from the
code under test.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
import spacy
from spacy.tokens import Doc, DocBin, Span
from spacy.training import Example

import spec_oracle
from spacy_delink.components.extensions import FINDINGS_KEY, TOKEN_RISK_KEY, register
from spacy_delink.errors import DelinkError, InputError
from spacy_delink.linkage.attack import detect
from spacy_delink.linkage.index import KEY_ENV

CORPUS = [
    "The applicant's farm near the river Mura was sold.",
    "The applicant's farm was sold in 1994.",
    "The farm near the river was sold.",
    "alpha beta. gamma delta.",
    "alpha beta. epsilon.",
    "gamma delta. epsilon.",
    "alpha beta. gamma delta. zeta eta.",
]
TEXT = "Her farm near the river Mura was sold."
#: At k=3 no single phrase links, but "alpha beta" + "gamma delta" leave 2 documents.
COMBO_ONLY = "alpha beta. gamma delta."
TEXTS = [TEXT, COMBO_ONLY, "alpha beta. gamma delta. zeta.", "Farm. Sold.", ""]
ROOT = Path(__file__).resolve().parents[1]


def linkable_texts(doc: Doc, key: str = "linkable") -> list[str]:
    return [span.text for span in doc.spans.get(key, [])]


# -- 1. doc scores do not depend on the order of the pipes ------------------------------------


@pytest.mark.parametrize("text", TEXTS)
def test_doc_scores_do_not_depend_on_pipe_order(index_path: Path, text: str) -> None:
    expected = spec_oracle.assess_combinations(CORPUS, text, 3, 8, 3)
    results = []
    for order in (["delink_risk", "delink_combinations"], ["delink_combinations", "delink_risk"]):
        nlp = spacy.blank("en")
        for name in order:
            nlp.add_pipe(name, config={"index": str(index_path), "k": 3})
        doc = nlp(text)
        results.append((doc._.delink_anonymity, doc._.delink_risk, doc._.delink_combination_linkable))
    anonymity = expected["anonymity"]
    assert results[0] == results[1] == (
        anonymity, 0.0 if anonymity is None else 1.0 / anonymity, expected["combination_linkable"]
    )


def test_combination_only_text_is_scored_after_the_risk_pipe(index_path: Path) -> None:
    """The reported bug: combinations first, then risk, ended with anonymity None."""
    assert spec_oracle.assess(CORPUS, COMBO_ONLY, 3, 8)["anonymity"] is None
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_combinations", config={"index": str(index_path), "k": 3})
    nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 3})
    doc = nlp(COMBO_ONLY)
    assert (doc._.delink_anonymity, doc._.delink_risk, doc._.delink_combination_linkable) == (2, 0.5, True)


@pytest.mark.parametrize("text", TEXTS)
def test_doc_scores_are_the_most_severe_finding_of_any_pipe(index_path: Path, text: str) -> None:
    """Pipes at different k: each records its own exact result (under both readings); the Doc takes the smallest support."""

    def smallest(*values: int | None) -> int | None:
        found = [v for v in values if v is not None]
        return min(found) if found else None

    risk_k4 = smallest(*(spec_oracle.assess(CORPUS, text, 4, 8, reading=r)["anonymity"] for r in ("exact", "search")))
    combinations_k2 = smallest(
        *(spec_oracle.assess_combinations(CORPUS, text, 2, 8, 3, r)["anonymity"] for r in ("exact", "search"))
    )
    found = [a for a in (risk_k4, combinations_k2) if a is not None]
    for first_risk in (True, False):
        nlp = spacy.blank("en")
        pipes = [("risk_k4", "delink_risk", 4), ("combos_k2", "delink_combinations", 2)]
        for name, factory, k in pipes if first_risk else pipes[::-1]:
            nlp.add_pipe(factory, name=name, config={"index": str(index_path), "k": k})
        doc = nlp(text)
        assert doc.user_data[FINDINGS_KEY] == {"risk_k4": risk_k4, "combos_k2": combinations_k2}
        assert doc._.delink_anonymity == (min(found) if found else None)


def test_a_pipe_run_again_replaces_its_own_record(index_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 3})
    doc = nlp(TEXT)
    assert doc._.delink_anonymity == 1
    nlp2 = spacy.blank("en")
    nlp2.add_pipe("delink_risk", config={"index": str(index_path), "k": 2})
    again = nlp2(Doc(nlp.vocab).from_bytes(doc.to_bytes()))
    assert again.user_data[FINDINGS_KEY] == {"delink_risk": spec_oracle.assess(CORPUS, TEXT, 2, 8)["anonymity"]}


# -- 2. settings live in the config; serialization writes data only ---------------------------


def risk_pipeline(index_path: Path, **config: Any) -> spacy.Language:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 2, **config})
    return nlp


def test_settings_edited_in_config_cfg_are_used(index_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "pipeline"
    risk_pipeline(index_path).to_disk(out)
    assert not list((out / "delink_risk").iterdir()), "no settings file: settings are in config.cfg"
    config = spacy.util.load_config(out / "config.cfg")
    config["components"]["delink_risk"]["k"] = 3
    config["components"]["delink_risk"]["spans_key"] = "edited"
    config.to_disk(out / "config.cfg")
    loaded = spacy.load(out)
    assert loaded.get_pipe("delink_risk").k == 3
    expected = spec_oracle.assess(CORPUS, TEXT, 3, 8)["ngrams"]
    doc = loaded(TEXT)
    assert [(s.start_char, s.end_char, s._.delink_support) for s in doc.spans["edited"]] == expected


def test_a_pipeline_without_an_index_saves_and_loads(tmp_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk")
    nlp.add_pipe("delink_combinations")
    nlp.add_pipe("delink_rewriter")
    nlp.to_disk(tmp_path / "pipeline")
    loaded = spacy.load(tmp_path / "pipeline")
    assert loaded.pipe_names == ["delink_risk", "delink_combinations", "delink_rewriter"]
    with pytest.raises(InputError, match="has no index"):
        loaded("text")
    assert spacy.blank("en").from_bytes(spacy.blank("en").to_bytes())  # nothing to refuse either
    nlp.from_bytes(nlp.to_bytes())


def test_bytes_round_trip_takes_the_index_from_the_config(index_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 3})
    nlp.add_pipe("delink_combinations", config={"index": str(index_path), "k": 3})
    data = nlp.to_bytes()
    restored = spacy.util.load_model_from_config(nlp.config).from_bytes(data)
    for text in TEXTS:
        a, b = nlp(text), restored(text)
        assert linkable_texts(a) == linkable_texts(b)
        assert (a._.delink_anonymity, a._.delink_combinations) == (b._.delink_anonymity, b._.delink_combinations)


def test_copy_index_travels_with_the_pipeline(index_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index = tmp_path / "own" / "index"
    shutil.copytree(index_path, index)
    shutil.copy(index_path.with_name("index.key"), index.with_name("index.key"))
    nlp = risk_pipeline(index, k=3, copy_index=True)
    nlp.to_disk(tmp_path / "saved")
    moved = tmp_path / "elsewhere" / "pipeline"
    shutil.move(str(tmp_path / "saved"), moved)
    shutil.rmtree(index)  # only the copy is left (the key stays beside the configured index)
    loaded = spacy.load(moved)
    assert loaded.get_pipe("delink_risk").index_path == str(moved / "delink_risk" / "index")
    assert linkable_texts(loaded(TEXT)) == ["near", "river", "Mura"]
    # on another machine the key lives elsewhere: $DELINK_KEY_FILE wins on load
    key = tmp_path / "secrets" / "delink.key"
    key.parent.mkdir()
    shutil.move(str(index.with_name("index.key")), key)
    monkeypatch.setenv(KEY_ENV, str(key))
    assert linkable_texts(spacy.load(moved)(TEXT)) == ["near", "river", "Mura"]
    # saving over the folder it was loaded from keeps the copy intact
    loaded = spacy.load(moved)
    loaded.to_disk(moved)
    assert linkable_texts(spacy.load(moved)(TEXT)) == ["near", "river", "Mura"]
    secrets = re.findall(rb"[0-9a-fA-F]{64}", key.read_bytes())
    assert secrets and not any(s in f.read_bytes() for s in secrets for f in moved.rglob("*") if f.is_file())


def test_key_env_wins_over_a_configured_key_file_on_load(index_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nlp = risk_pipeline(index_path, key_file=str(tmp_path / "gone.key"))
    nlp.to_disk(tmp_path / "pipeline")
    with pytest.raises(DelinkError, match="gone.key"):
        spacy.load(tmp_path / "pipeline")("text")
    monkeypatch.setenv(KEY_ENV, str(index_path.with_name("index.key")))
    assert linkable_texts(spacy.load(tmp_path / "pipeline")(TEXT)) == ["Mura"]


def test_copy_index_refuses_bytes_and_a_missing_copy(index_path: Path, tmp_path: Path) -> None:
    nlp = risk_pipeline(index_path, copy_index=True)
    with pytest.raises(InputError, match="copy_index = true needs nlp.to_disk"):
        nlp.to_bytes()
    nlp.to_disk(tmp_path / "pipeline")
    shutil.rmtree(tmp_path / "pipeline" / "delink_risk" / "index")
    with pytest.raises(InputError, match="holds no copied index"):
        spacy.load(tmp_path / "pipeline")
    with pytest.raises(InputError, match="no index is configured"):
        spacy.blank("en").add_pipe("delink_risk", config={"copy_index": True}).to_disk(tmp_path / "empty")


def test_a_missing_index_path_says_how_to_fix_it(tmp_path: Path) -> None:
    nlp = risk_pipeline(tmp_path / "nowhere")
    with pytest.raises(InputError, match="not found.*working directory.*copy_index"):
        nlp("text")


# -- 3. what a rewritten Doc keeps --------------------------------------------------------------


def test_rewriter_keeps_contexts_user_data_and_document_level_values(index_path: Path) -> None:
    if not Doc.has_extension("test_meta"):
        Doc.set_extension("test_meta", default=None)
    if not Span.has_extension("test_note"):
        Span.set_extension("test_note", default=None)
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 3})
    # the text worked out under the exact and search readings (the gap reading masks more: test_masking)
    nlp.add_pipe("delink_rewriter", config={"index": str(index_path), "k": 3, "readings": ["exact", "search"]})
    doc = nlp.make_doc(TEXT)
    doc.user_data["id"] = "case-7"
    doc._.test_meta = {"court": "ECHR"}
    doc[5:6]._.test_note = "a place"
    doc.ents = [Span(doc, 5, 6, label="GPE")]
    doc.cats = {"relevant": 1.0}
    out = nlp(doc)
    assert out.text == "Her farm [REDACTED] the [REDACTED] was sold."
    assert out.user_data["id"] == "case-7" and out._.test_meta == {"court": "ECHR"} and out.cats == {"relevant": 1.0}
    # bound to the old text: dropped (the old spans, token risks and scores described it)
    assert list(out.ents) == [] and not out.spans and TOKEN_RISK_KEY not in out.user_data
    assert not any(isinstance(key, tuple) and key[2] is not None for key in out.user_data)
    assert out.user_data[FINDINGS_KEY] == {"delink_rewriter": None} and out._.delink_anonymity is None
    assert all(t._.delink_risk == 0.0 for t in out)

    texts = [(TEXT, {"n": 1}), ("Nothing here.", {"n": 2}), (TEXT, {"n": 3})]
    for n_process in (1, 2):
        results = list(nlp.pipe(texts, as_tuples=True, n_process=n_process, batch_size=2))
        assert [context for _, context in results] == [{"n": 1}, {"n": 2}, {"n": 3}]
        assert [d.text for d, _ in results][1] == "Nothing here."


def test_source_text_travels_only_with_keep_source(index_path: Path) -> None:
    for keep_source in (False, True):
        nlp = spacy.blank("en")
        nlp.add_pipe("delink_rewriter", config={"index": str(index_path), "k": 3, "keep_source": keep_source, "readings": ["exact", "search"]})
        doc = nlp(TEXT)
        assert doc._.delink_protected is True
        assert [e["replacement"] for e in doc._.delink_edits] == ["[REDACTED]"] * 2  # near; river Mura (one stretch)
        payload = zlib.decompress(DocBin(store_user_data=True, docs=[doc]).to_bytes())
        if keep_source:
            assert doc._.delink_source == TEXT and [e["original"] for e in doc._.delink_edits] == ["near", "river Mura"]
            assert b"Mura" in payload
        else:
            assert doc._.delink_source is None and all("original" not in e for e in doc._.delink_edits)
            assert b"Mura" not in payload and b"river" not in payload, "the linkable original must not travel"


def test_protected_only_when_checked_under_the_components_own_settings(index_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nlp = spacy.blank("en")
    rewriter = nlp.add_pipe("delink_rewriter", config={"index": str(index_path), "k": 3})
    assert nlp(TEXT)._.delink_protected is True
    # a loop that checked at k=2 has not checked the component's k=3: no protection claim
    monkeypatch.setattr(rewriter, "_detect", lambda text, carried=(): detect(rewriter.index, text, 2, carried=carried))
    doc = nlp(TEXT)
    assert spec_oracle.assess(CORPUS, doc.text, 3, 8)["ngrams"], "still linkable at k=3"
    assert doc._.delink_protected is False


def test_a_tokenizer_that_changes_the_text_is_refused(index_path: Path) -> None:
    nlp = spacy.blank("en")
    # lowercasing turns the mask "[REDACTED]" into the words of "[redacted]", which join n-grams again
    nlp.tokenizer = lambda text: Doc(nlp.vocab, words=text.lower().split())
    nlp.add_pipe("delink_rewriter", config={"index": str(index_path), "k": 3})
    with pytest.raises(InputError, match="tokenizer changed the text"):
        nlp(TEXT)


def test_pipes_after_the_rewriter_score_the_new_text(index_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_rewriter", config={"index": str(index_path), "k": 3})
    nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 4})
    doc = nlp(TEXT)
    expected = spec_oracle.assess(CORPUS, doc.text, 4, 8)
    assert expected["anonymity"] is not None, "the k=4 pipe must find something for this test to bite"
    assert doc._.delink_protected is True and doc._.delink_anonymity == expected["anonymity"]
    assert [(s.start_char, s.end_char, s._.delink_support) for s in doc.spans["linkable"]] == expected["ngrams"]


# -- 4. factory metadata and scorers -------------------------------------------------------------


def test_factories_declare_what_they_assign() -> None:
    nlp = spacy.blank("en")
    for factory in ("delink_risk", "delink_combinations", "delink_rewriter"):
        nlp.add_pipe(factory)
    nlp.add_pipe("delink_redactor", config={"method": "random"})
    summary = nlp.analyze_pipes()["summary"]
    assert "token._.delink_risk" in summary["delink_risk"]["assigns"]
    assert "doc._.delink_combination_linkable" in summary["delink_combinations"]["assigns"]
    assert "doc._.delink_protected" in summary["delink_rewriter"]["assigns"]
    assert summary["delink_rewriter"]["retokenizes"] is True
    assert "token._.delink_redaction_score" in summary["delink_redactor"]["assigns"]
    for name in ("delink_risk", "delink_combinations", "delink_rewriter"):
        assert summary[name]["scores"] == ["delink_linkable_share", "delink_mean_risk", "delink_protected_share"]


def test_scorer_reports_shares_of_linkable_and_protected_docs(index_path: Path) -> None:
    texts = [TEXT, "Farm. Sold.", COMBO_ONLY, "alpha beta. gamma delta. zeta."]
    expected = [spec_oracle.assess_combinations(CORPUS, t, 3, 8, 3)["anonymity"] for t in texts]
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_combinations", config={"index": str(index_path), "k": 3})
    scores = nlp.evaluate([Example(nlp.make_doc(t), nlp.make_doc(t)) for t in texts])
    assert scores["delink_linkable_share"] == sum(a is not None for a in expected) / 4
    assert scores["delink_mean_risk"] == pytest.approx(sum(1 / a for a in expected if a) / 4)
    assert scores["delink_protected_share"] is None
    # nlp.evaluate cannot align a rewritten text with its reference (spaCy's E949): score the pipe itself
    rewriter = nlp.add_pipe("delink_rewriter", config={"index": str(index_path), "k": 3, "arity": 3})
    scores = rewriter.score([Example(doc, doc) for doc in nlp.pipe(texts)])
    assert (scores["delink_linkable_share"], scores["delink_protected_share"]) == (0.0, 1.0)


def test_a_saved_pipeline_loads_in_a_fresh_process(index_path: Path, tmp_path: Path) -> None:
    """Factories and the scorer resolve through entry points, with nothing imported first."""
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_combinations", config={"index": str(index_path), "k": 3})
    nlp.add_pipe("delink_rewriter", config={"index": str(index_path), "k": 3, "arity": 3})
    nlp.to_disk(tmp_path / "pipeline")
    script = (
        "import spacy, sys; nlp = spacy.load(sys.argv[1]); doc = nlp(sys.argv[2]);"
        "print(doc._.delink_protected, nlp.get_pipe('delink_rewriter').scorer.__name__)"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "pipeline"), TEXT], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.split() == ["True", "linkage_score"]
    # The scorer alone, as a config that names it resolves it (no factory imports the package first).
    alone = run_python("import spacy; print(spacy.registry.scorers.get('spacy_delink.linkage_scorer.v1')().__name__)")
    assert alone.returncode == 0 and alone.stdout.strip() == "linkage_score", alone.stderr


# -- 5. extension attributes ---------------------------------------------------------------------


def test_register_refuses_a_conflicting_definition() -> None:
    name = "delink_test_conflict"
    Doc.set_extension(name, default=1)
    try:
        register(Doc, name, default=1)  # the same definition: accepted
        with pytest.raises(DelinkError, match=f"Doc._.{name} is already registered"):
            register(Doc, name, default=2)
        with pytest.raises(DelinkError, match="already registered"):
            register(Doc, name, getter=len)
    finally:
        Doc.remove_extension(name)
    Span.set_extension(name, getter=len)
    try:
        with pytest.raises(DelinkError, match=f"Span._.{name}"):
            register(Span, name, getter=str)
    finally:
        Span.remove_extension(name)


def run_python(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_another_packages_attribute_is_never_overwritten() -> None:
    completed = run_python(
        "import spacy; from spacy.tokens import Doc;"
        "Doc.set_extension('delink_anonymity', default=-1);"
        "spacy.blank('en').add_pipe('delink_risk')"
    )
    assert completed.returncode != 0
    assert "Doc._.delink_anonymity is already registered by other code" in completed.stderr
    assert "DelinkError" in completed.stderr


def test_reimport_and_reregistration_are_idempotent(index_path: Path) -> None:
    completed = run_python(
        "import importlib, spacy;"
        "import spacy_delink.components.extensions as ext, spacy_delink.components.risk as risk;"
        "import spacy_delink.redaction.component as red;"
        "ext.register_extensions(); importlib.reload(ext); ext.register_extensions();"
        "importlib.reload(red); importlib.reload(risk);"
        "nlp = spacy.blank('en');"
        f"nlp.add_pipe('delink_risk', config={{'index': {str(index_path)!r}, 'k': 3}});"
        f"print([t._.delink_risk for t in nlp({TEXT!r})][5])"
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == "1.0"
