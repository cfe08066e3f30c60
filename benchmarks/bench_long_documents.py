"""Protection of long documents (issue: mask passes grew with length at arity 3). Prints one JSON object.

A long document is built by joining the first ``--unit`` TAB manual de-identifications
(paragraph breaks between them) and repeating them until the size is reached, so it holds
many repetitions of every phrase: the case where flagging only a key's first occurrence
needed one pass per repetition. For each size, ``delink protect``'s rewriter (Mask model, token granularity,
k = 2, default flagging) protects it at arity 1 and at arity 3; the report gives passes and
seconds per size, and the growth of each from the smallest size to the largest against the
growth of the size (linear time: the same ratio). ``--redetect-size`` also times arity 3 at
that size with the incremental re-detection against a detection from scratch after every
mask pass (``bench_flagging.redetect``, the same run).

BLAS runs single-threaded (see bench_flagging.py).

    python benchmarks/bench_long_documents.py [--sizes 50000,250000,1000000,3000000] [--redetect-size 1000000]
        [--out results.json]
"""
from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import spacy  # noqa: E402

from bench_flagging import redetect, write_report  # noqa: E402
from spacy_delink.components.rewriter import DelinkRewriter  # noqa: E402
from spacy_delink.linkage.index import IndexBuilder  # noqa: E402
from tab_testbed import load_tab  # noqa: E402

TAB = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tab"
TARGETS = {"passes_max": 20, "arity3_over_arity1_seconds_at_largest": 10.0}


def long_document(texts: list[str], size: int) -> str:
    """The de-identified texts joined by paragraph breaks, repeated, cut at a paragraph near ``size`` characters."""
    pieces: list[str] = []
    length = 0
    while length < size:
        for text in texts:
            pieces.append(text)
            length += len(text) + 2
            if length >= size:
                break
    return "\n\n".join(pieces)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50000,250000,1000000,3000000", help="document sizes in characters")
    parser.add_argument("--unit", type=int, default=10, help="de-identified documents repeated")
    parser.add_argument("--redetect-size", type=int, default=0, help="also time full vs incremental re-detection at this size")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tab = load_tab(TAB)
    texts = [text for _, text in tab.inputs][: args.unit]
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        IndexBuilder(progress=False).build(tab.corpus, Path(tmp) / "index")
        for arity in (1, 3):
            rewriter = spacy.blank("en").add_pipe("delink_rewriter", config={"index": str(Path(tmp) / "index"), "k": 2, "arity": arity})
            assert isinstance(rewriter, DelinkRewriter)
            rewriter.rewrite_texts(texts[:1])  # compiles the kernels (numba) before anything is timed
            for size in sizes:
                document = long_document(texts, size)
                started = time.perf_counter()
                result = rewriter.rewrite_texts([document])[0]
                seconds = time.perf_counter() - started
                if not result.protected:
                    raise SystemExit(f"arity {arity}, {size} characters: output not protected")
                rows.setdefault(str(size), {"characters": len(document)})[f"arity{arity}"] = {
                    "passes": result.passes, "seconds": round(seconds, 2)
                }
        if args.redetect_size:
            document = long_document(texts, args.redetect_size)
            timing = redetect(Path(tmp) / "index", [document], 2, "min_cover", warm_up=texts[0])
            timing["characters"] = len(document)
    smallest, largest = rows[str(sizes[0])], rows[str(sizes[-1])]
    growth = largest["characters"] / smallest["characters"]
    report = {
        "targets": TARGETS,
        "sizes": rows,
        "size_growth": round(growth, 1),
        "seconds_growth": {f"arity{a}": round(largest[f"arity{a}"]["seconds"] / max(smallest[f"arity{a}"]["seconds"], 1e-9), 1) for a in (1, 3)},
        "passes_max": max(row[f"arity{a}"]["passes"] for row in rows.values() for a in (1, 3)),
        "arity3_over_arity1_seconds_at_largest": round(largest["arity3"]["seconds"] / max(largest["arity1"]["seconds"], 1e-9), 1),
    }
    if args.redetect_size:
        report["redetect_arity3"] = timing
    write_report(report, args.out)


if __name__ == "__main__":
    main()
