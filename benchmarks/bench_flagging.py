"""Flagging strategies on TAB (issue: fewer edits for the same protection). Prints one JSON object.

For each de-identification of the TAB test set (manual, Presidio), k and arity, ``delink
protect``'s rewriter with the Mask model (token granularity) runs every document with each
flagging strategy (``shortest``: the paper's rule; ``min_cover``; ``optimal``: the exact
program per pass, on the ``--optimal-docs`` shortest documents with ``--time-limit``
seconds per pass) and reports:

* ``pct_tokens_changed``: median and p90 of the share of the de-identified text's tokens
  (masks excluded) that protection changes, aligned with difflib;
* ``phrases``: median phrases flagged for rewriting per document, over all passes;
* ``passes``: median and max mask passes; ``seconds``: wall time of the run;
* ``protected``: documents whose output passed the final check (all, or the run fails).

``vs_optimal`` compares ``min_cover`` with ``optimal`` on the documents where every pass of
``optimal`` was proven optimal: the first pass (the same instance for both: the ratio of
their costs) and the whole run (tokens changed). ``redetect`` times protection at arity 3
with the incremental re-detection against a detection from scratch after every mask pass,
document by document in the same run (``--redetect-only``: just that, for the strategies given).

BLAS runs single-threaded: the benchmark machine is shared, and a threaded BLAS then spends
more time waiting than multiplying, which would swamp what is measured.

    python benchmarks/bench_flagging.py [--deidentification manual,presidio] [--k 2,5]
        [--arity 1,2,3] [--strategies shortest,min_cover,optimal] [--optimal-docs 20]
        [--time-limit 10] [--docs N] [--redetect-only] [--readings exact,search] [--out results.json]
"""
from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import difflib  # noqa: E402
import functools  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import spacy  # noqa: E402

from spacy_delink.components import rewriter as rewriter_module  # noqa: E402
from spacy_delink.components.rewriter import DelinkRewriter  # noqa: E402
from spacy_delink.linkage import attack, cover  # noqa: E402
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder, open_index  # noqa: E402
from tab_testbed import TAB_MANUAL_SUPPRESSION, load_tab  # noqa: E402

TAB = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tab"
DEIDENTIFICATIONS = {"manual": TAB_MANUAL_SUPPRESSION, "presidio": "TAB_test_Presidio_Entity.json"}
TARGETS = {"min_cover_fewer_tokens_than_shortest_at_arity_2_3": 0.30, "manual_k2_median_arity2": 44.0,
           "manual_k2_median_arity3": 48.0, "arity1_median": 14.6, "min_cover_over_optimal": 1.2,
           "manual_k2_median_arity1_both_readings": 21.0}


def share_changed(index: CorpusIndex, source: str, output: str) -> float:
    """Percent of the source's tokens that the output does not keep, aligned with difflib."""
    before, _ = index.tokenize(source)
    after, _ = index.tokenize(output)
    old = [source[s:e] for s, e in zip(before.starts.tolist(), before.ends.tolist())]
    new = [output[s:e] for s, e in zip(after.starts.tolist(), after.ends.tolist())]
    kept = sum(block.size for block in difflib.SequenceMatcher(None, old, new, autojunk=False).get_matching_blocks())
    return 100.0 * (len(old) - kept) / max(len(old), 1)


def percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 1) if values else float("nan")


class Recorder:
    """Counts, per document, the phrases each pass's cover flags and whether every ``optimal`` pass was proven."""

    def __init__(self) -> None:
        self.phrases = 0
        self.proven = True
        self.first_cost: int | None = None
        self._choose: Callable[..., cover.Cover] = cover.choose

    def __enter__(self) -> "Recorder":
        def recording(detection: attack.Detection, strategy: str, *args: Any, **kwargs: Any) -> cover.Cover:
            chosen = self._choose(detection, strategy, *args, **kwargs)
            self.phrases += len(np.unique(chosen.intervals, axis=0))
            self.proven &= chosen.proven_optimal or strategy != "optimal"
            self.first_cost = chosen.cost if self.first_cost is None else self.first_cost
            return chosen

        attack.choose = recording  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        attack.choose = self._choose  # type: ignore[assignment]


def run_strategy(
    index_path: Path, index: CorpusIndex, texts: list[str], k: int, arity: int, strategy: str, readings: list[str]
) -> dict[str, Any]:
    nlp = spacy.blank("en")
    config = {"index": str(index_path), "k": k, "arity": arity, "flagging": strategy, "readings": readings}
    rewriter = nlp.add_pipe("delink_rewriter", config=config)
    assert isinstance(rewriter, DelinkRewriter)
    shares, phrases, passes, proven, first = [], [], [], [], []
    rewriter.rewrite_texts(texts[:1])  # compiles the kernels (numba) before anything is timed
    started = time.perf_counter()
    for text in texts:
        with Recorder() as recorder:
            result = rewriter.rewrite_texts([text])[0]
        if not result.protected:
            raise SystemExit(f"{strategy}: an output was not protected (k={k}, arity={arity})")
        shares.append(share_changed(index, text, result.text))
        phrases.append(recorder.phrases)
        passes.append(result.passes)
        proven.append(recorder.proven)
        first.append(recorder.first_cost or 0)
    seconds = time.perf_counter() - started
    return {
        "documents": len(texts),
        "protected": len(texts),
        "pct_tokens_changed": {"median": percentile(shares, 50), "p90": percentile(shares, 90)},
        "phrases": {"median": statistics.median(phrases), "total": int(sum(phrases))},
        "passes": {"median": statistics.median(passes), "max": max(passes)},
        "seconds": round(seconds, 2),
        "_shares": shares,
        "_proven": proven,
        "_first": first,
    }


class StepTimer:
    """Adds up the seconds spent in detections from scratch, incremental re-detections and covers."""

    def __init__(self, rewriter: DelinkRewriter) -> None:
        self.rewriter = rewriter
        self.seconds = {"first_detection": 0.0, "later_detections_from_scratch": 0.0, "after_mask": 0.0, "cover": 0.0}
        self.later_detections = 0

    def _timed(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - started

        return timed

    def __enter__(self) -> "StepTimer":
        """Times one document: its first detection, then every later one from scratch."""
        self._saved = (attack.choose, attack.Detection.after_mask)
        first = self._timed("first_detection", self.rewriter._detect)
        later = self._timed("later_detections_from_scratch", self.rewriter._detect)
        self._first = True

        def counted(text: str) -> attack.Detection:
            if self._first:
                self._first = False
                return first(text)
            self.later_detections += 1
            return later(text)

        self.rewriter._detect = counted  # type: ignore[method-assign]
        attack.choose = self._timed("cover", attack.choose)  # type: ignore[assignment]
        attack.Detection.after_mask = self._timed("after_mask", attack.Detection.after_mask)  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        attack.choose, attack.Detection.after_mask = self._saved  # type: ignore[assignment,method-assign]
        del self.rewriter._detect


def redetect(index_path: Path, texts: list[str], k: int, strategy: str, warm_up: str | None = None) -> dict[str, Any]:
    """Protection at arity 3 with the incremental re-detection, and with a detection from scratch after every
    mask pass (``RewriteLoop.incremental = False``, the loop before it), in the same run.

    The two alternate document by document (so a change in the machine's load hits both)
    and must give the same output. Each side's seconds are split into the first detection,
    later detections from scratch, incremental re-detections and covers, and
    ``ms_per_redetection`` compares one re-detection after a mask pass. ``ceiling`` is the
    speedup were the covers (the same work on both sides) and the incremental steps free:
    both sides detect every input once, and the incremental side detects its output once
    more from scratch (SPEC §7), so it cannot beat (1 + passes) / 2 detections from scratch
    per document. ``warm_up`` (default: the first text) is protected once by each side
    before the clock starts.
    """
    rewriters = {}
    for name in ("full", "incremental"):
        nlp = spacy.blank("en")
        rewriter = nlp.add_pipe("delink_rewriter", config={"index": str(index_path), "k": k, "arity": 3, "flagging": strategy})
        assert isinstance(rewriter, DelinkRewriter)
        rewriter.rewrite_texts([texts[0] if warm_up is None else warm_up])  # compiles the kernels (numba) first
        rewriters[name] = rewriter
    seconds = {"full": 0.0, "incremental": 0.0}
    timers = {name: StepTimer(rewriter) for name, rewriter in rewriters.items()}
    passes = []
    plain_loop = rewriter_module.RewriteLoop
    for text in texts:
        outputs = {}
        for name, rewriter in rewriters.items():
            rewriter_module.RewriteLoop = functools.partial(plain_loop, incremental=name == "incremental")  # type: ignore[misc]
            try:
                with timers[name]:
                    started = time.perf_counter()
                    outputs[name] = rewriter.rewrite_texts([text])[0]
                    seconds[name] += time.perf_counter() - started
            finally:
                rewriter_module.RewriteLoop = plain_loop  # type: ignore[misc]
        full, incremental = outputs["full"], outputs["incremental"]
        if (full.text, full.edits, full.passes) != (incremental.text, incremental.edits, incremental.passes):
            raise SystemExit(f"{strategy}: the incremental and the full loop disagree on a document")
        if not (full.protected and incremental.protected):
            raise SystemExit(f"{strategy}: an output was not protected (k={k}, arity=3)")
        passes.append(full.passes)
    report: dict[str, Any] = {name: round(value, 2) for name, value in seconds.items()}
    report["speedup"] = round(seconds["full"] / seconds["incremental"], 2)
    mine, theirs = timers["incremental"].seconds, timers["full"].seconds
    scratch = {name: t.seconds["first_detection"] + t.seconds["later_detections_from_scratch"] for name, t in timers.items()}
    report["ceiling"] = round(scratch["full"] / scratch["incremental"], 2)
    report["passes"] = {"mean": round(statistics.mean(passes), 2), "max": max(passes), "total": sum(passes)}
    report["steps"] = {
        name: {"later_detections": timer.later_detections}
        | {step: round(value, 2) for step, value in timer.seconds.items()}
        for name, timer in timers.items()
    }
    report["ms_per_redetection"] = {
        "from_scratch": round(1000 * theirs["later_detections_from_scratch"] / max(sum(passes), 1), 1),
        "incremental": round(1000 * mine["after_mask"] / max(sum(passes), 1), 1),
    }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deidentification", default="manual,presidio")
    parser.add_argument("--k", default="2,5")
    parser.add_argument("--arity", default="1,2,3")
    parser.add_argument("--strategies", default="shortest,min_cover,optimal")
    parser.add_argument("--optimal-docs", type=int, default=20, help="optimal runs on this many of the shortest documents")
    parser.add_argument("--time-limit", type=float, default=10.0, help="seconds per pass for optimal")
    parser.add_argument("--docs", type=int, default=None, help="only the first N documents (all 127 by default)")
    parser.add_argument("--redetect-only", action="store_true", help="only the incremental vs full re-detection timing")
    parser.add_argument("--readings", default="exact,search", help="readings of the rules protected under (docs/linkage-rules.md §8)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    cover.OPTIMAL_TIME_LIMIT_S = args.time_limit
    strategies = args.strategies.split(",")
    report: dict[str, Any] = {"targets": TARGETS, "settings": vars(args) | {"out": str(args.out)}, "runs": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = load_tab(TAB)
        index_path = Path(tmp) / "index"
        IndexBuilder(progress=False).build(base.corpus, index_path)
        index = open_index(index_path)
        for name in [] if args.redetect_only else args.deidentification.split(","):
            texts = [text for _, text in load_tab(TAB, DEIDENTIFICATIONS[name]).inputs][: args.docs]
            small = sorted(range(len(texts)), key=lambda i: len(texts[i]))[: args.optimal_docs]
            for k in map(int, args.k.split(",")):
                for arity in map(int, args.arity.split(",")):
                    runs: dict[str, Any] = {}
                    for strategy in strategies:
                        docs = [texts[i] for i in small] if strategy == "optimal" else texts
                        runs[strategy] = run_strategy(index_path, index, docs, k, arity, strategy, args.readings.split(","))
                        print(f"{name} k={k} arity={arity} {strategy}: {runs[strategy]['pct_tokens_changed']} "
                              f"{runs[strategy]['seconds']} s", file=sys.stderr, flush=True)
                    summary: dict[str, Any] = {}
                    if "shortest" in runs and "min_cover" in runs:
                        summary["min_cover_fewer_tokens_than_shortest"] = round(
                            1 - runs["min_cover"]["pct_tokens_changed"]["median"] / max(runs["shortest"]["pct_tokens_changed"]["median"], 1e-9), 3
                        )
                    if "optimal" in runs and "min_cover" in runs:
                        position = {i: n for n, i in enumerate(small)}
                        mine = runs["min_cover"]
                        proven = [n for n, ok in enumerate(runs["optimal"]["_proven"]) if ok]
                        pairs = [(mine["_first"][small[n]], runs["optimal"]["_first"][n]) for n in proven]
                        whole = [(mine["_shares"][small[n]], runs["optimal"]["_shares"][n]) for n in proven]
                        summary["vs_optimal"] = {
                            "documents_proven": len(proven),
                            "of": len(position),
                            "first_pass_cost_ratio_max": round(max((a / b for a, b in pairs if b), default=1.0), 3),
                            "first_pass_cost_ratio_mean": round(statistics.mean([a / b for a, b in pairs if b] or [1.0]), 3),
                            "tokens_changed_ratio_median": round(
                                statistics.median([a / b for a, b in whole if b] or [1.0]), 3
                            ),
                        }
                    for run in runs.values():
                        for hidden in ("_shares", "_proven", "_first"):
                            run.pop(hidden)
                    report["runs"][f"{name}_k{k}_arity{arity}"] = runs | summary
        if 3 in map(int, args.arity.split(",")):
            texts = [text for _, text in base.inputs][: args.docs]
            report["redetect"] = {s: redetect(index_path, texts, 2, s) for s in strategies if s != "optimal"}
    report["seconds"] = round(time.perf_counter() - started, 1)
    write_report(report, args.out)


def write_report(report: dict[str, Any], out: Path | None) -> None:
    """Print ``report`` as indented JSON, and write it to ``out`` too when given."""
    text = json.dumps(report, indent=2)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
