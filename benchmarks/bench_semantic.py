"""Embedding search: exact (numpy, blocked matrix products) against the HNSW graph (usearch).

Prints JSON. For each collection size: build time of the graph, milliseconds per query
for exact and graph search (top-10, single queries as the component sends them, and a
batch), and the graph's recall@1 / recall@10 against exact search. Vectors are synthetic
unit vectors in 384 dimensions (all-MiniLM-L6-v2's width) drawn around 1,000 topics, and
each query is a stored vector plus noise — a released document near its source — so
recall@1 asks whether the graph still finds the source. The crossover where the graph
pays for itself sets ``semantic.index.DEFAULT_ANN_THRESHOLD``.

    python benchmarks/bench_semantic.py [--sizes 20000,100000,300000] [--queries 200]
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from spacy_delink.semantic.index import (
    ANN_CONNECTIVITY,
    ANN_EXPANSION_SEARCH,
    DEFAULT_ANN_THRESHOLD,
    build_graph,
    exact_nearest,
    graph_nearest,
)

WIDTH = 384


def collection(size: int, rng: np.random.Generator) -> np.ndarray:
    topics = rng.normal(size=(1000, WIDTH)).astype(np.float32)
    vectors = topics[rng.integers(0, len(topics), size)] + 0.8 * rng.normal(size=(size, WIDTH)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def per_query_ms(search: object, queries: np.ndarray, single: int) -> tuple[float, float]:
    """(ms per query sent one by one, ms per query in one batch)."""
    started = time.perf_counter()
    for query in queries[:single]:
        search(query[None, :])  # type: ignore[operator]
    one = (time.perf_counter() - started) * 1000 / single
    started = time.perf_counter()
    search(queries)  # type: ignore[operator]
    return one, (time.perf_counter() - started) * 1000 / len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000,100000,300000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--single", type=int, default=50, help="queries timed one by one")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        vectors = collection(size, rng)
        picked = rng.choice(size, args.queries, replace=False)
        queries = vectors[picked] + 0.03 * rng.normal(size=(args.queries, WIDTH)).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        started = time.perf_counter()
        graph = build_graph(vectors)
        build_s = time.perf_counter() - started
        graph.expansion_search = ANN_EXPANSION_SEARCH
        exact_top, _ = exact_nearest(vectors, queries, 10)
        graph_top, _ = graph_nearest(graph, vectors, queries, 10)
        exact_one, exact_batch = per_query_ms(lambda q: exact_nearest(vectors, q, 10), queries, args.single)
        graph_one, graph_batch = per_query_ms(lambda q: graph_nearest(graph, vectors, q, 10), queries, args.single)
        rows.append(
            {
                "documents": size,
                "graph_build_s": round(build_s, 2),
                "exact_ms_per_query": round(exact_one, 3),
                "graph_ms_per_query": round(graph_one, 3),
                "exact_ms_per_query_batched": round(exact_batch, 3),
                "graph_ms_per_query_batched": round(graph_batch, 3),
                "recall_at_1": float(np.mean(graph_top[:, 0] == exact_top[:, 0])),
                "recall_at_10": float(np.mean([len(set(g) & set(e)) / 10 for g, e in zip(graph_top.tolist(), exact_top.tolist())])),
                "source_found_exact": float(np.mean(exact_top[:, 0] == picked)),
                "source_found_graph": float(np.mean(graph_top[:, 0] == picked)),
            }
        )
    print(json.dumps({
        "width": WIDTH,
        "connectivity": ANN_CONNECTIVITY,
        "expansion_search": ANN_EXPANSION_SEARCH,
        "default_ann_threshold": DEFAULT_ANN_THRESHOLD,
        "results": rows,
    }, indent=1))


if __name__ == "__main__":
    main()
