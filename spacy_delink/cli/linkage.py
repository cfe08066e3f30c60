"""`delink index`, `delink assess`: building the index and running the attack."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..claims import THREAT_MODEL_ARITY
from .app import app, echo_claims, output_name

ARITY_HELP = (
    f"Largest number of phrases searched together: 1 checks single phrases only; {THREAT_MODEL_ARITY} (the threat model, "
    "docs/linkage-rules.md) also pairs and triples."
)
STRICT_HELP = "Refuse a key file or id mapping that another user owns or group or others may access (default: warn) [also $DELINK_STRICT_KEY_PERMISSIONS=1]."
WORKERS_HELP = "Run on a local Dask cluster of N worker processes [default: this process] (docs/scale.md)."
SCHEDULER_HELP = "Run on an existing Dask cluster, e.g. tcp://host:8786 (tls:// on untrusted networks); paths must be shared, or URLs every worker reads (docs/scale.md)."
READINGS_HELP = (
    "Readings of the rules checked, comma-separated: exact (the paper's, broken at punctuation), search (what a search "
    "engine reads: punctuation-blind, invisible and look-alike characters folded) and gap (sloppy phrases around masks) "
    "(docs/linkage-rules.md §8–§9)."
)


def check_k_option(value: int | None) -> int | None:
    """``--k`` checked as the command line is parsed: a k the kernels cannot hold is a bad argument (status 2)."""
    from ..errors import InputError
    from ..linkage.ngrams import check_k

    try:
        return None if value is None else check_k(value)
    except InputError as err:
        raise typer.BadParameter(str(err)) from None


def check_k_list_option(value: str) -> str:
    """A comma-separated ``--k`` (``delink evaluate``), each value checked as ``check_k_option`` does."""
    from ..errors import InputError
    from ..evaluate.settings import parse_int_list
    from ..linkage.ngrams import check_k

    try:
        parse_int_list(value, "--k", check_k)
    except InputError as err:
        raise typer.BadParameter(str(err)) from None
    return value


ID_FIELD_HELP = "Field (JSONL) or column (CSV, TSV, Parquet) holding the document id; a folder's ids are its files' paths."
TEXT_FIELD_HELP = "Field (JSONL) or column (CSV, TSV, Parquet) holding the text."
FORMAT_HELP = "Input format where its name does not say: jsonl, csv, tsv, parquet or folder [default: from the name; stdin: jsonl]."
#: The options every command reading documents or an index spells the same way (one definition, one help).
KEY_FILE_OPTION = typer.Option(None, "--key-file", help="The index's key [default: <index>.key or $DELINK_KEY_FILE].")
ID_FIELD_OPTION = typer.Option("id", "--id-field", help=ID_FIELD_HELP)
TEXT_FIELD_OPTION = typer.Option("text", "--text-field", help=TEXT_FIELD_HELP)
FORMAT_OPTION = typer.Option(None, "--format", help=FORMAT_HELP)
ALLOW_EMPTY_HELP = "Succeed even when no document was {verb} (an empty input, every input skipped) [default: exit 1, so no script reads an empty run as all clear]."


def report_skipped(lines: list[str], verb: str) -> None:
    """The run's last line when inputs were skipped: how many, the first few, and that they were not handled."""
    if lines:
        more = f" and {len(lines) - 5:,} more" if len(lines) > 5 else ""
        typer.echo(f"warning: {len(lines):,} input(s) skipped as invalid and not {verb}: {'; '.join(lines[:5])}{more}", err=True)


@app.command("index")
def index_command(
    corpus: list[str] = typer.Argument(
        ..., metavar="CORPUS",
        help="JSONL/JSONL.gz files, folders of .txt files, or .spacy DocBins (ids: docs/index.md): paths, or URLs fsspec opens "
        "(s3://, gs://, https://, file://, chains; globs expanded outside http) (docs/scale.md).",
    ),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Index directory to create (required unless --update)."),
    update: Optional[Path] = typer.Option(
        None, "--update", metavar="INDEX", help="Add CORPUS (new ids only) to this updatable index as a delta, instead of building (docs/scale.md)."
    ),
    updatable: bool = typer.Option(
        False, "--updatable", help="Also store each document's tokens as level-1 rows (about 2-3 bytes per token), which --update and `delink compact` need."
    ),
    max_n: int = typer.Option(8, "--max-n", help="Longest N-gram to index (docs/linkage-rules.md)."),
    max_n_chars: int = typer.Option(
        16, "--max-n-chars", help="Most characters of scripts written without spaces in one N-gram of the search reading (docs/languages.md).",
    ),
    max_gap: int = typer.Option(
        16, "--max-gap", help="Most tokens a mask stretch stands for in the gap reading's sloppy phrases around it (docs/linkage-rules.md §9).",
    ),
    readings: str = typer.Option(
        "exact,search,gap", "--readings",
        help="Readings of the rules the index holds, comma-separated; a query for another is refused (docs/linkage-rules.md §8–§9).",
    ),
    text_field: str = TEXT_FIELD_OPTION,
    id_field: str = ID_FIELD_OPTION,
    input_format: Optional[str] = FORMAT_OPTION,
    memory_mb: int = typer.Option(2048, "--memory-mb", help="Working-memory budget; larger corpora spill to disk."),
    key_file: Optional[Path] = typer.Option(
        None, "--key-file", help="Key file the secret is added to (other keys in it are kept) [default: <output>.key or $DELINK_KEY_FILE]."
    ),
    doc_ids: str = typer.Option(
        "keyed", "--doc-ids", help="keyed: the index holds keyed digests of the ids, the mapping goes to --ids-file; external: no mapping is written."
    ),
    ids_file: Optional[Path] = typer.Option(
        None, "--ids-file", help="Where the id mapping goes; keep it private like the key [default: <output>.ids.json]."
    ),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid lines instead of stopping."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing index at --output (with its key and id mapping, in one step)."),
    strict_key_permissions: bool = typer.Option(False, "--strict-key-permissions", help=STRICT_HELP),
    embeddings: bool = typer.Option(
        False, "--embeddings", help="Also embed the corpus into <output>.embeddings for semantic linkage (docs/evaluate.md)."
    ),
    retrieval: bool = typer.Option(
        False, "--retrieval",
        help="Also count BM25 statistics (keyed word digests, no text) into <output>.retrieval, for `delink assess`'s "
        "retrieval rank and `delink protect --retrieval` (docs/evaluate.md).",
    ),
    workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    shards: Optional[int] = typer.Option(None, "--shards", help="Number of hash-range shards, a power of two [default: from the corpus size and --memory-mb] (docs/scale.md)."),
    work_dir: Optional[Path] = typer.Option(None, "--work-dir", help="Scratch space of the build [default: beside --output]; with --scheduler, shared storage every worker sees."),
) -> None:
    """Build a keyed-hash N-gram index over the original collection (docs/index.md, docs/scale.md)."""
    from ..corpus.source import resolve_sources
    from ..errors import InputError
    from ..io.files import is_stdio, refuse_same_file
    from ..urls import is_url
    from ..linkage.index import CorpusFiles, IndexBuilder, resolve_key_path
    from ..linkage.readings import check_readings, describe
    from ..linkage.tokenize import LinkageRules

    sources = resolve_sources(corpus)
    if update is not None:
        given = [name for name, value in (
            ("--output", output), ("--overwrite", overwrite), ("--updatable", updatable), ("--embeddings", embeddings),
            ("--retrieval", retrieval),
            ("--readings", readings != "exact,search,gap"),
            ("--workers", workers), ("--scheduler", scheduler), ("--shards", shards), ("--work-dir", work_dir),
        ) if value]
        if given:
            raise InputError(f"--update adds to an existing index and takes no {', '.join(given)}; drop it or build without --update")
        _update(update, sources, text_field, id_field, skip_invalid, key_file, ids_file, memory_mb, strict_key_permissions, input_format)
        return
    if output is None:
        raise InputError("give --output DIR (the index to build) or --update INDEX (the index to add to)")
    refuse_same_file(sources, output, "--output")
    refuse_same_file(sources, resolve_key_path(output, key_file), "--key-file")
    if ids_file is not None:
        refuse_same_file(sources, ids_file, "--ids-file")
    if embeddings:
        from ..errors import DelinkError
        from ..semantic import embeddings_unavailable

        if embeddings_unavailable():
            raise DelinkError(f"--embeddings: {embeddings_unavailable()}")
        if any(is_url(source) for source in sources):
            raise InputError("--embeddings reads the corpus from local paths only; copy it here, or build the embeddings from local files")
    if retrieval and any(is_url(source) or is_stdio(source) for source in sources):
        raise InputError("--retrieval reads the corpus twice, from local paths only; copy it here, or count it from local files")
    documents = CorpusFiles(tuple(sources), text_field, id_field, skip_invalid, input_format)
    builder = IndexBuilder(
        LinkageRules(max_n=max_n, max_n_chars=max_n_chars, max_gap=max_gap),
        memory_mb=memory_mb,
        workers=workers,
        dask=workers is not None,
        scheduler=scheduler,
        shards=shards,
        work_dir=work_dir,
        updatable=updatable,
        readings=check_readings(readings),
    )
    summary = builder.build(
        documents,
        output,
        key_file=key_file,
        overwrite=overwrite,
        doc_ids=doc_ids,
        ids_file=ids_file,
        strict_key_permissions=strict_key_permissions or None,
    )
    for note in summary.notes:
        typer.echo(f"note: {note}", err=True)
    words = next(iter(summary.reading_tokens.values()))  # the collection's tokens under the first reading (exact)
    typer.echo(
        f"indexed {summary.documents:,} documents ({summary.empty_documents:,} empty, {len(summary.skipped_lines):,} skipped), {words:,} tokens, "
        f"{summary.ngrams:,} distinct n-grams stored ({describe(builder.readings)}), {summary.bytes_on_disk:,} bytes "
        f"({summary.bytes_on_disk / max(words, 1):.1f} per token) in {summary.seconds:.1f} s → {output}",
        err=True,
    )
    if embeddings:
        from ..semantic.index import embed_corpus

        built = embed_corpus(output, [Path(source) for source in sources], key_file, text_field, id_field, skip_invalid)
        typer.echo(f"embedded {built.documents:,} documents ({built.dimensions} dimensions, {built.bytes_on_disk:,} bytes) → {built.path}", err=True)
    if retrieval:
        from ..retrieval.store import count_corpus

        counted = count_corpus(output, [Path(source) for source in sources], key_file, text_field, id_field, skip_invalid, input_format=input_format)
        typer.echo(f"counted BM25 statistics of {summary.documents:,} documents → {counted}", err=True)
    report_skipped(summary.skipped_lines, "indexed")


def _update(
    index: Path, corpus: list[str], text_field: str, id_field: str, skip_invalid: bool, key_file: Optional[Path],
    ids_file: Optional[Path], memory_mb: int, strict_key_permissions: bool, input_format: Optional[str],
) -> None:
    """`delink index --update`: the new documents as a delta of ``index``."""
    from ..corpus.rules import CorpusStats
    from ..corpus.source import read_documents
    from ..io.files import refuse_same_file
    from ..linkage.index.update import update_index

    refuse_same_file(corpus, index, "--update")
    stats = CorpusStats()
    summary = update_index(
        index, read_documents(corpus, text_field, id_field, skip_invalid, stats, input_format), key_file=key_file, ids_file=ids_file,
        strict_key_permissions=strict_key_permissions or None, memory_mb=memory_mb,
    )
    for note in summary.notes:
        typer.echo(f"note: {note}", err=True)
    typer.echo(
        f"added {summary.documents:,} documents ({summary.empty_documents:,} empty, {len(stats.skipped_lines):,} skipped), {summary.tokens:,} tokens as {summary.delta} "
        f"({summary.linked_documents:,} indexed documents re-read), {summary.bytes_on_disk:,} bytes in {summary.seconds:.1f} s → {index}",
        err=True,
    )
    report_skipped(stats.skipped_lines, "indexed")


@app.command("compact")
def compact_command(
    index: Path = typer.Argument(..., help="Updatable index directory whose deltas to merge into its base."),
    key_file: Optional[Path] = KEY_FILE_OPTION,
    ids_file: Optional[Path] = typer.Option(None, "--ids-file", help="The index's id mapping [default: <index>.ids.json]."),
    memory_mb: int = typer.Option(2048, "--memory-mb", help="Working-memory budget; larger indexes spill to disk."),
    shards: Optional[int] = typer.Option(None, "--shards", help="Number of hash-range shards, a power of two [default: as a fresh build would choose] (docs/scale.md)."),
    strict_key_permissions: bool = typer.Option(False, "--strict-key-permissions", help=STRICT_HELP),
) -> None:
    """Merge an index's deltas (from `delink index --update`) into its base, as a fresh build of all its documents."""
    from ..linkage.index.update import compact_index

    summary = compact_index(
        index, key_file=key_file, ids_file=ids_file, strict_key_permissions=strict_key_permissions or None,
        memory_mb=memory_mb, shards=shards,
    )
    for note in summary.notes:
        typer.echo(f"note: {note}", err=True)
    if summary.documents:
        typer.echo(
            f"compacted {summary.documents:,} documents, {summary.tokens:,} tokens into {summary.shards} shard(s), "
            f"{summary.bytes_on_disk:,} bytes in {summary.seconds:.1f} s → {index}",
            err=True,
        )


@app.command("assess")
def assess_command(
    index: Path = typer.Argument(..., help="Index directory built by `delink index`."),
    input_path: Path = typer.Argument(
        ..., metavar="INPUT", help='JSONL lines {"id": ..., "text": ...} (.gz, .zst), a CSV, TSV or Parquet table, a folder of .txt/.md files, or - (stdin).'
    ),
    output: Path = typer.Option(
        ..., "--output", "-o",
        help="One record per input document, every input field kept but the text: JSONL, or CSV/TSV/Parquet when the name ends so; - writes stdout.",
    ),
    k: int = typer.Option(2, "--k", callback=check_k_option, help="Linkable when fewer than k documents match (k >= 2)."),
    arity: int = typer.Option(THREAT_MODEL_ARITY, "--arity", help=ARITY_HELP),
    max_combinations: int = typer.Option(1000, "--max-combinations", help="Report cap per document, all readings together (scores stay exact)."),
    all_combinations: bool = typer.Option(
        False, "--all-combinations", help="List every combination (up to --max-combinations), not one per group of slides."
    ),
    readings: str = typer.Option("exact,search,gap", "--readings", help=READINGS_HELP),
    html: Optional[Path] = typer.Option(None, "--html", help="Also write an HTML report with the spans highlighted (a file)."),
    key_file: Optional[Path] = KEY_FILE_OPTION,
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid lines."),
    id_field: str = ID_FIELD_OPTION,
    text_field: str = TEXT_FIELD_OPTION,
    input_format: Optional[str] = FORMAT_OPTION,
    allow_empty: bool = typer.Option(False, "--allow-empty", help=ALLOW_EMPTY_HELP.format(verb="assessed")),
    verify: bool = typer.Option(
        True, "--verify/--no-verify", help="Check every array's checksum on open (the manifest's MAC and sizes are always checked)."
    ),
    strict_key_permissions: bool = typer.Option(False, "--strict-key-permissions", help=STRICT_HELP),
    workers: Optional[int] = typer.Option(None, "--workers", help=WORKERS_HELP),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help=SCHEDULER_HELP),
    source_field: Optional[str] = typer.Option(
        None, "--source-field",
        help="Field naming each text's source in the collection, for its BM25 rank (with <index>.retrieval) "
        "[default: the record's id, when the collection holds it].",
    ),
) -> None:
    """Find every phrase (and combination) of each document that singles out fewer than k sources."""
    from ..claims import CheckedUnder
    from ..corpus.source import InputSource
    from ..errors import InputError
    from ..evaluate.assess import assess_file, check_assess_outputs
    from ..io.files import is_stdio, output_lock
    from ..linkage.index import CorpusIndex
    from ..linkage.index.distributed import DaskRunner
    from ..linkage.ngrams import check_k
    from ..linkage.readings import check_readings

    check_k(k)
    checked_readings = check_readings(readings)
    if html is not None and is_stdio(html):
        raise InputError("--html -: the report is a page, not a stream; give a file such as report.html (-o - streams the JSONL)")
    source = InputSource(input_path, input_format, id_field, text_field)
    check_assess_outputs(source, output, html)
    corpus_index = CorpusIndex(index, key_file=key_file, verify=verify, strict_key_permissions=strict_key_permissions or None)
    corpus_index.require_readings(checked_readings)
    runner = DaskRunner(workers, scheduler) if workers is not None or scheduler is not None else None
    try:
        with output_lock(output, "delink assess"):
            summary = assess_file(
                corpus_index, source, output, k, arity, html, skip_invalid, max_combinations=max_combinations, runner=runner,
                readings=checked_readings, all_combinations=all_combinations, allow_empty=allow_empty, source_field=source_field,
            )
    finally:
        if runner is not None:
            runner.close()
    checked = CheckedUnder(k, arity, index, checked_readings)
    echo_claims(
        f"assessed {summary.documents:,} documents ({len(summary.skipped_lines):,} skipped) under {checked}: "
        f"{summary.linkable_documents:,} linkable in {summary.seconds:.1f} s → {output_name(output)}",
        checked,
    )
    report_skipped(summary.skipped_lines, "assessed")
