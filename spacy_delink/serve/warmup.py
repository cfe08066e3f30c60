"""Compile the numba kernels before the port opens, so no request pays for a compilation.

The kernels compile on first use (seconds each on a fresh install, then loaded from
numba's cache). A real index may link nothing in any text we could invent, which would
leave the masking and cover kernels cold, so the kernels first run on a small invented
collection built here (under the served index's rules) where the warm-up text has
linkable phrases and combinations at every arity; then every arity runs on the served
index itself. Nothing is sent to an LLM: protection is warmed with the offline Mask model.

    python -m spacy_delink.serve.warmup    # fills numba's cache, e.g. while building an image
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Optional

from ..batch import assess_documents, protect_documents
from ..linkage.combinations import ARITY_RANGE
from ..linkage.index import CorpusIndex, IndexBuilder
from ..linkage.tokenize import LinkageRules
from ..rewrite.config import load_rewriter

#: An invented collection: common phrases shared by several documents, rare ones in one each.
CORPUS = (
    ("warm-1", "The farmer keeps bees near the river. He sold honey and wax at the town market every week."),
    ("warm-2", "The farmer keeps goats near the lake. He sold cheese at the town market every week."),
    ("warm-3", "The baker sells bread near the river. She sold cakes in the old town every morning."),
    ("warm-4", "The baker sells cakes near the lake. She sold bread in the old town every morning."),
    ("warm-5", "The farmer sells bread near the river. He sold cheese in the old town every week."),
)
#: Rare phrases (df 1), and common ones that single out a document only together.
TEXT = "The farmer keeps bees near the lake. He sold cakes at the town market every week, and honey and wax too."
ARITIES = tuple(range(1, ARITY_RANGE[1] + 1))


def warm_up_kernels(rules: LinkageRules, flagging: Optional[str] = None) -> None:
    """Run the attack at every arity and the Mask rewriter (k = 2) on an invented collection built under ``rules``."""
    with tempfile.TemporaryDirectory(prefix="delink-warmup-") as folder:
        path = Path(folder) / "index"
        IndexBuilder(rules).build(iter(CORPUS), path)
        index = CorpusIndex(path)
        for arity in ARITIES:
            assess_documents(index, [(0, TEXT)], 2, arity)
        rewriter = load_rewriter(path, 2, ARITIES[-1], None, None, flagging=flagging, threads=1)
        protect_documents(rewriter, [(0, TEXT)])


def warm_up_index(index: CorpusIndex, k: int) -> None:
    """Every arity's lookups on the served index (its pages mapped, its shard layout's code paths run)."""
    for arity in ARITIES:
        assess_documents(index, [(0, TEXT)], k, arity)


def main() -> None:
    started = time.perf_counter()
    warm_up_kernels(LinkageRules())
    print(f"numba kernels compiled or loaded from cache in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
