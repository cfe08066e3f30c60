"""``delink protect``: stream a JSONL file through the rewriter, resumably and without loss.

Everything that can be checked is checked before the output is touched: the output path
(not the input, not a directory, writable), every input line (an id, a text, valid
Unicode; ids unique) and an existing output, which must hold only records of this input
protected under exactly the current settings (``protected_under``: the index's key id,
size and rules, k, arity). Only then is the output opened, and each batch is appended
and fsynced before the next starts.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Iterator, Optional

import spacy
from thinc.api import ConfigValidationError
from tqdm import tqdm

from ..components.rewriter import FACTORY, DelinkRewriter
from ..corpus import DocId, check_doc_id, unicode_problem
from ..errors import InputError
from ..io import JsonlStats, atomic_write, dumps_jsonl_line, read_jsonl, refuse_same_file
from ..linkage.index.shards import Runner

#: The record field that says under what a text was protected.
PROTECTED_UNDER = "protected_under"


@dataclass
class ProtectSummary:
    """What `delink protect` did, for its closing line."""

    documents: int = 0
    already_done: int = 0
    rewritten: int = 0
    with_mask: int = 0
    unchanged: int = 0
    llm_calls: int = 0
    #: Model calls that gave no answer, by kind (failed_timeout, failed_endpoint_down, ...).
    failures: Counter[str] = field(default_factory=Counter)
    #: Answers refused by the task's checks, by reason (rejected_echo, rejected_url, ...).
    rejected: Counter[str] = field(default_factory=Counter)
    skipped_lines: list[int] = field(default_factory=list)
    repaired_last_line: bool = False
    seconds: float = 0.0

    @property
    def endpoint_down(self) -> int:
        """Prompts not sent because the circuit breaker held the endpoint for down."""
        return self.failures["failed_endpoint_down"]


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


def load_rewriter(
    index: Path,
    k: int,
    arity: int,
    config: Optional[Path],
    key_file: Optional[Path],
    require_llm: bool = False,
    flagging: Optional[str] = None,
    config_overrides: Optional[dict[str, Any]] = None,
    threads: Optional[int] = None,
) -> DelinkRewriter:
    """The rewriter from a spaCy config (its ``delink_rewriter`` component) or the Mask default.

    ``flagging`` overrides the component's flagging strategy (docs/flagging.md) when given,
    ``threads`` the documents it masks at once;
    ``config_overrides`` sets other values of the config (``section.key``), never the ones
    the command sets itself, so what a record says it was protected under stays true.
    """
    settings: dict[str, Any] = {
        "index": str(index), "k": k, "arity": arity, "key_file": str(key_file) if key_file else None,
        "require_llm": require_llm,
    }
    if flagging is not None:
        settings["flagging"] = flagging
    if threads is not None:
        settings["threads"] = threads
    config_overrides = config_overrides or {}
    if config is None:
        if config_overrides:
            raise InputError("--set changes a config's values and needs --config (e.g. --config openai; docs/llm.md)")
        if require_llm:
            raise InputError("--require-llm needs a config with an LLM model, e.g. --config openai (docs/llm.md)")
        nlp = spacy.blank("en")
        rewriter = nlp.add_pipe(FACTORY, config=settings)
    else:
        config = resolve_config(config)
        loaded = spacy.util.load_config(config)
        names = [n for n, c in loaded.get("components", {}).items() if c.get("factory") == FACTORY]
        if not names:
            raise InputError(f"{config}: no component with factory = \"{FACTORY}\"; see spacy_delink/configs/rewriter_openai.cfg")
        overrides = {f"components.{names[0]}.{key}": value for key, value in settings.items()}
        _check_overrides(config, loaded, config_overrides, set_by_command=overrides)
        overrides = {**config_overrides, **overrides}
        try:
            nlp = spacy.util.load_model_from_config(spacy.util.load_config(config, overrides=overrides), auto_fill=True)
        except ConfigValidationError as err:
            details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors) or str(err)
            raise InputError(f"{config}: invalid configuration ({details}); see spacy_delink/configs/rewriter_openai.cfg") from None
        rewriter = nlp.get_pipe(names[0])
    assert isinstance(rewriter, DelinkRewriter)
    rewriter.initialize()
    return rewriter


def _check_overrides(config: Path, loaded: dict[str, Any], overrides: dict[str, Any], set_by_command: dict[str, Any]) -> None:
    """Refuse a ``--set`` key the config lacks (a typo would be added silently) or one the command sets itself."""
    for key in overrides:
        if key in set_by_command:
            name = key.rsplit(".", 1)[1]
            option = "the INDEX argument" if name == "index" else "--" + name.replace("_", "-")
            raise InputError(f"--set {key}: this command sets it; use {option} instead")
        *sections, name = key.split(".")
        node: Any = loaded
        for depth, section in enumerate(sections):
            node = node.get(section) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                raise InputError(f"--set {key}: {config} has no [{'.'.join(sections[: depth + 1])}] section")
        if name not in node:
            raise InputError(f"--set {key}: [{'.'.join(sections)}] of {config} has no {name!r}; check the spelling")


def parse_settings(settings: list[str]) -> dict[str, Any]:
    """``SECTION.KEY=VALUE`` strings as config overrides; a value is JSON when it parses, else text."""
    parsed: dict[str, Any] = {}
    for setting in settings:
        key, equals, value = setting.partition("=")
        key = key.strip()
        if not equals or "." not in key or not all(key.split(".")):
            raise InputError(f"--set {setting!r}: expected SECTION.KEY=VALUE, e.g. --set llm.model=llama3.1:8b")
        if key in parsed:
            raise InputError(f"--set {key} is given twice; keep one")
        try:
            parsed[key] = json.loads(value)
        except json.JSONDecodeError:
            parsed[key] = value
    return parsed


def protection_settings(rewriter: DelinkRewriter) -> dict[str, Any]:
    """Under what the rewriter protects: a resumed run accepts only records with exactly this.

    The index is named by its key id (a fresh secret per build), document count and a
    digest of its linkage rules; then k, arity and the flagging strategy.
    """
    index = rewriter.index
    rules = json.dumps(index.rules.to_dict(), sort_keys=True, ensure_ascii=False)
    return {
        "index": index.manifest["key_id"],
        "documents": index.documents,
        "rules": hashlib.sha256(rules.encode("utf-8")).hexdigest()[:16],
        "k": rewriter.k,
        "arity": rewriter.arity,
        "flagging": rewriter.flagging,
    }


def _documents(input_path: Path, skip_invalid: bool, stats: JsonlStats) -> Iterator[tuple[int, DocId, str]]:
    """``(line, id, text)`` of each valid line; an invalid one stops the run or, with ``skip_invalid``, is counted.

    Ids follow the rule every command shares (``corpus.check_doc_id``: given, never invented).
    """
    for record in read_jsonl(input_path, skip_invalid, stats):
        where = f"{input_path}:{stats.lines}"
        try:
            doc_id = check_doc_id(record.get("id"), where)
            text = record.get("text")
            if not isinstance(text, str):
                raise InputError(f"{where}: missing or invalid \"text\" (a string); fix the line or pass --skip-invalid")
            broken = unicode_problem(text)
            if broken:
                raise InputError(
                    f"{where}: the text holds {broken}, which is not Unicode text (a broken \\u escape); "
                    "fix the line or pass --skip-invalid"
                )
        except InputError:
            if not skip_invalid:
                raise
            stats.skipped.append(stats.lines)
            continue
        yield stats.lines, doc_id, text


def scan_input(input_path: Path, skip_invalid: bool) -> tuple[dict[DocId, int], list[int]]:
    """Every valid id with its line, and the skipped lines; duplicate ids are refused."""
    stats = JsonlStats()
    lines: dict[DocId, int] = {}
    for line, doc_id, _ in _documents(input_path, skip_invalid, stats):
        if doc_id in lines:
            raise InputError(
                f"{input_path}:{line}: duplicate id {doc_id!r} (first on line {lines[doc_id]}); "
                "ids must be unique, or the second text would never be protected"
            )
        lines[doc_id] = line
    return lines, stats.skipped


def check_output_path(output: Path, input_path: Path) -> None:
    """Refuse an output that cannot be written, before anything is read or created."""
    refuse_same_file([input_path], output)
    if output.is_dir():
        raise InputError(f"--output {output} is a directory; give a file path such as {output / 'protected.jsonl'}")
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=output.parent):
            pass
        if output.exists():
            open(output, "ab").close()  # appending nothing changes nothing
    except OSError as err:
        raise InputError(f"--output {output}: cannot write there ({err.strerror or err}); choose a writable location") from None


def _settings_text(settings: Any) -> str:
    if not isinstance(settings, dict):
        return repr(settings)
    return ", ".join(f"{key}={value}" for key, value in settings.items())


def read_done(output: Path, expected: dict[str, Any], input_ids: dict[Any, int]) -> tuple[set[Any], bool]:
    """Ids already protected in ``output`` under ``expected``; any other record is refused.

    A half-written last line (a crash) is cut off, but only once every complete line
    passed: a file that is refused is left exactly as it was.
    """
    if not output.exists():
        return set(), False
    data = output.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    how = "write to a new --output, or rerun with the settings that file was made with"
    done: set[Any] = set()
    for line_no, raw in enumerate(complete.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError:
            record = None
        where = f"{output}:{line_no}"
        if not isinstance(record, dict) or "id" not in record:
            raise InputError(f"{where}: not a `delink protect` record; {how}")
        if PROTECTED_UNDER not in record:
            raise InputError(
                f"{where}: not a `delink protect` record (no {PROTECTED_UNDER!r}: an input, an assess result or "
                f"the output of an older spacy-delink); {how}"
            )
        if record[PROTECTED_UNDER] != expected:
            raise InputError(
                f"{where}: protected under {_settings_text(record[PROTECTED_UNDER])}, but this run protects under "
                f"{_settings_text(expected)}; {how}"
            )
        if record.get("protected") is not True or not isinstance(record.get("text"), str):
            raise InputError(f"{where}: a record that is not marked protected; {how}")
        doc_id = record["id"]
        if doc_id not in input_ids:
            raise InputError(f"{where}: id {doc_id!r} is not in the input, so this output belongs to another input; {how}")
        if doc_id in done:
            raise InputError(f"{where}: id {doc_id!r} appears twice; the file was edited by hand, {how}")
        done.add(doc_id)
    repaired = len(complete) < len(data)
    if repaired:
        with atomic_write(output, "wb") as handle:
            handle.write(complete)
    return done, repaired


@dataclass(frozen=True)
class RewriterSpec:
    """How to load the rewriter (``load_rewriter``'s arguments), so each worker process loads its own."""

    index: str
    k: int
    arity: int
    config: Optional[str] = None
    key_file: Optional[str] = None
    require_llm: bool = False
    flagging: Optional[str] = None
    #: ``config_overrides`` as canonical JSON (hashable).
    overrides: str = "{}"
    threads: Optional[int] = None

    @classmethod
    def of(
        cls, index: Path, k: int, arity: int, config: Optional[Path], key_file: Optional[Path], require_llm: bool,
        flagging: Optional[str], overrides: dict[str, Any], threads: Optional[int] = None,
    ) -> "RewriterSpec":
        """The spec of ``load_rewriter``'s arguments, with paths made absolute for the workers."""
        return cls(
            str(index.absolute()), k, arity, str(config.absolute()) if config is not None and config.is_file() else (str(config) if config else None),
            str(key_file.absolute()) if key_file else None, require_llm, flagging, json.dumps(overrides, sort_keys=True), threads,
        )

    def load(self) -> DelinkRewriter:
        return load_rewriter(
            Path(self.index), self.k, self.arity, Path(self.config) if self.config else None,
            Path(self.key_file) if self.key_file else None, require_llm=self.require_llm, flagging=self.flagging,
            config_overrides=json.loads(self.overrides), threads=self.threads,
        )


#: Batches sent to the workers ahead of the one being written.
IN_FLIGHT_BATCHES = 8
_WORKER_REWRITERS: dict[RewriterSpec, DelinkRewriter] = {}


def _tally(rewriter: DelinkRewriter) -> Counter[str]:
    """The rewriter's running counts that the summary reports."""
    tally: Counter[str] = Counter({name: rewriter.stats[name] for name in ("documents", "rewritten", "with_mask", "unchanged")})
    tally["llm_calls"] = rewriter.llm_calls()
    tally.update(rewriter.failures())
    return tally


def protected_records(rewriter: DelinkRewriter, batch: list[tuple[Any, str]], settings: dict[str, Any]) -> list[dict[str, Any]]:
    """The output records of one batch of ``(id, text)``, protected under ``settings`` (``protection_settings``)."""
    records = []
    for (doc_id, _), result in zip(batch, rewriter.rewrite_texts([text for _, text in batch])):
        record = {"id": doc_id, **result.record(), PROTECTED_UNDER: settings}
        record["edits"] = rewriter.published_edits(result.edits)  # no source phrase in the output by default
        records.append(record)
    return records


def protect_batch(
    spec: RewriterSpec, settings: dict[str, Any], batch: list[tuple[Any, str]]
) -> tuple[list[dict[str, Any]], Counter[str]]:
    """One worker task: a batch's records and the counts it added, by the worker's own rewriter.

    The rewriter is loaded once per worker process, and again when the index changed
    (an update); a worker whose index is not the one ``settings`` names refuses to write.
    """
    rewriter = _WORKER_REWRITERS.get(spec)
    if rewriter is None or protection_settings(rewriter) != settings:
        rewriter = _WORKER_REWRITERS[spec] = spec.load()
    if protection_settings(rewriter) != settings:
        raise InputError(
            f"a worker protects under {_settings_text(protection_settings(rewriter))}, not {_settings_text(settings)}: "
            "the index changed during the run; rerun it (it resumes)"
        )
    before = _tally(rewriter)
    records = protected_records(rewriter, batch, settings)
    return records, _tally(rewriter) - before


def protect_file(
    rewriter: DelinkRewriter,
    input_path: Path,
    output: Path,
    batch_size: int = 16,
    skip_invalid: bool = False,
    progress: bool = True,
    runner: Optional[Runner] = None,
    spec: Optional[RewriterSpec] = None,
) -> ProtectSummary:
    """Stream ``input_path`` through the rewriter, appending one record per document to ``output``.

    Resumable: documents already in ``output`` (protected under the same settings) are
    skipped. Each batch is flushed and fsynced before the next starts, so a crash loses
    at most the batches in flight. With a ``runner`` (Dask workers, ``--workers``/
    ``--scheduler``), each batch is protected on a worker by a rewriter loaded from
    ``spec``; batches are the same and written in input order, so the output is the
    output of a run without one.
    """
    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}")
    if (runner is None) != (spec is None):
        raise InputError("protecting on workers needs both a runner and the rewriter's spec")
    started = time.perf_counter()
    summary = ProtectSummary()
    check_output_path(output, input_path)
    input_ids, summary.skipped_lines = scan_input(input_path, skip_invalid)
    settings = protection_settings(rewriter)
    seen, summary.repaired_last_line = read_done(output, settings, input_ids)
    handle: Optional[IO[str]] = None
    bar = tqdm(desc="protect", unit="doc", disable=not progress)
    tally: Counter[str] = Counter()

    def batches() -> Iterator[list[tuple[Any, str]]]:
        batch: list[tuple[Any, str]] = []
        for line, doc_id, text in _documents(input_path, skip_invalid, JsonlStats()):
            if input_ids.get(doc_id) != line:
                raise InputError(f"{input_path}:{line}: the file changed while protect ran; rerun it (the run resumes)")
            if doc_id in seen:
                summary.already_done += 1
                continue
            batch.append((doc_id, text))
            if len(batch) == batch_size:
                yield batch
                batch = []
        if batch:
            yield batch

    def write(records: list[dict[str, Any]]) -> None:
        nonlocal handle
        if handle is None:
            handle = open(output, "a", encoding="utf-8")  # only now: an early error leaves no file
        for record in records:
            handle.write(dumps_jsonl_line(record))
        handle.flush()
        os.fsync(handle.fileno())
        bar.update(len(records))

    try:
        if runner is None:
            for batch in batches():
                write(protected_records(rewriter, batch, settings))
            tally = _tally(rewriter)
        else:
            arguments = ((spec, settings, batch) for batch in batches())
            for records, added in runner.ordered(protect_batch, arguments, IN_FLIGHT_BATCHES):
                write(records)
                tally += added
    finally:
        bar.close()
        if handle is not None:
            handle.close()
    summary.documents = tally["documents"]
    summary.rewritten = tally["rewritten"]
    summary.with_mask = tally["with_mask"]
    summary.unchanged = tally["unchanged"]
    summary.llm_calls = tally["llm_calls"]
    for name, count in tally.items():
        if name.startswith(("rejected_", "failed_")):
            (summary.rejected if name.startswith("rejected_") else summary.failures)[name] += count
    summary.seconds = time.perf_counter() - started
    return summary
