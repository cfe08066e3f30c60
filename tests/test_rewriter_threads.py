"""Documents detected and masked on several threads (``threads``): the same outputs, errors and counts as one."""
from __future__ import annotations

import os
import random
import threading
from collections import Counter
from pathlib import Path

import pytest
import spacy
import srsly

from spacy_delink.components.rewriter import resolve_threads
from spacy_delink.errors import DelinkError, InputError
from spacy_delink.linkage.attack import detect
from spacy_delink.linkage.index import CorpusIndex
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from spacy_delink.rewrite.loop import RewriteLoop
from test_incremental_detection import MASK, random_setting


def loop(index: CorpusIndex, k: int, arity: int, threads: int, seen: set[str] | None = None) -> RewriteLoop:
    def detect_here(text: str, carried=()):  # type: ignore[no-untyped-def]
        if seen is not None:
            seen.add(threading.current_thread().name)
        return detect(index, text, k, arity, carried=carried)

    return RewriteLoop(
        name="test", detect=detect_here, task=make_rewrite_task(), vocab=spacy.blank("en").vocab, llm=None,
        max_passes=0, mask=MASK, granularity="token", stats=Counter(), threads=threads,
    )


@pytest.mark.parametrize("seed", range(8))
def test_threads_give_the_outputs_of_one(tmp_path: Path, seed: int) -> None:
    corpus, index, texts, k, arity, _ = random_setting(seed, tmp_path)
    rng = random.Random(seed)
    texts = texts + [rng.choice(texts) + " " + t for t in texts]  # more documents than threads, of unequal lengths
    one = loop(index, k, arity, threads=1)
    seen: set[str] = set()
    several = loop(index, k, arity, threads=3, seen=seen)
    alone, together = one.run(texts), several.run(texts)
    assert [(r.source, r.text, r.passes, r.edits, r.protected) for r in alone] == [
        (r.source, r.text, r.passes, r.edits, r.protected) for r in together
    ]
    assert all(r.protected and r.detection.text == r.text for r in together)
    assert one.stats == several.stats
    assert any(name.startswith("delink-protect") for name in seen)  # the detections did run on the pool


def test_an_error_on_a_thread_is_raised_by_the_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus, index, texts, k, arity, _ = random_setting(0, tmp_path)
    several = loop(index, k, arity, threads=2)
    failing = texts[1]

    def verify(result) -> None:  # type: ignore[no-untyped-def]
        if result.source == failing:
            raise DelinkError("test: output failed the protection check")

    monkeypatch.setattr(several, "_verify", verify)
    with pytest.raises(DelinkError, match="failed the protection check"):
        several.run(texts)
    assert several.stats["documents"] == 0  # nothing of the batch is counted as done


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_threads_must_be_a_count(bad: object) -> None:
    with pytest.raises(InputError, match=r"threads must be an integer >= 0 \(0 = one per CPU\)"):
        resolve_threads(bad)  # type: ignore[arg-type]


def test_zero_threads_is_one_per_usable_cpu() -> None:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert resolve_threads(0) == usable
    assert resolve_threads(3) == 3


def test_protect_threads_option(tmp_path: Path, delink) -> None:  # type: ignore[no-untyped-def]
    """`delink protect --threads N`: the same records as one thread; a bad count is one error line."""
    corpus, _, texts, k, arity, _ = random_setting(3, tmp_path)
    corpus_path, inputs = tmp_path / "corpus.jsonl", tmp_path / "in.jsonl"
    srsly.write_jsonl(corpus_path, [{"id": i, "text": text} for i, text in enumerate(corpus)])
    srsly.write_jsonl(inputs, [{"id": i, "text": text} for i, text in enumerate(texts * 3)])
    assert delink("index", corpus_path, "-o", tmp_path / "cli-index").returncode == 0
    outputs = []
    for threads in ("1", "3"):
        out = tmp_path / f"out{threads}.jsonl"
        done = delink("protect", tmp_path / "cli-index", inputs, "-o", out, "--k", k, "--arity", arity, "--threads", threads)
        assert done.returncode == 0, done.stderr
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]
    bad = delink("protect", tmp_path / "cli-index", inputs, "-o", tmp_path / "bad.jsonl", "--threads", "-2")
    assert bad.returncode != 0 and bad.stderr_lines == ["error: threads must be an integer >= 0 (0 = one per CPU), got -2"]
    assert not (tmp_path / "bad.jsonl").exists()
