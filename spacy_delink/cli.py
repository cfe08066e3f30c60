"""The `delink` command line (also `python -m spacy_delink`).

Each command is a thin wrapper: it parses options, calls the library, shows progress and
turns :class:`~spacy_delink.errors.DelinkError` into a one-line message and exit status 1.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from .errors import DelinkError

app = typer.Typer(
    name="delink",
    help="Protect de-identified documents against search-based linkage attacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: run the app, mapping expected errors to exit status 1."""
    try:
        app(args=argv)
    except DelinkError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(1)


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
    from .corpus import CorpusStats, read_documents
    from .index import IndexBuilder
    from .tokenization import LinkageRules

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
    from .assess import assess_file
    from .detection import check_k
    from .index import CorpusIndex

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


@app.command("privacy-level")
def privacy_level_command(
    original: Path = typer.Argument(..., metavar="ORIGINAL.csv", help="The table before anonymization."),
    anonymized: Path = typer.Argument(..., metavar="ANONYMIZED.csv", help="The released table, same rows."),
    qi: str = typer.Option(..., "--qi", help="Comma-separated quasi-identifier columns, e.g. age,zip."),
    sensitive: str = typer.Option(..., "--sensitive", help="Comma-separated sensitive columns, e.g. salary,disease."),
    local: bool = typer.Option(False, "--local", help="Also the local PL of each QI given the other QIs."),
    as_json: bool = typer.Option(False, "--json", help="Print the full report as JSON instead of a table."),
    id_column: Optional[str] = typer.Option(None, "--id-column", help="Pair rows by this column instead of by position."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the JSON report to this file."),
) -> None:
    """Privacy level PL = DR x IR of an anonymized table (Zang & Zhu 2024); 0 is best protection."""
    import json

    from .io import atomic_write
    from .tabular import privacy_level

    report = privacy_level(original, anonymized, qi, sensitive, id_column=id_column, local=local)
    document = json.dumps(report.to_dict(), indent=2, ensure_ascii=False)
    if output is not None:
        with atomic_write(output) as handle:
            handle.write(document + "\n")
    if as_json:
        typer.echo(document)
        return
    typer.echo(f"{report.rows:,} rows; QIs: {', '.join(report.quasi_identifiers)}; sensitive: {', '.join(report.sensitive)}")
    typer.echo(f"{'attribute':<32} {'known':<32} {'DR':>7} {'IR':>7} {'PL':>7}")
    singles = report.per_sensitive.values() if len(report.sensitive) > 1 else ()
    measures = [report.overall, *singles, *report.local.values()]
    for measure in measures:
        typer.echo(
            f"{', '.join(measure.attributes):<32.32} {', '.join(measure.known) or '-':<32.32} "
            f"{measure.discrimination_rate:7.4f} {measure.information_ratio:7.4f} {measure.privacy_level:7.4f}"
        )
    typer.echo(
        f"entropy change EC = {report.entropy_change:.4f} "
        f"(QI entropy {report.entropy_qi_original:.3f} -> {report.entropy_qi_anonymized:.3f} bits)"
    )


@app.command("anonymize-table")
def anonymize_table_command(
    data: Path = typer.Argument(..., metavar="DATA.csv", help="The table to anonymize (delimiter auto-detected)."),
    hierarchy: list[str] = typer.Option(..., "--hierarchy", "-H", help="COLUMN=PATH of an ARX hierarchy CSV; repeat for each QI."),
    output: Path = typer.Option(..., "--output", "-o", help="Anonymized CSV to write (suppressed rows keep '*' QIs)."),
    k: Optional[int] = typer.Option(None, "--k", help="k-anonymity: every class holds at least k records."),
    l: Optional[int] = typer.Option(None, "--l", help="Distinct l-diversity of every sensitive column."),
    t: Optional[float] = typer.Option(None, "--t", help="t-closeness (EMD) of every sensitive column."),
    sensitive: str = typer.Option("", "--sensitive", help="Comma-separated sensitive columns (needed for --l and --t)."),
    suppression_limit: float = typer.Option(0.0, "--suppression-limit", help="Largest share of records that may be suppressed."),
) -> None:
    """Optimal full-domain generalization (least non-uniform entropy) under k, l and t."""
    from .errors import InputError
    from .tabular import write_csv
    from .tabular.anonymize import anonymize

    hierarchies: dict[str, str] = {}
    for spec in hierarchy:
        column, separator, path = spec.partition("=")
        if not separator or not column or not path:
            raise InputError(f"--hierarchy {spec!r}: expected COLUMN=PATH, e.g. age=hierarchy_age.csv")
        hierarchies[column] = path
    result = anonymize(
        data,
        hierarchies,
        k=k,
        l=l,
        t=t,
        sensitive=[name.strip() for name in sensitive.split(",") if name.strip()],
        suppression_limit=suppression_limit,
        progress=True,
    )
    write_csv(result.table, output)
    levels = ", ".join(f"{name}={level}" for name, level in result.levels.items())
    typer.echo(
        f"levels {levels}; loss {result.loss:,.1f} bits; {result.suppressed:,} of {result.rows:,} rows suppressed; "
        f"{result.classes:,} classes (smallest {result.min_class_size}); "
        f"{result.nodes_evaluated} of {result.lattice_size} nodes checked in {result.seconds:.2f} s -> {output}",
        err=True,
    )


@app.command("train-redactor")
def train_redactor_command(
    sensitive: Path = typer.Option(..., "--sensitive", help="JSONL of the sensitive collection D0 (one text per line)."),
    safe: Path = typer.Option(..., "--safe", help="JSONL of the safe collection D1."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for the trained spaCy pipeline."),
    fraction: float = typer.Option(0.2, "--fraction", help="Share of each text's words to redact, in (0, 1]."),
    method: str = typer.Option("ranker", "--method", help="ranker (learned) or logreg (TF-IDF baseline)."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field holding the text."),
    base_model: Optional[str] = typer.Option(None, "--base-model", help="spaCy pipeline to extend (default: blank English)."),
    embedder: str = typer.Option("minilm", "--embedder", help="minilm, or spacy to use the base model's doc.tensor."),
    epochs: int = typer.Option(30, "--epochs", help="Most training epochs (early stopping may end sooner)."),
    patience: int = typer.Option(5, "--patience", help="Epochs without held-out improvement before stopping."),
    batch_size: int = typer.Option(128, "--batch-size", help="Texts per side in each training batch."),
    seed: int = typer.Option(0, "--seed", help="Seed for the held-out split, batches and weights."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """Train the delink_redactor (Gusain & Leith 2025) and save it as a loadable spaCy pipeline."""
    import spacy

    from .errors import InputError
    from .io import atomic_directory
    from .redaction import RankerSettings
    from .redaction.component import texts_from_jsonl, train_pipeline

    if method not in ("ranker", "logreg"):
        raise InputError(f"--method {method!r}: train ranker or logreg (random needs no training)")
    if output.exists() and not overwrite:
        raise InputError(f"{output} already exists; choose another --output or pass --overwrite")
    settings = RankerSettings(epochs=epochs, patience=patience, batch_size=batch_size, seed=seed)
    sensitive_texts = texts_from_jsonl(sensitive, text_field)
    safe_texts = texts_from_jsonl(safe, text_field)
    base = spacy.load(base_model) if base_model else None
    nlp = train_pipeline(sensitive_texts, safe_texts, method, fraction, settings, base, embedder, progress=True)
    with atomic_directory(output, overwrite=overwrite) as folder:
        nlp.to_disk(folder)
    training = nlp.get_pipe("delink_redactor").training  # type: ignore[attr-defined]
    detail = (
        f"best epoch {training['best_epoch']} of {len(training['history'])}, "
        f"held-out loss {training['history'][training['best_epoch'] - 1]['valid_loss']:.4f}, {training['seconds']:.1f} s"
        if method == "ranker"
        else f"{training['vocabulary']:,} word weights"
    )
    typer.echo(f"trained {method} on {len(sensitive_texts):,} + {len(safe_texts):,} texts ({detail}) -> {output}", err=True)


@app.command("redaction-privacy")
def redaction_privacy_command(
    sensitive: Path = typer.Option(..., "--sensitive", help="JSONL of the sensitive collection D0."),
    safe: Path = typer.Option(..., "--safe", help="JSONL of the safe collection D1."),
    output: Path = typer.Option(..., "--output", "-o", help="Folder for privacy.json and privacy.png."),
    method: list[str] = typer.Option(["ranker", "logreg", "random"], "--method", help="ranker, logreg or random; repeat or comma-separate."),
    fractions: str = typer.Option("0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8", "--fractions", help="Redaction levels to compare."),
    text_field: str = typer.Option("text", "--text-field", help="JSON field holding the text."),
    test_share: float = typer.Option(0.3, "--test-share", help="Share of each collection held out for measuring."),
    max_texts: Optional[int] = typer.Option(None, "--max-texts", help="Use at most this many texts per collection."),
    alpha: float = typer.Option(2.0, "--alpha", help="Rényi order (> 1)."),
    delta: Optional[float] = typer.Option(None, "--delta", help="δ of (ε, δ); default 1/n, n = test texts."),
    knn_k: Optional[int] = typer.Option(None, "--k", help="Neighbours for the divergence (default √n)."),
    pca: Optional[int] = typer.Option(None, "--pca", help="Project sentence embeddings on this many PCA axes."),
    bootstrap: int = typer.Option(200, "--bootstrap", help="Bootstrap resamples for the confidence bounds."),
    epochs: int = typer.Option(30, "--epochs", help="Most ranker training epochs per level."),
    seed: int = typer.Option(0, "--seed", help="Seed for splits, training and bootstrap."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output folder."),
) -> None:
    """ε of redacted texts against redaction level per method (Figure 2 of Gusain & Leith), plus attack AUC."""
    import json

    import spacy

    from .errors import InputError
    from .io import atomic_directory, atomic_write
    from .redaction import PrivacySettings, RankerSettings, plot_privacy_curve, privacy_curve
    from .redaction.component import texts_from_jsonl
    from .redaction.evaluation import parse_fractions, sample_texts, split_texts

    methods = [name.strip() for entry in method for name in entry.split(",") if name.strip()]
    levels = parse_fractions(fractions)
    if output.exists() and not overwrite:
        raise InputError(f"{output} already exists; choose another --output or pass --overwrite")
    privacy_settings = PrivacySettings(alpha=alpha, delta=delta, knn_k=knn_k, pca_dim=pca, n_bootstrap=bootstrap, seed=seed)
    pair = [sample_texts(texts_from_jsonl(path, text_field), max_texts, seed) for path in (sensitive, safe)]
    splits = [split_texts(texts, test_share, seed) for texts in pair]
    rows = privacy_curve(
        spacy.blank("en"),
        (splits[0][0], splits[1][0]),
        (splits[0][1], splits[1][1]),
        methods,
        levels,
        RankerSettings(epochs=epochs, seed=seed),
        privacy_settings,
        progress=True,
    )
    report = {
        "sensitive": str(sensitive),
        "safe": str(safe),
        "train_texts": [len(splits[0][0]), len(splits[1][0])],
        "test_texts": [len(splits[0][1]), len(splits[1][1])],
        "rows": rows,
    }
    with atomic_directory(output, overwrite=overwrite) as folder:
        with atomic_write(folder / "privacy.json") as handle:
            handle.write(json.dumps(report, indent=2) + "\n")
        with atomic_write(folder / "privacy.png", "wb") as handle:
            plot_privacy_curve(rows, handle, title=f"{sensitive.parent.name or sensitive.stem}: ε vs redaction")
    for row in rows:
        typer.echo(
            f"{row['method']:<7} {row['fraction']:.2f}  ε {row['epsilon']:.3f} "
            f"[{row['epsilon_low']:.3f}, {row['epsilon_high']:.3f}]  D {row['divergence']:.4f}  AUC {row['attack_auc']:.3f}"
        )
    typer.echo(f"-> {output / 'privacy.json'}, {output / 'privacy.png'}", err=True)


@app.command("setanon")
def setanon_command(
    input_path: Path = typer.Argument(..., metavar="INPUT", help='JSONL lines {"id", "items"|"queries"|"text"}, or a .dat transaction file.'),
    output: Path = typer.Option(..., "--output", "-o", help="Release to write: JSONL {id, [thread], items}, or .dat lines."),
    k: int = typer.Option(..., "--k", help="Every published set is shared by at least k records (k >= 2)."),
    method: str = typer.Option("cluster", "--method", help="cluster (local search) or suppress (the suppression route)."),
    threads: bool = typer.Option(False, "--threads", help="Split each user's queries into topic threads and anonymize threads."),
    model: Optional[str] = typer.Option(None, "--model", help="Installed spaCy pipeline for term normalization [default: blank English]."),
    keep_stop_words: bool = typer.Option(False, "--keep-stop-words", help="Keep stop words as items."),
    keep_punctuation: bool = typer.Option(False, "--keep-punctuation", help="Keep punctuation as items."),
    duplicates: str = typer.Option("error", "--duplicates", help="Repeated ids: error, or merge (unite their items)."),
    max_items: int = typer.Option(1000, "--max-items", help="Records with more items keep their most widely held ones."),
    bucket_size: int = typer.Option(400, "--bucket-size", help="Records solved together; larger is slower but cheaper."),
    extend: Optional[Path] = typer.Option(None, "--extend", help="Earlier release to add INPUT's records to, unchanged."),
    skip_invalid: bool = typer.Option(False, "--skip-invalid", help="Skip (and count) invalid JSON lines."),
) -> None:
    """k-anonymity for set-valued records (query logs, baskets, keyword sets) with few item changes."""
    from .setvalued.command import setanon_file

    summary = setanon_file(
        input_path,
        output,
        k,
        method=method,  # type: ignore[arg-type]
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
        f"({(summary.additions + summary.deletions) / records:.3f} per record), k={k} verified, "
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
    from .rewriting import load_rewriter, protect_file

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
