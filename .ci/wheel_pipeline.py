"""The README's pipeline, run by the wheel-installed package (called by .ci/wheel_smoke.sh).

Builds a pipeline with delink_risk, delink_combinations and delink_rewriter on the index of
the sample corpus, saves it with ``nlp.to_disk``, moves it, loads it with ``spacy.load`` and
checks what a user relies on: the risk annotations on a linkable text, and a rewritten
text that a fresh detection under the same rules finds protected.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import spacy

import spacy_delink
from spacy_delink import detect, open_index


def fail(message: str) -> None:
    sys.exit(f"wheel smoke: {message}")


def main(checkout: Path) -> None:
    package = Path(spacy_delink.__file__).resolve()
    if checkout in package.parents:
        fail(f"spacy_delink was imported from the checkout ({package}), not from the installed wheel")
    texts = [json.loads(line)["text"] for line in Path("samples/deidentified.jsonl").read_text("utf-8").splitlines()]

    nlp = spacy.blank("en")
    index_path = str(Path("index").resolve())  # absolute: the saved pipeline finds it from any folder
    nlp.add_pipe("delink_risk", config={"index": index_path, "k": 2})
    nlp.add_pipe("delink_combinations", config={"index": index_path, "k": 2, "arity": 3})
    nlp.add_pipe("delink_rewriter", config={"index": index_path, "k": 2, "arity": 3})
    nlp.to_disk("pipeline")
    Path("pipeline").rename("moved")  # loaded from another folder than it was saved to
    loaded = spacy.load("moved")
    if loaded.pipe_names != ["delink_risk", "delink_combinations", "delink_rewriter"]:
        fail(f"spacy.load gave the pipes {loaded.pipe_names}")

    # The annotators alone, on the de-identified sample: every document is still linkable.
    with loaded.select_pipes(disable=["delink_rewriter"]):
        annotated = list(loaded.pipe(texts))
    for doc in annotated:
        if not doc.spans["linkable"] and not doc._.delink_combination_linkable:
            fail(f"nothing linkable found in a sample document: {doc.text[:60]!r}...")
        if doc._.delink_anonymity != 1 or doc._.delink_risk != 1.0:
            fail(f"expected a singled-out sample document, got anonymity {doc._.delink_anonymity}")

    # The whole pipeline: every output is protected, checked again from scratch.
    index = open_index("index")
    for source, doc in zip(texts, loaded.pipe(texts)):
        if not doc._.delink_protected or doc.text == source:
            fail(f"rewriter left a document unprotected or unchanged: {doc.text[:60]!r}...")
        if not detect(index, doc.text, k=2, arity=3).protected:
            fail(f"a fresh detection still links a text marked protected: {doc.text[:60]!r}...")
    print(f"wheel smoke: pipeline saved, loaded and run on {len(texts)} documents; all protected", file=sys.stderr)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve())
