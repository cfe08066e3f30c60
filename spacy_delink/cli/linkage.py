"""`delink index`, `delink assess`: building the index and running the attack."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import app


@app.command("index")
def index_command(
    corpus: list[Path] = typer.Argument(..., help="JSONL/JSONL.gz files, folders of .txt files, or .spacy DocBins."),
    output: Path = typer.Option(..., "--output", "-o", help="Index directory to create."),
    max_n: int = typer.Option(8, "--max-n", help="Longest N-gram to index (SPEC §3)."),
    text_field: str = typer.Option("text", "--text-field", help="JSONL field holding the text."),
    id_field: str = typer.Option("id", "--id-field", help="JSONL field holding the document id."),
    memory_mb: int = typer.Option(2048, "--memory-mb", help="Working-memory budget; larger corpora spill to disk."),
    key_file: Optional[Path] = typer.Option(None, "--key-file", help="Where to write the secret key [default: <output>.key or $DELINK_KEY_FILE]."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid JSON lines instead of stopping."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing index at --output."),
) -> None:
    """Build a keyed-hash N-gram index over the original collection."""
    from ..corpus import CorpusStats, read_documents
    from ..linkage.index import IndexBuilder
    from ..linkage.tokenize import LinkageRules

    stats = CorpusStats()
    documents = read_documents(corpus, text_field, id_field, skip_invalid, stats)
    summary = IndexBuilder(LinkageRules(max_n=max_n), memory_mb=memory_mb).build(
        documents, output, key_file=key_file, overwrite=overwrite
    )
    typer.echo(
        f"indexed {summary.documents:,} documents ({summary.empty_documents:,} empty), {summary.tokens:,} tokens, "
        f"{summary.ngrams:,} distinct n-grams stored, {summary.bytes_on_disk:,} bytes "
        f"({summary.bytes_on_disk / max(summary.tokens, 1):.1f} per token) in {summary.seconds:.1f} s → {output}"
    )
    if stats.skipped_lines:
        typer.echo(f"skipped {len(stats.skipped_lines)} invalid line(s): {', '.join(stats.skipped_lines[:5])}", err=True)


@app.command("assess")
def assess_command(
    index: Path = typer.Argument(..., help="Index directory built by `delink index`."),
    input_path: Path = typer.Argument(..., metavar="INPUT.jsonl", help='Lines of {"id": ..., "text": ...}.'),
    output: Path = typer.Option(..., "--output", "-o", help="Output JSONL, one record per input document."),
    k: int = typer.Option(2, "--k", help="Linkable when fewer than k documents match (k >= 2)."),
    arity: int = typer.Option(1, "--arity", help="1: single phrases; 2 or 3: also combinations."),
    max_combinations: int = typer.Option(1000, "--max-combinations", help="Report cap per document (scores stay exact)."),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write an HTML report with the spans highlighted."),
    key_file: Optional[Path] = typer.Option(None, "--key-file", help="The index's key [default: <index>.key or $DELINK_KEY_FILE]."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid JSON lines."),
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Check the index checksums on open."),
) -> None:
    """Find every phrase (and combination) of each document that singles out fewer than k sources."""
    from ..evaluate.assess import assess_file
    from ..linkage.ngrams import check_k
    from ..linkage.index import CorpusIndex

    check_k(k)
    summary = assess_file(
        CorpusIndex(index, key_file=key_file, verify=verify),
        input_path,
        output,
        k,
        arity,
        html,
        skip_invalid,
        max_combinations=max_combinations,
    )
    typer.echo(
        f"assessed {summary.documents:,} documents: {summary.linkable_documents:,} linkable at k={k} "
        f"in {summary.seconds:.1f} s → {output}"
    )
    if summary.skipped_lines:
        typer.echo(f"skipped {len(summary.skipped_lines)} invalid line(s): {', '.join(summary.skipped_lines[:5])}", err=True)
