"""The reports' plots (matplotlib, Agg backend, PNG bytes): linkage vs k, anonymity, similarity, top-k.

matplotlib comes with the ``plots`` extra and is imported when a plot is drawn, not with
this module: without it the reports are still written and say, in words, that the plots
were not drawn (``plots_unavailable``).
"""
from __future__ import annotations

import io
from collections import Counter
from typing import Any, Iterable

from ..extras import missing_module

_BEFORE, _AFTER = "#c0392b", "#2471a3"


def plots_unavailable() -> str | None:
    """Why no plot can be drawn here (matplotlib missing), or None."""
    if missing_module("plots") is None:
        return None
    return "matplotlib is not installed; install it with pip install 'spacy-delink[plots]'"


def _pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display), imported on first use."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(figure: Any) -> bytes:
    plt = _pyplot()
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=96)
    plt.close(figure)
    return buffer.getvalue()


def _anonymity_labels(histograms: Iterable[dict[str, int]]) -> list[str]:
    """Anonymity values in order, "none" (not linkable) last."""
    keys = {key for histogram in histograms for key in histogram}
    return sorted(keys, key=lambda key: (key == "none", int(key) if key != "none" else 0))


def _anonymity_bars(axis: Any, series: dict[str, tuple[dict[str, int], str]], xlabel: str) -> None:
    """Side-by-side bars of documents per anonymity, one colour per series (name → (histogram, colour))."""
    labels = _anonymity_labels(histogram for histogram, _ in series.values())
    width = 0.8 / len(series)
    for offset, (name, (histogram, colour)) in enumerate(series.items()):
        values = [histogram.get(label, 0) for label in labels]
        shift = (offset - (len(series) - 1) / 2) * width
        axis.bar([i + shift for i in range(len(labels))], values, width, color=colour, label=name)
    axis.set_xticks(range(len(labels)), ["not linkable" if label == "none" else label for label in labels])
    axis.set_xlabel(xlabel)
    axis.set_ylabel("documents")


def linkage_plot(metrics: dict[str, Any]) -> bytes:
    """Share of linkable documents vs k, one panel per arity; ours solid, the engine dashed."""
    cells = metrics["linkage"]
    arities = metrics["settings"]["arity"]
    ks = metrics["settings"]["k"]
    figure, axes = _pyplot().subplots(1, len(arities), figsize=(3.4 * len(arities), 3.0), sharey=True, squeeze=False)
    for axis, arity in zip(axes[0], arities):
        rows = [c for c in cells if c["arity"] == arity]
        for version, colour in (("before", _BEFORE), ("after", _AFTER)):
            if version not in rows[0]:
                continue
            axis.plot(ks, [100 * (r[version]["linkable_share"] or 0) for r in rows], "o-", color=colour, label=f"{version} (ours)")
            if "engine_linkable_share" in rows[0][version]:
                axis.plot(
                    ks, [100 * (r[version]["engine_linkable_share"] or 0) for r in rows], "s--", color=colour,
                    alpha=0.6, label=f"{version} (tantivy)",
                )
        axis.set_title(f"arity {arity}")
        axis.set_xlabel("k")
        axis.set_xticks(ks)
        axis.set_ylim(-3, 103)
        axis.grid(alpha=0.3)
    axes[0][0].set_ylabel("documents linkable (%)")
    axes[0][-1].legend(fontsize=7, loc="center right")
    return _png(figure)


def anonymity_plot(metrics: dict[str, Any]) -> bytes:
    """How many documents have each anonymity (smallest candidate set) at the report's (k, arity)."""
    report = metrics["settings"]["report"]
    cell = next(c for c in metrics["linkage"] if c["k"] == report["k"] and c["arity"] == report["arity"])
    series = {
        version: (cell[version]["anonymity"], colour)
        for version, colour in (("before", _BEFORE), ("after", _AFTER))
        if version in cell
    }
    figure, axis = _pyplot().subplots(figsize=(4.2, 3.0))
    _anonymity_bars(axis, series, f"anonymity at k={report['k']}, arity {report['arity']}")
    axis.legend(fontsize=8)
    return _png(figure)


def assessment_plot(anonymities: list[int | None], linkable_phrases: list[int], k: int, arity: int) -> bytes:
    """``delink assess --html``: documents per anonymity, and per number of linkable phrases."""
    counts = Counter("none" if value is None else str(value) for value in anonymities)
    # every possible value as a bar (zeros included) while that stays readable
    possible = [str(value) for value in range(1, k)] if k <= 12 else []
    histogram = {label: counts.get(label, 0) for label in [*possible, "none"]} | dict(counts)
    from matplotlib.ticker import MaxNLocator

    figure, (left, right) = _pyplot().subplots(1, 2, figsize=(8.4, 3.0))
    _anonymity_bars(left, {"documents": (histogram, _BEFORE)}, f"anonymity at k={k}, arity {arity}")
    left.set_title("smallest candidate set", fontsize=10)
    most = max(linkable_phrases, default=0)
    # one bar per count while that stays readable, else 20 bins
    right.hist(linkable_phrases, bins=range(most + 2) if most < 30 else 20, align="left" if most < 30 else "mid", color=_BEFORE)
    right.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.set_xlabel("linkable phrases in the document")
    right.set_ylabel("documents")
    right.set_title("phrases to rewrite", fontsize=10)
    return _png(figure)


def similarity_plot(values: list[float]) -> bytes:
    figure, axis = _pyplot().subplots(figsize=(4.2, 3.0))
    axis.hist(values, bins=20, range=(min(0.0, min(values)), 1.0), color=_AFTER)
    axis.set_xlabel("cosine similarity, de-identified vs protected")
    axis.set_ylabel("documents")
    return _png(figure)


def topk_plot(semantic: dict[str, Any]) -> bytes:
    figure, axis = _pyplot().subplots(figsize=(4.2, 3.0))
    names = ["top1", "top10"]
    width = 0.4
    for offset, (version, colour) in enumerate((("before", _BEFORE), ("after", _AFTER))):
        if version in semantic:
            axis.bar([i + (offset - 0.5) * width for i in range(2)], [100 * semantic[version][n] for n in names], width,
                     color=colour, label=version)
    axis.set_xticks(range(2), ["top-1", "top-10"])
    axis.set_ylim(0, 100)
    axis.set_ylabel("true source found (%)")
    axis.set_title("semantic linkage")
    axis.legend(fontsize=8)
    return _png(figure)


def evaluation_plots(metrics: dict[str, Any]) -> dict[str, bytes]:
    """File name → PNG bytes for every plot the metrics support (none without matplotlib)."""
    if plots_unavailable():
        return {}
    plots = {"linkage.png": linkage_plot(metrics), "anonymity.png": anonymity_plot(metrics)}
    semantic = metrics["semantic"]
    if semantic.get("available"):
        plots["semantic_topk.png"] = topk_plot(semantic)
        if "similarity" in semantic:
            plots["similarity.png"] = similarity_plot(semantic["similarity"]["values"])
    return plots
