"""Lookups at a threshold: df capped at k, the frequent bits, batch posting lists, and what delink_risk writes.

``delink_risk`` asks the index for df only up to k (``analyze(..., exact_frequent=False)``);
at k = 2 the answer comes from one bit per stored n-gram instead of the postings. Both
must give exactly what the full df gives for every SPEC output, on any shard count and
after updates; the bits are checked like every other array of the index.
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import spacy
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import examples
import spec_oracle
from spacy_delink.components.extensions import register_extensions, set_token_risks
from spacy_delink.errors import IndexFormatError
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder, builder
from spacy_delink.linkage.index.format import sign
from spacy_delink.linkage.index.keys import KeyFile
from spacy_delink.linkage.index.update import update_index
from spacy_delink.linkage.attack import assess_text
from spacy_delink.linkage.ngrams import analyze
from spacy_delink.linkage.records import ngram_records
from spacy_delink.linkage.tokenize import LinkageRules
from test_tokenization import texts

RULES = LinkageRules(max_n=3)


def _level_keys(index: CorpusIndex, text: str) -> dict[int, np.ndarray]:
    """The keys ``analyze`` looks up at each level for ``text`` (the exact analysis)."""
    return {level.n: level.keys for level in analyze(index, text, 2).levels}


def _outputs(index: CorpusIndex, text: str, k: int, exact: bool) -> dict[str, Any]:
    analysis = analyze(index, text, k, exact_frequent=exact)
    minimal = analysis.minimal_arrays()
    maximal = analysis.maximal_columns()
    return {  # rows are left out: an updated index numbers them otherwise than a fresh build
        "minimal": [minimal[name].tolist() for name in ("token", "n", "start", "end", "support")],
        "maximal": [maximal[name].tolist() for name in ("token", "n", "start", "end")],
        "anonymity": analysis.anonymity(),
    }


@settings(max_examples=examples(30))
@given(
    corpus=st.lists(texts(), min_size=1, max_size=7),
    query=texts(),
    shard_count=st.sampled_from([1, 2, 8]),
    data=st.data(),
)
def test_capped_lookups_equal_the_full_df_capped(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], query: str, shard_count: int, data: st.DataObject
) -> None:
    """``lookup(keys, cap)`` is ``(rows, min(df, cap))`` — the frequent bits at cap 2, the
    postings otherwise — and every SPEC output of the capped analysis equals the exact
    one (and the brute force), on any shard count."""
    assume(any(spec_oracle.tokenize(t)[0] for t in corpus))  # a corpus without tokens proves nothing
    tmp = tmp_path_factory.mktemp("capped")
    IndexBuilder(RULES, progress=False, shards=shard_count).build([(f"d{i}", t) for i, t in enumerate(corpus)], tmp / "index")
    index = CorpusIndex(tmp / "index")
    text = data.draw(st.sampled_from([query, *corpus, " ".join(corpus)]))
    for n, keys in _level_keys(index, text).items():
        rows, df = index.levels[n].lookup(keys)
        found = rows[rows >= 0][::-1]  # any order, repeats allowed
        batch = index.levels[n].documents_many(found)
        assert [b.tolist() for b in batch] == [index.levels[n].documents(r).tolist() for r in found]
        assert [len(b) for b in batch] == df[rows >= 0][::-1].tolist()
        lengths, flat = index.levels[n].documents_flat(found)
        assert lengths.tolist() == [len(b) for b in batch] and flat.tolist() == [d for b in batch for d in b.tolist()]
        for cap in (1, 2, 3, 5):
            capped_rows, capped_df = index.levels[n].lookup(keys, cap)
            assert capped_rows.tolist() == rows.tolist()
            assert capped_df.tolist() == np.minimum(df, cap).tolist()
    for k in range(2, len(corpus) + 2):
        capped = _outputs(index, text, k, exact=False)
        assert capped == _outputs(index, text, k, exact=True)
        oracle = spec_oracle.assess(corpus, text, k, RULES.max_n)
        found = analyze(index, text, k, exact_frequent=False).minimal_arrays()
        ngrams = sorted(zip(found["start"].tolist(), found["end"].tolist(), found["support"].tolist()))
        assert {"ngrams": ngrams, "anonymity": capped["anonymity"]} == oracle
        record = assess_text(index, "q", text, k, 1, readings=("exact", "search"))  # assess asks only up to k (n-grams: no gap reading)
        full = [analyze(index, text, k, reading=reading) for reading in ("exact", "search")]
        anonymities = [a.anonymity() for a in full if a.anonymity() is not None]
        assert (record["ngrams"], record["anonymity"]) == (ngram_records(full), min(anonymities) if anonymities else None)


def test_capped_lookups_after_an_update_see_the_deltas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A base n-gram seen once, then again in a delta, is frequent at k = 2: its base bit
    says df = 1, the delta's additions make it 2 — as in a fresh build of the union."""
    monkeypatch.setattr(builder, "new_secret", lambda: bytes(range(32)))
    base = [("a", "the farm near the river was sold"), ("b", "a quiet street in town")]
    added = [("c", "the farm near the mill"), ("d", "a quiet street by the river")]
    IndexBuilder(RULES, progress=False, shards=2, updatable=True).build(base, tmp_path / "updated")
    update_index(tmp_path / "updated", added)
    IndexBuilder(RULES, progress=False, shards=2, updatable=True).build(base + added, tmp_path / "fresh")
    updated, fresh = CorpusIndex(tmp_path / "updated"), CorpusIndex(tmp_path / "fresh")
    for text in ["the farm near the river", "a quiet street by the mill", "was sold in town"]:
        for k in (2, 3):
            assert _outputs(updated, text, k, exact=False)["minimal"] == _outputs(fresh, text, k, exact=True)["minimal"]
        for n, keys in _level_keys(fresh, text).items():
            assert updated.levels[n].lookup(keys, 2)[1].tolist() == np.minimum(fresh.levels[n].lookup(keys)[1], 2).tolist()
            rows = {name: index.levels[n].lookup(keys)[0] for name, index in (("updated", updated), ("fresh", fresh))}
            lists = {name: [d.tolist() for d in index.levels[n].documents_many(rows[name][rows[name] >= 0])]
                     for name, index in (("updated", updated), ("fresh", fresh))}
            assert lists["updated"] == lists["fresh"]
            lengths, flat = updated.levels[n].documents_flat(rows["updated"][rows["updated"] >= 0])
            assert lengths.tolist() == [len(d) for d in lists["fresh"]] and flat.tolist() == [x for d in lists["fresh"] for x in d]
    keys = _level_keys(fresh, "the farm near")[2]  # "the farm", "farm near": in a (base) and c (the delta)
    assert updated.levels[2].lookup(keys, 2)[1].tolist() == [2, 2]


def test_frequent_bits_are_checked_on_open(tmp_path: Path) -> None:
    """A missing, altered or truncated frequent file is refused, and so is one whose
    length does not fit its level even under an authentic manifest."""
    documents = [(f"d{i}", f"w{i % 3} w{i % 5} river farm {i}") for i in range(12)]
    IndexBuilder(RULES, progress=False, shards=2).build(documents, tmp_path / "index")
    index = tmp_path / "index"
    pristine = tmp_path / "pristine"
    shutil.copytree(index, pristine)
    name = "shard-0001.level-1.frequent"
    (index / name).unlink()
    with pytest.raises(IndexFormatError, match=f"{name} is missing"):
        CorpusIndex(index)
    data = bytearray((pristine / name).read_bytes())
    data[0] ^= 0x01
    (index / name).write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match=f"checksum mismatch in {name}"):
        CorpusIndex(index)
    (index / name).write_bytes(bytes(data) + bytes(8))
    with pytest.raises(IndexFormatError, match=f"{name} has .* bytes"):
        CorpusIndex(index)
    # A longer array that the manifest (re-signed with the key) agrees with: still refused.
    words = np.concatenate([np.fromfile(pristine / name, dtype="<u8"), np.zeros(1, dtype="<u8")])
    words.tofile(index / name)
    manifest = json.loads((pristine / "manifest.json").read_text())
    manifest["arrays"][name].update(length=len(words), bytes=8 * len(words))
    secret = KeyFile(tmp_path / "index.key").secret(manifest["key_id"])
    (index / "manifest.json").write_text(json.dumps(sign(manifest, secret)))
    with pytest.raises(IndexFormatError, match=f"{name} does not have one bit per row"):
        CorpusIndex(index, verify=False)


def test_token_risks_keep_the_highest_risk_of_the_covering_spans() -> None:
    """``set_token_risks`` is painting the spans in increasing order of risk, by brute force,
    on random overlapping spans with a few risk values."""
    register_extensions()
    nlp = spacy.blank("en")
    rng = random.Random(5)
    for _ in range(100):
        doc = nlp.make_doc(" ".join(f"w{i}" for i in range(rng.randint(1, 30))))
        spans = [(a, rng.randint(a + 1, len(doc))) for a in (rng.randrange(len(doc)) for _ in range(rng.randint(0, 12)))]
        risks = [rng.choice([1.0, 0.5, 0.25]) for _ in spans]
        expected = [0.0] * len(doc)
        for (a, b), risk in sorted(zip(spans, risks), key=lambda pair: pair[1]):
            expected[a:b] = [risk] * (b - a)
        first = np.array([a for a, _ in spans], dtype=np.int64)
        stop = np.array([b for _, b in spans], dtype=np.int64)
        set_token_risks(doc, first, stop, np.array(risks))
        assert [token._.delink_risk for token in doc] == expected


@pytest.mark.parametrize("shard_count", [1, 4])
def test_frequent_rows_coded_in_classes_answer_like_the_rest(tmp_path: Path, shard_count: int) -> None:
    """Rows with df in every posting class (1, rare, >= 16, >= 64, >= 256, >= 1024, >= 4096) give their exact
    df, capped df and documents — against the brute force — and each class holds rows."""
    documents = [
        f"common w{i % 2} u{i % 16} v{i % 250} y{i % 1000} z{i % 60} x{i} common w{i % 2} u{i % 16} end" for i in range(4200)
    ]
    IndexBuilder(RULES, progress=False, shards=shard_count).build([(f"d{i}", t) for i, t in enumerate(documents)], tmp_path / "index")
    index = CorpusIndex(tmp_path / "index")
    floors = builder.shards_module.POSTING_CLASSES
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    for floor in floors:  # every class is populated somewhere in the index
        assert sum(spec[f"rows-{floor}"]["count"] for name, spec in manifest["arrays"].items() if name.endswith(".ef")) > 0
    queries = ["common w1 u3 v7 y5 x42 common w0 u9 end", "x4199 common w0 u15 v249 y999", "u3 v3 y3 z3 x3 end"]
    truth = spec_oracle.postings(documents, RULES.max_n)
    dfs_seen = set()
    for text in queries:
        spans = {(i, n): key for i, n, key, _, _ in spec_oracle.occurrences(text, RULES.max_n)}
        for level in analyze(index, text, 2).levels:
            rows, df = index.levels[level.n].lookup(level.keys)
            expected = [sorted(truth.get(spans[(int(p), level.n)], ())) for p in level.positions]
            assert df.tolist() == [len(e) for e in expected]
            stored = rows >= 0
            lists = index.levels[level.n].documents_many(rows[stored])
            assert [d.tolist() for d in lists] == [e for e, s in zip(expected, stored) if s]
            for cap in (2, 3, 16, 17, 300):
                assert index.levels[level.n].lookup(level.keys, cap)[1].tolist() == np.minimum(df, cap).tolist()
            dfs_seen.update(df.tolist())
    assert {1, 4, 17, 70, 263, 2100, 4200} <= dfs_seen  # df 1, rare, and each class (df 16+, 64+, 256+, 1024+, 4096+)


def test_posting_classes_round_trip_on_random_rows() -> None:
    """A level coded with posting classes (``lookup.encode_posting_classes``) gives back every
    row's df (exact and capped) and posting list, for random dfs on both sides of each floor."""
    from spacy_delink.linkage.index import eliasfano, lookup
    from spacy_delink.linkage.index.format import POSTING_CLASSES, frequent_words

    rng = np.random.default_rng(7)
    for _ in range(20):
        documents = int(rng.integers(1, 6000))
        rows = int(rng.integers(1, 400))
        df = np.minimum(rng.choice([1, 2, 15, 16, 17, 255, 256, 257, 4095, 4096, 5000], size=rows), documents)
        lists = [np.sort(rng.choice(documents, size=d, replace=False)).astype(np.uint32) for d in df]
        keys = np.unique(rng.integers(0, 2**63, size=rows * 2, dtype=np.uint64))[:rows]
        parts = [lookup.open_part(*part) for part in lookup.encode_posting_classes(df, np.concatenate(lists), documents, POSTING_CLASSES)]
        classes = lookup.PostingClasses.from_parts(parts)
        level = lookup.ShardedLevel(
            [eliasfano.EliasFano(*eliasfano.encode(keys, 1 << 64, eliasfano.KEY_SAMPLE_SHIFT))], [classes], [frequent_words(df)], 0,
            documents, POSTING_CLASSES,
        )
        order = rng.permutation(rows)
        lengths, found = level.documents(order)
        assert lengths.tolist() == df[order].tolist()
        assert found.tolist() == np.concatenate([lists[i] for i in order]).tolist()
        for cap in (0, 2, 3, 16, 300):
            looked_rows, looked_df = level.lookup(keys, cap)
            assert looked_rows.tolist() == list(range(rows))
            assert looked_df.tolist() == (np.minimum(df, cap) if cap else df).tolist()
