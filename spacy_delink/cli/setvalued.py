"""`delink setanon`: k-anonymity for set-valued records."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import COMPANIONS, app


@app.command("setanon", rich_help_panel=COMPANIONS)
def setanon_command(
    input_path: Path = typer.Argument(..., metavar="INPUT", help='JSONL lines {"id", "items"|"queries"|"text"}, or a .dat transaction file.'),
    output: Path = typer.Option(..., "--output", "-o", help="Release to write: JSONL {id, items} ({items} with --threads), or .dat lines."),
    k: int = typer.Option(..., "--k", help="Every published set is shared by at least k records (k >= 2)."),
    method: str = typer.Option(
        "cluster", "--method",
        help="cluster (local search), suppress (the suppression route) or km (k^m-anonymity by deletions).",
    ),
    deletions_only: bool = typer.Option(False, "--deletions-only", help="Publish each group's intersection: delete items, never add one."),
    m: int = typer.Option(2, "--m", help="With --method km: the most items an adversary knows (1 to 3)."),
    threads: bool = typer.Option(
        False, "--threads",
        help="Split each user's queries into topic threads and publish the threads unlinked (no id, sorted).",
    ),
    model: Optional[str] = typer.Option(None, "--model", help="Installed spaCy pipeline for term normalization [default: blank English]."),
    keep_stop_words: bool = typer.Option(False, "--keep-stop-words", help="Keep stop words as items."),
    keep_punctuation: bool = typer.Option(False, "--keep-punctuation", help="Keep punctuation as items."),
    duplicates: str = typer.Option("error", "--duplicates", help="Repeated ids: error, or merge (unite their items)."),
    max_items: int = typer.Option(1000, "--max-items", help="Records with more items keep their most widely held ones."),
    bucket_size: int = typer.Option(400, "--bucket-size", help="Records solved together; larger is slower but cheaper."),
    extend: Optional[Path] = typer.Option(None, "--extend", help="Earlier release to add INPUT's records to, unchanged."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid JSON lines."),
) -> None:
    """k-anonymity (or k^m-anonymity) for set-valued records (query logs, baskets, keyword sets) with few item changes."""
    from ..extras import require_extra

    require_extra("setvalued", "delink setanon")
    from ..setvalued.command import setanon_file

    summary = setanon_file(
        input_path,
        output,
        k,
        method=method,
        deletions_only=deletions_only,
        m=m,
        threads=threads,
        model=model,
        keep_stop_words=keep_stop_words,
        keep_punctuation=keep_punctuation,
        duplicates=duplicates,  # type: ignore[arg-type]
        max_items=max_items,
        bucket_size=bucket_size,
        extend=extend,
        skip_invalid=skip_invalid,
    )
    load = summary.load
    records = max(load.records, 1)
    typer.echo(
        f"{load.records:,} records -> {summary.distinct_published:,} distinct published sets "
        f"({summary.groups:,} groups), {summary.additions:,} additions + {summary.deletions:,} deletions "
        f"({(summary.additions + summary.deletions) / records:.3f} per record), "
        f"{f'k^m with k={k}, m={m}' if method == 'km' else f'k={k}'} verified, "
        f"in {summary.seconds:.1f} s -> {output}",
        err=True,
    )
    notes = [
        f"{load.empty:,} empty record(s)" if load.empty else "",
        f"{load.merged_duplicates:,} duplicate id(s) merged" if load.merged_duplicates else "",
        f"{load.truncated:,} record(s) over --max-items lost {load.truncated_items:,} items" if load.truncated else "",
        f"{load.users_split:,} user(s) split into several threads" if load.users_split else "",
        f"{len(load.skipped_lines):,} invalid line(s) skipped" if load.skipped_lines else "",
    ]
    if any(notes):
        typer.echo("note: " + "; ".join(note for note in notes if note), err=True)
