"""``delink evaluate`` as a job: check the output folder, evaluate, write metrics, plots and report atomically."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

from ..errors import InputError
from ..io.files import atomic_directory, atomic_write, check_output_path, refuse_same_file
from ..linkage.index import CorpusIndex
from .metrics import Evaluation, evaluate
from .settings import EvaluationSettings
from .plots import evaluation_plots, plots_unavailable
from .evaluation_page import write_evaluation_report

METRICS = "metrics.json"
REPORT = "report.html"


def check_output_folder(inputs: Sequence[Path], output: Path, overwrite: bool) -> None:
    """Refuse an output folder that is, or holds, an input, or that holds anything but an earlier evaluation.

    The folder is replaced whole, so anything else inside it would be lost.
    """
    refuse_same_file(inputs, output)
    resolved = output.resolve()
    for source in inputs:
        if Path(source).resolve().is_relative_to(resolved):
            raise InputError(f"--output {output} contains the input {source}; write the evaluation to another folder")
    check_output_path(output, directory=True)
    if output.exists():
        if not overwrite:
            raise InputError(f"--output {output} already exists; choose another folder or pass --overwrite")
        if any(output.iterdir()) and not (output / METRICS).exists():
            raise InputError(
                f"--output {output} holds files that are not an earlier evaluation (no {METRICS}); "
                "choose an empty or new folder"
            )


def evaluate_to_folder(
    open_index: Callable[[], CorpusIndex],
    inputs: Sequence[Path],
    output: Path,
    settings: EvaluationSettings,
    overwrite: bool = False,
    progress: bool = True,
) -> Evaluation:
    """Evaluate ``inputs`` = (index, original, de-identified[, protected]) and write the folder.

    Without matplotlib the metrics and the report are written all the same, without plots
    (the report says why).
    """
    check_output_folder(inputs, output, overwrite)
    index = open_index()
    original, deidentified = inputs[1], inputs[2]
    protected = inputs[3] if len(inputs) > 3 else None
    evaluation = evaluate(index, original, deidentified, protected, settings, progress=progress)
    plots_missing = plots_unavailable()
    plots = {} if plots_missing else evaluation_plots(evaluation.metrics)
    with atomic_directory(output, overwrite=True) as folder:
        with atomic_write(folder / METRICS) as handle:
            json.dump({**evaluation.metrics, "plots": sorted(plots), "report": REPORT}, handle, indent=1, ensure_ascii=False)
            handle.write("\n")
        for name, png in plots.items():
            with atomic_write(folder / name, "wb") as handle:
                handle.write(png)
        write_evaluation_report(evaluation, plots, folder / REPORT, plots_missing)
    return evaluation
