"""`delink protect`: rewrite documents until protected."""
from __future__ import annotations

import logging
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer

from ..claims import THREAT_MODEL_ARITY
from .app import UsageError, app, echo_claims, output_name
from .linkage import (
    ALLOW_EMPTY_HELP,
    ARITY_HELP,
    FORMAT_OPTION,
    ID_FIELD_OPTION,
    KEY_FILE_OPTION,
    READINGS_HELP,
    SCHEDULER_HELP,
    TEXT_FIELD_OPTION,
    WORKERS_HELP,
    check_k_option,
    report_skipped,
)

OVERRIDE_EXAMPLE = "--components.delink_rewriter.model.name gpt-4o"


@contextmanager
def model_notes() -> Iterator[None]:
    """The model's own notes on stderr while protect runs (a local model's load time and threads), as ``note:`` lines."""
    llm_logger = logging.getLogger("spacy_delink.llm")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("note: %(message)s"))
    handler.setLevel(logging.INFO)
    level = llm_logger.level
    llm_logger.addHandler(handler)
    llm_logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        llm_logger.removeHandler(handler)
        llm_logger.setLevel(level)


def config_overrides(ctx: typer.Context, settings: list[str]) -> dict[str, str]:
    """The config overrides of the command line, as text: spaCy's syntax and the older ``--set``.

    ``--section.key value`` or ``--section.key=value`` (alone: ``true``) as ``spacy train``
    reads them; ``--set section.key=value`` is the same override. The text is read against
    the config later (``rewrite.config.read_override``).
    """
    given = [f"--{setting}" for setting in settings]
    for setting in settings:
        key, equals, _ = setting.partition("=")
        if not equals or "." not in key or not all(key.split(".")):
            raise UsageError(f"--set {setting!r}: expected SECTION.KEY=VALUE, or spaCy's {OVERRIDE_EXAMPLE}", ctx)
    args = given + list(ctx.args)
    overrides: dict[str, str] = {}
    while args:
        option = args.pop(0)
        if not option.startswith("--"):
            raise UsageError(
                f"unexpected argument {option!r}; config overrides are --section.key value (e.g. {OVERRIDE_EXAMPLE}), "
                "given after INDEX and INPUT", ctx,
            )
        key, equals, value = option[2:].partition("=")
        if "." not in key or not all(key.split(".")):
            raise UsageError(f"no such option: {option}", ctx)
        if not equals:
            value = args.pop(0) if args and not args[0].startswith("--") else "true"
        if key in overrides:
            raise UsageError(f"config override {key} is given twice; keep one", ctx)
        overrides[key] = value
    return overrides


@app.command("protect", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def protect_command(
    ctx: typer.Context,
    index: Path = typer.Argument(..., help="Index directory built by `delink index`."),
    input_path: Path = typer.Argument(
        ..., metavar="INPUT", help='JSONL lines {"id": ..., "text": ...} (.gz, .zst), a CSV, TSV or Parquet table, a folder of .txt/.md files, or - (stdin).'
    ),
    output: Path = typer.Option(
        ..., "--output", "-o",
        help="Every input field kept, the text protected: JSONL (appended to, so an interrupted run resumes; - writes stdout, "
        "no resume), or CSV/TSV/Parquet when the name ends so (journaled beside it, resumed, written at the end).",
    ),
    k: int = typer.Option(2, "--k", callback=check_k_option, help="Linkable when fewer than k documents match (k >= 2)."),
    arity: int = typer.Option(THREAT_MODEL_ARITY, "--arity", help=ARITY_HELP),
    readings: str = typer.Option("exact,search,gap", "--readings", help=READINGS_HELP),
    config: Optional[Path] = typer.Option(
        None, "--config",
        help="spaCy config with a delink_rewriter component, or a shipped one by name: mask, openai, local "
        "(a GGUF model in process) [default: the offline Mask model]; "
        f"its values can be overridden after INDEX and INPUT as spaCy does, e.g. {OVERRIDE_EXAMPLE}.",
    ),
    key_file: Optional[Path] = KEY_FILE_OPTION,
    batch_size: int = typer.Option(16, "--batch-size", help="Documents whose LLM requests are sent together."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid lines instead of stopping."),
    id_field: str = ID_FIELD_OPTION,
    text_field: str = TEXT_FIELD_OPTION,
    input_format: Optional[str] = FORMAT_OPTION,
    allow_empty: bool = typer.Option(False, "--allow-empty", help=ALLOW_EMPTY_HELP.format(verb="protected")),
    require_llm: bool = typer.Option(
        False, "--require-llm", help="Fail (status 1) when the LLM gives no answer, e.g. its endpoint is down, instead of masking."
    ),
    flagging: Optional[str] = typer.Option(
        None, "--flagging",
        help="What to rewrite: shortest (the paper's rule), min_cover (fewest tokens changed) or optimal (exact, small documents) [default: min_cover, or the config's]. See docs/flagging.md.",
    ),
    settings: Optional[list[str]] = typer.Option(
        None, "--set", metavar="SECTION.KEY=VALUE",
        help="The same as --SECTION.KEY=VALUE (repeatable): a value of the --config, read as spaCy reads overrides.",
    ),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Documents masked at once, same output for any number [default: one per CPU, or the config's; 1 on each Dask worker]."
    ),
    workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    retrieval: int = typer.Option(
        0, "--retrieval", metavar="K",
        help="Ranked retrieval (opt-in): after the phrase rules hold, mask words until at least K-1 other documents outscore "
        "each text's source under BM25, the text as the query; the record's id names the source; needs <index>.retrieval "
        "(`delink index --retrieval`) [default: 0, off] (docs/evaluate.md).",
    ),
) -> None:
    """Rewrite documents until none is linkable at (k, arity), masking what the LLM cannot fix."""
    from ..claims import CheckedUnder
    from ..corpus.source import InputSource
    from ..linkage.index.distributed import DaskRunner
    from ..linkage.readings import check_readings
    from ..rewrite.config import RewriterSpec, load_rewriter
    from ..rewrite.protect import protect_file

    from ..retrieval.defence import check_retrieval_rank

    overrides = config_overrides(ctx, settings or [])
    source = InputSource(input_path, input_format, id_field, text_field)
    checked_readings = check_readings(readings)
    check_retrieval_rank(retrieval)
    rewriter = load_rewriter(
        index, k, arity, config, key_file, require_llm=require_llm, flagging=flagging, config_overrides=overrides, threads=threads,
        readings=checked_readings, retrieval=retrieval,
    )
    # The workers share the machine's CPUs already: one document at a time on each, unless asked.
    spec = RewriterSpec.of(
        index, k, arity, config, key_file, require_llm, flagging, overrides, 1 if threads is None else threads, checked_readings,
        retrieval,
    )
    runner = DaskRunner(workers, scheduler) if workers is not None or scheduler is not None else None
    try:
        with model_notes():
            summary = protect_file(
                rewriter, source, output, batch_size=batch_size, skip_invalid=skip_invalid,
                runner=runner, spec=spec if runner is not None else None, allow_empty=allow_empty,
            )
    finally:
        if runner is not None:
            runner.close()

    def counts(counter: dict[str, int], prefix: str) -> str:
        return ", ".join(f"{name.removeprefix(prefix)} {n:,}" for name, n in sorted(counter.items())) or "none"

    per_document = f"{summary.seconds / summary.documents:.2f} s per document; " if summary.documents else ""
    checked = CheckedUnder(k, arity, index, checked_readings)
    ranked = f" and ranked at least {retrieval}-th by BM25 (the text as the query)" if retrieval else ""
    echo_claims(
        f"{summary.documents:,} documents protected under {checked}{ranked} "
        f"({summary.already_done:,} already done, {sum(summary.redone.values()):,} redone, {len(summary.skipped_lines):,} skipped): "
        f"{summary.outcomes['rewritten']:,} by rewriting alone, {summary.outcomes['with_mask']:,} with mask fallback, "
        f"{summary.outcomes['unchanged']:,} unchanged; {summary.llm_calls:,} LLM calls; "
        f"failed calls: {counts(summary.failures, 'failed_')}; rejected rewrites: {counts(summary.rejected, 'rejected_')}; "
        f"{per_document}{summary.seconds:.1f} s -> {output_name(output)}",
        checked,
    )
    notes = [
        (
            f"the LLM endpoint was down (circuit breaker): {summary.endpoint_down:,} prompt(s) not sent, their spans "
            "were masked; pass --require-llm to make this an error"
        ) if summary.endpoint_down else "",
        "repaired a half-written last line" if summary.repaired_last_line else "",
        (
            f"{len(summary.copied_fields):,} other field(s) of the input copied as they are, not checked: "
            + ", ".join(summary.copied_fields[:10]) + (", ..." if len(summary.copied_fields) > 10 else "")
        ) if summary.copied_fields else "",
        (
            "earlier records redone: " + ", ".join(f"{n:,} {why.replace('_', ' ')}" for why, n in sorted(summary.redone.items()))
        ) if summary.redone else "",
    ]
    if any(notes):
        typer.echo("note: " + "; ".join(n for n in notes if n), err=True)
    report_skipped(summary.skipped_lines, "protected")
