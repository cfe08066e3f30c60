"""`delink protect`: rewrite documents until protected."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import app


@app.command("protect")
def protect_command(
    index: Path = typer.Argument(..., help="Index directory built by `delink index`."),
    input_path: Path = typer.Argument(..., metavar="INPUT.jsonl", help='Lines of {"id": ..., "text": ...}.'),
    output: Path = typer.Option(..., "--output", "-o", help="Output JSONL; appended to, so an interrupted run resumes."),
    k: int = typer.Option(2, "--k", help="Linkable when fewer than k documents match (k >= 2)."),
    arity: int = typer.Option(1, "--arity", help="1: single phrases; 2 or 3: also combinations."),
    config: Optional[Path] = typer.Option(None, "--config", help="spaCy config with a delink_rewriter component [default: the offline Mask model]."),
    key_file: Optional[Path] = typer.Option(None, "--key-file", help="The index's key [default: <index>.key or $DELINK_KEY_FILE]."),
    batch_size: int = typer.Option(16, "--batch-size", help="Documents whose LLM requests are sent together."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid lines instead of stopping."),
) -> None:
    """Rewrite documents until none is linkable at (k, arity), masking what the LLM cannot fix."""
    from ..rewrite.protect import load_rewriter, protect_file

    rewriter = load_rewriter(index, k, arity, config, key_file)
    summary = protect_file(rewriter, input_path, output, batch_size=batch_size, skip_invalid=skip_invalid)
    failures = ", ".join(f"{name} {count}" for name, count in sorted(summary.failures.items())) or "none"
    typer.echo(
        f"{summary.documents:,} documents protected ({summary.already_done:,} already done): "
        f"{summary.rewritten:,} by rewriting alone, {summary.with_mask:,} with mask fallback, "
        f"{summary.unchanged:,} unchanged; {summary.llm_calls:,} LLM calls; failures: {failures}; "
        f"{summary.seconds:.1f} s -> {output}"
    )
    notes = [
        "repaired a half-written last line" if summary.repaired_last_line else "",
        f"{len(summary.skipped_lines):,} invalid line(s) skipped" if summary.skipped_lines else "",
    ]
    if any(notes):
        typer.echo("note: " + "; ".join(n for n in notes if n), err=True)
