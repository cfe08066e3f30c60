"""The TAB test bed (shared by tests and benchmarks): the attack's standard test bed on the Text Anonymization Benchmark.

The TAB setting (Pilán et al., 2022) used by the tests and benchmarks: the original
collection is the 127 ECHR test judgments plus, as distractors, the public texts whose
ids are not among them; the de-identified inputs are the originals with a
de-identification's spans replaced by a mask.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

from spacy_delink.errors import InputError

DEFAULT_MASK = "[REDACTED]"
TAB_ORIGINALS = "TAB_test_BK=Original.json"
TAB_DISTRACTORS = "TAB_all_BK=Public10%.json"
TAB_MANUAL_SUPPRESSION = "TAB_test_Manual_Supression.json"


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


def load_tab(tab_dir: str | Path, deidentification: str = TAB_MANUAL_SUPPRESSION, mask: str = DEFAULT_MASK) -> TabBenchmark:
    """The TAB test bed from a folder holding the benchmark's JSON files."""
    tab_dir = Path(tab_dir)
    files = {name: tab_dir / name for name in (TAB_ORIGINALS, TAB_DISTRACTORS, deidentification)}
    missing = [str(path) for path in files.values() if not path.exists()]
    if missing:
        raise InputError(f"TAB files not found: {', '.join(missing)}")
    originals = json.loads(files[TAB_ORIGINALS].read_text(encoding="utf-8"))
    public = json.loads(files[TAB_DISTRACTORS].read_text(encoding="utf-8"))
    spans = json.loads(files[deidentification].read_text(encoding="utf-8"))
    sources = list(originals.items())
    distractors = [(doc_id, text) for doc_id, text in public.items() if doc_id not in originals]
    inputs = [(doc_id, redact_spans(text, spans.get(doc_id, []), mask)) for doc_id, text in sources]
    return TabBenchmark(corpus=sources + distractors, originals=sources, inputs=inputs)
