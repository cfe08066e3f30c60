"""`delink evaluate`: linkage before and after protection, an independent engine, utility and semantic linkage."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import app, echo_claims
from .linkage import FORMAT_OPTION, ID_FIELD_HELP, KEY_FILE_OPTION, READINGS_HELP, TEXT_FIELD_HELP, check_k_list_option, check_k_option


@app.command("evaluate")
def evaluate_command(
    index: Path = typer.Argument(..., help="Index directory built by `delink index` from --original."),
    original: Path = typer.Option(..., "--original", help="The original collection (the indexed corpus): JSONL, CSV, TSV, Parquet or a folder."),
    deidentified: Path = typer.Option(..., "--deidentified", help="The de-identified documents (ids of their sources), in any input format."),
    protected: Optional[Path] = typer.Option(None, "--protected", help="What `delink protect` wrote from --deidentified."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for metrics.json, report.html and the plots."),
    k: str = typer.Option("2,3,5", "--k", callback=check_k_list_option, help="Thresholds to evaluate, comma-separated (each >= 2)."),
    arity: str = typer.Option("1,2,3", "--arity", help="Arities to evaluate, comma-separated (1, 2, 3)."),
    report_k: Optional[int] = typer.Option(None, "--report-k", callback=check_k_option, help="k of the documents shown in the report [default: the smallest --k]."),
    report_arity: Optional[int] = typer.Option(None, "--report-arity", help="Arity shown in the report [default: the largest --arity]."),
    max_combinations: int = typer.Option(1000, "--max-combinations", help="Combinations listed per document in the report."),
    readings: str = typer.Option("exact,search,gap", "--readings", help=READINGS_HELP),
    engine: bool = typer.Option(True, "--engine/--no-engine", help="Also run the attack with tantivy (independent search engine)."),
    semantic: bool = typer.Option(True, "--semantic/--no-semantic", help="Semantic linkage and similarity (needs the embeddings extra)."),
    ranked: bool = typer.Option(
        True, "--ranked/--no-ranked", help="Ranked retrieval: tantivy's BM25 with each text as the query (needs the evaluate extra)."
    ),
    key_file: Optional[Path] = KEY_FILE_OPTION,
    verify: bool = typer.Option(True, "--verify/--no-verify", help="Check the index checksums on open."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an earlier evaluation in --output."),
    id_field: str = typer.Option("id", "--id-field", help=ID_FIELD_HELP + " The same in all three inputs."),
    text_field: str = typer.Option("text", "--text-field", help=TEXT_FIELD_HELP + " The same in all three inputs."),
    input_format: Optional[str] = FORMAT_OPTION,
) -> None:
    """Measure linkage before/after protection (ours and tantivy), utility and semantic linkage; write a report."""
    from ..claims import CheckedUnder
    from ..errors import InputError
    from ..evaluate.inputs import InputFields
    from ..evaluate.job import evaluate_to_folder
    from ..evaluate.settings import EvaluationSettings, parse_int_list
    from ..io.files import is_stdio, output_lock
    from ..evaluate.plots import plots_unavailable
    from ..linkage.combinations import check_arity
    from ..linkage.index import CorpusIndex
    from ..linkage.ngrams import check_k
    from ..linkage.readings import check_readings

    settings = EvaluationSettings(
        ks=parse_int_list(k, "--k", check_k),
        arities=parse_int_list(arity, "--arity", lambda value: check_arity(value, allow_single=True)),
        report_k=report_k,
        report_arity=report_arity,
        max_combinations=max_combinations,
        adversary=engine,
        semantic=semantic,
        readings=check_readings(readings),
        fields=InputFields(id_field, text_field, input_format),
        ranked=ranked,
    )
    inputs = [index, original, deidentified] + ([protected] if protected else [])
    for name, path in (("--original", original), ("--deidentified", deidentified), ("--protected", protected), ("--output", output)):
        if path is not None and is_stdio(path):
            raise InputError(f"{name} -: evaluate reads its inputs more than once and writes a folder; give file and folder paths")
    with output_lock(output, "delink evaluate"):
        evaluation = evaluate_to_folder(
            lambda: CorpusIndex(index, key_file=key_file, verify=verify), inputs, output, settings, overwrite=overwrite
        )
    metrics = evaluation.metrics
    for cell in metrics["linkage"]:
        line = f"{CheckedUnder(cell['k'], cell['arity'], index, settings.readings)}: linkable {cell['before']['linkable']}/{cell['before']['documents']}"
        if "after" in cell:
            line += f" → {cell['after']['linkable']}/{cell['after']['documents']} after protection"
            if "engine_linkable" in cell["after"]:
                line += f" (tantivy: {cell['before']['engine_linkable']} → {cell['after']['engine_linkable']})"
            if "proximity" in cell["after"]:
                near = cell["after"]["proximity"]
                line += (
                    f"; sloppy phrases around masks after: {near['gap_reading']['linkable']} in the contract (gap reading), "
                    f"{near['beyond_contract']} more outside it"
                )
        typer.echo(line, err=True)
    counts = metrics["documents"]
    if counts["excluded_total"]:
        reasons = ", ".join(f"{item['count']:,} {item['why']}" for item in counts["excluded"].values())
        typer.echo(f"note: {counts['excluded_total']:,} document(s) left out: {reasons}", err=True)
    if ranked and metrics["ranked"].get("available"):
        summary = metrics["ranked"]
        figures = "; ".join(
            f"{version}: top-1 {100 * summary[version]['top1']:.1f}%, top-10 {100 * summary[version]['top10']:.1f}%, mean rank {summary[version]['mean_rank']}"
            for version in ("before", "after") if version in summary
        )
        typer.echo(f"ranked retrieval (BM25, tantivy): {figures}", err=True)
    elif ranked:
        typer.echo(f"note: ranked retrieval not measured: {metrics['ranked']['reason']}", err=True)
    if not metrics["semantic"].get("available"):
        typer.echo(f"note: semantic linkage not measured: {metrics['semantic']['reason']}", err=True)
    if not metrics["engine"]["available"]:
        typer.echo(f"note: independent engine not run: {metrics['engine']['reason']}", err=True)
    missing_plots = plots_unavailable()
    if missing_plots:
        typer.echo(f"note: plots not drawn: {missing_plots}", err=True)
    disagreements = metrics["engine"]["decision_disagreements"]
    if disagreements:
        typer.echo(f"note: tantivy and our index disagree on {disagreements} decision(s); listed in the report", err=True)
    echo_claims(
        f"evaluated {counts['evaluated']:,} documents against index {index} in {evaluation.seconds:.1f} s → {output}",
        CheckedUnder(min(settings.ks), max(settings.arities), index, settings.readings),
    )


@app.command("evaluate-table")
def evaluate_table_command(
    runs: list[str] = typer.Argument(..., metavar="NAME=FOLDER", help="A name and a `delink evaluate` output folder, repeatable."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the tables here [default: stdout]."),
) -> None:
    """Markdown tables of `delink evaluate` results: linkage per (k, arity), then utility and semantic linkage."""
    from ..evaluate.table import load_run, tables
    from ..io.files import atomic_write

    text = tables([load_run(spec) for spec in runs])
    if output is None:
        typer.echo(text, nl=False)
    else:
        with atomic_write(output) as handle:
            handle.write(text)


def _check_deidentifications(names: Optional[list[str]]) -> Optional[list[str]]:
    from ..evaluate.tab import DEIDENTIFICATIONS

    unknown = [name for name in names or [] if name not in DEIDENTIFICATIONS]
    if unknown:
        raise typer.BadParameter(f"{', '.join(map(repr, unknown))}: choose from {', '.join(sorted(DEIDENTIFICATIONS))}")
    return names


@app.command("tab-convert")
def tab_convert_command(
    tab_dir: Path = typer.Argument(..., metavar="TAB_DIR", help="Folder with the TAB JSON files (`spacy project assets`)."),
    output_dir: Path = typer.Argument(..., metavar="OUTPUT_DIR", help="Folder for corpus.jsonl and deidentified-<name>.jsonl."),
    deidentification: Optional[list[str]] = typer.Option(
        None, "--deidentification", metavar="NAME", callback=_check_deidentifications, help="manual or presidio, repeatable [default: all]."
    ),
    limit: Optional[int] = typer.Option(None, "--limit", help="Keep only the first N test documents as inputs."),
) -> None:
    """The Text Anonymization Benchmark (TAB) as JSONL: its original collection and each de-identification's inputs."""
    from ..evaluate.tab import DEIDENTIFICATIONS, convert

    written = convert(tab_dir, output_dir, deidentification or list(DEIDENTIFICATIONS), limit)
    for name, count in written.items():
        typer.echo(f"{count:,} documents → {output_dir / name}", err=True)
