"""Benchmark of the combination detector (issue: arity <= 3, exact and fast). Prints one JSON object.

Per de-identified TAB document (originals with the manual suppression spans replaced by
``[REDACTED]``), it times ``analyze`` + ``analyze_combinations`` at the given arity and k:

* as ``delink assess`` runs it (report capped at ``--max-combinations``, no flags), and
* as the rewriter runs it with the paper's ``shortest`` flags (``CombinationAnalysis.flagged``),

on indexes built from 10%, 50% and 100% of the corpus (the 127 originals plus distractors,
shuffled with a fixed seed, originals always kept so the attack has its targets), and
reports the growth of the median cost against the growth of the corpus. Extra memory is
the tracemalloc peak during one document's analysis, against the index's bytes on disk.

    python benchmarks/bench_combinations.py [--k 2] [--arity 3] [--out results.json]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from spacy_delink.linkage.combinations import analyze_combinations
from spacy_delink.linkage.ngrams import analyze
from tab_testbed import load_tab
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder

TAB = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tab"
TARGETS = {"median_ms": 50.0, "p99_ms": 500.0}


def load_tab_split() -> tuple[list[tuple[str, str]], list[tuple[str, str]], list[str]]:
    """Originals, distractors and de-identified queries of the TAB test bed."""
    tab = load_tab(TAB)
    return tab.originals, tab.corpus[len(tab.originals) :], [text for _, text in tab.inputs]


def time_documents(index: CorpusIndex, queries: list[str], k: int, arity: int, cap: int, flags: bool) -> dict[str, float]:
    times = []
    for text in queries:
        started = time.perf_counter()
        result = analyze_combinations(index, analyze(index, text, k), arity, max_combinations=cap)
        result.head(cap)
        if flags:
            result.flagged()
        times.append((time.perf_counter() - started) * 1000)
    array = np.array(times)
    return {
        "median_ms": round(float(np.median(array)), 2),
        "p99_ms": round(float(np.percentile(array, 99)), 2),
        "max_ms": round(float(array.max()), 2),
    }


def peak_memory(index: CorpusIndex, queries: list[str], k: int, arity: int, cap: int) -> dict[str, int]:
    """tracemalloc peaks per document (numpy reports its buffers to tracemalloc): median and max."""
    peaks = []
    for text in queries:
        tracemalloc.start()
        analyze_combinations(index, analyze(index, text, k), arity, max_combinations=cap).flagged()
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    return {"median": int(np.median(peaks)), "max": int(max(peaks))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--arity", type=int, default=3)
    parser.add_argument("--max-combinations", type=int, default=1000)
    parser.add_argument("--fractions", default="0.1,0.5,1.0")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not TAB.exists():
        sys.exit(f"error: TAB data not found at {TAB}")
    originals, distractors, queries = load_tab_split()
    random.Random(0).shuffle(distractors)
    total = len(originals) + len(distractors)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for fraction in (float(f) for f in args.fractions.split(",")):
            size = max(len(originals), round(fraction * total))
            corpus = originals + distractors[: size - len(originals)]
            path = Path(tmp) / f"index-{fraction}"
            IndexBuilder(progress=False).build(corpus, path)
            index = CorpusIndex(path)
            analyze(index, queries[0], args.k)  # warm the caches
            runs.append(
                {
                    "fraction": fraction,
                    "documents": len(corpus),
                    "index_bytes": index.bytes_on_disk(),
                    "assess": time_documents(index, queries, args.k, args.arity, args.max_combinations, flags=False),
                    "rewriter_flags": time_documents(index, queries, args.k, args.arity, 0, flags=True),
                    "peak_extra_bytes": peak_memory(index, queries, args.k, args.arity, args.max_combinations),
                }
            )
    full, smallest = runs[-1], runs[0]
    growth = {
        "corpus_ratio": round(full["documents"] / smallest["documents"], 2),
        "assess_median_ratio": round(full["assess"]["median_ms"] / smallest["assess"]["median_ms"], 2),
        "rewriter_median_ratio": round(full["rewriter_flags"]["median_ms"] / smallest["rewriter_flags"]["median_ms"], 2),
    }
    report = {
        "benchmark": "combinations",
        "k": args.k,
        "arity": args.arity,
        "queries": len(queries),
        "runs": runs,
        "growth_10_to_100_percent": growth,
        "targets": {
            "median_ms<=50": full["assess"]["median_ms"] <= TARGETS["median_ms"],
            "p99_ms<=500": full["assess"]["p99_ms"] <= TARGETS["p99_ms"],
            "extra_memory<=index_size (median doc)": full["peak_extra_bytes"]["median"] <= full["index_bytes"],
            "extra_memory<=index_size (worst doc)": full["peak_extra_bytes"]["max"] <= full["index_bytes"],
            "sublinear_growth": growth["assess_median_ratio"] < growth["corpus_ratio"],
        },
    }
    text = json.dumps(report, indent=1)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
