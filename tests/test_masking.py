"""Mask passes: bounded on long repetitive documents, and the incremental detection equals a full one."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spacy_delink.linkage.attack import Detection, detect
from spacy_delink.linkage.cover import STRATEGIES
from spacy_delink.rewrite.masking import mask_ranges
from test_combinations import SAMPLES, build, phrase_texts
from test_flagging import protect


def sample_texts() -> list[str]:
    return [json.loads(line)["text"] for line in SAMPLES.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_passes_do_not_grow_with_repetitions(tmp_path: Path, strategy: str) -> None:
    """Issue: one pass per repetition when only a key's first occurrence was flagged."""
    corpus = sample_texts()
    index = build(tmp_path, corpus)
    unit = "\n\n".join(corpus[:3])
    passes = {}
    for copies in (1, 3, 9):
        result = protect(index, "\n\n".join([unit] * copies), 2, 3, strategy)
        assert result.protected
        passes[copies] = result.passes
    assert passes[1] >= 1
    assert passes[9] == passes[3] == passes[1], passes


def _same(incremental: Detection, full: Detection) -> None:
    assert incremental.text == full.text
    assert (incremental.protected, incremental.anonymity) == (full.protected, full.anonymity)
    assert incremental.readings == full.readings
    for mine, theirs in zip(incremental.parts, full.parts):
        assert mine.analysis.minimal_columns() == theirs.analysis.minimal_columns()
        if theirs.combinations is None:
            assert mine.combinations is None
            continue
        assert mine.combinations is not None
        assert mine.combinations.candidates == theirs.combinations.candidates
        off_diagonal = ~np.eye(len(theirs.combinations.candidates), dtype=bool)  # a candidate's pair with itself is never read
        assert np.array_equal(mine.combinations.pair_matrix[off_diagonal], theirs.combinations.pair_matrix[off_diagonal])
        assert mine.combinations.flagged() == theirs.combinations.flagged()
        assert mine.combinations.pair_count == theirs.combinations.pair_count


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
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
    index = build(tmp_path_factory.mktemp("m"), corpus, max_n=3)
    detection = detect(index, text, k, arity, flagging=strategy)
    while not detection.protected:
        ranges = mask_ranges(detection, granularity)
        pieces, cursor = [], 0
        for start, end in ranges:
            pieces += [detection.text[cursor:start], "[REDACTED]"]
            cursor = end
        masked = "".join(pieces) + detection.text[cursor:]
        incremental = detection.after_mask(ranges, masked, granularity)
        _same(incremental, detect(index, masked, k, arity, flagging=strategy))
        detection = incremental
