"""Benchmark set-valued k-anonymity (issue #6) on BMS-WebView-1 and retail.

For each data set and k: cost (additions + deletions, per record) and runtime of the
clustering route and the suppression route, the naive baseline (random groups of k) and
the provable lower bound of :func:`spacy_delink.setvalued.lower_bounds`. Prints one JSON
object to stdout (progress goes to stderr).

    python benchmarks/bench_setvalued.py [--data ../shared/data/setvalued] [--k 2 5 10 25]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from spacy_delink.setvalued import anonymize_sets, load_set_records, lower_bounds, random_groups

DATASETS = {"BMS-WebView-1": "BMS-WebView-1.dat", "retail": "retail.dat"}


def summarize(cost_parts: tuple[int, int], n: int, seconds: float, bound: int) -> dict[str, float]:
    additions, deletions = cost_parts
    cost = additions + deletions
    return {
        "cost": cost,
        "additions": additions,
        "deletions": deletions,
        "cost_per_record": round(cost / n, 4),
        "additions_per_record": round(additions / n, 4),
        "deletions_per_record": round(deletions / n, 4),
        "seconds": round(seconds, 2),
        "ratio_to_lower_bound": round(cost / bound, 3) if bound else None,
    }


def run(data: Path, ks: list[int], names: list[str], methods: list[str]) -> dict:
    report: dict = {"data": str(data), "k": ks, "datasets": {}}
    for name in names:
        records = [record.items for record in load_set_records(data / DATASETS[name])[0]]
        n = len(records)
        start = time.perf_counter()
        bounds = lower_bounds(records, ks)
        entry: dict = {"records": n, "lower_bound_seconds": round(time.perf_counter() - start, 2), "by_k": {}}
        for k in ks:
            bound = bounds[k].value
            row: dict = {
                "lower_bound": bound,
                "lower_bound_neighbour": bounds[k].neighbour,
                "lower_bound_item_support": bounds[k].item_support,
            }
            for method in methods:
                print(f"{name} k={k} {method}", file=sys.stderr, flush=True)
                start = time.perf_counter()
                release = anonymize_sets(records, k, method=method)  # type: ignore[arg-type]
                seconds = time.perf_counter() - start
                row[method] = summarize((int(release.additions.sum()), int(release.deletions.sum())), n, seconds, bound)
                row[method]["groups"] = release.n_groups
            start = time.perf_counter()
            baseline = random_groups(records, k, seed=0)
            row["random_groups"] = summarize(
                (int(baseline.additions.sum()), int(baseline.deletions.sum())), n, time.perf_counter() - start, bound
            )
            entry["by_k"][str(k)] = row
        report["datasets"][name] = entry
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "setvalued")
    parser.add_argument("--k", type=int, nargs="+", default=[2, 5, 10, 25])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--methods", nargs="+", default=["cluster", "suppress"], choices=["cluster", "suppress"])
    args = parser.parse_args()
    print(json.dumps(run(args.data, args.k, args.datasets, args.methods), indent=2))


if __name__ == "__main__":
    main()
