"""The postings coded by df (format 5): df-1 rows' documents packed and found by the rank of
their clear flag bit, the df 2..15 rows and the classes numbered by the rank of their set bit.

Every coding must round-trip exactly, on edge shapes (no rows, only df-1 rows, only
frequent rows) as on random ones; a built index must answer as a brute-force count of its
corpus; an index of an older format is refused with a request to rebuild.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import spec_oracle
from spacy_delink.errors import IndexFormatError
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder, eliasfano, lookup, packing
from spacy_delink.linkage.index.format import BASE_FORMAT_VERSION, POSTING_CLASSES, frequent_words
from spacy_delink.linkage.index.update import compact_index, update_index
from spacy_delink.linkage.ngrams import analyze
from spacy_delink.linkage.tokenize import LinkageRules

RULES = LinkageRules(max_n=3)


@pytest.mark.parametrize("rows", [0, 1, 63, 64, 511, 512, 513, 1024, 3000])
def test_flag_rank_counts_the_set_flags_before_each_row(rows: int) -> None:
    rng = np.random.default_rng(rows)
    flags = rng.random(rows) < 0.3
    words = packing.flag_words(flags)
    assert len(words) == packing.flag_words_length(rows)
    before = np.cumsum(flags) - flags
    assert [packing.flag_rank(words, rows, row) for row in range(rows)] == before.tolist()


def _level(df: np.ndarray, documents: int, rng: np.random.Generator) -> tuple[lookup.ShardedLevel, list[np.ndarray], np.ndarray]:
    lists = [np.sort(rng.choice(documents, size=int(d), replace=False)).astype(np.uint32) for d in df]
    keys = np.unique(rng.integers(0, 2**63, size=len(df) * 2 + 1, dtype=np.uint64))[: len(df)]
    flat = np.concatenate(lists) if lists else np.zeros(0, dtype=np.uint32)
    parts = [lookup.open_part(*part) for part in lookup.encode_posting_classes(df, flat, documents, POSTING_CLASSES)]
    level = lookup.ShardedLevel(
        [eliasfano.EliasFano(*eliasfano.encode(keys, 1 << 64, eliasfano.KEY_SAMPLE_SHIFT))], [lookup.PostingClasses.from_parts(parts)],
        [frequent_words(df)], 0, documents, POSTING_CLASSES,
    )
    return level, lists, keys


@pytest.mark.parametrize(
    "shape", ["empty", "only df 1", "df 2..15", "all frequent", "one of each class", "mixed"]
)
def test_postings_round_trip_by_df(shape: str) -> None:
    """Every row's df (exact and capped) and documents come back, whatever mix of dfs a shard holds."""
    rng = np.random.default_rng(len(shape))
    documents = 5000
    df = {
        "empty": np.zeros(0, dtype=np.int64),
        "only df 1": np.ones(700, dtype=np.int64),
        "df 2..15": rng.integers(2, 16, size=600),
        "all frequent": rng.choice([16, 63, 64, 255, 256, 1023, 1024, 4095, 4096, 5000], size=40),
        "one of each class": np.array([1, 2, 15, 16, 64, 256, 1024, 4096]),
        "mixed": rng.choice([1, 1, 1, 2, 3, 15, 16, 70, 300, 2000, 4999], size=1500),
    }[shape]
    level, lists, keys = _level(df, documents, rng)
    order = rng.permutation(len(df))
    lengths, found = level.documents(order)
    assert lengths.tolist() == df[order].tolist()
    expected = [lists[i] for i in order]
    assert found.tolist() == (np.concatenate(expected).tolist() if expected else [])
    for cap in (0, 2, 3, 16, 300):
        rows, capped = level.lookup(keys, cap)
        assert rows.tolist() == list(range(len(df)))
        assert capped.tolist() == (np.minimum(df, cap) if cap else df).tolist()
    absent = level.lookup(np.array([1, 2**64 - 1], dtype=np.uint64))
    assert set(absent[0].tolist()) <= {-1} or set(absent[0].tolist()) <= set(range(len(df)))


def test_df1_documents_use_the_fewest_bits() -> None:
    """A df-1 row's document costs ceil(log2 D) bits, and such rows leave the shared sequence."""
    df = np.array([1, 2, 1, 1, 17, 1])
    postings = np.array([4, 1, 2, 0, 5, *range(17), 3], dtype=np.uint32)
    parts = lookup.encode_posting_classes(df, postings, 30729, POSTING_CLASSES)
    singles, values = parts[-1], parts[0]
    assert singles[0] == packing.Packed(4, 15)
    assert packing.unpack(singles[1], 0, 4, 15).tolist() == [4, 0, 5, 3]
    assert values[0].count == 2  # the df-2 row alone


def _random_corpus(rng: np.random.Generator, documents: int) -> list[tuple[str, str]]:
    words = ["a", "b", "c", "d", "e", "farm", "river", "x"]
    texts = [" ".join(rng.choice(words, size=int(rng.integers(1, 12)))) for _ in range(documents)]
    return [(f"d{i}", text) for i, text in enumerate(texts)]


@pytest.mark.parametrize("seed", range(4))
def test_lookups_equal_a_brute_force_count(tmp_path: Path, seed: int) -> None:
    """Every n-gram a query of each document asks for: exact df, capped df and documents."""
    rng = np.random.default_rng(seed)
    corpus = _random_corpus(rng, int(rng.integers(2, 80)))
    texts = [text for _, text in corpus]
    IndexBuilder(RULES, progress=False, shards=[1, 4][seed % 2]).build(corpus, tmp_path / "index")
    index = CorpusIndex(tmp_path / "index")
    truth = spec_oracle.postings(texts, RULES.max_n)
    seen = set()
    for text in texts:
        spans = {(i, n): key for i, n, key, _, _ in spec_oracle.occurrences(text, RULES.max_n)}
        for level in analyze(index, text, 2).levels:
            expected = [sorted(truth.get(spans[(int(p), level.n)], ())) for p in level.positions]
            rows, df = index.levels[level.n].lookup(level.keys)
            assert df.tolist() == [len(e) for e in expected]
            assert index.levels[level.n].lookup(level.keys, 2)[1].tolist() == np.minimum(df, 2).tolist()
            stored = rows >= 0
            found = index.levels[level.n].documents_many(rows[stored])
            assert [d.tolist() for d in found] == [e for e, s in zip(expected, stored) if s]
            seen.update(df[stored].tolist())
    assert 1 in seen and max(seen) >= 2


def test_update_and_compact_equal_a_fresh_build_of_the_union(tmp_path: Path) -> None:
    corpus = _random_corpus(np.random.default_rng(11), 40)
    IndexBuilder(RULES, progress=False, shards=2, updatable=True).build(corpus[:25], tmp_path / "index")
    update_index(tmp_path / "index", corpus[25:])
    updated = CorpusIndex(tmp_path / "index")
    compact_index(tmp_path / "index", shards=2, progress=False)
    IndexBuilder(RULES, progress=False, shards=2, updatable=True).build(corpus, tmp_path / "fresh")
    fresh = CorpusIndex(tmp_path / "fresh")
    compacted = CorpusIndex(tmp_path / "index")
    for n in range(1, RULES.max_n + 1):
        keys = compacted.levels[n].keys_by_row()
        # The compaction and the fresh build have different keys: compare through each index's own rows.
        rows, df = compacted.levels[n].lookup(keys)
        assert rows.tolist() == list(range(len(keys)))
        assert sorted(df.tolist()) == sorted(fresh.levels[n].lookup(fresh.levels[n].keys_by_row())[1].tolist())
        old_rows, old_df = updated.levels[n].lookup(keys)
        assert old_df.tolist() == df.tolist()
        assert [d.tolist() for d in updated.levels[n].documents_many(old_rows)] == [
            d.tolist() for d in compacted.levels[n].documents_many(rows)
        ]


@pytest.mark.parametrize("version", [3, 4])
def test_an_index_of_an_older_format_is_refused_with_one_line(tmp_path: Path, version: int) -> None:
    IndexBuilder(RULES, progress=False).build(_random_corpus(np.random.default_rng(1), 5), tmp_path / "index")
    manifest_path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["format_version"] = version
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError) as error:
        CorpusIndex(tmp_path / "index")
    message = str(error.value)
    assert "\n" not in message and f"format {version}" in message and "rebuild it with `delink index" in message
    assert version < BASE_FORMAT_VERSION
