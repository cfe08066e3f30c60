"""Markdown tables from ``delink evaluate`` outputs (the README's results table).

``python -m spacy_delink.evaluate.table NAME=FOLDER [NAME=FOLDER ...] [--output FILE]`` writes one linkage
table (a row per de-identification, k and arity: ours and tantivy, before and after) and
one utility / semantic table (a row per de-identification).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from ..errors import DelinkError, InputError
from ..io import atomic_write
from .job import METRICS


def _share(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _load(spec: str) -> tuple[str, dict[str, Any]]:
    name, separator, folder = spec.partition("=")
    if not separator or not name or not folder:
        raise InputError(f"{spec!r}: expected NAME=FOLDER, e.g. manual=metrics/tab/evaluation-manual")
    path = Path(folder) / METRICS
    if not path.exists():
        raise InputError(f"{path} not found; run `delink evaluate` (or `spacy project run tab`) first")
    return name, json.loads(path.read_text(encoding="utf-8"))


def tables(runs: Sequence[tuple[str, dict[str, Any]]]) -> str:
    lines = [
        "| de-identification | k | arity | linkable before: ours / tantivy | linkable after: ours / tantivy | averted |",
        "|---|---|---|---|---|---|",
    ]
    for name, metrics in runs:
        for cell in metrics["linkage"]:
            before, after = cell["before"], cell.get("after", {})
            lines.append(
                f"| {name} | {cell['k']} | {cell['arity']} "
                f"| {_share(before['linkable_share'])} / {_share(before.get('engine_linkable_share'))} "
                f"| {_share(after.get('linkable_share'))} / {_share(after.get('engine_linkable_share'))} "
                f"| {_share(cell.get('averted', {}).get('share'))} |"
            )
    lines += [
        "",
        "| de-identification | documents | tokens changed | masks added per document | similarity (mean) | semantic top-1 before → after | top-10 before → after |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, metrics in runs:
        utility = metrics.get("utility") or {}
        semantic = metrics["semantic"]
        if semantic.get("available"):
            similarity = f"{semantic['similarity']['mean']:.3f}" if "similarity" in semantic else "–"
            top1 = f"{_share(semantic['before']['top1'])} → {_share(semantic.get('after', {}).get('top1'))}"
            top10 = f"{_share(semantic['before']['top10'])} → {_share(semantic.get('after', {}).get('top10'))}"
        else:
            similarity = top1 = top10 = "not measured"
        lines.append(
            f"| {name} | {metrics['documents']['evaluated']} | {_share(utility.get('tokens_changed_share'))} "
            f"| {utility.get('masks_added_per_document', 0):.1f} | {similarity} | {top1} | {top10} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spacy_delink.evaluate.table", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="NAME=FOLDER", help="a name and a `delink evaluate` output folder")
    parser.add_argument("--output", type=Path, default=None, help="write the tables here [default: stdout]")
    args = parser.parse_args(argv)
    try:
        text = tables([_load(spec) for spec in args.runs])
        if args.output is None:
            print(text, end="")
        else:
            with atomic_write(args.output) as handle:
                handle.write(text)
    except DelinkError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
