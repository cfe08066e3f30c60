"""Benchmark of the corpus index: build speed, size, open time and assess latency.

Prints one JSON object. The build runs in a spawned child process so that its peak
RSS (``resource.getrusage``) is its own and not the benchmark's. ``--compare`` also
times, on the same documents and tokens, the two baselines the index must beat:

* a plain Python dict of sets (N-gram tuple -> document numbers), the obvious design;
* tantivy with a positional index and one phrase query per N-gram, the search-engine
  design (the query count is capped and the per-query time extrapolated; the JSON
  says so).

Default corpus: TAB (../shared/data/tab) — the 127 test originals plus the public texts
whose ids are not among them; queries are the originals with the manual suppression
spans replaced by ``[REDACTED]``. With ``--corpus``, queries are a seeded sample of
corpus documents.

    python benchmarks/bench_index.py [--compare] [--corpus PATH ...] [--max-docs N]
        [--k 2] [--memory-mb 2048] [--out result.json]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
from tqdm import tqdm

from spacy_delink.linkage.attack import assess_text
from spacy_delink.corpus.source import read_documents
from spacy_delink.linkage.ngrams import analyze, check_k
from spacy_delink.errors import DelinkError, InputError
from tab_testbed import load_tab
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.io.files import atomic_write
from spacy_delink.linkage.tokenize import LinkageRules, Tokenizer

TAB_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "tab"
CUSTOM_QUERY_SAMPLE = 100
SEED = 0
OPEN_REPEATS = 7
DOC_1000_REPEATS = 5
TANTIVY_QUERY_CAP = 20_000
TANTIVY_FIELD = "body"
TARGETS = {
    "build_tokens_per_s": (">=", 1_000_000),
    "index_bytes_per_token": ("<=", 16),
    "assess_ms_per_1000_token_doc": ("<=", 2.0),
    "assess_speedup_over_tantivy": (">=", 100),
    "open_ms_verified": ("<=", 50),
}

Documents = list[tuple[str, str]]
NGram = tuple[str, ...]


@dataclass
class Workload:
    """The corpus to index and the documents to assess against it."""

    name: str
    corpus: Documents
    queries: Documents
    query_source: str


@dataclass
class OurFigures:
    """What the comparison needs from our own measurements."""

    corpus_tokens: int
    build_tokens_per_s: float
    index_bytes: int
    assess: dict[str, Any]


def load_tab_workload(max_docs: int | None) -> Workload:
    try:
        tab = load_tab(TAB_DIR)
    except InputError as err:
        raise InputError(f"{err}; put ../shared/data/tab beside the checkout or pass --corpus PATH") from None
    return Workload(
        "TAB originals + Public10% distractors",
        tab.corpus[:max_docs],
        tab.inputs,
        "TAB originals, manual suppression spans -> [REDACTED]",
    )


def load_custom(paths: list[str], max_docs: int | None) -> Workload:
    corpus: Documents = []
    for document in read_documents(paths):
        if max_docs is not None and len(corpus) >= max_docs:
            break
        corpus.append(document)
    if not corpus:
        raise InputError(f"corpus {', '.join(paths)} has no documents; check the path")
    queries = random.Random(SEED).sample(corpus, min(CUSTOM_QUERY_SAMPLE, len(corpus)))
    return Workload(", ".join(paths), corpus, queries, f"seeded sample (seed {SEED}) of {len(queries)} corpus documents")


def load_workload(paths: list[str] | None, max_docs: int | None) -> Workload:
    return load_custom(paths, max_docs) if paths else load_tab_workload(max_docs)


def max_rss_mb() -> float:
    """This process's peak resident set size so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def build_in_child(paths: list[str] | None, max_docs: int | None, index_dir: str, memory_mb: int) -> dict[str, Any]:
    """Load the corpus, then build the index; report the build's time and this process's peak RSS."""
    corpus = load_workload(paths, max_docs).corpus
    rss_before = max_rss_mb()
    started = time.perf_counter()
    summary = IndexBuilder(LinkageRules(), memory_mb=memory_mb, progress=False).build(corpus, index_dir)
    seconds = time.perf_counter() - started
    return {"summary": summary.to_dict(), "seconds": seconds, "rss_before_mb": rss_before, "peak_rss_mb": max_rss_mb()}


def send_result(target: Callable[..., dict[str, Any]], args: tuple[Any, ...], conn: Connection) -> None:
    """A spawned child's body: send ``target(*args)`` (or the one-line error it raised) to the parent."""
    try:
        conn.send(target(*args))
    except DelinkError as err:
        conn.send({"error": str(err)})
    finally:
        conn.close()


def receive_report(receiver: Connection) -> dict[str, Any]:
    """What the child sent, or {} when it died before sending (``child_report`` then says so)."""
    try:
        report: dict[str, Any] = receiver.recv()
    except EOFError:
        report = {}
    return report


def child_report(report: dict[str, Any], child: BaseProcess, what: str) -> dict[str, Any]:
    """``report`` from a joined child, or its error as the one-line error it was."""
    if "error" in report:
        raise InputError(report["error"])
    if child.exitcode != 0 or not report:
        raise DelinkError(f"the {what} child process failed (exit code {child.exitcode}); see its traceback above")
    return report


def build_index(paths: list[str] | None, max_docs: int | None, index_dir: Path, memory_mb: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=send_result, args=(build_in_child, (paths, max_docs, str(index_dir), memory_mb), sender))
    child.start()
    sender.close()
    report = receive_report(receiver)
    child.join()
    return child_report(report, child, "index build")


def median_ms(action: Callable[[], object], repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings) * 1000


def segment_ngrams(tokenizer: Tokenizer, text: str, max_n: int) -> Iterator[NGram]:
    """Every N-gram of search forms (n <= max_n) that lies within one segment (SPEC §1-2)."""
    tokens = tokenizer.tokenize(text)
    forms = [tokenizer.search_form(raw) for raw in tokens.raw]
    for start, room in enumerate(tokens.remaining.tolist()):
        for n in range(1, min(room, max_n) + 1):
            yield tuple(forms[start : start + n])


def ms_per_1000_tokens(seconds: float, tokens: int) -> float:
    return seconds * 1e6 / tokens


def time_assess(index: CorpusIndex, queries: Documents, token_counts: list[int], doc_1000: int, k: int) -> dict[str, Any]:
    """Ours: time of ``assess_text`` (one full ``delink assess`` record) per document and on the ~1,000-token one."""
    assess_text(index, queries[0][0], queries[0][1], k)  # first-call setup (page faults, caches)
    per_1000 = []
    for (doc_id, text), tokens in zip(tqdm(queries, desc="assessing (ours)", unit="doc"), token_counts):
        started = time.perf_counter()
        assess_text(index, doc_id, text, k)
        if tokens:
            per_1000.append(ms_per_1000_tokens(time.perf_counter() - started, tokens))
    doc_id, text = queries[doc_1000]
    doc_ms = median_ms(lambda: assess_text(index, doc_id, text, k), DOC_1000_REPEATS)
    return {
        "ms_per_1000_tokens_median": round(statistics.median(per_1000), 3),
        "ms_per_1000_tokens_p90": round(float(np.percentile(per_1000, 90)), 3),
        "doc_1000": {
            "id": doc_id,
            "tokens": token_counts[doc_1000],
            "ms": round(doc_ms, 3),
            "ms_per_1000_tokens": round(doc_ms * 1000 / token_counts[doc_1000], 3),
            "repeats": DOC_1000_REPEATS,
        },
        "measures": "assess_text(): analysis, anonymity and the minimal linkable set with offsets (one delink assess record)",
    }


def build_dict_of_sets(tokenizer: Tokenizer, corpus: Documents, max_n: int) -> tuple[dict[NGram, set[int]], float]:
    """The obvious index: every segment N-gram -> set of document numbers."""
    started = time.perf_counter()
    postings: defaultdict[NGram, set[int]] = defaultdict(set)
    for doc_no, (_, text) in enumerate(tqdm(corpus, desc="building dict-of-sets", unit="doc")):
        for gram in segment_ngrams(tokenizer, text, max_n):
            postings[gram].add(doc_no)
    return postings, time.perf_counter() - started


def dict_assess(postings: dict[NGram, set[int]], tokenizer: Tokenizer, text: str, k: int, max_n: int) -> int | None:
    """Arity-1 anonymity from the dict: one lookup per segment N-gram."""
    linkable = [df for gram in segment_ngrams(tokenizer, text, max_n) if 1 <= (df := len(postings.get(gram, ()))) < k]
    return min(linkable, default=None)


def df_mismatches(index: CorpusIndex, postings: dict[NGram, set[int]], queries: Documents, k: int) -> tuple[int, int]:
    """Check every df our index returned against the dict of sets: (looked up, disagreeing)."""
    looked_up = disagreeing = 0
    for _, text in queries:
        analysis = analyze(index, text, k)
        forms = [index.tokenizer.search_form(raw) for raw in analysis.tokens.raw]
        for level in analysis.levels:
            for position, df in zip(level.positions.tolist(), level.df.tolist()):
                looked_up += 1
                disagreeing += len(postings.get(tuple(forms[position : position + level.n]), ())) != df
    return looked_up, disagreeing


def build_tantivy(corpus: Documents, path: Path, memory_mb: int) -> tuple[Any, float]:
    """A positional tantivy index of the raw texts (its default simple tokenizer, lowercased)."""
    import tantivy

    path.mkdir()
    started = time.perf_counter()
    schema_builder = tantivy.SchemaBuilder()
    schema_builder.add_text_field(TANTIVY_FIELD, stored=False, tokenizer_name="default", index_option="position")
    engine = tantivy.Index(schema_builder.build(), path=str(path))
    writer = engine.writer(heap_size=min(memory_mb, 4000) * 1024 * 1024, num_threads=1)
    for _, text in tqdm(corpus, desc="building tantivy", unit="doc"):
        writer.add_document(tantivy.Document(**{TANTIVY_FIELD: text}))
    writer.commit()
    writer.wait_merging_threads()
    engine.reload()
    return engine, time.perf_counter() - started


def tantivy_counter(engine: Any) -> Callable[[NGram], int]:
    """Matching-document count of one N-gram: a term query for n = 1, else a phrase query."""
    import tantivy

    schema, searcher = engine.schema, engine.searcher()

    def count(gram: NGram) -> int:
        if len(gram) == 1:
            query = tantivy.Query.term_query(schema, TANTIVY_FIELD, gram[0])
        else:
            query = tantivy.Query.phrase_query(schema, TANTIVY_FIELD, list(gram))
        return int(searcher.search(query, 1).count)

    return count


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def compare(
    workload: Workload,
    index: CorpusIndex,
    ours: OurFigures,
    token_counts: list[int],
    doc_1000: int,
    k: int,
    memory_mb: int,
    work: Path,
) -> dict[str, Any]:
    """Time the dict-of-sets and tantivy baselines on the same corpus, tokens and queries."""
    tokenizer, max_n = Tokenizer(index.rules), index.max_n
    corpus_tokens = ours.corpus_tokens
    rss_before = max_rss_mb()
    postings, dict_build_s = build_dict_of_sets(tokenizer, workload.corpus, max_n)
    dict_rss_increase = max_rss_mb() - rss_before
    dict_per_1000 = []
    for (_, text), tokens in zip(tqdm(workload.queries, desc="assessing (dict)", unit="doc"), token_counts):
        started = time.perf_counter()
        dict_assess(postings, tokenizer, text, k, max_n)
        if tokens:
            dict_per_1000.append(ms_per_1000_tokens(time.perf_counter() - started, tokens))
    looked_up, disagreeing = df_mismatches(index, postings, workload.queries, k)

    engine, tantivy_build_s = build_tantivy(workload.corpus, work / "tantivy", memory_mb)
    count = tantivy_counter(engine)
    grams_per_doc = [list(segment_ngrams(tokenizer, text, max_n)) for _, text in workload.queries]
    all_grams = [gram for grams in grams_per_doc for gram in grams]
    sample = random.Random(SEED).sample(all_grams, min(TANTIVY_QUERY_CAP, len(all_grams)))
    started = time.perf_counter()
    counts = [count(gram) for gram in tqdm(sample, desc="tantivy phrase queries", unit="query", mininterval=1)]
    us_per_query = (time.perf_counter() - started) * 1e6 / len(sample)
    equal_to_dict = sum(c == len(postings.get(gram, ())) for gram, c in zip(sample, counts)) / len(sample)
    doc_grams = grams_per_doc[doc_1000]
    tantivy_doc_ms = median_ms(lambda: [count(gram) for gram in doc_grams], 3)
    doc_tokens = token_counts[doc_1000]
    tantivy_doc_per_1000 = tantivy_doc_ms * 1000 / doc_tokens
    query_tokens = sum(token_counts)
    dict_assess_median = statistics.median(dict_per_1000)
    ours_assess_median = ours.assess["ms_per_1000_tokens_median"]
    ours_doc_per_1000 = ours.assess["doc_1000"]["ms_per_1000_tokens"]
    tantivy_bytes = directory_bytes(work / "tantivy")
    return {
        "dict_of_sets": {
            "build_seconds": round(dict_build_s, 3),
            "build_tokens_per_s": round(corpus_tokens / dict_build_s),
            "max_rss_increase_mb": round(dict_rss_increase, 1),
            "distinct_ngrams": len(postings),
            "assess_ms_per_1000_tokens_median": round(dict_assess_median, 3),
            "assess_note": "one dict lookup per segment N-gram (n <= max_n) and the minimum linkable df; no offsets or records",
            "df_check": {"ngrams_looked_up_by_ours": looked_up, "df_disagreements": disagreeing},
        },
        "tantivy": {
            "build_seconds": round(tantivy_build_s, 3),
            "build_tokens_per_s": round(corpus_tokens / tantivy_build_s),
            "index_bytes": tantivy_bytes,
            "index_bytes_per_token": round(tantivy_bytes / corpus_tokens, 2),
            "setup": "on-disk index, one text field with positions, 'default' tokenizer (simple + lowercase), writer with 1 thread",
            "query_ngrams_total": len(all_grams),
            "ngrams_per_1000_query_tokens": round(len(all_grams) * 1000 / query_tokens, 1),
            "queries_timed": len(sample),
            "query_sampling": f"{len(sample)} of {len(all_grams)} query N-grams, seeded uniform sample; µs/query extrapolated",
            "us_per_phrase_query": round(us_per_query, 2),
            "extrapolated_ms_per_1000_tokens": round(us_per_query * len(all_grams) / query_tokens, 2),
            "doc_1000_ms": round(tantivy_doc_ms, 2),
            "doc_1000_ms_per_1000_tokens": round(tantivy_doc_per_1000, 2),
            "doc_1000_note": "every segment N-gram of the ~1,000-token document queried, median of 3 runs",
            "counts_equal_dict_df_fraction": round(equal_to_dict, 4),
            "counts_note": "tantivy phrases also match across segment breaks and its tokenizer differs slightly, so counts may exceed df",
        },
        "ratios": {
            "build_speed_ours_over_dict": round(ours.build_tokens_per_s / (corpus_tokens / dict_build_s), 2),
            "build_speed_ours_over_tantivy": round(ours.build_tokens_per_s / (corpus_tokens / tantivy_build_s), 2),
            "index_size_ours_over_tantivy": round(ours.index_bytes / tantivy_bytes, 3),
            "assess_speedup_over_dict": round(dict_assess_median / ours_assess_median, 2),
            "assess_speedup_over_tantivy": round(tantivy_doc_per_1000 / ours_doc_per_1000, 1),
        },
    }


def check_targets(
    measured: dict[str, float | None], targets: dict[str, tuple[str, float]] = TARGETS
) -> list[dict[str, Any]]:
    """Each target with the measured value and whether it is met (None: not measured)."""
    results = []
    for name, (relation, bound) in targets.items():
        value = measured.get(name)
        passed = None if value is None else (value >= bound if relation == ">=" else value <= bound)
        results.append({"name": name, "target": f"{relation} {bound:,}", "measured": value, "pass": passed})
    return results


def run(args: argparse.Namespace) -> dict[str, Any]:
    check_k(args.k)
    if args.max_docs is not None and args.max_docs < 1:
        raise InputError(f"--max-docs must be at least 1, got {args.max_docs}")
    workload = load_workload(args.corpus, args.max_docs)
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        work = Path(tmp)
        index_dir = work / "index"
        built = build_index(args.corpus, args.max_docs, index_dir, args.memory_mb)
        summary = built["summary"]
        corpus_tokens = int(summary["tokens"])
        started = time.perf_counter()
        CorpusIndex(index_dir)
        first_open_ms = (time.perf_counter() - started) * 1000
        open_verified = median_ms(lambda: CorpusIndex(index_dir, verify=True), OPEN_REPEATS)
        open_unverified = median_ms(lambda: CorpusIndex(index_dir, verify=False), OPEN_REPEATS)
        index = CorpusIndex(index_dir)
        max_n = index.max_n
        token_counts = [len(index.tokenizer.tokenize(text)) for _, text in workload.queries]
        if not any(token_counts):
            raise InputError(f"the query documents of {workload.name} contain no tokens; use a corpus with text")
        doc_1000 = min((i for i, tokens in enumerate(token_counts) if tokens), key=lambda i: abs(token_counts[i] - 1000))
        assess = time_assess(index, workload.queries, token_counts, doc_1000, args.k)
        build_tps = corpus_tokens / built["seconds"]
        ours = OurFigures(corpus_tokens, build_tps, int(summary["bytes_on_disk"]), assess)
        comparison = (
            compare(workload, index, ours, token_counts, doc_1000, args.k, args.memory_mb, work) if args.compare else None
        )
    measured = {
        "build_tokens_per_s": round(build_tps),
        "index_bytes_per_token": round(ours.index_bytes / corpus_tokens, 2),
        "assess_ms_per_1000_token_doc": assess["doc_1000"]["ms_per_1000_tokens"],
        "assess_speedup_over_tantivy": comparison["ratios"]["assess_speedup_over_tantivy"] if comparison else None,
        "open_ms_verified": round(open_verified, 2),
    }
    return {
        **header("index"),
        "corpus": {
            "name": workload.name,
            "documents": int(summary["documents"]),
            "tokens": corpus_tokens,
            "query_documents": len(workload.queries),
            "query_tokens": sum(token_counts),
            "queries": workload.query_source,
        },
        "settings": {"k": args.k, "max_n": max_n, "memory_mb": args.memory_mb},
        "build": {
            "seconds": round(built["seconds"], 3),
            "tokens_per_s": measured["build_tokens_per_s"],
            "peak_rss_mb": round(built["peak_rss_mb"], 1),
            "rss_before_build_mb": round(built["rss_before_mb"], 1),
            "build_rss_increase_mb": round(built["peak_rss_mb"] - built["rss_before_mb"], 1),
            "rss_note": "child process; 'before' includes the interpreter, libraries and the corpus texts in memory",
            "ngrams_stored": summary["ngrams"],
            "postings": summary["postings"],
            "partitions": summary["partitions"],
        },
        "index": {"bytes_on_disk": ours.index_bytes, "bytes_per_token": measured["index_bytes_per_token"]},
        "open": {
            "first_open_ms": round(first_open_ms, 2),
            "verified_ms_median": measured["open_ms_verified"],
            "unverified_ms_median": round(open_unverified, 2),
            "repeats": OPEN_REPEATS,
        },
        "assess": assess,
        "compare": comparison,
        "targets": check_targets(measured),
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", action="append", help="JSONL/JSONL.gz/folder/.spacy (repeatable) [default: TAB]")
    parser.add_argument("--max-docs", type=int, help="Index only the first N corpus documents.")
    parser.add_argument("--k", type=int, default=2, help="Linkability threshold for assess (k >= 2).")
    parser.add_argument("--memory-mb", type=int, default=2048, help="The builder's working-memory budget.")
    parser.add_argument("--compare", action="store_true", help="Also time the dict-of-sets and tantivy baselines.")
    parser.add_argument("--out", type=Path, help="Also write the JSON result to this file.")
    return parser.parse_args(argv)


def header(benchmark: str) -> dict[str, Any]:
    """The fields every benchmark's JSON opens with: its name, the command, the machine."""
    return {
        "benchmark": benchmark,
        "command": " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "machine": {
            "cpus": os.cpu_count(),
            "load_average_1min_at_end": round(os.getloadavg()[0], 2),
            "python": platform.python_version(),
            "numpy": np.__version__,
        },
    }


def report(run_benchmark: Callable[[argparse.Namespace], dict[str, Any]], args: argparse.Namespace) -> int:
    """Run a benchmark, print its JSON (and write it to ``args.out``); 1 on a clear error."""
    try:
        result = run_benchmark(args)
    except DelinkError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    text = json.dumps(result, indent=1, ensure_ascii=False)
    if args.out is not None:
        with atomic_write(args.out) as handle:
            handle.write(text + "\n")
    print(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    return report(run, parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
