"""The Text Anonymization Benchmark (TAB) as an evaluation test bed, and its conversion to JSONL.

The TAB setting (Pilán et al., 2022) used by the ``tab`` workflow, the tests and the
benchmarks: the original collection is the 127 ECHR test judgments plus, as distractors,
the public texts of the other TAB cases; the de-identified inputs are the originals with a
de-identification's character spans replaced by a mask. The JSON files are those of the
Text Anonymization Evaluator repository (``project.yml`` lists them with checksums).

``delink tab-convert TAB_DIR OUTPUT_DIR`` writes ``corpus.jsonl`` and one
``deidentified-<name>.jsonl`` per de-identification (manual, presidio).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import InputError
from ..io.files import atomic_write
from ..io.jsonl import dumps_jsonl_line
from ..progress import Progress

DEFAULT_MASK = "[REDACTED]"
TAB_ORIGINALS = "TAB_test_BK=Original.json"
TAB_DISTRACTORS = "TAB_all_BK=Public10%.json"
TAB_MANUAL_SUPPRESSION = "TAB_test_Manual_Supression.json"
TAB_PRESIDIO = "TAB_test_Presidio_Entity.json"
#: De-identifications by the name the workflow uses.
DEIDENTIFICATIONS = {"manual": TAB_MANUAL_SUPPRESSION, "presidio": TAB_PRESIDIO}


def redact_spans(text: str, spans: Iterable[Sequence[object]], mask: str = DEFAULT_MASK) -> str:
    """Replace each ``(start, end, ...)`` character span by ``mask``; overlapping spans merge first."""
    merged: list[list[int]] = []
    for start, end in sorted((int(span[0]), int(span[1])) for span in spans):  # type: ignore[call-overload]
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        text = text[:start] + mask + text[end:]
    return text


@dataclass
class TabBenchmark:
    """``corpus``: the original collection; ``originals``: the 127 sources; ``inputs``: de-identified."""

    corpus: list[tuple[str, str]]
    originals: list[tuple[str, str]]
    inputs: list[tuple[str, str]]


def _read_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: not a TAB JSON file ({err}); fetch it again (`spacy project assets`)") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object {{doc_id: ...}}, the TAE layout of TAB")
    return data


def load_tab(tab_dir: str | Path, deidentification: str = TAB_MANUAL_SUPPRESSION, mask: str = DEFAULT_MASK) -> TabBenchmark:
    """The TAB test bed from a folder holding the benchmark's JSON files."""
    tab_dir = Path(tab_dir)
    files = {name: tab_dir / name for name in (TAB_ORIGINALS, TAB_DISTRACTORS, deidentification)}
    missing = [str(path) for path in files.values() if not path.exists()]
    if missing:
        raise InputError(f"TAB files not found: {', '.join(missing)}")
    originals = _read_json(files[TAB_ORIGINALS])
    public = _read_json(files[TAB_DISTRACTORS])
    spans = _read_json(files[deidentification])
    sources = [(str(doc_id), str(text)) for doc_id, text in originals.items()]
    distractors = [(str(doc_id), str(text)) for doc_id, text in public.items() if doc_id not in originals]
    inputs = [(doc_id, redact_spans(text, spans.get(doc_id, []), mask)) for doc_id, text in sources]  # type: ignore[arg-type]
    return TabBenchmark(corpus=sources + distractors, originals=sources, inputs=inputs)


def _write_jsonl(path: Path, documents: Sequence[tuple[str, str]], progress: bool) -> int:
    with Progress(path.name, "docs", len(documents), enabled=progress) as bar, atomic_write(path) as handle:
        for doc_id, text in documents:
            handle.write(dumps_jsonl_line({"id": doc_id, "text": text}))
            bar.update()
    return len(documents)


def convert(tab_dir: Path, output_dir: Path, names: Sequence[str], limit: int | None = None, progress: bool = True) -> dict[str, int]:
    """Write ``corpus.jsonl`` and ``deidentified-<name>.jsonl``; ``limit`` keeps the first test documents."""
    unknown = [name for name in names if name not in DEIDENTIFICATIONS]
    if unknown:
        raise InputError(f"unknown de-identification(s) {', '.join(unknown)}; use {', '.join(DEIDENTIFICATIONS)}")
    written = {}
    corpus_written = False
    for name in names:
        benchmark = load_tab(tab_dir, DEIDENTIFICATIONS[name])
        if not corpus_written:
            written["corpus.jsonl"] = _write_jsonl(output_dir / "corpus.jsonl", benchmark.corpus, progress)
            corpus_written = True
        inputs = benchmark.inputs[:limit] if limit else benchmark.inputs
        written[f"deidentified-{name}.jsonl"] = _write_jsonl(output_dir / f"deidentified-{name}.jsonl", inputs, progress)
    return written

