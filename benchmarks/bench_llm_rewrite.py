"""Mask, Generalize→Mask and a real local language model (``spacy_delink.LlamaCpp.v1``), same documents, same run.

For each document set (the 12 shipped sample documents against samples/corpus.jsonl; the
first TAB manual de-identifications against the TAB collection) and each arity, the same
documents go through ``delink_rewriter`` once per configuration, at k = 2:

* ``mask``: the Mask model without its generalizer (``generalize = false``: the old default);
* ``generalize_mask``: the Mask model as shipped (generalize flagged numbers and dates, then mask);
* ``generalize_llm`` (with ``--model``): ``Generalize.v1`` in front of the GGUF model, every
  answer under the task's checks (fidelity included), the mask fallback after it;

and the JSON reports for each:

* seconds per document, LLM calls (prompts answered), seconds per prompt, passes;
* what fixed the flagged spans: each span flagged in the input is traced through the
  passes' edits to the output and counted as ``masked`` (a mask covers part of it),
  ``rephrased`` (the model's rewrites touch it, no mask), ``generalized`` (only the
  generalizer's edits touch it) or ``untouched`` (a neighbouring edit broke it);
  ``fixed_by_rewriting`` is the rephrased share of the flagged spans. Edits are also counted
  by what made them: the generalizer, the model's rephrasing, its own mask answer, the fallback;
* rejected answers by reason, spans retried one per prompt, constrained (grammar) prompts;
* tokens changed and the cosine similarity of de-identified vs protected text, both as
  ``delink evaluate`` computes them (``compare_texts``; all-MiniLM-L6-v2 document embeddings);
* every output checked protected by a fresh detection under the same k, arity and readings.

Runs are bounded: ``--limit`` documents per set, ``--max-seconds`` of model run per set and
arity (the documents begun go on; the Mask model then runs on the same ones).
Every accepted rephrasing and generalization is listed (``rephrasings``, ``generalizations``).
Usage: python benchmarks/bench_llm_rewrite.py [--model PATH.gguf] [--sets sample,tab] [--arity 1,3]
       [--limit 10] [--max-seconds 1800] [--threads 2] [--spans-per-prompt 1] [--max-passes 2] [--tab DIR]
       [--template instructions.txt] [--examples examples.jsonl] [--above-mask] [--unit span|sentence]
Prints one JSON object.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import spacy
import srsly

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_rewriter import TimedModel  # noqa: E402
from tab_testbed import load_tab  # noqa: E402

from spacy_delink.evaluate.utility import compare_texts  # noqa: E402
from spacy_delink.linkage.attack import detect  # noqa: E402
from spacy_delink.linkage.index import IndexBuilder, open_index  # noqa: E402
from spacy_delink.llm.models.generalize import model as _registers_generalize  # noqa: E402,F401  (before any reinstall)
from spacy_delink.rewrite.masking import merge_ranges  # noqa: E402
from spacy_delink.semantic.encoder import DocumentEncoder, embeddings_unavailable  # noqa: E402

K = 2
MASK = "[REDACTED]"


def sample_set() -> tuple[list[tuple[str, str]], list[str]]:
    corpus = [(str(r["id"]), r["text"]) for r in srsly.read_jsonl(ROOT / "samples" / "corpus.jsonl")]
    return corpus, [r["text"] for r in srsly.read_jsonl(ROOT / "samples" / "deidentified.jsonl")]


def tab_set(folder: Path) -> tuple[list[tuple[str, str]], list[str]]:
    tab = load_tab(folder)
    return tab.corpus, [text for _, text in tab.inputs]


def rewriter(index: Path, arity: int, model: dict[str, Any] | None, args: argparse.Namespace) -> tuple[Any, Any]:
    """The pipeline and its rewriter; an LLM model's time is measured (``TimedModel``)."""
    nlp = spacy.blank("en")
    # keep_source: the benchmark lists what the model rephrased into what
    config: dict[str, Any] = {"index": str(index), "k": K, "arity": arity, "cache_dir": None, "threads": 1, "keep_source": True}
    if model is not None and model["@llm_models"] == "spacy_delink.Mask.v1":
        config.update(model=model)
    elif model is not None:
        config.update(
            max_passes=args.max_passes,
            model={"@llm_models": "spacy_delink.Generalize.v1", "model": model},
            task={"@llm_tasks": "spacy_delink.Rewrite.v1", "spans_per_prompt": args.spans_per_prompt,
                  "template": args.template, "examples": args.examples, "above_mask": args.above_mask, "unit": args.unit},
        )
    component = nlp.add_pipe("delink_rewriter", config=config)
    if component.uses_llm:
        component.model.then._loaded()  # the model file is read here, not inside the first document's time
        component.model.then = TimedModel(component.model.then)
    return nlp, component


def run(nlp: Any, component: Any, texts: list[str], budget: float) -> tuple[list[Any], list[float]]:
    """Documents one at a time until ``budget`` seconds are spent; their Docs and seconds."""
    docs, seconds = [], []
    for text in texts:
        started = time.perf_counter()
        docs.append(nlp(text))
        seconds.append(time.perf_counter() - started)
        if sum(seconds) >= budget:
            break
    return docs, seconds


def by_kind(edit: dict[str, Any]) -> str:
    """What made an edit: the generalizer, the model's rephrasing, the model's own mask answer, or the mask fallback."""
    if edit["by"] in ("mask", "generalize"):
        return {"mask": "mask_fallback", "generalize": "generalized"}[edit["by"]]
    return "llm_mask" if edit["replacement"].strip() == MASK else "rephrased"


FATE = {"rephrased": "llm", "generalized": "generalize"}


def source_fates(source: str, edits: list[dict[str, Any]]) -> list[str]:
    """What became of each character of ``source``: ``kept``, ``llm`` (rewritten), ``generalize`` or ``mask`` (under a mask).

    Edits are replayed pass by pass (their offsets are into the text before their pass);
    each character of the current text remembers the source range it stands for, so a
    mask over a rewrite marks the rewritten source as masked.
    """
    owners: list[tuple[str, int, int]] = [("kept", i, i + 1) for i in range(len(source))]
    for number in sorted({edit["pass"] for edit in edits}):
        rebuilt, cursor = [], 0
        for edit in sorted((e for e in edits if e["pass"] == number), key=lambda e: e["start"]):
            rebuilt += owners[cursor : edit["start"]]
            covered = owners[edit["start"] : edit["end"]] or owners[max(0, edit["start"] - 1) : edit["start"] + 1]
            low, high = min(o[1] for o in covered), max(o[2] for o in covered)
            rebuilt += [(FATE.get(by_kind(edit), "mask"), low, high)] * len(edit["replacement"])
            cursor = edit["end"]
        owners = rebuilt + owners[cursor:]
    fates = ["kept"] * len(source)
    for kind, low, high in owners:
        if kind != "kept":
            for i in range(low, high):
                fates[i] = "mask" if "mask" in (kind, fates[i]) else "llm" if "llm" in (kind, fates[i]) else kind
    return fates


def span_fates(source: str, edits: list[dict[str, Any]], spans: list[tuple[int, int]]) -> Counter[str]:
    """Each flagged span of ``source``: ``masked``, ``rephrased``, ``generalized`` or ``untouched`` (see the module docstring)."""
    fates = source_fates(source, edits)
    counted: Counter[str] = Counter()
    for start, end in spans:
        inside = set(fates[start:end])
        counted["masked" if "mask" in inside else "rephrased" if "llm" in inside else "generalized" if "generalize" in inside else "untouched"] += 1
    return counted


def summary(
    component: Any, index: Any, arity: int, texts: list[str], docs: list[Any], seconds: list[float],
    encoder: DocumentEncoder | None,
) -> dict[str, Any]:
    edits = [edit for doc in docs for edit in doc._.delink_edits]
    by = Counter(by_kind(e) for e in edits)
    flagged_spans = [merge_ranges((o.start, o.end) for o in detect(index, t, K, arity, readings=component.readings).to_rephrase()) for t in texts]
    fates: Counter[str] = Counter()
    for text, doc, spans in zip(texts, docs, flagged_spans):
        fates.update(span_fates(text, doc._.delink_edits, spans))
    flagged = sum(len(spans) for spans in flagged_spans)
    compared = [compare_texts(index.tokenizer, before, doc.text) for before, doc in zip(texts, docs)]
    timed = getattr(component.model, "then", component.model)  # the TimedModel behind Generalize.v1
    stats = Counter(getattr(getattr(timed, "model", timed), "stats", {}))
    calls = int(stats["calls"])
    model_seconds = getattr(timed, "seconds", 0.0)
    result: dict[str, Any] = {
        "documents": len(docs),
        "seconds_per_document": round(statistics.mean(seconds), 2),
        "llm_calls": calls,
        "seconds_per_prompt": round(model_seconds / calls, 2) if calls else None,
        "passes_mean": round(statistics.mean(doc._.delink_passes for doc in docs), 2),
        "flagged_spans_before": flagged,
        "flagged_span_fates": {fate: fates[fate] for fate in ("rephrased", "generalized", "masked", "untouched")},
        "fixed_by_rewriting": round(fates["rephrased"] / flagged, 3) if flagged else None,
        "declined_to_mask": component.stats["declined_to_mask"],
        "edits": dict(by),
        "rephrased_share_of_edits": round(by["rephrased"] / len(edits), 3) if edits else None,
        "rejected": {k.removeprefix("rejected_"): v for k, v in sorted(component.stats.items()) if k.startswith("rejected_")},
        "retried_alone": component.stats["retried_alone"],
        "model": {k: v for k, v in sorted(stats.items()) if k != "calls"},
        "tokens": sum(c[0] for c in compared),
        "tokens_changed": sum(c[1] for c in compared),
        "tokens_changed_share": round(sum(c[1] for c in compared) / max(1, sum(c[0] for c in compared)), 4),
        # a fresh detection under the component's k, arity and readings: not the component's own verdict
        "protected": sum(detect(index, doc.text, K, arity, readings=component.readings).protected for doc in docs),
        "rephrasings": [[e["original"], e["replacement"]] for e in edits if by_kind(e) == "rephrased"],
        "generalizations": [[e["original"], e["replacement"]] for e in edits if by_kind(e) == "generalized"],
    }
    if encoder is not None:
        before = encoder.encode(texts)
        after = encoder.encode([doc.text for doc in docs])
        similarity = (before * after).sum(axis=1)
        result["similarity_mean"] = round(float(similarity.mean()), 4)
        result["similarity_min"] = round(float(similarity.min()), 4)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a GGUF model file (without: only mask and generalize_mask)")
    parser.add_argument("--sets", default="sample", help="comma-separated: sample, tab")
    parser.add_argument("--arity", default="1,3")
    parser.add_argument("--limit", type=int, default=10, help="documents per set")
    parser.add_argument("--max-seconds", type=float, default=1800.0, help="model run per set and arity")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--spans-per-prompt", type=int, default=1)
    parser.add_argument("--max-passes", type=int, default=2)
    parser.add_argument("--template", help="prompt instructions file (default: the shipped prompt)")
    parser.add_argument("--examples", help="few-shot examples JSONL (default: the shipped examples)")
    parser.add_argument("--unit", default="span", choices=["span", "sentence"], help="task.unit: rewrite spans or whole sentences")
    parser.add_argument("--above-mask", action="store_true", help="task.above_mask: keep rephrasings closer than the mask")
    parser.add_argument("--tab", type=Path, default=ROOT.parent / "shared" / "data" / "tab")
    args = parser.parse_args()
    model_path = Path(args.model) if args.model else None
    configurations: dict[str, dict[str, Any]] = {
        "mask": {"@llm_models": "spacy_delink.Mask.v1", "generalize": False},
        "generalize_mask": {"@llm_models": "spacy_delink.Mask.v1"},
    }
    if model_path is not None:
        configurations["generalize_llm"] = {"@llm_models": "spacy_delink.LlamaCpp.v1", "model_path": str(model_path), "n_threads": args.threads}
    reason = embeddings_unavailable()
    encoder = None if reason else DocumentEncoder()
    command = " ".join(["python", "benchmarks/bench_llm_rewrite.py", *sys.argv[1:]])
    out: dict[str, Any] = {
        "benchmark": "bench_llm_rewrite",
        "command": command.replace(str(model_path), model_path.name) if model_path else command,
        # Seconds per prompt depend on whether the cores were shared: the load says so.
        "machine": {"cpus": os.cpu_count(), "load_average_1min_start": round(os.getloadavg()[0], 2)},
        "model": None if model_path is None else {
            "file": model_path.name, "bytes": model_path.stat().st_size,
            "sha256": hashlib.sha256(model_path.read_bytes()).hexdigest(), "n_threads": args.threads},
        "k": K,
        "settings": {"spans_per_prompt": args.spans_per_prompt, "max_passes": args.max_passes, "limit": args.limit,
                     "max_seconds": args.max_seconds, "template": args.template or "shipped",
                     "examples": args.examples or "shipped", "above_mask": args.above_mask, "unit": args.unit},
        "similarity": "all-MiniLM-L6-v2 cosine, de-identified vs protected (delink evaluate)" if encoder else reason,
        "sets": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.sets.split(","):
            corpus, texts = sample_set() if name == "sample" else tab_set(args.tab)
            texts = texts[: args.limit]
            path = Path(tmp) / name
            IndexBuilder(progress=False).build(corpus, path)
            index = open_index(path)
            for arity in (int(a) for a in args.arity.split(",")):
                started = time.perf_counter()
                results: dict[str, Any] = {}
                done = texts
                # The LLM first: its time budget decides how many documents the others get.
                for configuration in sorted(configurations, key=lambda c: c != "generalize_llm"):
                    nlp, component = rewriter(path, arity, configurations[configuration], args)
                    budget = args.max_seconds if configuration == "generalize_llm" else float("inf")
                    docs, seconds = run(nlp, component, done, budget)
                    done = done[: len(docs)]
                    results[configuration] = summary(component, index, arity, done, docs, seconds, encoder)
                out["sets"][f"{name}/arity{arity}"] = {**results, "wall_seconds": round(time.perf_counter() - started, 1)}
                print(json.dumps({f"{name}/arity{arity}": out["sets"][f"{name}/arity{arity}"]}), file=sys.stderr, flush=True)
    out["machine"]["load_average_1min_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(out, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()
