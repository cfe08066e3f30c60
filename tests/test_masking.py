"""Mask passes: bounded on long repetitive documents, the incremental detection equals a full one,
and each hidden stretch is written as one mask whatever its length (SPEC §9)."""
from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import spacy
import srsly
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import build_index, examples, replay
from spacy_delink.cli import app
from spacy_delink.errors import DelinkError
from spacy_delink.linkage.attack import Detection, detect
from spacy_delink.linkage.strategies import STRATEGIES
from spacy_delink.linkage.tokenize import Tokenizer
from spacy_delink.rewrite.masking import mask_ranges, one_mask_per_stretch
from test_combinations import SAMPLES, phrase_texts
from test_flagging import protect as exact_protect
from spacy_delink.rewrite.loop import RewriteLoop, RewriteResult
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from collections import Counter


def protect(index, text: str, k: int, arity: int, strategy: str, granularity: str = "token", mask: str = "[REDACTED]") -> RewriteResult:  # type: ignore[no-untyped-def]
    """The rewriter's own loop, masks only, under every reading (what ``delink protect`` runs)."""
    loop = RewriteLoop(
        name="test", detect=lambda t, carried=(): detect(index, t, k, arity, flagging=strategy, carried=carried),
        task=make_rewrite_task(), vocab=spacy.blank("en").vocab, llm=None, max_passes=0, mask=mask,
        granularity=granularity, stats=Counter(),
    )
    return loop.run([text])[0]

MASK = "[REDACTED]"


def sample_texts() -> list[str]:
    return [json.loads(line)["text"] for line in SAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_passes_do_not_grow_with_repetitions(tmp_path: Path, strategy: str) -> None:
    """Issue: one pass per repetition when only a key's first occurrence was flagged."""
    corpus = sample_texts()
    index = build_index(tmp_path, corpus)
    unit = "\n\n".join(corpus[:3])
    passes = {}
    for copies in (1, 3, 9):
        result = exact_protect(index, "\n\n".join([unit] * copies), 2, 3, strategy)
        assert result.protected
        passes[copies] = result.passes
    assert passes[1] >= 1
    assert passes[9] == passes[3] == passes[1], passes


def _same(incremental: Detection, full: Detection) -> None:
    assert incremental.text == full.text
    assert (incremental.protected, incremental.anonymity) == (full.protected, full.anonymity)
    assert incremental.readings == full.readings
    for mine, theirs in zip(incremental.parts, full.parts):
        for name, column in theirs.analysis.minimal_arrays().items():  # the gap reading's bridges carry slop and rule too
            assert np.array_equal(mine.analysis.minimal_arrays()[name], column), name
        if theirs.combinations is None:
            assert mine.combinations is None
            continue
        assert mine.combinations is not None
        assert mine.combinations.candidates == theirs.combinations.candidates
        off_diagonal = ~np.eye(len(theirs.combinations.candidates), dtype=bool)  # a candidate's pair with itself is never read
        assert np.array_equal(mine.combinations.pair_matrix[off_diagonal], theirs.combinations.pair_matrix[off_diagonal])
        assert mine.combinations.flagged() == theirs.combinations.flagged()
        assert mine.combinations.pair_count == theirs.combinations.pair_count


@settings(max_examples=examples(30), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpus=st.lists(phrase_texts(1, 6), min_size=2, max_size=7),
    text=phrase_texts(1, 10),
    k=st.integers(2, 4),
    arity=st.sampled_from([1, 2, 3]),
    granularity=st.sampled_from(["token", "span"]),
    strategy=st.sampled_from(STRATEGIES),
)
def test_incremental_detection_equals_a_full_one(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], text: str, k: int, arity: int, granularity: str, strategy: str
) -> None:
    index = build_index(tmp_path_factory.mktemp("m"), corpus, max_n=3)
    detection = detect(index, text, k, arity, flagging=strategy)
    while not detection.protected:
        ranges = mask_ranges(detection, granularity)
        pieces, cursor = [], 0
        for start, end in ranges:
            pieces += [detection.text[cursor:start], "[REDACTED]"]
            cursor = end
        masked = "".join(pieces) + detection.text[cursor:]
        incremental = detection.after_mask(ranges, masked, granularity)
        _same(incremental, detect(index, masked, k, arity, flagging=strategy, carried=detection.known_sources))
        detection = incremental


# -- one mask per hidden stretch -----------------------------------------------------------------

STRETCH_CORPUS = ["alpha beta gamma delta epsilon.", "zeta eta theta."]


def write(text: str, replacements: list[tuple[int, int, str]]) -> str:
    pieces, cursor = [], 0
    for start, end, replacement in replacements:
        assert start >= cursor  # in order, none overlapping
        pieces += [text[cursor:start], replacement]
        cursor = end
    return "".join(pieces) + text[cursor:]


def masks_apart(index: Any, text: str) -> list[str]:
    """The stretches of ``text`` written as more than one mask: the gaps between two masks
    with no token of any reading between them."""
    detection = detect(index, text, 2)
    masks = detection.parts[0].analysis.tokens.masks
    units = detection.units
    return [
        text[a_end:b_start]
        for (_, a_end), (b_start, _) in zip(masks, masks[1:])
        if not np.any((units.starts < b_start) & (units.ends > a_end))
    ]




@pytest.mark.parametrize(
    "text, words, mask, expected",
    [
        ("alpha beta gamma delta", ["beta"], MASK, "alpha [REDACTED] gamma delta"),
        ("alpha beta gamma delta", ["beta", "gamma"], MASK, "alpha [REDACTED] delta"),
        # punctuation and sentence ends between hidden words are swallowed, those around the stretch kept
        ("alpha beta, gamma. delta (epsilon) zeta", ["beta", "gamma", "delta", "epsilon"], MASK, "alpha [REDACTED]) zeta"),
        # a new mask merges with the input's masks beside it, of every pattern
        ("alpha [PERSON] beta gamma", ["beta"], MASK, "alpha [REDACTED] gamma"),
        ("alpha beta <PERSON>, **** [DATE_2] gamma", ["beta"], MASK, "alpha [REDACTED] gamma"),
        # a stretch of the input's masks alone is merged too; a lone one stays as written
        ("[PERSON] [DATE] alpha beta [LOC]", ["alpha"], MASK, "[REDACTED] beta [LOC]"),
        ("[PERSON], [DATE] alpha beta [LOC]", ["beta"], MASK, "[REDACTED] alpha [REDACTED]"),
        ("[PERSON]\n\n[DATE]\nalpha", [], MASK, "[REDACTED]\n\nalpha"),
        # a paragraph end inside a stretch is kept once, after the mask, in place of the spaces that followed
        ("alpha beta\n\ngamma delta", ["beta", "gamma"], MASK, "alpha [REDACTED]\n\ndelta"),
        ("alpha beta.\n\nGAMMA\n  \n\ndelta epsilon", ["beta", "GAMMA", "delta"], MASK, "alpha [REDACTED]\n\nepsilon"),
        ("alpha beta\r\n\r\ngamma delta", ["beta", "gamma"], MASK, "alpha [REDACTED]\r\n\r\ndelta"),
        ("alpha beta\n\ngamma\n\ndelta", ["beta", "gamma"], MASK, "alpha [REDACTED]\n\ndelta"),  # one follows already
        ("alpha beta\n\ngamma\n", ["beta", "gamma"], MASK, "alpha [REDACTED]\n"),  # nothing follows
        ("alpha beta\ngamma delta", ["beta", "gamma"], MASK, "alpha [REDACTED] delta"),  # a line end is no paragraph end
        # a lone combining mark is a token of the exact reading (SPEC §1): the masks stay apart
        ("alpha beta \u0301 gamma delta", ["beta", "gamma"], MASK, "alpha [REDACTED] \u0301 [REDACTED] delta"),
        # the mask text is the configured one, whatever the input's masks look like
        ("alpha [PERSON] beta gamma delta", ["beta", "gamma"], "<MASKED>", "alpha <MASKED> delta"),
        ("alpha beta gamma [X] delta", ["beta", "gamma"], "***", "alpha *** delta"),
    ],
)
def test_a_hidden_stretch_is_written_as_one_mask(tmp_path: Path, text: str, words: list[str], mask: str, expected: str) -> None:
    index = build_index(tmp_path, STRETCH_CORPUS)
    detection = detect(index, text, 2)
    ranges = sorted((m.start(), m.end()) for word in words for m in re.finditer(rf"\b{word}\b", text))
    replacements = one_mask_per_stretch(text, ranges, detection, mask)
    assert write(text, replacements) == expected
    tokens = Tokenizer().tokenize(text)
    for start, end, _ in replacements:  # only the hidden words and what lies between them: no other token is lost
        assert {text[s:e] for s, e in zip(tokens.starts, tokens.ends) if start <= s and e <= end} <= set(words)


def test_an_input_with_masks_side_by_side_comes_out_with_one(tmp_path: Path) -> None:
    """Nothing linkable, but two masks in one stretch: one more pass merges them, no token changes."""
    index = build_index(tmp_path, STRETCH_CORPUS * 2)
    text = "alpha beta [PERSON], <DATE> gamma delta [LOC]"
    result = protect(index, text, 2, 3, "min_cover")
    assert result.text == "alpha beta [REDACTED] gamma delta [LOC]" and result.protected
    assert result.edits == [{"start": 11, "end": 27, "original": "[PERSON], <DATE>", "replacement": MASK, "pass": 1, "by": "mask"}]
    assert result.detection.text == result.text and masks_apart(index, result.text) == []


def test_the_detection_must_be_of_the_text_masked(tmp_path: Path) -> None:
    index = build_index(tmp_path, STRETCH_CORPUS)
    with pytest.raises(DelinkError, match="another text"):
        one_mask_per_stretch("alpha beta", [(6, 10)], detect(index, "alpha gamma", 2), MASK)


@pytest.mark.parametrize("mask", [MASK, "<MASKED>", "***"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_protected_outputs_show_one_mask_per_stretch(tmp_path: Path, strategy: str, mask: str) -> None:
    """The loop on the shipped samples: every stretch one mask, edits that replay, output detected as written."""
    corpus = sample_texts()
    index = build_index(tmp_path, corpus)
    text = "\n\n".join(corpus[:4]).replace("the ", "the [PERSON] ", 3).replace(". ", ". [DATE], [LOC]. ", 2)
    result = protect(index, text, 2, 3, strategy, mask=mask)
    assert result.protected and result.detection.text == result.text
    assert result.masked and mask in result.text
    assert masks_apart(index, result.text) == []
    assert replay(text, result.edits, originals=True) == result.text
    full = detect(index, result.text, 2, 3, flagging=strategy)
    assert full.protected and full.anonymity == result.detection.anonymity
    # what the masks cover, pass by pass: whole stretches, never two edits of one pass side by side
    for _, group in itertools.groupby(result.edits, key=lambda e: e["pass"]):
        spans = sorted((e["start"], e["end"]) for e in group)
        assert all(a_end < b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


FARMS = ["The applicant's farm near the river Mura was sold.", "The applicant's farm was sold in 1994.", "The farm near the river was sold.", "The bank sold a farm."]


def test_the_rewriter_component_writes_its_configured_mask_once_per_stretch(tmp_path: Path) -> None:
    """``mask`` stays configurable; ``doc._.delink_edits`` replay to the Doc's text."""
    build_index(tmp_path, FARMS)
    text = "Her farm near the river Mura was sold."
    for mask in (MASK, "<MASKED>", "***"):
        nlp = spacy.blank("en")
        nlp.add_pipe("delink_rewriter", config={"index": str(tmp_path / "index"), "k": 3, "mask": mask, "keep_source": True})
        doc = nlp(text)
        # the gap reading reads "farm * the * was sold" too: the whole stretch after "farm" goes, as one mask
        assert doc.text == f"Her farm {mask}." and doc._.delink_protected
        assert replay(text, doc._.delink_edits, originals=True) == doc.text


@pytest.mark.parametrize("mask", ["<MASKED>", "[GONE]"])
def test_protect_writes_the_mask_it_is_given_once_per_stretch_and_resumes(tmp_path: Path, mask: str) -> None:
    """``delink protect`` with another mask: one per stretch (the input's own mask merged with new
    neighbours), and a resumed run detects the merged text again and keeps it."""
    build_index(tmp_path, FARMS)
    srsly.write_jsonl(tmp_path / "in.jsonl", [
        {"id": "a", "text": "Her farm near the river Mura was sold."},
        {"id": "b", "text": "Her farm near [PERSON] river Mura was sold."},
    ])
    out = tmp_path / "out.jsonl"
    args = ["protect", str(tmp_path / "index"), str(tmp_path / "in.jsonl"), "--output", str(out), "--k", "3", "--arity", "1",
            "--config", "mask", "--components.delink_rewriter.mask", mask]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    written = out.read_text(encoding="utf-8")
    assert [r["text"] for r in srsly.read_jsonl(out)][0] == f"Her farm {mask}."
    assert all(text.count(mask) == 1 for text in (r["text"] for r in srsly.read_jsonl(out)))
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
    assert "2 already done" in again.output and out.read_text(encoding="utf-8") == written
