"""Benchmark of the index at corpus scale, beside tantivy built on the same documents in the same run.

Workloads (``--workloads``, default all): ``slice`` = the first 2,500 articles of
part-000 of ../shared/data/scale (6.4M tokens); ``25``, ``50``, ``100`` = the first one,
two and all four parts (~16M words each). For each one, in this order:

* **build** (ours, then tantivy), each in a spawned child process that streams the corpus
  from the gzip files; wall time, tokens/s (our token count for both), bytes on disk and
  the peak of the *total* resident set size of the child and all its descendants (our
  worker processes included), sampled every 20 ms with psutil (shared pages count once
  per process, so the total over-counts a little);
* **delink_risk**: the ``delink_risk`` spaCy component on the first 50 articles of at
  most 20,000 characters, as given; spaCy's tokenizer runs before the clock (``make_doc``),
  only the component is timed; ms per 1,000 of our tokens, the best of ``RISK_PASSES``
  passes (each on fresh Docs; the median too), and the search alone. Peer: tantivy, one term or
  phrase query per segment n-gram (n <= max_n) of the same articles (a seeded sample of
  at most 20,000 queries, µs/query extrapolated to all n-grams);
* **assess** throughput (docs/s) at arity 1 and 3, k = 2, on the first 1,000 articles with
  their names masked: every whole-word, case-insensitive occurrence of a word of the
  article's title (its first line) is replaced by ``[REDACTED]``. Each arity runs through
  the articles in order for at most ``--assess-seconds``; the JSON says how many it did;
* **update** (only with ``--update-docs N``): an updatable build of all but the last N
  articles, ``delink index --update`` with those N, ``delink compact``, against a fresh
  updatable build of all of them (the peer); seconds of each and the forward store's
  bytes per token (its share of an updatable index);
* **shard sweep** (only with ``--shard-sweep S ...``): the same corpus built in-process with
  each shard count, and the search alone on the delink_risk articles, passes alternating
  between the indexes (a lookup costs one search per shard touched, so the time should not
  grow with the count).

    python benchmarks/bench_scale.py [--workloads slice 25 50 100] [--memory-mb 2048]
        [--workers N] [--scale-dir DIR] [--no-tantivy] [--risk-docs 50] [--assess-docs 1000]
        [--assess-seconds 120] [--update-docs 0] [--shard-sweep 1 8 64] [--out r.json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import multiprocessing
import random
import re
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil

from bench_index import (
    SEED,
    TANTIVY_FIELD,
    TANTIVY_QUERY_CAP,
    build_tantivy,
    check_targets,
    child_report,
    directory_bytes,
    header,
    receive_report,
    report,
    segment_ngrams,
    send_result,
    tantivy_counter,
)
from spacy_delink.corpus.source import read_documents
from spacy_delink.errors import InputError
from spacy_delink.io.files import atomic_write
from spacy_delink.linkage.attack import assess_text
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.linkage.ngrams import analyze
from spacy_delink.linkage.tokenize import LinkageRules

SCALE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "scale"
PARTS = [f"part-{i:03d}.jsonl.gz" for i in range(4)]
WORKLOADS: dict[str, tuple[int, int | None]] = {"slice": (1, 2500), "25": (1, None), "50": (2, None), "100": (4, None)}
RISK_MAX_CHARS = 20_000
#: Timed passes of delink_risk over the documents; the best is reported (and the median).
RISK_PASSES = 5
SAMPLE_SECONDS = 0.02
TARGETS: dict[str, tuple[str, float]] = {
    "build_tokens_per_s": (">=", 2_500_000),
    "build_time_over_tantivy": ("<=", 2.0),
    "bytes_per_token": ("<=", 6.0),
    "peak_rss_mb": ("<=", 4096),
    "risk_ms_per_1000_tokens": ("<=", 2.0),
    "risk_speedup_over_tantivy": (">=", 100),
}
MASK = "[REDACTED]"

Documents = list[tuple[Any, str]]


def corpus_paths(workload: str, scale_dir: Path) -> tuple[list[str], int | None]:
    parts, max_docs = WORKLOADS[workload]
    paths = [scale_dir / name for name in PARTS[:parts]]
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        raise InputError(f"scale corpus missing: {', '.join(missing)}; put ../shared/data/scale beside the checkout")
    return [str(p) for p in paths], max_docs


def stream(paths: list[str], max_docs: int | None) -> Iterator[tuple[Any, str]]:
    return itertools.islice(read_documents([Path(p) for p in paths]), max_docs)


def first_documents(paths: list[str], max_docs: int | None, count: int, keep: Callable[[str], bool]) -> Documents:
    return list(itertools.islice(((i, t) for i, t in stream(paths, max_docs) if keep(t)), count))


def _build_ours(paths: list[str], max_docs: int | None, out: str, memory_mb: int, workers: int | None) -> dict[str, Any]:
    started = time.perf_counter()
    builder = IndexBuilder(LinkageRules(), memory_mb=memory_mb, progress=False, workers=workers, dask=workers is not None)
    summary = builder.build(
        stream(paths, max_docs), out, key_file=out + ".key"
    )
    return {"seconds": time.perf_counter() - started, "summary": summary.to_dict()}


def _build_tantivy(paths: list[str], max_docs: int | None, out: str, memory_mb: int) -> dict[str, Any]:
    _, seconds = build_tantivy(stream(paths, max_docs), Path(out), memory_mb)
    return {"seconds": seconds, "bytes": directory_bytes(Path(out))}


def run_measured(target: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """Run ``target(*args)`` in a spawned child; add the peak total RSS of its process tree."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=send_result, args=(target, args, sender))
    child.start()
    sender.close()
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        process = psutil.Process(child.pid)
        while not done.is_set():
            try:
                tree = [process, *process.children(recursive=True)]
                total = 0
                for member in tree:
                    try:
                        total += member.memory_info().rss
                    except psutil.Error:
                        pass
                peak = max(peak, total)
            except psutil.Error:
                return
            time.sleep(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    report = receive_report(receiver)
    done.set()
    child.join()
    sampler.join()
    child_report(report, child, "benchmark")
    report["peak_rss_mb"] = round(peak / 2**20, 1)
    return report


def search_seconds_of(index: CorpusIndex, texts: list[str], k: int) -> float:
    """One pass of the search alone over ``texts``: SPEC §4 as ``delink_risk`` asks it (df up
    to k), without spans, attributes or scores."""
    started = time.perf_counter()
    for text in texts:
        analyze(index, text, k, exact_frequent=False).minimal_arrays()
    return time.perf_counter() - started


def time_risk(index_dir: Path, documents: Documents, index: CorpusIndex) -> dict[str, Any]:
    """The ``delink_risk`` component alone (spaCy's tokenizer runs before the clock)."""
    import spacy

    nlp = spacy.blank("en")
    component = nlp.add_pipe("delink_risk", config={"index": str(index_dir), "key_file": str(index_dir) + ".key"})
    docs = [nlp.make_doc(text) for _, text in documents]
    component(docs[0])  # first-call setup: page faults, compiled kernels
    tokens = sum(len(index.tokenizer.tokenize(text)) for _, text in documents)
    passes, search_passes = [], []
    for _ in range(RISK_PASSES):  # alternating, so load on a shared machine hits both alike
        fresh = [nlp.make_doc(doc.text) for doc in docs]
        started = time.perf_counter()
        for doc in fresh:
            component(doc)
        passes.append(time.perf_counter() - started)
        search_passes.append(search_seconds_of(component.index, [doc.text for doc in docs], component.k))
    seconds, search_seconds = min(passes), min(search_passes)
    docs = fresh
    return {
        "documents": len(docs),
        "tokens": tokens,
        "passes": RISK_PASSES,
        "seconds": round(seconds, 4),
        "ms_per_1000_tokens": round(seconds * 1e6 / tokens, 3),
        "ms_per_1000_tokens_median": round(sorted(passes)[len(passes) // 2] * 1e6 / tokens, 3),
        "search_ms_per_1000_tokens": round(search_seconds * 1e6 / tokens, 3),
        "spans": sum(len(doc.spans["linkable"]) for doc in docs),
    }


def time_tantivy_queries(engine_dir: Path, documents: Documents, index: CorpusIndex) -> dict[str, Any]:
    import tantivy

    schema_builder = tantivy.SchemaBuilder()
    schema_builder.add_text_field(TANTIVY_FIELD, stored=False, tokenizer_name="default", index_option="position")
    engine = tantivy.Index(schema_builder.build(), path=str(engine_dir))
    count = tantivy_counter(engine)
    grams = [gram for _, text in documents for gram in segment_ngrams(index.tokenizer, text, index.max_n)]
    tokens = sum(len(index.tokenizer.tokenize(text)) for _, text in documents)
    sample = random.Random(SEED).sample(grams, min(TANTIVY_QUERY_CAP, len(grams)))
    count(sample[0])
    started = time.perf_counter()
    for gram in sample:
        count(gram)
    us_per_query = (time.perf_counter() - started) * 1e6 / len(sample)
    return {
        "ngrams": len(grams),
        "queries_timed": len(sample),
        "us_per_query": round(us_per_query, 2),
        "ms_per_1000_tokens": round(us_per_query * len(grams) / tokens, 2),
        "note": "seeded sample of the n-gram queries, µs/query extrapolated to all of them",
    }


def mask_names(text: str) -> str:
    """Replace each whole word of the title (the first line), case-insensitively, by the mask."""
    title = text.split("\n", 1)[0]
    words = sorted({w for w in re.findall(r"\w+", title) if w}, key=len, reverse=True)
    if not words:
        return text
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, words)) + r")\b", re.IGNORECASE)
    return pattern.sub(MASK, text)


def time_assess(index: CorpusIndex, documents: Documents, arity: int, budget_s: float) -> dict[str, Any]:
    """``delink assess`` records (k = 2) for the documents in order, until done or ``budget_s`` is spent."""
    assess_text(index, documents[0][0], documents[0][1], 2, arity)
    started = time.perf_counter()
    linkable = done = 0
    for doc_id, text in documents:
        linkable += assess_text(index, doc_id, text, 2, arity)["anonymity"] is not None
        done += 1
        if time.perf_counter() - started > budget_s:
            break
    seconds = time.perf_counter() - started
    return {
        "arity": arity,
        "documents": done,
        "of": len(documents),
        "seconds": round(seconds, 3),
        "docs_per_s": round(done / seconds, 3),
        "linkable_documents": linkable,
        "note": f"the first documents in order until all were done or {budget_s:g} s had passed",
    }


def run_workload(name: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    paths, max_docs = corpus_paths(name, args.scale_dir)
    ours_dir = work / f"{name}-ours"
    ours = run_measured(_build_ours, paths, max_docs, str(ours_dir), args.memory_mb, args.workers)
    summary = ours["summary"]
    tokens = int(summary["tokens"])
    result: dict[str, Any] = {
        "corpus": {"paths": [Path(p).name for p in paths], "max_docs": max_docs, "documents": summary["documents"], "tokens": tokens},
        "ours": {
            "build_seconds": round(ours["seconds"], 3),
            "build_tokens_per_s": round(tokens / ours["seconds"]),
            "peak_rss_mb": ours["peak_rss_mb"],
            "bytes": summary["bytes_on_disk"],
            "bytes_per_token": round(summary["bytes_on_disk"] / tokens, 3),
            "ngrams_stored": summary["ngrams"],
            "postings": summary["postings"],
        },
    }
    tantivy_dir = work / f"{name}-tantivy"
    if args.tantivy:
        peer = run_measured(_build_tantivy, paths, max_docs, str(tantivy_dir), args.memory_mb)
        result["tantivy"] = {
            "build_seconds": round(peer["seconds"], 3),
            "build_tokens_per_s": round(tokens / peer["seconds"]),
            "peak_rss_mb": peer["peak_rss_mb"],
            "bytes": peer["bytes"],
            "bytes_per_token": round(peer["bytes"] / tokens, 3),
            "setup": "positional index, one text field, 'default' tokenizer, writer with 1 thread",
        }
    index = CorpusIndex(ours_dir, key_file=str(ours_dir) + ".key")
    risk_docs = first_documents(paths, max_docs, args.risk_docs, lambda t: len(t) <= RISK_MAX_CHARS)
    result["ours"]["delink_risk"] = time_risk(ours_dir, risk_docs, index)
    if args.tantivy:
        result["tantivy"]["phrase_queries"] = time_tantivy_queries(tantivy_dir, risk_docs, index)
    assess_docs = [(i, mask_names(t)) for i, t in first_documents(paths, max_docs, args.assess_docs, lambda t: True)]
    result["ours"]["assess"] = [time_assess(index, assess_docs, arity, args.assess_seconds) for arity in args.arities]
    if args.update_docs:
        result["ours"]["update"] = time_update(paths, max_docs, work, args.memory_mb, args.update_docs)
    if args.shard_sweep:
        result["ours"]["shard_sweep"] = time_shard_sweep(paths, max_docs, work, args.memory_mb, args.shard_sweep, risk_docs)
    result["measured"] = measured(result)
    result["targets"] = check_targets(result["measured"], TARGETS)
    return result


def time_shard_sweep(
    paths: list[str], max_docs: int | None, work: Path, memory_mb: int, shard_counts: list[int], documents: Documents
) -> dict[str, Any]:
    """The search alone (as in ``time_risk``) on the workload built with each shard count, passes
    alternating: a query costs one lookup per shard touched, so more shards should cost no more."""
    indexes: dict[int, CorpusIndex] = {}
    for count in shard_counts:
        out = work / f"shards-{count}"
        IndexBuilder(LinkageRules(), memory_mb=memory_mb, progress=False, shards=count).build(
            stream(paths, max_docs), out, key_file=str(out) + ".key"
        )
        indexes[count] = CorpusIndex(out, key_file=str(out) + ".key")
    texts = [text for _, text in documents]
    tokens = sum(len(next(iter(indexes.values())).tokenizer.tokenize(text)) for text in texts)
    passes: dict[int, list[float]] = {count: [] for count in indexes}
    for _ in range(RISK_PASSES + 1):  # the first pass only warms up (page faults, compiled kernels)
        for count, index in indexes.items():
            passes[count].append(search_seconds_of(index, texts, 2))
    return {
        str(count): {
            "search_ms_per_1000_tokens": round(min(times[1:]) * 1e6 / tokens, 3),
            "median": round(sorted(times[1:])[RISK_PASSES // 2] * 1e6 / tokens, 3),
        }
        for count, times in passes.items()
    }


def time_update(paths: list[str], max_docs: int | None, work: Path, memory_mb: int, new_docs: int) -> dict[str, Any]:
    """An update of the last ``new_docs`` articles and its compaction, beside a fresh build of all (module docstring)."""
    from spacy_delink.linkage.index.update import compact_index, update_index

    def build(documents: Iterator[tuple[Any, str]], out: Path) -> tuple[float, Any]:
        started = time.perf_counter()
        summary = IndexBuilder(LinkageRules(), memory_mb=memory_mb, progress=False, updatable=True).build(documents, out)
        return time.perf_counter() - started, summary

    fresh_seconds, fresh = build(stream(paths, max_docs), work / "update-fresh")
    forward_bytes = sum((work / "update-fresh" / name).stat().st_size for name in ("forward.rows", "forward.offsets"))
    base_docs = fresh.documents - new_docs
    base_seconds, _ = build(stream(paths, base_docs), work / "update-base")
    new = list(itertools.islice(stream(paths, max_docs), base_docs, None))
    started = time.perf_counter()
    update = update_index(work / "update-base", new, memory_mb=memory_mb)
    update_seconds = time.perf_counter() - started
    started = time.perf_counter()
    compact_index(work / "update-base", memory_mb=memory_mb, progress=False)
    compact_seconds = time.perf_counter() - started
    return {
        "documents": fresh.documents, "new_documents": new_docs, "new_tokens": update.tokens,
        "linked_documents_read_back": update.linked_documents,
        "update_seconds": round(update_seconds, 3), "compact_seconds": round(compact_seconds, 3),
        "fresh_build_seconds": round(fresh_seconds, 3), "base_build_seconds": round(base_seconds, 3),
        "update_over_fresh": round(update_seconds / fresh_seconds, 3),
        "updatable_bytes_per_token": round(fresh.bytes_on_disk / fresh.tokens, 3),
        "forward_bytes_per_token": round(forward_bytes / fresh.tokens, 3),
        "delta_bytes": update.bytes_on_disk,
    }


def measured(result: dict[str, Any]) -> dict[str, float | None]:
    ours, peer = result["ours"], result.get("tantivy")
    return {
        "build_tokens_per_s": ours["build_tokens_per_s"],
        "build_time_over_tantivy": round(ours["build_seconds"] / peer["build_seconds"], 2) if peer else None,
        "bytes_per_token": ours["bytes_per_token"],
        "peak_rss_mb": ours["peak_rss_mb"],
        "risk_ms_per_1000_tokens": ours["delink_risk"]["ms_per_1000_tokens"],
        "risk_speedup_over_tantivy": (
            round(peer["phrase_queries"]["ms_per_1000_tokens"] / ours["delink_risk"]["ms_per_1000_tokens"], 1) if peer else None
        ),
    }


def linearity(results: dict[str, Any]) -> dict[str, Any] | None:
    """Build seconds per million tokens across the workloads (constant when time is linear)."""
    points = {name: r["ours"]["build_seconds"] * 1e6 / r["corpus"]["tokens"] for name, r in results.items()}
    if len(points) < 2:
        return None
    return {"seconds_per_million_tokens": {k: round(v, 4) for k, v in points.items()}, "max_over_min": round(max(points.values()) / min(points.values()), 2)}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every workload in turn; with ``--out``, the JSON so far is written after each one."""
    started = time.perf_counter()
    results: dict[str, Any] = {}

    def summary() -> dict[str, Any]:
        return {
            **header("scale"),
            "settings": {"memory_mb": args.memory_mb, "workers": args.workers, "k": 2, "max_n": LinkageRules().max_n},
            "workloads": results,
            "linearity": linearity(results),
            "seconds": round(time.perf_counter() - started, 1),
        }

    with tempfile.TemporaryDirectory(prefix="bench-scale-", dir=args.work_dir) as tmp:
        for name in args.workloads:
            results[name] = run_workload(name, args, Path(tmp))
            if args.out is not None:
                with atomic_write(args.out) as handle:
                    json.dump(summary(), handle, indent=1, ensure_ascii=False)
    return summary()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--memory-mb", type=int, default=2048, help="The builder's memory budget.")
    parser.add_argument("--workers", type=int, help="Build on a local Dask cluster of N processes [default: in this process].")
    parser.add_argument("--no-tantivy", dest="tantivy", action="store_false", help="Skip the tantivy peer.")
    parser.add_argument("--risk-docs", type=int, default=50, help="Articles for the delink_risk timing.")
    parser.add_argument("--assess-docs", type=int, default=1000, help="Masked articles for the assess timing.")
    parser.add_argument("--arities", type=int, nargs="+", default=[1, 3], choices=[1, 2, 3])
    parser.add_argument("--assess-seconds", type=float, default=120.0, help="Time budget of each assess timing.")
    parser.add_argument("--scale-dir", type=Path, default=SCALE_DIR, help="The scale corpus [default: ../shared/data/scale].")
    parser.add_argument("--work-dir", help="Where the indexes are built [default: the system temp folder].")
    parser.add_argument("--update-docs", type=int, default=0, help="Also time an update with the last N articles [default: 0, off].")
    parser.add_argument(
        "--shard-sweep", type=int, nargs="+", default=[], metavar="S",
        help="Also time the search on the workload built with each of these shard counts (powers of two).",
    )
    parser.add_argument("--out", type=Path, help="Also write the JSON result to this file.")
    args = parser.parse_args(argv)
    for option in ("risk_docs", "assess_docs"):
        if getattr(args, option) < 1:
            parser.error(f"--{option.replace('_', '-')} must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    return report(run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
