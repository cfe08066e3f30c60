"""Zang & Zhu's experiment on UCI Adult: PL, per-attribute and local PL, and EC under k, l and t.

Anonymizes Adult with the optimal full-domain generalizer for k = 2..7 (k-anonymity),
l = 2..7 (distinct l-diversity) and t = 0.05..0.30 (t-closeness), measures each release
with :func:`spacy_delink.tabular.privacy_level` (the generalization checked against the
hierarchies, and the release's own k, l, t and risks), writes all numbers as JSON plus
seven PNG plots, and prints one JSON summary to stdout.

    python benchmarks/bench_tabular.py [--data-dir ../shared/data/adult] [--out benchmarks/results/tabular]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from tqdm import tqdm

from spacy_delink.io.files import atomic_write
from spacy_delink.tabular import load_table, privacy_level
from spacy_delink.tabular.anonymize import anonymize, read_hierarchy

QUASI_IDENTIFIERS = ["age", "workclass", "occupation", "race", "sex", "salary-class", "marital-status"]
SENSITIVE = ["education", "native-country"]
SWEEPS: dict[str, list[Any]] = {
    "k": [2, 3, 4, 5, 6, 7],
    "l": [2, 3, 4, 5, 6, 7],
    "t": [0.05, 0.10, 0.15, 0.20, 0.25, 0.30],
}
MODEL_NAMES = {"k": "k-anonymity", "l": "distinct l-diversity", "t": "t-closeness"}


def run_sweeps(data_dir: Path, suppression_limit: float) -> list[dict[str, Any]]:
    """One anonymization and one measurement per parameter value."""
    table = load_table(data_dir / "adult.csv", "adult")
    hierarchies = {name: read_hierarchy(data_dir / f"adult_hierarchy_{name}.csv") for name in QUASI_IDENTIFIERS}
    runs = []
    settings = [(model, value) for model, values in SWEEPS.items() for value in values]
    for model, value in tqdm(settings, desc="anonymizations", unit="run"):
        result = anonymize(
            table, hierarchies, sensitive=SENSITIVE, suppression_limit=suppression_limit, **{model: value}
        )
        started = time.perf_counter()
        report = privacy_level(table, result.table, QUASI_IDENTIFIERS, SENSITIVE, hierarchies=hierarchies)
        runs.append(
            {
                "model": model,
                "value": value,
                "levels": result.levels,
                "loss_bits": round(result.loss, 3),
                "suppressed": result.suppressed,
                "classes": result.classes,
                "min_class_size": result.min_class_size,
                "nodes_evaluated": result.nodes_evaluated,
                "lattice_size": result.lattice_size,
                "anonymize_seconds": round(result.seconds, 3),
                "measure_seconds": round(time.perf_counter() - started, 3),
                "privacy_level": report.privacy_level,
                "discrimination_rate": report.discrimination_rate,
                "information_ratio": report.information_ratio,
                "entropy_change": report.entropy_change,
                "per_sensitive": {name: m.privacy_level for name, m in report.per_sensitive.items()},
                "local": {name: m.privacy_level for name, m in report.local.items()},
                "release": report.release.to_dict() if report.release is not None else None,
            }
        )
    return runs


def series(runs: list[dict[str, Any]], model: str, pick: Any) -> tuple[list[Any], list[float]]:
    chosen = [run for run in runs if run["model"] == model]
    return [run["value"] for run in chosen], [pick(run) for run in chosen]


def save(figure: plt.Figure, path: Path) -> None:
    with atomic_write(path, "wb") as handle:
        figure.savefig(handle, format="png", dpi=110, bbox_inches="tight")
    plt.close(figure)


def plot(runs: list[dict[str, Any]], out: Path) -> list[str]:
    """Seven figures: PL, PL per sensitive attribute, local PL under k / l / t, EC, runtime."""
    files = []

    def per_model(name: str, title: str, lines: dict[str, Any]) -> None:
        figure, axes = plt.subplots(1, 3, figsize=(13, 3.6), sharey=True)
        for axis, model in zip(axes, SWEEPS):
            for label, pick in lines.items():
                x, y = series(runs, model, pick)
                axis.plot(x, y, marker="o", label=label)
            axis.set_xlabel(model)
            axis.set_title(MODEL_NAMES[model])
            axis.grid(alpha=0.3)
        axes[0].set_ylabel(title)
        axes[-1].legend(fontsize=8)
        figure.suptitle(f"{title} on Adult (QIs: {', '.join(QUASI_IDENTIFIERS)})", fontsize=9)
        save(figure, out / name)
        files.append(name)

    per_model("fig1_privacy_level.png", "PL(D)", {"PL": lambda r: r["privacy_level"]})
    per_model("fig2_privacy_level_per_sensitive.png", "PL per sensitive attribute",
              {name: (lambda r, n=name: r["per_sensitive"][n]) for name in SENSITIVE})
    for number, model in zip((3, 4, 5), SWEEPS):
        figure, axis = plt.subplots(figsize=(6.5, 4))
        for name in QUASI_IDENTIFIERS:
            x, y = series(runs, model, lambda r, n=name: r["local"][n])
            axis.plot(x, y, marker="o", label=name)
        axis.set_xlabel(model)
        axis.set_ylabel("local PL (QI given the other QIs)")
        axis.set_title(f"Local privacy level of each QI under {MODEL_NAMES[model]}")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=8)
        name = f"fig{number}_local_privacy_level_{model}.png"
        save(figure, out / name)
        files.append(name)
    per_model("fig6_entropy_change.png", "EC", {"EC": lambda r: r["entropy_change"]})
    per_model("fig7_runtime.png", "anonymization seconds", {"seconds": lambda r: r["anonymize_seconds"]})
    return files


def main() -> None:
    root = Path(__file__).resolve().parents[1]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=root.parent / "shared" / "data" / "adult")
    parser.add_argument("--out", type=Path, default=root / "benchmarks" / "results" / "tabular")
    parser.add_argument("--suppression-limit", type=float, default=0.0)
    args = parser.parse_args()
    started = time.perf_counter()
    runs = run_sweeps(args.data_dir, args.suppression_limit)
    args.out.mkdir(parents=True, exist_ok=True)
    with atomic_write(args.out / "results.json") as handle:
        json.dump({"suppression_limit": args.suppression_limit, "runs": runs}, handle, indent=2)
    files = ["results.json", *plot(runs, args.out)]
    summary = {
        "benchmark": "tabular",
        "rows": 30162,
        "suppression_limit": args.suppression_limit,
        "total_seconds": round(time.perf_counter() - started, 2),
        "max_anonymize_seconds": {m: max(r["anonymize_seconds"] for r in runs if r["model"] == m) for m in SWEEPS},
        "privacy_level": {f"{r['model']}={r['value']}": round(r["privacy_level"], 4) for r in runs},
        "entropy_change": {f"{r['model']}={r['value']}": round(r["entropy_change"], 4) for r in runs},
        "out": str(args.out),
        "files": files,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
