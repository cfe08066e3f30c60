"""``delink protect``: stream a JSONL file through the rewriter, resumably and without loss.

Everything that can be checked is checked before the output is touched: the output path
(not the input, not a directory, writable), every input line (an id, a text, valid
Unicode; ids unique) and an existing output, which must hold only records of this input
protected under exactly the current settings (``protected_under``: the index's key id,
size and rules, k, arity, readings). Only then is the output opened, and each batch is
appended and fsynced before the next starts. One run at a time writes a file output (a
lock beside it); a second gets one line and exit status 1.

A resumed run trusts nothing it finds: every record it keeps is detected again under the
settings it claims, and its ``input_digest`` (a keyed digest of the id and the input
text, ``hashing.input_digest``) must match the input's; a record that fails either —
edited back towards the input, or made from a text that has since changed — is dropped
from the output and its document protected again.

The output may also be a stream, as for any Unix tool: ``-`` (stdout), a FIFO or a
character device is written to batch by batch and never replaced, read back or resumed.
The input may be ``-`` (stdin), which is read into memory once, since every line is
checked before anything is written.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Optional, Sequence

import spacy
from thinc.api import ConfigValidationError

from ..components.rewriter import FACTORY, DelinkRewriter
from ..corpus import CorpusStats, DocId, InputRow, InputSource, nothing_done, output_format
from ..errors import InputError
from ..io import (
    StdinCopy,
    atomic_write,
    check_output_path,
    dumps_jsonl_line,
    is_stdio,
    is_stream,
    output_lock,
    parse_json_line,
    refuse_same_file,
)
from ..linkage.index.runners import Runner
from ..memory import check_document_size
from ..retrieval.defence import retrieval_settings
from ..progress import Progress

#: The record field that says under what a text was protected.
PROTECTED_UNDER = "protected_under"
#: The record field holding the keyed digest of the input document it was made from.
INPUT_DIGEST = "input_digest"


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
    #: The inputs left out as invalid (``--skip-invalid``), each as ``file:line`` or ``file row N``.
    skipped_lines: list[str] = field(default_factory=list)
    #: The input's fields besides the id and the text, copied to the output as they are (never checked).
    copied_fields: list[str] = field(default_factory=list)
    repaired_last_line: bool = False
    #: Records of an earlier run dropped and redone, by why (``input_changed``, ``not_protected``).
    redone: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def endpoint_down(self) -> int:
        """Prompts not sent because the circuit breaker held the endpoint for down."""
        return self.failures["failed_endpoint_down"]


#: Configs shipped with the package, by the short name ``--config`` accepts.
SHIPPED_CONFIGS = {"mask": "rewriter_mask.cfg", "openai": "rewriter_openai.cfg", "local": "rewriter_local.cfg"}
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
    readings: Optional[Sequence[str]] = None,
    retrieval: int = 0,
) -> DelinkRewriter:
    """The rewriter from a spaCy config (its ``delink_rewriter`` component) or the Mask default.

    ``flagging`` overrides the component's flagging strategy (docs/flagging.md) when given,
    ``threads`` the documents it masks at once;
    ``config_overrides`` sets other values of the config (``section.key``), never the ones
    the command sets itself, so what a record says it was protected under stays true. A
    value given as text (the command line's) is read as ``read_override`` says.
    """
    settings: dict[str, Any] = {
        "index": str(index), "k": k, "arity": arity, "key_file": str(key_file) if key_file else None,
        "require_llm": require_llm,
    }
    if flagging is not None:
        settings["flagging"] = flagging
    if threads is not None:
        settings["threads"] = threads
    if readings is not None:
        settings["readings"] = list(readings)
    if retrieval:
        settings["retrieval"] = retrieval
    config_overrides = config_overrides or {}
    if config is None:
        if config_overrides:
            raise InputError("config overrides (--section.key value) change a config's values and need --config (e.g. --config openai; docs/llm.md)")
        if require_llm:
            raise InputError("--require-llm needs a config with an LLM model, e.g. --config openai (docs/llm.md)")
        nlp = spacy.blank("en")
        rewriter = nlp.add_pipe(FACTORY, config=settings)
    else:
        config = resolve_config(config)
        try:
            loaded = spacy.util.load_config(config, interpolate=True)
            names = [n for n, c in loaded.get("components", {}).items() if c.get("factory") == FACTORY]
            if not names:
                raise InputError(f"{config}: no component with factory = \"{FACTORY}\"; see spacy_delink/configs/rewriter_openai.cfg")
            overrides = {f"components.{names[0]}.{key}": value for key, value in settings.items()}
            typed = {key: read_override(value, _configured(config, loaded, key, overrides)) for key, value in config_overrides.items()}
            overrides = {**typed, **overrides}
            nlp = spacy.util.load_model_from_config(spacy.util.load_config(config, overrides=overrides), auto_fill=True)
        except ConfigValidationError as err:
            details = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in err.errors) or str(err)
            raise InputError(f"{config}: invalid configuration ({details}); see spacy_delink/configs/rewriter_openai.cfg") from None
        rewriter = nlp.get_pipe(names[0])
    assert isinstance(rewriter, DelinkRewriter)
    rewriter.initialize()
    return rewriter


def _configured(config: Path, loaded: dict[str, Any], key: str, set_by_command: dict[str, Any]) -> Any:
    """The config's value at ``key``; a key the config lacks (a typo would be added silently) or one the command sets itself is refused."""
    if key in set_by_command:
        name = key.rsplit(".", 1)[1]
        option = "the INDEX argument" if name == "index" else "--" + name.replace("_", "-")
        raise InputError(f"config override {key}: this command sets it; use {option} instead")
    *sections, name = key.split(".")
    node: Any = loaded
    for depth, section in enumerate(sections):
        node = node.get(section) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            raise InputError(f"config override {key}: {config} has no [{'.'.join(sections[: depth + 1])}] section")
    if name not in node:
        raise InputError(f"config override {key}: [{'.'.join(sections)}] of {config} has no {name!r}; check the spelling")
    return node[name]


def read_override(value: Any, configured: Any) -> Any:
    """A config override given as text, read as spaCy's CLI reads one (JSON, else text), except that a
    setting holding text keeps the text (a model named ``500`` stays ``"500"``; ``null`` still unsets it).

    A value that is not text (from Python) is taken as it is.
    """
    if not isinstance(value, str) or (isinstance(configured, str) and value != "null"):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def protection_settings(rewriter: DelinkRewriter) -> dict[str, Any]:
    """Under what the rewriter protects: a resumed run accepts only records with exactly this.

    The index is named by its key id (a fresh secret per build), document count and a
    digest of its linkage rules; then k, arity, the readings checked and the flagging strategy.
    """
    index = rewriter.index
    rules = json.dumps(index.rules.to_dict(), sort_keys=True, ensure_ascii=False)
    return {
        "index": index.manifest["key_id"],
        "documents": index.documents,
        "rules": hashlib.sha256(rules.encode("utf-8")).hexdigest()[:16],
        "k": rewriter.k,
        "arity": rewriter.arity,
        "readings": list(rewriter.readings),
        "flagging": rewriter.flagging,
        **({"retrieval": retrieval_settings(rewriter.retrieval)} if rewriter.retrieval else {}),
    }


def _carried_digest(fields: dict[str, Any], text_field: str) -> str:
    """A digest of a record's fields other than its text: what an output copies from its input, unchecked."""
    carried = {key: value for key, value in fields.items() if key != text_field}
    return hashlib.sha256(json.dumps(carried, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


@dataclass
class InputScan:
    """The input's valid ids: each one's place, keyed input digest and the digest and names of its other fields; and the skipped inputs."""

    lines: dict[DocId, int]
    digests: dict[DocId, str]
    skipped: list[str]
    #: Per id, the input's field names but the text, and a digest of their values (``_carried_digest``).
    carried: dict[DocId, tuple[tuple[str, ...], str]] = field(default_factory=dict)


def scan_input(source: InputSource, skip_invalid: bool, digest: Callable[[DocId, str], str]) -> InputScan:
    """Every valid id with its place and ``digest(id, text)``, and the skipped inputs; duplicate ids are refused.

    Ids follow the rule every command shares (``corpus.check_doc_id``: given, never invented).
    """
    stats = CorpusStats()
    scan = InputScan({}, {}, stats.skipped_lines)
    where: dict[DocId, str] = {}
    for row in source.rows(skip_invalid, stats, check_document_size):
        if row.doc_id in scan.lines:
            raise InputError(
                f"{row.where}: duplicate id {row.doc_id!r} (first at {where[row.doc_id]}); "
                "ids must be unique, or the second text would never be protected"
            )
        where[row.doc_id] = row.where
        scan.lines[row.doc_id] = row.position
        scan.digests[row.doc_id] = digest(row.doc_id, row.text)
        scan.carried[row.doc_id] = (
            tuple(key for key in row.fields if key != source.text_field), _carried_digest(row.fields, source.text_field)
        )
    return scan


def check_output(output: Path, input_path: Path | str | StdinCopy) -> None:
    """Refuse an output that cannot be written, before anything is read or created."""
    refuse_same_file([] if isinstance(input_path, StdinCopy) else [input_path], output)
    fmt = output_format(output)
    if fmt != "jsonl" and not resumable(output):
        raise InputError(f"--output {output}: a stream takes JSONL only; give a file named .{fmt}")
    file = resumable(output)  # not stdout, a FIFO or a device, which are written to as they are
    if file and output.is_dir():
        raise InputError(f"--output {output} is a directory; give a file path such as {output / 'protected.jsonl'}")
    check_output_path(output)
    if file and output.is_file() and not os.access(output, os.R_OK | os.W_OK):
        raise InputError(f"--output {output}: this user cannot read and append to it (a resumed run does both); choose another output")


def resumable(output: Path) -> bool:
    """Whether a run can resume ``output``: a file (or a symlink to one), not ``-``, a FIFO or a device."""
    return not is_stdio(output) and not is_stream(output)


@contextmanager
def _appending(output: Path) -> Iterator[Callable[[list[dict[str, Any]]], None]]:
    """A writer of batches to ``output``, opened at the first batch (an early error leaves no file).

    A file is appended to (through its symlink: the link stays) and fsynced batch by batch;
    a stream is written to and flushed.
    """
    handle: Optional[IO[str]] = None
    to_stdout = is_stdio(output)
    durable = resumable(output)

    def write(records: list[dict[str, Any]]) -> None:
        nonlocal handle
        if handle is None:
            handle = sys.stdout if to_stdout else open(output, "a" if durable else "w", encoding="utf-8")
        for record in records:
            handle.write(dumps_jsonl_line(record))
        handle.flush()
        if durable:
            os.fsync(handle.fileno())

    try:
        yield write
    finally:
        if handle is not None and not to_stdout:
            handle.close()


def _settings_text(settings: Any) -> str:
    if not isinstance(settings, dict):
        return repr(settings)
    return ", ".join(f"{key}={value}" for key, value in settings.items())


@dataclass
class Resumed:
    """What an existing output holds for this run: the ids kept (verified) and those to redo, by why."""

    done: set[Any] = field(default_factory=set)
    redo: dict[Any, str] = field(default_factory=dict)
    repaired_last_line: bool = False


def journal_path(output: Path) -> Path:
    """Where protect appends its records: the output itself (JSONL), or for a CSV, TSV or Parquet output a
    hidden JSONL file beside it, which resumes like one and becomes the table when the run completes."""
    if output_format(output) == "jsonl" or not resumable(output):
        return output
    return output.with_name(f".{output.name}.protect.jsonl")


def read_done(
    output: Path, expected: dict[str, Any], scan: InputScan, still_protected: Callable[[str, DocId], bool],
    id_field: str = "id", text_field: str = "text",
) -> Resumed:
    """The records of ``output`` this run keeps, verified, and those it redoes; any other record is refused.

    A record must be a ``delink protect`` record of an id of this input, marked protected
    under exactly ``expected``. It is kept only when its ``input_digest`` is the input's
    and the fields it copied from the input are the input's now (else ``input_changed``)
    and ``still_protected`` its text, a detection under those settings (else
    ``not_protected``); the others are redone. A
    half-written last line (a crash) is cut off. The output is rewritten (atomically)
    only once every complete line passed, and only to drop what is redone: a file that is
    refused is left exactly as it was.
    """
    resumed = Resumed()
    if not output.exists():
        return resumed
    data = output.read_bytes()
    complete = data[: data.rfind(b"\n") + 1]
    how = "write to a new --output, or rerun with the settings that file was made with"
    kept_lines: list[bytes] = []
    for line_no, raw in enumerate(complete.splitlines(keepends=True), start=1):
        if not raw.strip():
            continue
        try:
            record = parse_json_line(raw, raw.decode("utf-8"))  # a repeated key is refused, as in every input
        except ValueError:  # UnicodeDecodeError too
            record = None
        where = f"{output}:{line_no}"
        if not isinstance(record, dict) or id_field not in record:
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
        if record.get("protected") is not True or not isinstance(record.get(text_field), str):
            raise InputError(f"{where}: a record that is not marked protected; {how}")
        doc_id = record[id_field]
        if isinstance(doc_id, (list, dict)) or doc_id not in scan.lines:
            raise InputError(f"{where}: id {doc_id!r} is not in the input, so this output belongs to another input; {how}")
        if doc_id in resumed.done or doc_id in resumed.redo:
            raise InputError(f"{where}: id {doc_id!r} appears twice; the file was edited by hand, {how}")
        names, carried = scan.carried[doc_id]
        if record.get(INPUT_DIGEST) != scan.digests[doc_id] or _carried_digest({key: record.get(key) for key in names}, text_field) != carried:
            resumed.redo[doc_id] = "input_changed"
        elif not still_protected(record[text_field], doc_id):
            resumed.redo[doc_id] = "not_protected"
        else:
            resumed.done.add(doc_id)
            kept_lines.append(raw)
    resumed.repaired_last_line = len(complete) < len(data)
    if resumed.repaired_last_line or resumed.redo:
        with atomic_write(output, "wb") as handle:
            handle.write(b"".join(kept_lines))
    return resumed


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
    readings: Optional[tuple[str, ...]] = None
    retrieval: int = 0

    @classmethod
    def of(
        cls, index: Path, k: int, arity: int, config: Optional[Path], key_file: Optional[Path], require_llm: bool,
        flagging: Optional[str], overrides: dict[str, Any], threads: Optional[int] = None,
        readings: Optional[Sequence[str]] = None, retrieval: int = 0,
    ) -> "RewriterSpec":
        """The spec of ``load_rewriter``'s arguments, with paths made absolute for the workers."""
        return cls(
            str(index.absolute()), k, arity, str(config.absolute()) if config is not None and config.is_file() else (str(config) if config else None),
            str(key_file.absolute()) if key_file else None, require_llm, flagging, json.dumps(overrides, sort_keys=True), threads,
            tuple(readings) if readings is not None else None, retrieval,
        )

    def load(self) -> DelinkRewriter:
        return load_rewriter(
            Path(self.index), self.k, self.arity, Path(self.config) if self.config else None,
            Path(self.key_file) if self.key_file else None, require_llm=self.require_llm, flagging=self.flagging,
            config_overrides=json.loads(self.overrides), threads=self.threads, readings=self.readings, retrieval=self.retrieval,
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
    """The output records of one batch of ``(id, text)``, protected under ``settings`` (``protection_settings``).

    The settings are checked against the rewriter's index before and after the batch: an
    index replaced meanwhile (an update, a compaction, a rebuild) is reopened by the
    component, and records checked against it must not claim the settings of the old one.
    """
    _check_same_index(rewriter, settings)
    records = []
    # The id names the source (ranked retrieval needs it; the gap reading reads it as a source when
    # the collection holds a document of that id, docs/linkage-rules.md §9).
    sources = [doc_id for doc_id, _ in batch]
    for (doc_id, text), result in zip(batch, rewriter.rewrite_texts([text for _, text in batch], sources)):
        record = {"id": doc_id, **result.record(), PROTECTED_UNDER: settings, INPUT_DIGEST: rewriter.index.input_digest(doc_id, text)}
        record["edits"] = rewriter.published_edits(result.edits)  # no source phrase in the output by default
        records.append(record)
    _check_same_index(rewriter, settings)
    return records


def _check_same_index(rewriter: DelinkRewriter, settings: dict[str, Any]) -> None:
    if protection_settings(rewriter) != settings:
        raise InputError(
            f"the index changed during the run (now {_settings_text(protection_settings(rewriter))}, the run protects "
            f"under {_settings_text(settings)}); rerun it: it resumes, and checks again what was written"
        )


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
    before = _tally(rewriter)
    records = protected_records(rewriter, batch, settings)
    return records, _tally(rewriter) - before


def protect_file(
    rewriter: DelinkRewriter,
    input_path: Path | InputSource,
    output: Path,
    batch_size: int = 16,
    skip_invalid: bool = False,
    progress: bool = True,
    runner: Optional[Runner] = None,
    spec: Optional[RewriterSpec] = None,
    *,
    id_field: str = "id",
    text_field: str = "text",
    input_format: Optional[str] = None,
    allow_empty: bool = False,
) -> ProtectSummary:
    """Stream the input (any format ``corpus.InputSource`` reads) through the rewriter, appending one record per document to ``output``.

    Each record holds every field of the input untouched, its text protected, then the
    protection's fields. Resumable: documents already in a file ``output`` (protected under
    the same settings, from the same input) are skipped. Each batch is flushed and fsynced
    before the next starts, so a crash loses at most the batches in flight; a second run
    into the same file is refused while this one writes. ``-`` reads stdin or writes stdout;
    a stream output is written afresh. A CSV, TSV or Parquet output (by its name) is
    journaled as JSONL beside it (``journal_path``, resumed the same way) and written,
    atomically, once every document is in: a table input's rows and columns untouched, its
    text column protected. An input with no document to protect (empty, or every input
    skipped) is refused before anything is written, unless ``allow_empty``. With a
    ``runner`` (Dask workers, ``--workers``/``--scheduler``), each batch is protected on a
    worker by a rewriter loaded from ``spec``; batches are the same and written in input
    order, so the output is the output of a run without one.
    """
    if batch_size < 1:
        raise InputError(f"--batch-size must be >= 1, got {batch_size}")
    if (runner is None) != (spec is None):
        raise InputError("protecting on workers needs both a runner and the rewriter's spec")
    started = time.perf_counter()
    summary = ProtectSummary()
    source = input_path if isinstance(input_path, InputSource) else InputSource(input_path, input_format, id_field, text_field)
    check_output(output, source.path)
    journal = journal_path(output)
    with output_lock(output, "delink protect"):
        if not isinstance(source.path, StdinCopy) and is_stdio(source.path):
            source.path = StdinCopy.read()  # read twice: every line is checked before anything is written
        scan = scan_input(source, skip_invalid, rewriter.index.input_digest)
        summary.skipped_lines = scan.skipped
        copied = dict.fromkeys(name for names, _ in scan.carried.values() for name in names if name != source.id_field)
        summary.copied_fields = list(copied)
        refusal = None if allow_empty else nothing_done("protect", len(scan.lines), CorpusStats(skipped_lines=scan.skipped), source.name)
        if refusal:
            raise InputError(refusal)
        settings = protection_settings(rewriter)
        seen: set[Any] = set()
        if resumable(output):
            resumed = read_done(journal, settings, scan, rewriter.still_protected, source.id_field, source.text_field)
            seen, summary.repaired_last_line = resumed.done, resumed.repaired_last_line
            summary.redone.update(resumed.redo.values())
        rows: dict[Any, InputRow] = {}

        def batches() -> Iterator[list[tuple[Any, str]]]:
            batch: list[tuple[Any, str]] = []
            for row in source.rows(skip_invalid, CorpusStats(), check_document_size):
                if scan.lines.get(row.doc_id) != row.position:
                    raise InputError(f"{row.where}: the file changed while protect ran; rerun it (the run resumes)")
                if row.doc_id in seen:
                    summary.already_done += 1
                    continue
                rows[row.doc_id] = row
                batch.append((row.doc_id, row.text))
                if len(batch) == batch_size:
                    yield batch
                    batch = []
            if batch:
                yield batch

        def output_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [rows.pop(record["id"]).with_results(record, source.id_field, source.text_field) for record in records]

        tally: Counter[str] = Counter()
        with Progress("protect", "docs", len(scan.lines) - len(seen), enabled=progress) as bar, _appending(journal) as write:
            if runner is None:
                for batch in batches():
                    write(output_records(protected_records(rewriter, batch, settings)))
                    bar.update(len(batch))
                tally = _tally(rewriter)
            else:
                arguments = ((spec, settings, batch) for batch in batches())
                for records, added in runner.ordered(protect_batch, arguments, IN_FLIGHT_BATCHES):
                    write(output_records(records))
                    bar.update(len(records))
                    tally += added
        if journal != output:
            _write_table_output(journal, output, source, scan)
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


def _write_table_output(journal: Path, output: Path, source: InputSource, scan: InputScan) -> None:
    """The journal's records as the CSV, TSV or Parquet ``output``, in input order; then the journal goes."""
    from ..tables import output_table, write_table

    records = [parse_json_line(raw, raw.decode("utf-8")) for raw in journal.read_bytes().splitlines() if raw.strip()]
    records.sort(key=lambda record: scan.lines[record[source.id_field]])
    positions = [scan.lines[record[source.id_field]] for record in records]
    table = output_table(records, source.table() if source.is_table else None, positions, source.text_field)
    write_table(table, output, output_format(output))
    journal.unlink()
