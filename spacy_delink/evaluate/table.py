"""Markdown tables from ``delink evaluate`` outputs (the README's results table).

``delink evaluate-table NAME=FOLDER [NAME=FOLDER ...] [--output FILE]`` writes one linkage
table (a row per de-identification, k and arity: ours and tantivy, before and after) and
one utility / semantic table (a row per de-identification).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from tabulate import tabulate

from ..errors import InputError
from .job import METRICS

LINKAGE_HEADER = ("de-identification", "k", "arity", "linkable before: ours / tantivy", "linkable after: ours / tantivy", "averted")
UTILITY_HEADER = (
    "de-identification", "documents", "tokens changed", "masks added per document", "similarity (mean)",
    "semantic top-1 before → after", "top-10 before → after",
)


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def load_run(spec: str) -> tuple[str, dict[str, Any]]:
    """``NAME=FOLDER``: the name of a de-identification and the metrics of its ``delink evaluate`` folder."""
    name, separator, folder = spec.partition("=")
    if not separator or not name or not folder:
        raise InputError(f"{spec!r}: expected NAME=FOLDER, e.g. manual=metrics/tab/evaluation-manual")
    path = Path(folder) / METRICS
    if not path.exists():
        raise InputError(f"{path} not found; run `delink evaluate` (or `spacy project run tab`) first")
    return name, json.loads(path.read_text(encoding="utf-8"))


def _markdown(header: Sequence[str], rows: list[list[Any]]) -> str:
    """A Markdown table (GitHub's pipes), every cell as written: numbers are not reformatted."""
    return tabulate(rows, headers=list(header), tablefmt="github", disable_numparse=True)


def tables(runs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    """The linkage table and the utility / semantic table of ``runs`` (name, metrics.json), a blank line between."""
    linkage = []
    for name, metrics in runs:
        for cell in metrics["linkage"]:
            before, after = cell["before"], cell.get("after", {})
            linkage.append([
                name, cell["k"], cell["arity"],
                f"{_share(before['linkable_share'])} / {_share(before.get('engine_linkable_share'))}",
                f"{_share(after.get('linkable_share'))} / {_share(after.get('engine_linkable_share'))}",
                _share(cell.get("averted", {}).get("share")),
            ])
    utility_rows = []
    for name, metrics in runs:
        utility = metrics.get("utility") or {}
        semantic = metrics["semantic"]
        if semantic.get("available"):
            similarity = f"{semantic['similarity']['mean']:.3f}" if "similarity" in semantic else "–"
            top1 = f"{_share(semantic['before']['top1'])} → {_share(semantic.get('after', {}).get('top1'))}"
            top10 = f"{_share(semantic['before']['top10'])} → {_share(semantic.get('after', {}).get('top10'))}"
        else:
            similarity = top1 = top10 = "not measured"
        utility_rows.append([
            name, metrics["documents"]["evaluated"], _share(utility.get("tokens_changed_share")),
            f"{utility.get('masks_added_per_document', 0):.1f}", similarity, top1, top10,
        ])
    return _markdown(LINKAGE_HEADER, linkage) + "\n\n" + _markdown(UTILITY_HEADER, utility_rows) + "\n"
