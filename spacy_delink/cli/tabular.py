"""`delink privacy-level`, `delink anonymize-table`: anonymized tables."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .app import COMPANIONS, app


def parse_hierarchies(specs: list[str], option: str = "--hierarchy") -> dict[str, Path]:
    """COLUMN=PATH options as a mapping, refusing a malformed or repeated one."""
    from ..errors import InputError

    hierarchies: dict[str, Path] = {}
    for spec in specs:
        column, separator, path = spec.partition("=")
        if not separator or not column or not path:
            raise InputError(f"{option} {spec!r}: expected COLUMN=PATH, e.g. age=hierarchy_age.csv")
        if column in hierarchies:
            raise InputError(f"{option}: column {column!r} is given twice; give one hierarchy per column")
        hierarchies[column] = Path(path)
    return hierarchies


@app.command("privacy-level", rich_help_panel=COMPANIONS)
def privacy_level_command(
    original: Path = typer.Argument(..., metavar="ORIGINAL.csv", help="The table before anonymization."),
    anonymized: Path = typer.Argument(..., metavar="ANONYMIZED.csv", help="The released table, same rows."),
    qi: str = typer.Option(..., "--qi", help="Comma-separated quasi-identifier columns, e.g. age,zip."),
    sensitive: str = typer.Option(..., "--sensitive", help="Comma-separated sensitive columns, e.g. salary,disease."),
    local: bool = typer.Option(False, "--local", help="Also the local PL of each QI given the other QIs."),
    as_json: bool = typer.Option(False, "--json", help="Print the full report as JSON instead of a table."),
    id_column: Optional[str] = typer.Option(None, "--id-column", help="Pair rows by this column instead of by position."),
    hierarchy: Optional[list[str]] = typer.Option(
        None, "--hierarchy", "-H",
        help="COLUMN=PATH of an ARX hierarchy CSV: exact generalization check, hierarchical EMD for a sensitive column.",
    ),
    no_check: bool = typer.Option(False, "--no-check", help="Measure even a release that is not a generalization of the original."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Also write the JSON report to this file."),
) -> None:
    """Privacy level PL = DR x IR of an anonymized table (Zang & Zhu 2024; 0 is best), and the release's k, l, t and risks."""
    import json

    from ..io.files import atomic_write, refuse_same_file
    from ..tabular import privacy_level

    hierarchies = parse_hierarchies(hierarchy or [])
    if output is not None:
        refuse_same_file([original, anonymized, *hierarchies.values()], output)
    report = privacy_level(
        original, anonymized, qi, sensitive, id_column=id_column, local=local, hierarchies=hierarchies, check=not no_check
    )
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
    release, checked = report.release, report.generalization
    if checked is not None:
        verdict = "a generalization of the original" if checked.ok else f"NOT a generalization ({checked.violations} cells)"
        typer.echo(f"release: {verdict}; {checked.suppressed:,} of {checked.cells:,} cells suppressed")
    if release is not None:
        risks = release.risks
        ls = ", ".join(f"{name} {value}" for name, value in release.l.items())
        ts = ", ".join(
            f"{name} {'n/a' if value is None else f'{value:.4f}'} ({release.ground_distance[name]})"
            for name, value in release.t.items()
        )
        typer.echo(f"release: k = {release.k} ({release.classes:,} classes); l: {ls}; t: {ts}")
        journalist = "n/a" if risks.journalist_highest is None else f"{risks.journalist_highest:.4f}"
        marketer = "n/a" if risks.marketer is None else f"{risks.marketer:.4f}"
        typer.echo(
            f"risks: prosecutor highest {risks.prosecutor_highest:.4f} "
            f"({risks.prosecutor_records_at_highest:.1%} of records), average {risks.prosecutor_average:.4f}; "
            f"journalist highest {journalist}; marketer {marketer}"
        )


@app.command("anonymize-table", rich_help_panel=COMPANIONS)
def anonymize_table_command(
    data: Path = typer.Argument(..., metavar="DATA.csv", help="The table to anonymize (delimiter auto-detected)."),
    hierarchy: list[str] = typer.Option(..., "--hierarchy", "-H", help="COLUMN=PATH of an ARX hierarchy CSV; repeat for each QI."),
    output: Path = typer.Option(..., "--output", "-o", help="Anonymized CSV to write (suppressed records withheld: their QIs and sensitive values '*')."),
    k: Optional[int] = typer.Option(None, "--k", help="k-anonymity: every class holds at least k records."),
    l: Optional[int] = typer.Option(None, "--l", help="Distinct l-diversity of every sensitive column."),
    t: Optional[float] = typer.Option(None, "--t", help="t-closeness (EMD) of every sensitive column."),
    sensitive: str = typer.Option("", "--sensitive", help="Comma-separated sensitive columns (needed for --l and --t)."),
    suppression_limit: float = typer.Option(0.0, "--suppression-limit", help="Largest share of records that may be suppressed."),
    sensitive_hierarchy: Optional[list[str]] = typer.Option(
        None, "--sensitive-hierarchy", help="COLUMN=PATH of a sensitive column's hierarchy: t-closeness uses the tree distance.",
    ),
) -> None:
    """Optimal full-domain generalization (least non-uniform entropy) under k, l and t."""
    from ..io.files import refuse_same_file
    from ..tabular import write_csv
    from ..tabular.anonymize import anonymize

    hierarchies = parse_hierarchies(hierarchy or [])
    sensitive_trees = parse_hierarchies(sensitive_hierarchy or [], "--sensitive-hierarchy")
    refuse_same_file([data, *hierarchies.values(), *sensitive_trees.values()], output)
    result = anonymize(
        data,
        hierarchies,
        k=k,
        l=l,
        t=t,
        sensitive=[name.strip() for name in sensitive.split(",") if name.strip()],
        suppression_limit=suppression_limit,
        progress=True,
        sensitive_hierarchies=sensitive_trees,
    )
    write_csv(result.table, output)
    levels = ", ".join(f"{name}={level}" for name, level in result.levels.items())
    typer.echo(
        f"levels {levels}; loss {result.loss:,.1f} bits; {result.suppressed:,} of {result.rows:,} rows suppressed; "
        f"{result.classes:,} classes (smallest {result.min_class_size}); "
        f"{result.nodes_evaluated} of {result.lattice_size} nodes checked in {result.seconds:.2f} s -> {output}",
        err=True,
    )
