"""Ranked retrieval (BM25) over the original collection: statistics under keyed digests, ranks, the opt-in defence."""
