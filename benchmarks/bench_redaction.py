"""ε against redaction level for the learned ranker, the TF-IDF logistic-regression baseline and random
redaction on the sensitive/safe pairs of ../shared/data/redaction (Gusain & Leith 2025, Figure 2).

Each redactor is trained on a 70% split and measured on the 30% it never saw. Prints one JSON object.
    python benchmarks/bench_redaction.py --pairs political,reddit --max-texts 1000
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import spacy

from spacy_delink.io import atomic_write
from spacy_delink.redaction import PrivacySettings, RankerSettings, TransformerEncoder, plot_privacy_curve, privacy_curve
from spacy_delink.redaction.component import texts_from_jsonl
from spacy_delink.redaction.evaluation import parse_fractions, sample_texts, split_texts

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "redaction"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default="political,reddit", help="comma-separated pair folders under shared/data/redaction")
    parser.add_argument("--max-texts", type=int, default=1000, help="texts drawn per side before the split")
    parser.add_argument("--fractions", default="0.1,0.2,0.3,0.4,0.6,0.8")
    parser.add_argument("--methods", default="ranker,logreg,random")
    parser.add_argument("--test-share", type=float, default=0.3)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot-dir", type=Path, default=None, help="also write <pair>.png here")
    args = parser.parse_args()

    fractions = parse_fractions(args.fractions)
    methods = [m for m in args.methods.split(",") if m]
    encoder = TransformerEncoder()
    report: dict = {
        "settings": {**vars(args), "plot_dir": str(args.plot_dir) if args.plot_dir else None},
        "cpus": os.cpu_count(),
        "pairs": {},
    }
    for pair in [p for p in args.pairs.split(",") if p]:
        started = time.perf_counter()
        sides = [
            sample_texts(texts_from_jsonl(DATA / pair / f"{side}.jsonl"), args.max_texts, args.seed)
            for side in ("sensitive", "safe")
        ]
        (train_0, test_0), (train_1, test_1) = [split_texts(texts, args.test_share, args.seed) for texts in sides]
        rows = privacy_curve(
            spacy.blank("en"),
            (train_0, train_1),
            (test_0, test_1),
            methods,
            fractions,
            RankerSettings(epochs=args.epochs, seed=args.seed),
            PrivacySettings(seed=args.seed),
            encoder,
            progress=True,
        )
        report["pairs"][pair] = {
            "train_texts": [len(train_0), len(train_1)],
            "test_texts": [len(test_0), len(test_1)],
            "seconds": round(time.perf_counter() - started, 1),
            "rows": [{key: (round(value, 4) if isinstance(value, float) else value) for key, value in row.items()} for row in rows],
        }
        if args.plot_dir:
            with atomic_write(args.plot_dir / f"{pair}.png", "wb") as handle:
                plot_privacy_curve(rows, handle, title=f"{pair}: ε vs redaction")
        print(f"{pair} done in {report['pairs'][pair]['seconds']} s", file=sys.stderr)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
