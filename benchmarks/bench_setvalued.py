"""Benchmark set-valued k-anonymity on BMS-WebView-1 and retail.

For each data set and k: cost (additions + deletions, per record), runtime and utility
(frequent itemsets of up to 3 items at 0.5% support: recall, precision, support error) of
the clustering route, the same partition published deletions-only, the suppression route,
the reviewer's baseline (each rare record moved to the nearest set that has k copies, or
emptied), random groups of k, and k^m-anonymity (m = 2) by deletions, next to the
provable lower bound of :func:`spacy_delink.setvalued.lower_bounds` (which holds for
whole-set k-anonymity, not for k^m). Prints one JSON object to stdout (progress to stderr).

    python benchmarks/bench_setvalued.py [--data ../shared/data/setvalued] [--k 2 5 10 25]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Callable

from spacy_delink.setvalued import (
    SetAnonymization,
    anonymize_km,
    anonymize_sets,
    itemset_utility,
    load_set_records,
    lower_bounds,
    nearest_frequent_sets,
    publish,
    random_groups,
)

DATASETS = {"BMS-WebView-1": "BMS-WebView-1.dat", "retail": "retail.dat"}


MIN_SUPPORT = 0.005
MAX_ITEMSET = 3


def summarize(records: list, release: SetAnonymization, seconds: float, bound: int) -> dict[str, float | None]:
    n = len(records)
    additions, deletions = int(release.additions.sum()), int(release.deletions.sum())
    cost = additions + deletions
    utility = itemset_utility(records, release.published, MIN_SUPPORT, MAX_ITEMSET)
    return {
        "cost": cost,
        "additions": additions,
        "deletions": deletions,
        "cost_per_record": round(cost / n, 4),
        "additions_per_record": round(additions / n, 4),
        "deletions_per_record": round(deletions / n, 4),
        "seconds": round(seconds, 2),
        "ratio_to_lower_bound": round(cost / bound, 3) if bound else None,
        "itemset_recall": round(utility.recall, 4),
        "itemset_precision": round(utility.precision, 4),
        "itemset_support_error": round(utility.support_error, 4),
    }


def timed(solve: Callable[[], SetAnonymization]) -> tuple[SetAnonymization, float]:
    start = time.perf_counter()
    release = solve()
    return release, time.perf_counter() - start


def run(data: Path, ks: list[int], names: list[str], methods: list[str], m: int) -> dict:
    report: dict = {
        "data": str(data), "k": ks, "m": m, "utility": {"min_support": MIN_SUPPORT, "max_size": MAX_ITEMSET}, "datasets": {},
    }
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
                release, seconds = timed(lambda: anonymize_sets(records, k, method=method))  # type: ignore[arg-type]
                row[method] = summarize(records, release, seconds, bound)
                row[method]["groups"] = release.n_groups
                if method == "cluster":  # the same partition, each group published as its intersection
                    deletions, seconds = timed(lambda: publish(records, release.labels, k, deletions_only=True))
                    row["cluster_deletions_only"] = summarize(records, deletions, seconds, bound)
            print(f"{name} k={k} baselines, k^{m}", file=sys.stderr, flush=True)
            for label, solve in (
                ("nearest_frequent", lambda: nearest_frequent_sets(records, k)),
                ("random_groups", lambda: random_groups(records, k, seed=0)),
                (f"km_m{m}", lambda: anonymize_km(records, k, m)),
            ):
                release, seconds = timed(solve)
                row[label] = summarize(records, release, seconds, bound)
            entry["by_k"][str(k)] = row
        report["datasets"][name] = entry
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data" / "setvalued")
    parser.add_argument("--k", type=int, nargs="+", default=[2, 5, 10, 25])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--methods", nargs="+", default=["cluster", "suppress"], choices=["cluster", "suppress"])
    parser.add_argument("--m", type=int, default=2, help="known items for the k^m-anonymity run")
    args = parser.parse_args()
    print(json.dumps(run(args.data, args.k, args.datasets, args.methods, args.m), indent=2))


if __name__ == "__main__":
    main()
