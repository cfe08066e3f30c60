"""`delink protect`: rewrite documents until protected."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import app
from .linkage import SCHEDULER_HELP, WORKERS_HELP, check_k_option


@app.command("protect")
def protect_command(
    index: Path = typer.Argument(..., help="Index directory built by `delink index`."),
    input_path: Path = typer.Argument(..., metavar="INPUT.jsonl", help='Lines of {"id": ..., "text": ...}.'),
    output: Path = typer.Option(..., "--output", "-o", help="Output JSONL; appended to, so an interrupted run resumes."),
    k: int = typer.Option(2, "--k", callback=check_k_option, help="Linkable when fewer than k documents match (k >= 2)."),
    arity: int = typer.Option(1, "--arity", help="1: single phrases; 2 or 3: also combinations."),
    config: Optional[Path] = typer.Option(None, "--config", help="spaCy config with a delink_rewriter component [default: the offline Mask model]."),
    key_file: Optional[Path] = typer.Option(None, "--key-file", help="The index's key [default: <index>.key or $DELINK_KEY_FILE]."),
    batch_size: int = typer.Option(16, "--batch-size", help="Documents whose LLM requests are sent together."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid lines instead of stopping."),
    require_llm: bool = typer.Option(
        False, "--require-llm", help="Fail (status 1) when the LLM gives no answer, e.g. its endpoint is down, instead of masking."
    ),
    flagging: Optional[str] = typer.Option(
        None, "--flagging",
        help="What to rewrite: shortest (the paper's rule), min_cover (fewest tokens changed) or optimal (exact, small documents) [default: min_cover, or the config's]. See docs/flagging.md.",
    ),
    settings: Optional[list[str]] = typer.Option(
        None, "--set", metavar="SECTION.KEY=VALUE",
        help="Set a value of the --config, e.g. --set llm.model=llama3.1:8b (repeatable; a JSON value, else text).",
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Documents masked at once, same output for any number [default: one per CPU, or the config's; 1 on each Dask worker]."
    ),
    workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
) -> None:
    """Rewrite documents until none is linkable at (k, arity), masking what the LLM cannot fix."""
    from ..linkage.index.distributed import DaskRunner
    from ..rewrite.protect import RewriterSpec, load_rewriter, parse_settings, protect_file

    overrides = parse_settings(settings or [])
    rewriter = load_rewriter(
        index, k, arity, config, key_file, require_llm=require_llm, flagging=flagging, config_overrides=overrides, threads=threads
    )
    # The workers share the machine's CPUs already: one document at a time on each, unless asked.
    spec = RewriterSpec.of(index, k, arity, config, key_file, require_llm, flagging, overrides, 1 if threads is None else threads)
    runner = DaskRunner(workers, scheduler) if workers is not None or scheduler is not None else None
    try:
        summary = protect_file(
            rewriter, input_path, output, batch_size=batch_size, skip_invalid=skip_invalid,
            runner=runner, spec=spec if runner is not None else None,
        )
    finally:
        if runner is not None:
            runner.close()

    def counts(counter: dict[str, int], prefix: str) -> str:
        return ", ".join(f"{name.removeprefix(prefix)} {n:,}" for name, n in sorted(counter.items())) or "none"

    typer.echo(
        f"{summary.documents:,} documents protected ({summary.already_done:,} already done): "
        f"{summary.rewritten:,} by rewriting alone, {summary.with_mask:,} with mask fallback, "
        f"{summary.unchanged:,} unchanged; {summary.llm_calls:,} LLM calls; "
        f"failed calls: {counts(summary.failures, 'failed_')}; rejected rewrites: {counts(summary.rejected, 'rejected_')}; "
        f"{summary.seconds:.1f} s -> {output}",
        err=True,
    )
    notes = [
        (
            f"the LLM endpoint was down (circuit breaker): {summary.endpoint_down:,} prompt(s) not sent, their spans "
            "were masked; pass --require-llm to make this an error"
        ) if summary.endpoint_down else "",
        "repaired a half-written last line" if summary.repaired_last_line else "",
        f"{len(summary.skipped_lines):,} invalid line(s) skipped" if summary.skipped_lines else "",
    ]
    if any(notes):
        typer.echo("note: " + "; ".join(n for n in notes if n), err=True)
