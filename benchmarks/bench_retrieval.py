"""The price of ranked-retrieval protection (`delink protect --retrieval K`). Prints one JSON object.

For TAB manual (the 127 test judgments, the manual de-identification, the collection of
1,268 TAB texts) and wiki (Wikipedia biographies, below), each de-identified text is
protected by the Mask model at k = 2, arity 3, both readings (the phrase rules alone),
then with ``--retrieval K`` for K = 2, 5, 10. For each: tokens changed (share of the
de-identified text's tokens, the token diff of ``delink evaluate``: median, mean, p90, and
how many documents pass 60%), and the source's rank with the text as the query:

* ``defence``: the BM25 the defence itself uses (``spacy_delink.retrieval``: exact
  document lengths, keyed word digests);
* ``tantivy``: the independent check: tantivy's BM25 (``evaluate.ranked``: its own
  analyzer and fieldnorm-quantized lengths), every word of the text one clause;
* ``tantivy_distinct``: the same, each word once (a query that ignores repeats).

top-1 and top-10 shares and the mean rank of the source. With ``--semantic``, the
embedding attack too (all-MiniLM-L6-v2, ``evaluate.semantic``): each reading of similarity
(``semantic.chunks``: the whole document's mean vector, the best window pair, the mean of
each query window's best match), to see which finds more sources.

Done-when (issue 38): on TAB
manual, ``--retrieval 2`` leaves the source first for at most 20% of the documents under
the independent engine.

wiki: the first ``--wiki-bios`` articles of parts 000-001 of ../shared/data/scale that open
as a biography ("Name (born ...) was/is" or "(1812–1870)"), of 200 to ``--wiki-max-words``
words, in file order; the collection: those plus the first articles of part-000 up to
``--wiki-collection`` documents. No NER model runs offline here, so the de-identification
is a stand-in: the title line, every word of the title, every capitalized word not
opening a sentence and every number are masked.

The phrase-only outputs are protected once and reused as the input of each K (the
retrieval step runs after the phrase rules, so this is what `protect --retrieval K`
writes); tokens changed always compare with the de-identified text.

    python benchmarks/bench_retrieval.py [--sets tab,wiki] [--ranks 2,5,10] [--docs N]
        [--tab-dir DIR] [--scale-dir DIR] [--semantic] [--out results.json] [--plot docs/retrieval.png]
    python benchmarks/bench_retrieval.py --replot results.json --plot docs/retrieval.png
"""
from __future__ import annotations

import os

for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Iterator  # noqa: E402

import numpy as np  # noqa: E402

from bench_index import header, report  # noqa: E402
from spacy_delink.errors import InputError  # noqa: E402
from spacy_delink.evaluate.utility import compare_texts  # noqa: E402
from spacy_delink.evaluate.ranked import TANTIVY_BM25, RankedAdversary, ranking_summary  # noqa: E402
from spacy_delink.linkage.index import IndexBuilder, open_index  # noqa: E402
from spacy_delink.retrieval.bm25 import B, K1  # noqa: E402
from spacy_delink.retrieval.defence import source_rank  # noqa: E402
from spacy_delink.retrieval.store import build_retrieval_index, open_retrieval_index, search_keys  # noqa: E402
from spacy_delink.rewrite.config import load_rewriter  # noqa: E402
from tab_testbed import TAB_MANUAL_SUPPRESSION, load_tab  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
MASK = "[REDACTED]"
BIO_OPENING = re.compile(r"^[^\n]{0,200}?\((?:born |[^()]*\b\d{3,4}\s*[–-]\s*\d{3,4}\))[^\n]{0,80}?\) (?:was|is) ")
CAPITALIZED = re.compile(r"\b[A-Z][\w'’-]*")
NUMBER = re.compile(r"\b\d[\d,.]*\b")
BATCH = 16


def deidentify_wiki(article: str) -> str:
    """The stand-in de-identification of a Wikipedia article (module docstring)."""
    title, _, body = article.partition("\n")
    names = [re.escape(word) for word in re.findall(r"\w+", title) if len(word) > 2]
    if names:
        body = re.sub(r"\b(?:" + "|".join(names) + r")\b", MASK, body, flags=re.IGNORECASE)

    def proper(match: re.Match[str]) -> str:
        before = body[: match.start()].rstrip(" \t")
        opening = not before or before[-1] in ".!?\n\"“(" or before.endswith(MASK + ".")
        return match.group(0) if opening or match.group(0) == MASK.strip("[]") else MASK

    body = CAPITALIZED.sub(proper, body)
    body = NUMBER.sub(MASK, body)
    return MASK + "\n" + body


def _articles(scale_dir: Path, parts: int) -> Iterator[tuple[str, str]]:
    for part in range(parts):
        path = scale_dir / f"part-{part:03d}.jsonl.gz"
        if not path.exists():
            raise InputError(f"scale corpus missing: {path}; pass --scale-dir")
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for line in handle:
                record = json.loads(line)
                yield str(record["id"]), str(record["text"])


def load_wiki(scale_dir: Path, bios: int, collection: int, max_words: int) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(the collection, the de-identified biographies) as the module docstring says."""
    found: list[tuple[str, str]] = []
    for doc_id, text in _articles(scale_dir, 2):
        body = text.partition("\n")[2].strip()
        if BIO_OPENING.match(body) and 200 <= len(text.split()) <= max_words:
            found.append((doc_id, text))
            if len(found) == bios:
                break
    if len(found) < bios:
        raise InputError(f"only {len(found)} biographies in parts 000-001; lower --wiki-bios")
    chosen = {doc_id for doc_id, _ in found}
    others = []
    for doc_id, text in _articles(scale_dir, 1):
        if len(others) + len(found) >= collection:
            break
        if doc_id not in chosen:
            others.append((doc_id, text))
    return found + others, [(doc_id, deidentify_wiki(text)) for doc_id, text in found]


def _shares(tokenizer: Any, before: list[str], after: list[str]) -> list[float]:
    shares = []
    for old, new in zip(before, after):
        tokens, changed, _ = compare_texts(tokenizer, old, new)
        shares.append(changed / tokens if tokens else 0.0)
    return shares


def _protect(index_path: Path, texts: list[str], ids: list[str], retrieval: int) -> tuple[list[str], list[int | None]]:
    rewriter = load_rewriter(index_path, 2, 3, None, None, threads=1, retrieval=retrieval)
    out: list[str] = []
    ranks: list[int | None] = []
    for start in range(0, len(texts), BATCH):
        results = rewriter.rewrite_texts(texts[start : start + BATCH], ids[start : start + BATCH] if retrieval else None)
        for result in results:
            if not result.protected or (retrieval and (result.retrieval_rank or 0) < retrieval):
                raise InputError(f"an output failed its check (retrieval {retrieval}); a bug")
            out.append(result.text)
            ranks.append(result.retrieval_rank)
    return out, ranks


def semantic_ranks(corpus: list[tuple[str, str]], sources: list[int]) -> Any:
    """A function from texts to each similarity reading's ranking of the sources (the originals' windows embedded once)."""
    from spacy_delink.semantic.chunks import ranks_from_scores, window_scores
    from spacy_delink.semantic.encoder import DocumentEncoder
    from spacy_delink.semantic.index import exact_ranks

    encoder = DocumentEncoder()
    windows = encoder.encode_windows([text for _, text in corpus])
    vectors = windows.document_vectors(len(corpus))
    targets = np.asarray(sources, dtype=np.int64)

    def measure(texts: list[str]) -> dict[str, Any]:
        query = encoder.encode_windows(texts)
        found = {"document": exact_ranks(vectors, query.document_vectors(len(texts)), targets)[0]}
        for variant, scores in window_scores(query, windows, len(texts), len(corpus)).items():
            found[variant] = ranks_from_scores(scores, targets)[0]
        return {variant: ranking_summary(ranks.tolist()) for variant, ranks in found.items()}

    return measure


def measure_set(
    name: str, corpus: list[tuple[str, str]], inputs: list[tuple[str, str]], ranks: list[int], work: Path, semantic: bool = False
) -> dict[str, Any]:
    started = time.perf_counter()
    index_path = work / f"{name}-index"
    IndexBuilder(progress=False).build(corpus, index_path)
    index = open_index(index_path)
    build_retrieval_index(index, corpus, progress=False)
    statistics = open_retrieval_index(index)
    adversary = RankedAdversary((text for _, text in corpus), index.rules.mask_patterns)
    number = {doc_id: n for n, (doc_id, _) in enumerate(corpus)}
    ids = [doc_id for doc_id, _ in inputs]
    sources = [number[doc_id] for doc_id in ids]
    deidentified = [text for _, text in inputs]
    similar = semantic_ranks(corpus, sources) if semantic else None
    setup_s = time.perf_counter() - started

    def ranked(texts: list[str]) -> dict[str, Any]:
        ours = [source_rank(statistics.query(search_keys(index, t)).scores(), s) for t, s in zip(texts, sources)]
        theirs = [adversary.rank(t, s).rank for t, s in zip(texts, sources)]
        distinct = [adversary.rank(t, s, distinct=True).rank for t, s in zip(texts, sources)]
        found = {
            "defence": ranking_summary(ours),
            "tantivy": ranking_summary(theirs),
            "tantivy_distinct": ranking_summary(distinct),
            "tantivy_ranks": theirs,
        }
        if similar is not None:
            found["semantic"] = similar(texts)
        return found

    def changed(texts: list[str]) -> dict[str, Any]:
        shares = np.asarray(_shares(index.tokenizer, deidentified, texts)) * 100
        return {
            "median_pct": round(float(np.median(shares)), 1),
            "mean_pct": round(float(shares.mean()), 1),
            "p90_pct": round(float(np.percentile(shares, 90)), 1),
            "documents_over_60pct": int(np.count_nonzero(shares > 60)),
        }

    runs: dict[str, Any] = {"deidentified": {"tokens_changed": None, **ranked(deidentified)}}
    clock = time.perf_counter()
    phrase, _ = _protect(index_path, deidentified, ids, 0)
    runs["phrase_rules"] = {"seconds": round(time.perf_counter() - clock, 1), "tokens_changed": changed(phrase), **ranked(phrase)}
    print(f"{name} phrase rules: {runs['phrase_rules']['tokens_changed']} {runs['phrase_rules']['tantivy']}", file=sys.stderr, flush=True)
    for rank in ranks:
        clock = time.perf_counter()
        protected, _ = _protect(index_path, phrase, ids, rank)
        runs[f"retrieval_{rank}"] = {
            "seconds": round(time.perf_counter() - clock, 1), "tokens_changed": changed(protected), **ranked(protected)
        }
        print(f"{name} K={rank}: {runs[f'retrieval_{rank}']['tokens_changed']} {runs[f'retrieval_{rank}']['tantivy']}", file=sys.stderr, flush=True)
    return {"documents": len(inputs), "collection": len(corpus), "setup_seconds": round(setup_s, 1), "runs": runs}


def plot(result: dict[str, Any], path: Path) -> None:
    """Top-1 and top-10 under tantivy against the median share of tokens changed, one line per set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(9.6, 4.0), sharex=True)
    names = {"tab": "TAB manual", "wiki": "wiki bios"}
    for (name, data), offset in zip(result["sets"].items(), (6, -12)):
        runs = data["runs"]
        labels = [label for label in runs if label != "deidentified"]
        x = [runs[label]["tokens_changed"]["median_pct"] for label in labels]
        for axis, top in zip(axes, ("top1", "top10")):
            y = [runs[label]["tantivy"][top] * 100 for label in labels]
            axis.plot(x, y, marker="o", label=names.get(name, name))
            for label, xi, yi in zip(labels, x, y):
                text = "phrase rules" if label == "phrase_rules" else "K=" + label.split("_")[1]
                axis.annotate(text, (xi, yi), textcoords="offset points", xytext=(3, offset), fontsize=8)
    axes[0].axhline(20, color="grey", linestyle=":", linewidth=1)
    axes[0].set_ylabel("source ranked first (%)")
    axes[1].set_ylabel("source in the first ten (%)")
    for axis in axes:
        axis.set_xlabel("tokens changed, median (% of the de-identified text)")
        axis.set_ylim(-5, 105)
        axis.legend(loc="center left")
    figure.suptitle("tantivy BM25, the text as the query: phrase rules alone, then --retrieval K (k = 2, arity 3, Mask)", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.replot is not None:  # draw the figure again from a result, without measuring
        result: dict[str, Any] = json.loads(args.replot.read_text(encoding="utf-8"))
        if args.plot is not None:
            plot(result, args.plot)
        return result
    ranks = [int(value) for value in args.ranks.split(",")]
    result = {
        **header("retrieval"),
        "bm25": {"defence": {"k1": K1, "b": B, "lengths": "exact"}, "independent": TANTIVY_BM25},
        "done_when": "TAB manual, --retrieval 2: tantivy top1 <= 0.20",
        "sets": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-retrieval-") as tmp:
        for name in args.sets.split(","):
            if name == "tab":
                tab = load_tab(args.tab_dir, TAB_MANUAL_SUPPRESSION)
                corpus, inputs = tab.corpus, tab.inputs
            elif name == "wiki":
                corpus, inputs = load_wiki(args.scale_dir, args.wiki_bios, args.wiki_collection, args.wiki_max_words)
            else:
                raise InputError(f"unknown set {name!r}; use tab, wiki")
            result["sets"][name] = measure_set(name, corpus, inputs[: args.docs] if args.docs else inputs, ranks, Path(tmp), args.semantic)
    tab_k2 = result["sets"].get("tab", {}).get("runs", {}).get("retrieval_2")
    if tab_k2 is not None:
        result["done_when_met"] = tab_k2["tantivy"]["top1"] <= 0.20
    if args.plot is not None:
        plot(result, args.plot)
        result["plot"] = str(args.plot)
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", default="tab,wiki")
    parser.add_argument("--ranks", default="2,5,10", help="the K of --retrieval K")
    parser.add_argument("--docs", type=int, default=None, help="only the first N de-identified texts of each set")
    parser.add_argument("--tab-dir", type=Path, default=SHARED / "tab")
    parser.add_argument("--scale-dir", type=Path, default=SHARED / "scale")
    parser.add_argument("--wiki-bios", type=int, default=100)
    parser.add_argument("--wiki-collection", type=int, default=2500)
    parser.add_argument("--wiki-max-words", type=int, default=2000)
    parser.add_argument("--semantic", action="store_true", help="also the embedding attack, each reading of similarity")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--replot", type=Path, default=None, help="a result JSON of this benchmark: only draw --plot from it")
    return parser.parse_args(argv)


if __name__ == "__main__":
    sys.exit(report(run, parse_args()))
