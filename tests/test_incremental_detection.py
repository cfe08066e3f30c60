"""The incremental re-detection (``Detection.after_mask``) equals a detection from scratch.

Random small corpora (one per seed) and random texts over a shared vocabulary, so that
texts hold linkable n-grams, linkable pairs and triples: after random whole-token masks,
after the masks a cover chooses, and after edits the incremental path cannot take (a range
that cuts a token, a mask string that yields tokens), every part of the detection — the
lookups, the candidates, the pair supports, every linkable pair and triple, the scores and
each strategy's cover — is the one a full detection computes. The rewrite loop gives the
same output either way, and that output is protected by the brute-force oracle (SPEC §7).
"""
from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import spacy

from conftest import assert_protected, build_index
from spacy_delink.linkage.attack import Detection, ReadingDetection, detect
from spacy_delink.linkage.strategies import STRATEGIES
from spacy_delink.linkage.index import CorpusIndex
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from spacy_delink.rewrite.loop import RewriteLoop
from spacy_delink.rewrite.masking import GRANULARITIES, mask_ranges, one_mask_per_stretch

MASK = "[REDACTED]"
WORDS = ["sava", "farm", "mill", "river", "1994", "the", "old", "near", "judge", "court", "bled", "x1"]
SEEDS = range(40)


def random_setting(seed: int, tmp_path: Path) -> tuple[list[str], CorpusIndex, list[str], int, int, int]:
    """A corpus, its index, texts, k, arity and max_n, drawn from ``seed``.

    Documents are a few phrases of one to four words over a small vocabulary, so phrases
    recur across documents: the texts, made of phrases of several documents, hold linkable
    n-grams, pairs and triples, and masking a token of a phrase leaves pieces that are
    common elsewhere (new candidates, the case the incremental path must get right).
    """
    rng = random.Random(seed)
    phrases = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(8, 14))]

    def text(low: int, high: int) -> str:
        chosen = [rng.choice(phrases) for _ in range(rng.randint(low, high))]
        return "".join(p + rng.choice([". ", ". ", ", ", " ", "\n\n"]) for p in chosen).strip()

    corpus = [text(2, 6) for _ in range(rng.randint(6, 12))]
    texts = [text(6, 16) for _ in range(2)] + [f"{rng.choice(corpus)}. {text(2, 6)}. {rng.choice(corpus)}"]
    max_n = rng.choice([3, 4])
    return corpus, build_index(tmp_path, corpus, max_n=max_n), texts, rng.randint(2, 4), rng.randint(1, 3), max_n


def masked(text: str, ranges: list[tuple[int, int]], mask: str = MASK) -> str:
    pieces, cursor = [], 0
    for start, end in sorted(ranges):
        pieces += [text[cursor:start], mask]
        cursor = end
    return "".join(pieces) + text[cursor:]


def same_detection(incremental: Detection, full: Detection) -> None:
    """Every part of the two detections that anything reads is equal, under every reading."""
    assert incremental.text == full.text
    assert (incremental.protected, incremental.anonymity, incremental.combination_linkable) == (
        full.protected, full.anonymity, full.combination_linkable
    )
    assert incremental.readings == full.readings
    for mine_part, full_part in zip(incremental.parts, full.parts):
        same_reading(mine_part, full_part)


def same_reading(incremental: ReadingDetection, full: ReadingDetection) -> None:
    """One reading's lookups, candidates, pair supports, combinations and scores are equal."""
    assert (incremental.protected, incremental.anonymity) == (full.protected, full.anonymity)
    mine, theirs = incremental.analysis, full.analysis
    for name in ("starts", "ends", "segment_start"):
        assert np.array_equal(getattr(mine.tokens, name), getattr(theirs.tokens, name))
    assert len(mine.levels) == len(theirs.levels)
    for a, b in zip(mine.levels, theirs.levels):
        for name in ("positions", "keys", "rows", "df"):
            assert np.array_equal(getattr(a, name), getattr(b, name)), (a.n, name)
    for name, column in theirs.minimal_arrays().items():  # the gap reading's bridges carry slop and rule too
        assert np.array_equal(mine.minimal_arrays()[name], column), name
    for name, column in theirs.maximal_columns().items():
        assert np.array_equal(mine.maximal_columns()[name], column)
    if full.combinations is None:
        assert incremental.combinations is None
        return
    ours, exact = incremental.combinations, full.combinations
    assert ours is not None
    assert ours.candidates == exact.candidates
    assert np.array_equal(ours.keys, exact.keys)
    off_diagonal = ~np.eye(len(exact.candidates), dtype=bool)  # a candidate's pair with itself is never read
    assert np.array_equal(ours.pair_matrix[off_diagonal], exact.pair_matrix[off_diagonal])
    assert ours.pair_count == exact.pair_count
    for a, b in zip(ours.all_pairs(), exact.all_pairs()):
        assert np.array_equal(a, b)
    assert np.array_equal(ours.pairs, exact.pairs) and np.array_equal(ours.pair_support, exact.pair_support)
    assert ours.triples_complete == exact.triples_complete
    assert np.array_equal(ours.triples, exact.triples) and np.array_equal(ours.triple_support, exact.triple_support)
    assert ours.flagged() == exact.flagged()
    everyone = np.ones(len(exact.candidates), dtype=bool)
    # The gap reading's own triples always hold a bridge (its ``anchored``); the others' are all of them.
    through = exact.anchored if full.reading == "gap" else np.ones_like(everyone)
    for a, b in zip(ours.triples_among(everyone), exact.triples_among(everyone, through)):
        assert np.array_equal(a, b)


def same_covers(incremental: Detection, full: Detection) -> None:
    for granularity in GRANULARITIES:
        mine, theirs = incremental.cover(granularity), full.cover(granularity)
        assert (mine.removed, mine.cost) == (theirs.removed, theirs.cost)
        assert np.array_equal(mine.intervals, theirs.intervals)


def random_token_ranges(rng: random.Random, detection: Detection) -> list[tuple[int, int]]:
    """A few random runs of whole tokens (of every reading: units), as character ranges."""
    tokens = detection.units
    count = len(tokens)
    if not count:
        return []
    ranges = set()
    for _ in range(rng.randint(1, 3)):
        first = rng.randrange(count)
        last = min(count - 1, first + rng.choice([0, 0, 1, 2]))
        ranges.add((int(tokens.starts[first]), int(tokens.ends[last])))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


@pytest.mark.parametrize("seed", SEEDS)
def test_random_whole_token_masks(tmp_path: Path, seed: int) -> None:
    """Any whole-token masks, several rounds: the incremental detection is the full one."""
    rng = random.Random(seed)
    _, index, texts, k, arity, _ = random_setting(seed, tmp_path)
    for text in texts:
        detection = detect(index, text, k, arity, flagging=rng.choice(STRATEGIES))
        for _ in range(3):
            ranges = random_token_ranges(rng, detection)
            if not ranges:
                break
            after = masked(detection.text, ranges)
            incremental = detection.after_mask(ranges, after, granularity=None)
            # a masked text reads the sources found on its earlier version too (SPEC §9, docs/linkage-rules.md)
            full = detect(index, after, k, arity, flagging=detection.flagging, carried=detection.known_sources)
            same_detection(incremental, full)
            same_covers(incremental, full)
            detection = incremental


@pytest.mark.parametrize("seed", SEEDS)
def test_cover_masks_until_protected(tmp_path: Path, seed: int) -> None:
    """The masks the loop applies (each strategy's cover, both cost models): every pass equals a full detection.

    This is where the incremental path skips the triples of the candidates the cover kept.
    """
    rng = random.Random(seed)
    _, index, texts, k, arity, _ = random_setting(seed, tmp_path)
    arity = max(arity, 2)  # combinations are what the cover's knowledge is about
    strategy, granularity = STRATEGIES[seed % len(STRATEGIES)], rng.choice(GRANULARITIES)
    for text in texts:
        detection = detect(index, text, k, arity, flagging=strategy)
        while not detection.protected:
            ranges = mask_ranges(detection, granularity)
            after = masked(detection.text, ranges)
            incremental = detection.after_mask(ranges, after, granularity)
            full = detect(index, after, k, arity, flagging=strategy, carried=detection.known_sources)
            same_detection(incremental, full)
            same_covers(incremental, full)
            detection = incremental


@pytest.mark.parametrize("seed", range(24))
def test_one_mask_per_stretch_keeps_the_incremental_path(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Masks written one per hidden stretch (merged with each other and with the input's masks,
    across punctuation and paragraph ends): the incremental detection equals a full one, pass
    after pass."""
    rng = random.Random(seed)
    _, index, texts, k, arity, _ = random_setting(seed, tmp_path)
    arity = max(arity, 2)
    strategy, granularity = STRATEGIES[seed % len(STRATEGIES)], rng.choice(GRANULARITIES)
    mask = rng.choice([MASK, "<MASKED>", "***"])
    for text in texts:
        words = text.split(" ")
        for _ in range(rng.randint(1, 4)):  # the input's own masks, some beside the words the cover masks
            words.insert(rng.randrange(len(words) + 1), rng.choice(["[PERSON]", "<DATE>", "[LOC_1]."]))
        detection = detect(index, " ".join(words), k, arity, flagging=strategy)
        while not detection.protected:
            ranges = mask_ranges(detection, granularity)
            written = one_mask_per_stretch(detection.text, ranges, detection, mask)
            after = masked_as(detection.text, written)
            incremental = detection.after_mask([(s, e) for s, e, _ in written], after, granularity)
            full = detect(index, after, k, arity, flagging=strategy, carried=detection.known_sources)
            same_detection(incremental, full)
            same_covers(incremental, full)
            detection = incremental


def masked_as(text: str, replacements: list[tuple[int, int, str]]) -> str:
    pieces, cursor = [], 0
    for start, end, replacement in replacements:
        pieces += [text[cursor:start], replacement]
        cursor = end
    return "".join(pieces) + text[cursor:]


@pytest.mark.parametrize("seed", range(12))
def test_edits_the_incremental_path_cannot_take(tmp_path: Path, seed: int) -> None:
    """A range that cuts a token, or a mask string that is read as tokens: detected from scratch, still equal."""
    rng = random.Random(seed)
    _, index, texts, k, arity, _ = random_setting(seed, tmp_path)
    for text in texts:
        detection = detect(index, text, k, arity)
        tokens = detection.units
        long_tokens = [i for i in range(len(tokens)) if tokens.ends[i] - tokens.starts[i] >= 2]
        if not long_tokens:
            continue
        i = rng.choice(long_tokens)
        cut = [(int(tokens.starts[i]), int(tokens.ends[i]) - 1)]  # leaves the token's last character
        whole = [(int(tokens.starts[i]), int(tokens.ends[i]))]
        for ranges, mask in ((cut, MASK), (whole, "masked out")):
            after = masked(text, ranges, mask)
            same_detection(detection.after_mask(ranges, after, granularity=None), detect(index, after, k, arity, carried=detection.known_sources))


def loop(index: CorpusIndex, k: int, arity: int, strategy: str, granularity: str, incremental: bool) -> RewriteLoop:
    return RewriteLoop(
        name="test", detect=lambda t, carried=(): detect(index, t, k, arity, flagging=strategy, carried=carried), task=make_rewrite_task(),
        vocab=spacy.blank("en").vocab, llm=None, max_passes=0, mask=MASK, granularity=granularity, stats=Counter(),
        incremental=incremental,
    )


@pytest.mark.parametrize("seed", range(24))
def test_incremental_and_full_loops_agree(tmp_path: Path, seed: int) -> None:
    """The same masks, passes and output either way; every output protected by the oracle."""
    rng = random.Random(seed)
    corpus, index, texts, k, arity, max_n = random_setting(seed, tmp_path)
    strategy, granularity = STRATEGIES[seed % len(STRATEGIES)], rng.choice(GRANULARITIES)
    fast = loop(index, k, arity, strategy, granularity, incremental=True).run(texts)
    slow = loop(index, k, arity, strategy, granularity, incremental=False).run(texts)
    for mine, theirs in zip(fast, slow):
        assert (mine.text, mine.passes, mine.edits) == (theirs.text, theirs.passes, theirs.edits)
        assert mine.protected and mine.detection.text == mine.text
        assert_protected(corpus, mine.text, k, arity, max_n=max_n, index=index)  # every reading the loop checked


@pytest.mark.parametrize("seed", range(16))
def test_bridge_decisions_kept_across_passes_are_a_fresh_index_s(tmp_path: Path, seed: int) -> None:
    """The gap reading keeps each bridge's decision per opened index (``GapLookup.decisions``):
    every pass of a masking loop, and every text after the first, reads what an index opened
    afresh for that one detection reads."""
    rng = random.Random(seed)
    _, index, texts, k, arity, _ = random_setting(seed, tmp_path)
    strategy, granularity = STRATEGIES[seed % len(STRATEGIES)], rng.choice(GRANULARITIES)
    kept = 0
    for text in texts:
        detection = detect(index, text, k, arity, flagging=strategy)
        while True:
            fresh = detect(CorpusIndex(tmp_path / "index"), detection.text, k, arity, flagging=strategy, carried=detection.known_sources)
            same_detection(detection, fresh)
            if detection.protected:
                break
            detection = detect(index, masked(detection.text, mask_ranges(detection, granularity)), k, arity, flagging=strategy,
                               carried=detection.known_sources)
        kept = max(kept, len(index.__dict__["_gap_lookup"].decisions) if "_gap_lookup" in index.__dict__ else 0)
    assert kept > 0  # the masks made bridges, and their decisions were kept
