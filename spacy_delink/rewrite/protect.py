"""``delink protect``: stream a JSONL file through the rewriter, resumably and without loss."""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Optional

import spacy
from thinc.api import ConfigValidationError
from tqdm import tqdm

from ..components.rewriter import FACTORY, DelinkRewriter
from ..errors import InputError
from ..io import JsonlStats, atomic_write, dumps_jsonl_line, read_jsonl


@dataclass
class ProtectSummary:
    """What `delink protect` did, for its closing line."""

    documents: int = 0
    already_done: int = 0
    rewritten: int = 0
    with_mask: int = 0
    unchanged: int = 0
    llm_calls: int = 0
    failures: Counter[str] = field(default_factory=Counter)
    skipped_lines: list[int] = field(default_factory=list)
    repaired_last_line: bool = False
    seconds: float = 0.0


#: Configs shipped with the package, by the short name ``--config`` accepts.
SHIPPED_CONFIGS = {"mask": "rewriter_mask.cfg", "openai": "rewriter_openai.cfg"}
SHIPPED_CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"


def resolve_config(config: Path) -> Path:
    """A config file path, or the short name of one shipped in ``spacy_delink/configs``."""
    if config.is_file():
        return config
    shipped = SHIPPED_CONFIGS.get(str(config))
    if shipped is not None:
        return SHIPPED_CONFIG_DIR / shipped
    names = ", ".join(SHIPPED_CONFIGS)
    raise InputError(f"config {config} not found; pass an existing file or a shipped config name ({names})")


def load_rewriter(index: Path, k: int, arity: int, config: Optional[Path], key_file: Optional[Path]) -> DelinkRewriter:
    """The rewriter from a spaCy config (its ``delink_rewriter`` component) or the Mask default."""
    settings = {"index": str(index), "k": k, "arity": arity, "key_file": str(key_file) if key_file else None}
    if config is None:
        nlp = spacy.blank("en")
        rewriter = nlp.add_pipe(FACTORY, config=settings)
    else:
        config = resolve_config(config)
        loaded = spacy.util.load_config(config)
        names = [n for n, c in loaded.get("components", {}).items() if c.get("factory") == FACTORY]
        if not names:
            raise InputError(f"{config}: no component with factory = \"{FACTORY}\"; see spacy_delink/configs/rewriter_openai.cfg")
        overrides = {f"components.{names[0]}.{key}": value for key, value in settings.items()}
        try:
            nlp = spacy.util.load_model_from_config(spacy.util.load_config(config, overrides=overrides), auto_fill=True)
        except ConfigValidationError as err:
            details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors) or str(err)
            raise InputError(f"{config}: invalid configuration ({details}); see spacy_delink/configs/rewriter_openai.cfg") from None
        rewriter = nlp.get_pipe(names[0])
    assert isinstance(rewriter, DelinkRewriter)
    rewriter.initialize()
    return rewriter


def done_ids(output: Path) -> tuple[set[Any], bool]:
    """Ids already in ``output``; a half-written last line (a crash) is cut off first."""
    if not output.exists():
        return set(), False
    data = output.read_bytes()
    repaired = bool(data) and not data.endswith(b"\n")
    if repaired:
        with atomic_write(output, "wb") as handle:
            handle.write(data[: data.rfind(b"\n") + 1])
    ids = set()
    for line_no, line in enumerate(output.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict) or "id" not in record:
            raise InputError(f"{output}:{line_no}: not a `delink protect` record; move the file away or fix the line")
        ids.add(record["id"])
    return ids, repaired


def _documents(input_path: Path, skip_invalid: bool, stats: JsonlStats) -> Iterator[tuple[Any, str]]:
    for record in read_jsonl(input_path, skip_invalid, stats):
        doc_id, text = record.get("id"), record.get("text")
        problem = (
            "missing or invalid \"id\" (a string or integer)" if not isinstance(doc_id, (str, int)) or isinstance(doc_id, bool)
            else "missing or invalid \"text\" (a string)" if not isinstance(text, str) else ""
        )
        if isinstance(text, str) and not problem:
            yield doc_id, text
        elif skip_invalid:
            stats.skipped.append(stats.lines)
        else:
            raise InputError(f"{input_path}:{stats.lines}: {problem}; fix the line or pass --skip-invalid")


def protect_file(
    rewriter: DelinkRewriter,
    input_path: Path,
    output: Path,
    batch_size: int = 16,
    skip_invalid: bool = False,
    progress: bool = True,
) -> ProtectSummary:
    """Stream ``input_path`` through the rewriter, appending one record per document to ``output``.

    Resumable: ids already in ``output`` are skipped. Each batch is flushed and fsynced
    before the next starts, so a crash loses at most the batch in flight.
    """
    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}")
    started = time.perf_counter()
    summary = ProtectSummary()
    seen, summary.repaired_last_line = done_ids(output)
    stats = JsonlStats()
    output.parent.mkdir(parents=True, exist_ok=True)
    bar = tqdm(desc="protect", unit="doc", disable=not progress)
    with open(output, "a", encoding="utf-8") as handle:

        def flush(batch: list[tuple[Any, str]]) -> None:
            for (doc_id, _), result in zip(batch, rewriter.rewrite_texts([text for _, text in batch])):
                handle.write(dumps_jsonl_line({"id": doc_id, **result.record()}))
            handle.flush()
            os.fsync(handle.fileno())
            bar.update(len(batch))

        batch: list[tuple[Any, str]] = []
        for doc_id, text in _documents(input_path, skip_invalid, stats):
            if doc_id in seen:
                summary.already_done += 1
                continue
            seen.add(doc_id)
            batch.append((doc_id, text))
            if len(batch) == batch_size:
                flush(batch)
                batch = []
        if batch:
            flush(batch)
    bar.close()
    summary.documents = rewriter.stats["documents"]
    summary.rewritten = rewriter.stats["rewritten"]
    summary.with_mask = rewriter.stats["with_mask"]
    summary.unchanged = rewriter.stats["unchanged"]
    summary.llm_calls = rewriter.llm_calls()
    summary.failures = rewriter.failures()
    summary.skipped_lines = stats.skipped
    summary.seconds = time.perf_counter() - started
    return summary

