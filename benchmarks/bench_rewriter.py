"""Throughput of ``delink_rewriter`` against a fake endpoint that takes 1 s per call, and the mask's footprint.

* ``throughput``: docs/minute at concurrency 1, 4 and 16 (one batch, one prompt per
  document), and the loop's own overhead per document (wall time minus time spent waiting
  in the model) as a share of model time.
* ``mask``: with the Mask model on TAB, the median share of a document's tokens that get
  masked, token vs span granularity, k = 2 and 5, arity 1.
* ``unreachable``: 12 documents against a port that refuses connections, with the shipped
  model settings (retries 4, backoff 1 s, 8 in flight, 5 passes): seconds and HTTP
  attempts with the circuit breaker on (the default) and off (``breaker_threshold = 0``).
* ``similarity``: the cosine (all-MiniLM-L6-v2, the context with the span vs with the
  replacement) of the shipped few-shot replacements and of hostile ones (the fake server's
  injections, an off-topic phrase) in the shipped examples' contexts: what
  ``task.min_similarity`` separates. Needs the embeddings extra.

Documents are the TAB manual de-identifications (../shared/data/tab). Prints one JSON object.
Usage: python benchmarks/bench_rewriter.py [--docs 16] [--delay 1.0] [--only throughput,mask,unreachable,similarity]
"""
from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import spacy

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai_server import INJECTIONS, FakeOpenAI  # noqa: E402
from tab_testbed import load_tab  # noqa: E402

from spacy_delink.components.rewriter import DelinkRewriter  # noqa: E402
from spacy_delink.linkage.index import IndexBuilder, open_index  # noqa: E402
from spacy_delink.llm.tasks.rewrite import SPAN_CLOSE, SPAN_OPEN, read_examples  # noqa: E402
from spacy_delink.llm.tasks.rewrite.content import SimilarityCheck, embeddings_available  # noqa: E402
from spacy_delink.llm.tasks.rewrite.prompt import DEFAULT_EXAMPLES  # noqa: E402

TAB = ROOT.parent / "shared" / "data" / "tab"


def build_tab(tmp: Path) -> tuple[Path, list[str]]:
    """Index the TAB collection; return its path and the de-identified inputs."""
    tab = load_tab(TAB)
    IndexBuilder(progress=False).build(tab.corpus, tmp / "index")
    return tmp / "index", [text for _, text in tab.inputs]


class TimedModel:
    """Wraps a spacy-llm model to add up the wall time spent inside it."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.seconds = 0.0

    @property
    def context_length(self) -> int:
        return int(self.model.context_length)

    def __call__(self, prompts: Iterable[Iterable[str]]) -> Iterable[Iterable[str]]:
        started = time.perf_counter()
        answers = self.model(prompts)
        self.seconds += time.perf_counter() - started
        return answers


def throughput(index: Path, texts: list[str], delay: float) -> dict[str, Any]:
    rows = {}
    with FakeOpenAI(delay_s=delay) as fake:
        for concurrency in (1, 4, 16):
            nlp = spacy.blank("en")
            rewriter = nlp.add_pipe(
                "delink_rewriter",
                config={
                    "index": str(index), "k": 2, "cache_dir": None,
                    "task": {"@llm_tasks": "spacy_delink.Rewrite.v1", "spans_per_prompt": 1000},
                    "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": fake.base_url,
                              "name": "good", "max_in_flight": concurrency, "timeout": 30.0},
                },
            )
            assert isinstance(rewriter, DelinkRewriter)
            timed = TimedModel(rewriter.model)
            rewriter.model = timed  # before the first pass builds spacy-llm's wrapper around it
            before = fake.requests
            started = time.perf_counter()
            docs = list(nlp.pipe(texts, batch_size=len(texts)))
            wall = time.perf_counter() - started
            calls = fake.requests - before
            assert all(d._.delink_protected for d in docs)
            overhead = (wall - timed.seconds) / len(texts)
            rows[str(concurrency)] = {
                "docs_per_minute": round(60 * len(texts) / wall, 1),
                "llm_calls": calls,
                "docs_rewritten_without_mask": sum(all(e["by"] == "llm" for e in d._.delink_edits) for d in docs),
                "loop_overhead_ms_per_doc": round(1000 * overhead, 1),
                "loop_overhead_share_of_model_time": round(overhead / (delay * calls / len(texts)), 4),
            }
    return rows


def mask_footprint(index_path: Path, texts: list[str]) -> dict[str, Any]:
    index = open_index(index_path)
    rows: dict[str, Any] = {}
    for k in (2, 5):
        for granularity in ("token", "span"):
            rewriter = spacy.blank("en").add_pipe(
                "delink_rewriter", config={"index": str(index_path), "k": k, "granularity": granularity}
            )
            assert isinstance(rewriter, DelinkRewriter)
            started = time.perf_counter()
            results = rewriter.rewrite_texts(texts)
            seconds = time.perf_counter() - started
            shares = []
            for text, result in zip(texts, results):
                tokens, _ = index.tokenize(text)
                changed = np.zeros(len(tokens), dtype=bool)
                for edit in result.edits:
                    changed |= (tokens.starts >= edit["start"]) & (tokens.ends <= edit["end"])
                shares.append(100 * changed.sum() / max(len(tokens), 1))
            rows[f"k{k}_{granularity}"] = {
                "median_pct_tokens_masked": round(statistics.median(shares), 1),
                "mean_pct_tokens_masked": round(statistics.mean(shares), 1),
                "seconds": round(seconds, 2),
            }
    return rows


def unreachable(index: Path, texts: list[str]) -> dict[str, Any]:
    """The shipped model settings against a refused port, breaker on vs off (the same 12 documents)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))  # bound, never listening: every connection is refused
    rows = {}
    try:
        for label, threshold in (("breaker_on", 5), ("breaker_off", 0)):
            rewriter = spacy.blank("en").add_pipe("delink_rewriter", config={
                "index": str(index), "k": 2, "cache_dir": None,
                "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "name": "any",
                          "base_url": f"http://127.0.0.1:{sock.getsockname()[1]}/v1", "breaker_threshold": threshold},
            })
            assert isinstance(rewriter, DelinkRewriter)
            started = time.perf_counter()
            results = rewriter.rewrite_texts(texts)
            stats = rewriter.model.stats  # type: ignore[attr-defined]
            rows[label] = {
                "seconds": round(time.perf_counter() - started, 2),
                "http_attempts": stats["requests"],
                "prompts_not_sent": stats["failed_endpoint_down"],
                "documents_masked": sum(r.masked for r in results),
                "all_protected": all(r.protected for r in results),
            }
    finally:
        sock.close()
    return rows


def similarity() -> dict[str, Any]:
    """Cosines in the shipped examples' contexts: their own replacements vs hostile ones."""
    if not embeddings_available(None):
        return {"skipped": "the embeddings extra is not installed (pip install 'spacy-delink[redaction]')"}
    check = SimilarityCheck(0.0, None)
    groups: dict[str, list[float]] = {"shipped_replacements": [], "injections": [], "off_topic": []}
    for example in read_examples(DEFAULT_EXAMPLES):
        if example["replacement"] == "[REDACTED]":
            continue  # the mask is exempt from the check
        left, rest = example["context"].split(SPAN_OPEN, 1)
        right = rest.split(SPAN_CLOSE, 1)[1]
        candidates = {
            "shipped_replacements": [example["replacement"]],
            "injections": list(INJECTIONS.values()),
            "off_topic": ["banana smoothie recipe with chocolate"],
        }
        for group, replacements in candidates.items():
            before = [f"{left}{example['span']}{right}"] * len(replacements)
            groups[group] += [float(x) for x in check.similarities(before, [f"{left}{r}{right}" for r in replacements])]
    return {
        group: {"n": len(v), "min": round(min(v), 3), "median": round(statistics.median(v), 3), "max": round(max(v), 3)}
        for group, v in groups.items()
    }


SECTIONS = ("throughput", "mask", "unreachable", "similarity")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=16, help="documents per throughput run")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the fake endpoint takes per call")
    parser.add_argument("--only", default=",".join(SECTIONS), help=f"comma-separated sections of {', '.join(SECTIONS)}")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if only - set(SECTIONS):
        parser.error(f"unknown section(s) {', '.join(sorted(only - set(SECTIONS)))}; choose from {', '.join(SECTIONS)}")
    report: dict[str, Any] = {}
    if "similarity" in only:
        report["similarity_in_context"] = similarity()
    if only & {"throughput", "mask", "unreachable"}:
        with tempfile.TemporaryDirectory() as tmp:
            index, texts = build_tab(Path(tmp))
            report["documents"] = {"throughput": args.docs, "mask": len(texts), "unreachable": 12}
            if "throughput" in only:
                report["fake_call_seconds"] = args.delay
                report["throughput_by_concurrency"] = throughput(index, texts[: args.docs], args.delay)
            if "mask" in only:
                report["mask_arity1"] = mask_footprint(index, texts)
            if "unreachable" in only:
                report["unreachable_endpoint"] = unreachable(index, texts[:12])
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
