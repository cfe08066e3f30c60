"""The index at scale: Elias–Fano codec, compiled kernels, shards, Dask builds, updates."""
from __future__ import annotations

from collections import Counter

import numba as nb
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from conftest import examples
from spacy_delink.linkage import bits
from spacy_delink.linkage.index import eliasfano, grouping, ngram_keys
from spacy_delink.linkage.index.vocabulary import Vocabulary


# --- codec -----------------------------------------------------------------------------


def _sorted_values(draw: st.DrawFn, universe: int) -> np.ndarray:
    values = draw(st.lists(st.integers(min_value=0, max_value=universe - 1), max_size=300))
    return np.array(sorted(values), dtype=np.uint64)


@st.composite
def sequences(draw: st.DrawFn) -> tuple[np.ndarray, int]:
    universe = draw(st.sampled_from([1, 2, 7, 64, 1000, 2**20, 2**40, 2**63, 2**64]))
    values = _sorted_values(draw, universe)
    if draw(st.booleans()):  # dense clusters and the universe's edges
        values = np.array(sorted({*values.tolist(), 0, universe - 1}), dtype=np.uint64)
    return values, universe


@settings(max_examples=examples(200))
@given(
    sequences(),
    st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=50),
    st.sampled_from([eliasfano.SAMPLE_SHIFT, eliasfano.KEY_SAMPLE_SHIFT, 1]),
)
def test_elias_fano_round_trip_find_and_rows(sequence: tuple[np.ndarray, int], probes: list[int], sample_shift: int) -> None:
    values, universe = sequence
    layout, words = eliasfano.encode(values, universe, sample_shift)
    coded = eliasfano.EliasFano(layout, words)
    assert coded.decode_all().tolist() == values.tolist()
    distinct = np.unique(values)
    distinct_coded = eliasfano.EliasFano(*eliasfano.encode(distinct, universe, sample_shift))
    needles = np.array([*distinct.tolist(), *probes], dtype=np.uint64)
    expected = [int(np.searchsorted(distinct, np.uint64(x))) if x in set(distinct.tolist()) else -1 for x in needles.tolist()]  # uint64: a Python int above 2**53 would compare as a float
    assert distinct_coded.find(needles).tolist() == expected
    # Rows of width w: the ranks of the values in [row * w, (row + 1) * w).
    width = max(1, universe // 7)
    rows = np.array([-1, 0, 1, 3, 6], dtype=np.int64)
    starts, stops = coded.row_bounds(rows, width)
    for row, start, stop in zip(rows.tolist(), starts.tolist(), stops.tolist()):
        if row < 0:
            assert (start, stop) == (0, 0)
            continue
        low, high = row * width, (row + 1) * width
        inside = [v for v in values.tolist() if low <= v < high]
        assert start == sum(v < low for v in values.tolist())
        assert stop - start == len(inside)
        assert coded.decode_from(low, stop - start).tolist() == inside


def test_elias_fano_refuses_unsorted_or_out_of_range() -> None:
    with pytest.raises(ValueError, match="sorted"):
        eliasfano.encode(np.array([3, 1], dtype=np.uint64), 10)
    with pytest.raises(ValueError, match="sorted"):
        eliasfano.encode(np.array([10], dtype=np.uint64), 10)
    layout, words = eliasfano.encode(np.array([1, 2], dtype=np.uint64), 10)
    with pytest.raises(ValueError, match="words"):
        eliasfano.EliasFano(layout, words[:-1])


@pytest.mark.parametrize("sample_shift", [eliasfano.SAMPLE_SHIFT, eliasfano.KEY_SAMPLE_SHIFT])
def test_layout_is_the_smallest_of_the_two_low_widths(sample_shift: int) -> None:
    rng = np.random.default_rng(3)
    widened = 0
    for count, universe in [(0, 5), (1, 1), (7, 2**64), (141_213, 2**62), (278_763, 141_213 * 30_729)] + [
        (int(c), int(u)) for c, u in zip(rng.integers(1, 10**6, 40), rng.integers(1, 2**62, 40))
    ]:
        chosen = eliasfano.Layout.for_values(count, universe, sample_shift)
        usual = min(63, max(0, (universe // max(1, count)).bit_length() - 1))
        options = [eliasfano.Layout(count, b, ((universe - 1) >> b) + 1, sample_shift) for b in range(max(0, usual - 3), min(63, usual + 4) + 1)]
        assert chosen.words == min(option.words for option in options), (count, universe)
        assert chosen.low_bits in (usual, usual + 1)
        widened += chosen.low_bits == usual + 1
    assert widened  # the wider choice is taken somewhere, so both kinds of layout are read back elsewhere


def test_elias_fano_is_near_the_entropy_bound() -> None:
    values = np.unique(np.random.default_rng(0).integers(0, 2**63, 100_000, dtype=np.uint64))
    layout, words = eliasfano.encode(values, 2**64)
    bits_per_value = 64 * len(words) / len(values)
    bound = np.log2(2**64 / len(values))
    assert bound < bits_per_value < bound + 3.0


# --- kernels ---------------------------------------------------------------------------


@nb.njit(cache=False)
def _bit_operations(words: np.ndarray) -> np.ndarray:
    out = np.full((len(words), 66), -1, dtype=np.int64)
    for i in range(len(words)):
        out[i, 0] = bits.popcount(words[i])
        out[i, 1] = bits.trailing_zeros(words[i])
        for rank in range(out[i, 0]):
            out[i, 2 + rank] = bits.select(words[i], np.int64(rank))
    return out


def test_bit_operations_equal_their_definitions() -> None:
    rng = np.random.default_rng(5)
    words = [0, 1, 2**63, 2**64 - 1, 2**32, 0x5555555555555555] + rng.integers(0, 2**64, 300, dtype=np.uint64).tolist()
    words += [int(w) & int(rng.integers(0, 2**64, dtype=np.uint64)) for w in words[6:106]]  # sparser words
    found = _bit_operations(np.array(words, dtype=np.uint64)).tolist()
    for word, row in zip(words, found):
        ones = [i for i in range(64) if word >> i & 1]
        assert row[0] == len(ones)
        assert row[1] == (ones[0] if ones else 64)
        assert row[2 : 2 + len(ones)] == ones


@settings(max_examples=examples(150))
@given(
    st.lists(st.tuples(st.integers(0, 40), st.integers(0, 2)), max_size=400),
    st.sampled_from([0, 1, 2**40, 2**63 - 7]),
)
def test_group_counts_distinct_documents_per_key(pairs: list[tuple[int, int]], spread: int) -> None:
    # Keys that share their top 40 bits exercise the packed-sort repair.
    raw_keys = np.array([(key * spread + key % 3) % 2**64 for key, _ in pairs], dtype=np.uint64)
    docs = np.cumsum([step for _, step in pairs]).astype(np.uint32) if pairs else np.zeros(0, np.uint32)
    unique, df, postings, pair_df = grouping.group(raw_keys, docs)
    distinct = sorted(set(zip(raw_keys.tolist(), docs.tolist())))
    assert unique.tolist() == sorted(set(raw_keys.tolist()))
    assert postings.tolist() == [doc for _, doc in distinct]
    per_key = Counter(key for key, _ in distinct)
    assert df.tolist() == [per_key[key] for key in unique.tolist()]
    assert pair_df.tolist() == [per_key[key] for key in raw_keys.tolist()]


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_group_splits_large_inputs_into_buckets(threads: int) -> None:
    rng = np.random.default_rng(3)
    keys = rng.integers(0, 5_000, 300_000).astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    docs = np.sort(rng.integers(0, 1_000, len(keys))).astype(np.uint32)
    unique, df, postings, pair_df = grouping.group(keys, docs, threads=threads)
    order = np.lexsort((docs, keys))
    pairs = np.unique(np.stack([keys[order], docs[order].astype(np.uint64)]), axis=1)
    assert unique.tolist() == np.unique(keys).tolist()
    assert postings.tolist() == pairs[1].tolist()
    assert df.sum() == len(postings)
    lookup = dict(zip(unique.tolist(), df.tolist()))
    assert pair_df.tolist() == [lookup[k] for k in keys.tolist()]


@settings(max_examples=examples(100))
@given(st.lists(st.sampled_from(["the", "The", "THE", "Straße", "STRASSE", "ﬁne", "fine", "cafe\u0301", "a", "verylongtoken", "VeryLongToken"]), max_size=60))
def test_vocabulary_ids_follow_the_search_form(words: list[str]) -> None:
    from spacy_delink.linkage.tokenize import Tokenizer

    tokenizer = Tokenizer()
    vocabulary = Vocabulary(fold_ascii=True, limit=1 << 10)
    tokens = tokenizer.tokenize(" ".join(words))
    ids, new = vocabulary.assign(tokens.codes, tokens.starts, tokens.ends)
    assert sorted(ids[new].tolist()) == ids[new].tolist() == list(range(len(new)))
    forms = [tokenizer.search_form(raw) for raw in tokens.raw]
    form_of_id: dict[int, str] = {}
    for token_id, form in zip(ids.tolist(), forms):
        assert form_of_id.setdefault(token_id, form) == form  # one id never mixes two forms
    # Two ids may share a form only through a non-ASCII spelling (kept apart, digested alike).
    raw_of_id = {token_id: tokens.raw[i] for i, token_id in enumerate(ids.tolist())}
    for a, b in [(a, b) for a in raw_of_id for b in raw_of_id if a < b and form_of_id[a] == form_of_id[b]]:
        assert not (raw_of_id[a].isascii() and raw_of_id[b].isascii())


def test_vocabulary_grows_and_clears_at_its_limit() -> None:
    from spacy_delink.linkage.tokenize import Tokenizer

    tokenizer = Tokenizer()
    vocabulary = Vocabulary(fold_ascii=True, limit=1 << 20)
    words = [f"w{i}x{'y' * (i % 11)}" for i in range(3000)]
    tokens = tokenizer.tokenize(" ".join(words))
    ids, new = vocabulary.assign(tokens.codes, tokens.starts, tokens.ends)
    assert len(set(ids.tolist())) == len(words) == len(new)
    again, new_again = vocabulary.assign(tokens.codes, tokens.starts, tokens.ends)
    assert again.tolist() == ids.tolist() and len(new_again) == 0  # all known: no new digests
    small = Vocabulary(fold_ascii=True, limit=1 << 10)
    batch = tokenizer.tokenize(" ".join(words[:900]))
    first, _ = small.assign(batch.codes, batch.starts, batch.ends)
    second, new_second = small.assign(batch.codes, batch.starts, batch.ends)
    assert len(new_second) == 0 and second.tolist() == first.tolist()
    third, new_third = small.assign(tokens.codes, tokens.starts, tokens.ends)  # over the limit: cleared
    assert len(new_third) == len(words) and len(set(third.tolist())) == len(words)


@settings(max_examples=examples(100))
@given(st.lists(st.tuples(st.integers(1, 2), st.booleans(), st.integers(0, 4)), max_size=60), st.integers(2, 4))
def test_extend_level_keeps_the_positions_the_reduction_keeps(steps: list[tuple[int, bool, int]], level: int) -> None:
    """A position survives when it and the next stored position are adjacent, both frequent, and its segment has room."""
    previous = np.cumsum([step for step, _, _ in steps]).astype(np.uint32)
    frequent = np.array([flag for _, flag, _ in steps], dtype=bool)
    size = int(previous[-1]) + level + 1 if steps else level
    rng = np.random.default_rng(len(steps))
    remaining = rng.integers(0, 6, size).astype(np.uint8)
    for position, (_, _, room) in zip(previous.tolist(), steps):
        remaining[position] = room
    tok = rng.integers(0, 2**63, size, dtype=np.uint64)
    previous_keys = rng.integers(0, 2**63, len(previous), dtype=np.uint64)
    positions, keys = shards.extend_level(previous, previous_keys, frequent, remaining, tok, level)
    kept = [
        i for i in range(len(previous) - 1)
        if frequent[i] and frequent[i + 1] and previous[i + 1] == previous[i] + 1 and remaining[previous[i]] >= level
    ]
    assert positions.tolist() == previous[kept].tolist()
    assert keys.tolist() == ngram_keys.extend(previous_keys[kept], tok[previous[kept].astype(np.int64) + level - 1]).tolist()


@settings(max_examples=examples(100))
@given(st.text(max_size=20))
def test_token_digest_is_keyed_blake2b_of_the_search_form(form: str) -> None:
    """The digest every index and query shares (hashing.py): BLAKE2b-64 keyed with the secret, little-endian."""
    import hashlib

    from spacy_delink.linkage.index.hashing import TokenHasher
    from spacy_delink.linkage.tokenize import Tokenizer

    secret = bytes(range(32))
    hasher = TokenHasher(Tokenizer(), secret)
    expected = hashlib.blake2b(form.encode("utf-8", "surrogatepass"), digest_size=8, key=secret).digest()
    assert hasher.digest(form) == hasher.digest(form) == int.from_bytes(expected, "little") & ~int(ngram_keys.FAMILY)  # the exact family's bit: clear


def test_extend_is_the_documented_mixing_step() -> None:
    """The chaining step, spelled out with numpy's wrapping uint64 arithmetic as the oracle:
    the family bits (``ngram_keys.FAMILY``) are left out of the mixing, and the token's is the key's."""
    rng = np.random.default_rng(5)
    prefix = rng.integers(0, 2**63, 1000, dtype=np.uint64) * np.uint64(3)
    token = rng.integers(0, 2**63, 1000, dtype=np.uint64) * np.uint64(5)
    family = ngram_keys.FAMILY
    low = ~family
    x = (prefix & low) * np.uint64(0x9E3779B97F4A7C15) + (token & low)
    x ^= x >> np.uint64(30)
    x *= np.uint64(0xBF58476D1CE4E5B9)
    x ^= x >> np.uint64(27)
    x *= np.uint64(0x94D049BB133111EB)
    x ^= x >> np.uint64(31)
    assert ngram_keys.extend(prefix, token).tolist() == ((x & low) | (token & family)).tolist()
    twins = ngram_keys.extend(prefix ^ family, token ^ family)  # the other reading, the same strings
    assert (twins ^ ngram_keys.extend(prefix, token)).tolist() == [int(family)] * len(token)


# --- shards, Dask ----------------------------------------------------------------------

import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

import spec_oracle  # noqa: E402
from spacy_delink.errors import DelinkError, IndexFormatError, InputError  # noqa: E402
from spacy_delink.linkage.index import CorpusFiles, CorpusIndex, IndexBuilder, builder, shards  # noqa: E402
from spacy_delink.linkage.ngrams import analyze  # noqa: E402
from spacy_delink.linkage.tokenize import LinkageRules  # noqa: E402

from test_tokenization import texts  # noqa: E402

SECRET = bytes(range(32))


@pytest.fixture
def fixed_secret(monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Builds draw this secret, so that two builds of one corpus can be compared byte for byte."""
    monkeypatch.setattr(builder, "new_secret", lambda: SECRET)
    return SECRET


def _corpus(documents: int = 60, words: int = 300, seed: int = 1) -> list[tuple[str, str]]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(200)] + ["the farm", "near the river", "was sold."]
    return [(f"d{i}", " ".join(rng.choice(vocab, size=words))) for i in range(documents)]


def _write_jsonl(path: Path, documents: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in documents), encoding="utf-8")
    return path


def _arrays(index: Path) -> dict[str, object]:
    """What determines an index's bytes: every file's size and SHA-256 (the manifest's table)."""
    return json.loads((index / "manifest.json").read_text())["arrays"]


def _result(index: CorpusIndex, text: str, k: int) -> dict[str, object]:
    analysis = analyze(index, text, k)
    return {"ngrams": sorted((o.start, o.end, o.support) for o in analysis.minimal()), "anonymity": analysis.anonymity()}


@pytest.fixture(scope="module")
def scheduler() -> object:
    """One local Dask cluster (2 worker processes) for the tests that need a scheduler address."""
    distributed = pytest.importorskip("dask.distributed")
    import cloudpickle

    import test_index_scale

    cloudpickle.register_pickle_by_value(test_index_scale)  # the failure-injecting tasks below
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    yield cluster.scheduler_address
    cluster.close()
    cloudpickle.unregister_pickle_by_value(test_index_scale)


def test_local_cluster_build_equals_the_in_process_build(tmp_path: Path, fixed_secret: bytes) -> None:
    documents = _corpus()
    files = CorpusFiles((str(_write_jsonl(tmp_path / "a.jsonl", documents[:25])), str(_write_jsonl(tmp_path / "b.jsonl", documents[25:]))))
    rules = LinkageRules(max_n=4)
    in_process = IndexBuilder(rules, progress=False, shards=4).build(documents, tmp_path / "threads")
    IndexBuilder(rules, progress=False, shards=4, workers=1).build(files, tmp_path / "one")
    cluster = IndexBuilder(rules, progress=False, shards=4, workers=2, dask=True).build(files, tmp_path / "dask")
    assert _arrays(tmp_path / "threads") == _arrays(tmp_path / "one") == _arrays(tmp_path / "dask")
    assert cluster.partitions == 2 and in_process.shards == cluster.shards == 4
    assert in_process.ngrams_per_level == cluster.ngrams_per_level


class _CountLevelKillingItsWorkerOnce:
    """``shards.count_level``, but the first call kills its worker process mid-task."""

    __name__ = "count_level"

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __call__(self, *args: object) -> object:
        marker = Path(self.marker)
        if not marker.exists():
            marker.write_text("killed")
            os._exit(1)  # the worker dies; its nanny starts a new one and Dask reruns the task
        return shards.count_level(*args)  # type: ignore[arg-type]  # on the worker: the real one


def _count_level_always_failing(*args: object) -> object:
    raise OSError("disk full (injected)")


def test_a_killed_worker_is_retried_and_the_bytes_stay_the_same(
    tmp_path: Path, fixed_secret: bytes, scheduler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = _corpus(30)
    path = str(_write_jsonl(tmp_path / "corpus.jsonl", documents))
    rules = LinkageRules(max_n=3)
    IndexBuilder(rules, progress=False, shards=2).build(documents, tmp_path / "reference")
    marker = tmp_path / "killed"
    monkeypatch.setattr(shards, "count_level", _CountLevelKillingItsWorkerOnce(marker))
    IndexBuilder(rules, progress=False, shards=2, scheduler=scheduler).build(CorpusFiles((path,)), tmp_path / "dask")
    assert marker.exists()
    assert _arrays(tmp_path / "dask") == _arrays(tmp_path / "reference")


def test_a_failing_task_stops_the_build_and_leaves_nothing(
    tmp_path: Path, scheduler: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(_write_jsonl(tmp_path / "corpus.jsonl", _corpus(10)))
    monkeypatch.setattr(shards, "count_level", _count_level_always_failing)
    with pytest.raises(DelinkError, match="failed after 2 retries .OSError: disk full"):
        IndexBuilder(LinkageRules(max_n=2), progress=False, scheduler=scheduler).build(CorpusFiles((path,)), tmp_path / "index")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]  # no index, no partial, no key


def test_a_bad_corpus_line_on_a_worker_is_a_clear_error(tmp_path: Path, scheduler: str) -> None:
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"id": "a", "text": "x"}\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(DelinkError, match="missing text field"):
        IndexBuilder(progress=False, scheduler=scheduler).build(CorpusFiles((str(path),)), tmp_path / "index")
    assert not (tmp_path / "index").exists()


def test_duplicate_ids_across_partitions_are_refused(tmp_path: Path) -> None:
    a = _write_jsonl(tmp_path / "a.jsonl", [("x", "one"), ("y", "two")])
    b = _write_jsonl(tmp_path / "b.jsonl", [("z", "three"), ("x", "four")])
    with pytest.raises(InputError, match="duplicate document id 'x' \\(documents 1 and 4\\)"):
        IndexBuilder(progress=False).build(CorpusFiles((str(a), str(b))), tmp_path / "index")


def test_a_deleted_or_corrupted_shard_file_is_detected_on_open(tmp_path: Path) -> None:
    IndexBuilder(LinkageRules(max_n=3), progress=False, shards=4).build(_corpus(20), tmp_path / "index")
    index = tmp_path / "index"
    pristine = tmp_path / "pristine"
    shutil.copytree(index, pristine)
    (index / "shard-0002.level-2.ef").unlink()
    with pytest.raises(IndexFormatError, match="shard-0002.level-2.ef is missing"):
        CorpusIndex(index)
    shutil.copyfile(pristine / "shard-0002.level-2.ef", index / "shard-0002.level-2.ef")
    data = bytearray((index / "shard-0001.level-1.ef").read_bytes())
    data[len(data) // 2] ^= 0x10
    (index / "shard-0001.level-1.ef").write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="checksum mismatch in shard-0001.level-1.ef"):
        CorpusIndex(index)
    (index / "shard-0001.level-1.ef").write_bytes(bytes(data[:-8]))
    with pytest.raises(IndexFormatError, match="shard-0001.level-1.ef has .* bytes"):
        CorpusIndex(index)


@settings(max_examples=examples(25))
@given(corpus=st.lists(texts(), min_size=1, max_size=6), query=texts(), shard_count=st.sampled_from([2, 8, 64]), data=st.data())
def test_queries_across_shards_equal_one_shard(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], query: str, shard_count: int, data: st.DataObject
) -> None:
    assume(any(spec_oracle.tokenize(t)[0] for t in corpus))  # a corpus without tokens proves nothing
    tmp = tmp_path_factory.mktemp("shards")
    documents = [(f"d{i}", t) for i, t in enumerate(corpus)]
    one = IndexBuilder(LinkageRules(max_n=3), progress=False, shards=1).build(documents, tmp / "one")
    many = IndexBuilder(LinkageRules(max_n=3), progress=False, shards=shard_count).build(documents, tmp / "many")
    assert one.ngrams_per_level == many.ngrams_per_level and many.shards == shard_count
    single, sharded = CorpusIndex(tmp / "one"), CorpusIndex(tmp / "many")
    text = data.draw(st.sampled_from([query, *corpus, " ".join(corpus)]))
    for k in range(2, len(corpus) + 2):
        assert _result(sharded, text, k) == _result(single, text, k) == spec_oracle.assess(corpus, text, k, 3)
    for n in range(1, 4):
        # Every row's posting list, as sets of documents: the same whichever shard holds it.
        lists = lambda index: sorted(tuple(index.levels[n].documents(r).tolist()) for r in range(len(index.levels[n])))  # noqa: E731
        assert lists(single) == lists(sharded)


def test_assess_on_dask_workers_writes_the_same_records(tmp_path: Path, scheduler: str) -> None:
    from spacy_delink.evaluate.assess import assess_file
    from spacy_delink.linkage.index.distributed import DaskRunner

    documents = _corpus(40, words=120)
    IndexBuilder(LinkageRules(max_n=4), progress=False, shards=2).build(documents, tmp_path / "index")
    rng = np.random.default_rng(9)
    queries = documents[:30] + [(f"q{i}", " ".join(rng.choice([t for _, t in documents[:5]], size=2))) for i in range(45)]
    path = _write_jsonl(tmp_path / "queries.jsonl", queries)
    index = CorpusIndex(tmp_path / "index")
    alone = assess_file(index, path, tmp_path / "alone.jsonl", 3, 2, progress=False)
    runner = DaskRunner(scheduler=scheduler)
    try:
        spread = assess_file(index, path, tmp_path / "spread.jsonl", 3, 2, progress=False, runner=runner)
    finally:
        runner.close()
    assert (tmp_path / "spread.jsonl").read_bytes() == (tmp_path / "alone.jsonl").read_bytes()
    assert spread.documents == alone.documents == 75 and spread.linkable_documents == alone.linkable_documents
