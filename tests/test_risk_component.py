"""The `delink_risk` spaCy component: attributes, alignment, serialization, multiprocessing."""
from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import spacy

import spec_oracle
from spacy_delink.components.alignment import expanded_spans, set_span_values
from spacy_delink.components.extensions import register_extensions
from spacy_delink.errors import InputError

CORPUS = [
    "The applicant's farm near the river Mura was sold.",
    "The applicant's farm was sold in 1994.",
    "The farm near the river was sold.",
]
TEXT = "Her farm near the river Mura was sold."


def test_spans_scores_and_tokens(index_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 3})
    doc = nlp(TEXT)
    spans = doc.spans["linkable"]
    assert [(s.text, s.label_, s._.delink_support) for s in spans] == [("near", "NGRAM", 2), ("river", "NGRAM", 2), ("Mura", "NGRAM", 1)]
    assert [s._.delink_risk for s in spans] == [0.5, 0.5, 1.0]
    assert doc._.delink_anonymity == 1 and doc._.delink_risk == 1.0
    risks = {t.text: t._.delink_risk for t in doc}
    assert risks["Mura"] == 1.0 and risks["near"] == 0.5 and risks["farm"] == 0.0
    expected = spec_oracle.assess(CORPUS, TEXT, 3, 8)["ngrams"]
    assert [(s.start_char, s.end_char, s._.delink_support) for s in spans] == expected


def test_nothing_linkable(index_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(index_path)})
    doc = nlp("Farm. The river. Sold.")
    assert list(doc.spans["linkable"]) == [] and doc._.delink_anonymity is None and doc._.delink_risk == 0.0
    assert nlp("")._.delink_anonymity is None


def test_alignment_expands_to_pipeline_tokens(index_path: Path) -> None:
    nlp = spacy.blank("xx")
    nlp.tokenizer = lambda text: spacy.tokens.Doc(nlp.vocab, words=text.split(" "))  # coarse tokens
    nlp.add_pipe("delink_risk", config={"index": str(index_path)})
    doc = nlp("near Mura-river too")
    assert [s.text for s in doc.spans["linkable"]] == ["Mura-river"]


def test_round_trip_referenced_and_copied(index_path: Path, tmp_path: Path) -> None:
    for copy in (False, True):
        nlp = spacy.blank("en")
        nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 3, "copy_index": copy})
        out = tmp_path / f"pipeline-{copy}"
        nlp.to_disk(out)
        assert (out / "delink_risk" / "index").exists() == copy
        assert not list(out.rglob("*.key")), "the secret key must never be copied into a pipeline"
        loaded = spacy.load(out)
        doc = loaded(TEXT)
        assert [s.text for s in doc.spans["linkable"]] == ["near", "river", "Mura"]


def test_pipe_with_two_processes(index_path: Path) -> None:
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 3})
    docs = list(nlp.pipe([TEXT, "Farm. Sold.", TEXT] * 3, n_process=2, batch_size=2))
    assert [d._.delink_anonymity for d in docs] == [1, None, 1] * 3
    assert [s.text for s in docs[-1].spans["linkable"]] == ["near", "river", "Mura"]


def test_bad_configuration(index_path: Path) -> None:
    nlp = spacy.blank("en")
    with pytest.raises(InputError, match="k must be"):
        nlp.add_pipe("delink_risk", config={"index": str(index_path), "k": 1})
    nlp.add_pipe("delink_risk")
    with pytest.raises(InputError, match="has no index"):
        nlp("text")


def test_vectorized_alignment_equals_char_span_expand() -> None:
    """``expanded_spans`` is ``Doc.char_span(..., alignment_mode="expand")`` for every range
    (None where that gives an empty span: a range within a token's trailing space), on texts
    with runs of spaces (whitespace tokens), punctuation and trailing space."""
    register_extensions()
    rng = random.Random(3)
    nlp = spacy.blank("en")
    pieces = ["river", "Sava", ",", "  ", "'s", "1997.", "\n", "farm-house", " ", "(A)"]
    for _ in range(200):
        text = "".join(rng.choice(pieces) + rng.choice(["", " ", " "]) for _ in range(rng.randint(0, 12)))
        doc = nlp.make_doc(text)
        ranges = [(a, b) for a, b in ((rng.randint(0, len(text)), rng.randint(0, len(text))) for _ in range(30)) if a < b]
        expected = [doc.char_span(a, b, label="X", alignment_mode="expand") for a, b in ranges]
        expected = [s if s is None or len(s) else None for s in expected]  # only whitespace: no span, not an empty one
        got = expanded_spans(doc, ranges, "X")
        assert [(s.start, s.end, s.label_) if s is not None else None for s in got] == [
            (s.start, s.end, s.label_) if s is not None else None for s in expected
        ], (text, ranges)
        spans = [s for s in got if s is not None]
        set_span_values(doc, "delink_support", [s.start_char for s in spans], [s.end_char for s in spans], [(s.start, s.end) for s in spans])
        assert [s._.delink_support for s in spans] == [(s.start, s.end) for s in spans]


def test_doc_text_is_rebuilt_exactly_from_the_token_array() -> None:
    from spacy.tokens import Doc

    from spacy_delink.components.alignment import DocText

    nlp = spacy.blank("en")
    texts = ["", "  ", "Hello  world!\n\nThe  cat's  hat ", "naïve café\u00a0x  y\t", "a b c d e f g h i j k", "😀 x😀 \u200b"]
    rebuilt = DocText(limit=4)  # below the pieces of one text: the cache empties as it goes
    for text in texts * 2:
        doc = nlp.make_doc(text)
        assert rebuilt(doc) == doc.text == text
    words = Doc(nlp.vocab, words=["a", "b", "c"], spaces=[False, True, False])
    assert rebuilt(words) == words.text == "ab c"
    other = spacy.blank("de")  # another vocab: pieces are the same strings
    assert rebuilt(other.make_doc("Hello  world!")) == "Hello  world!"
    # Threads sharing one cache that keeps emptying itself still get each text exactly.
    docs = [nlp.make_doc(" ".join(f"w{i}x{j}" for j in range(200)) + f"  end{i}") for i in range(16)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(DocText(limit=50), docs * 4)) == [doc.text for doc in docs * 4]
