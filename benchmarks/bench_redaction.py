"""Learned redaction benchmarks (Gusain & Leith 2025); each mode prints one JSON object.

``curves`` (the default): ε against redaction level for the learned ranker, both
logistic-regression baselines (largest |weight|, and largest weight towards the sensitive
side as in the paper) and random redaction on the pairs of ../shared/data/redaction
(Figure 2 of the paper). Each of ``--repeats`` random 70/30 splits trains every redactor
on its train part and measures the test part; rows give mean and standard deviation over
the splits, plus the unredacted test sets and the same-collection floor.

    python benchmarks/bench_redaction.py --pairs political,reddit,amazon,medical --max-texts 1000 --repeats 3

``estimators``: the three divergence estimators on pairs of unit Gaussians whose means
differ by √D along one axis (closed form D₂ = D), at d = 384 and 32 and n = 300 and 1,000
per side: mean, spread and range of the ε they give, against the true ε.

    python benchmarks/bench_redaction.py --mode estimators --draws 20

``ranker``: the planted-word corpus of tests/test_redaction.py (one word only sensitive
texts hold), the rank the trained ranker gives that word over many seeds.

    python benchmarks/bench_redaction.py --mode ranker --seeds 16
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from spacy_delink.io.files import atomic_write
from spacy_delink.redaction import (
    PrivacySettings,
    RankerSettings,
    TransformerEncoder,
    gaussian_divergence,
    knn_divergence,
    paper_estimate,
    plot_privacy_curve,
    privacy_curve,
    train_ranker,
    zcdp_epsilon,
)
from spacy_delink.redaction.component import texts_from_jsonl
from spacy_delink.redaction.evaluation import parse_fractions, sample_texts
from spacy_delink.redaction.privacy import bounding_epsilon

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "redaction"


def rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 4)
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return value


def curves(args: argparse.Namespace) -> dict[str, Any]:
    import spacy

    fractions = parse_fractions(args.fractions)
    methods = [m for m in args.methods.split(",") if m]
    encoder = TransformerEncoder()
    report: dict[str, Any] = {
        "settings": {**vars(args), "plot_dir": str(args.plot_dir) if args.plot_dir else None},
        "cpus": os.cpu_count(),
        "pairs": {},
    }
    for pair in [p for p in args.pairs.split(",") if p]:
        started = time.perf_counter()
        texts = tuple(
            sample_texts(texts_from_jsonl(DATA / pair / f"{side}.jsonl"), args.max_texts, args.seed)
            for side in ("sensitive", "safe")
        )
        rows = privacy_curve(
            spacy.blank("en"), texts, methods, fractions, args.test_share, args.repeats,  # type: ignore[arg-type]
            RankerSettings(epochs=args.epochs, seed=args.seed), PrivacySettings(seed=args.seed), encoder, progress=True,
        )
        report["pairs"][pair] = {
            "texts": [len(side) for side in texts],
            "seconds": round(time.perf_counter() - started, 1),
            "rows": rounded(rows),
        }
        if args.plot_dir:
            with atomic_write(args.plot_dir / f"{pair}.png", "wb") as handle:
                plot_privacy_curve(rows, handle, title=f"{pair}: ε vs redaction ({args.repeats} splits)")
        print(f"{pair} done in {report['pairs'][pair]['seconds']} s", file=sys.stderr, flush=True)
    return report


def estimators(args: argparse.Namespace) -> dict[str, Any]:
    rows = []
    for d in (384, 32):
        for n in (300, 1000):
            delta = 1.0 / (2 * n)
            for divergence in (0.0, 1.0, 4.0):
                truth = zcdp_epsilon(divergence, 2.0, delta)
                found: dict[str, list[float]] = {"gaussian": [], "gaussian_high": [], "knn": [], "paper": [], "paper_line": []}
                started = time.perf_counter()
                for draw in range(args.draws):
                    rng = np.random.default_rng([d, n, int(divergence * 10), draw])
                    p, q = rng.normal(size=(n, d)), rng.normal(size=(n, d))
                    q[:, 0] += math.sqrt(divergence)
                    estimate = gaussian_divergence(p, q)
                    found["gaussian"].append(zcdp_epsilon(estimate.divergence, 2.0, delta))
                    found["gaussian_high"].append(zcdp_epsilon(estimate.high, 2.0, delta))
                    if draw < args.knn_draws:
                        found["knn"].append(zcdp_epsilon(knn_divergence(p, q, n_bootstrap=0).divergence, 2.0, delta))
                        paper, by_alpha = paper_estimate(p, q, n_bootstrap=args.paper_bootstrap, seed=draw)
                        found["paper"].append(zcdp_epsilon(paper.divergence, 2.0, delta))
                        found["paper_line"].append(bounding_epsilon(by_alpha, delta)[0])
                summary = {
                    name: {
                        "mean": float(np.mean(values)), "sd": float(np.std(values, ddof=1)),
                        "min": float(np.min(values)), "max": float(np.max(values)), "draws": len(values),
                    }
                    for name, values in found.items()
                }
                summary["gaussian_high"]["covered"] = float(np.mean(np.array(found["gaussian_high"]) >= truth))
                rows.append({"d": d, "n": n, "divergence": divergence, "true_epsilon": truth, "delta": delta,
                             "seconds": round(time.perf_counter() - started, 1), "epsilon": summary})
                print(f"d={d} n={n} D={divergence} done", file=sys.stderr, flush=True)
    return {"draws": args.draws, "knn_and_paper_draws": args.knn_draws, "paper_bootstrap": args.paper_bootstrap,
            "rows": rounded(rows)}


def planted(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_redaction import PLANTED, SMALL, planted_corpus

    vectors, sensitive, safe = planted_corpus()
    runs = {}
    for loss in ("gaussian", "knn"):
        ranks = []
        for seed in range(args.seeds):
            result = train_ranker(
                [vectors[i] for i in sensitive], [vectors[i] for i in safe], 0.1, replace(SMALL, seed=seed, loss=loss)
            )
            with torch.no_grad():
                scores = result.net(torch.from_numpy(vectors)).squeeze(-1).numpy()
            ranks.append(int((scores < scores[PLANTED]).sum()) + 1)
        runs[loss] = {"ranks": ranks, "first": sum(rank == 1 for rank in ranks)}
        print(f"{loss}: {ranks}", file=sys.stderr, flush=True)
    return {"settings": SMALL.to_dict(), "seeds": args.seeds, "runs": runs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("curves", "estimators", "ranker"), default="curves")
    parser.add_argument("--pairs", default="political,reddit,amazon,medical", help="pair folders under shared/data/redaction")
    parser.add_argument("--max-texts", type=int, default=1000, help="texts drawn per side before the splits")
    parser.add_argument("--fractions", default="0.1,0.2,0.3,0.4,0.6,0.8")
    parser.add_argument("--methods", default="ranker,logreg,logreg_d0,random")
    parser.add_argument("--test-share", type=float, default=0.3)
    parser.add_argument("--repeats", type=int, default=3, help="random splits per pair")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot-dir", type=Path, default=None, help="also write <pair>.png here")
    parser.add_argument("--draws", type=int, default=20, help="estimators: Gaussian pairs per setting")
    parser.add_argument("--knn-draws", type=int, default=5, help="estimators: of which the kNN and paper ones see")
    parser.add_argument("--paper-bootstrap", type=int, default=5, help="estimators: resamples of the paper's estimate")
    parser.add_argument("--seeds", type=int, default=16, help="ranker: training seeds")
    args = parser.parse_args()
    job = {"curves": curves, "estimators": estimators, "ranker": planted}[args.mode]
    print(json.dumps(job(args)))


if __name__ == "__main__":
    main()
