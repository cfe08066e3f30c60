"""The fast paths of the index build give exactly what the straightforward ones give.

A JSONL line is read by orjson where that gives the standard library's result, and a
``.gz`` corpus is decompressed by ISA-L (``io.py``); a level's pairs are cut into shards,
and the shards' flags put back, in one compiled pass each; a bucket's pairs are radix
sorted (``grouping.py``); an ASCII token's keyed digest is computed by a compiled BLAKE2b
(``hashing.py``). Each is checked here against the plain reading — the standard parser on
every line, numpy masks per shard, numpy's sort, ``hashlib`` — records, skipped lines and
errors included. The build's warm-up task (``shards.warm_kernels``) loads the kernels the
build calls, and its failures, or the corpus's while it runs, stop the build with their error.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import random
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

from spacy_delink.io import jsonl as delink_io
from spacy_delink.io.streams import open_binary
from spacy_delink.corpus.rules import CorpusStats
from spacy_delink.corpus.source import read_documents
from spacy_delink.errors import InputError
from spacy_delink.linkage.index import blake2b, builder, grouping, shards
from spacy_delink.linkage.index.builder import IndexBuilder
from spacy_delink.linkage.index.hashing import TokenHasher
from spacy_delink.linkage.tokenize import LinkageRules, Tokenizer

#: Lines each path must read alike: kept, skipped (--skip-invalid) or refused with one message.
LINES: list[bytes] = [
    '\ufeff{"id": "bom", "text": "first line after a byte-order mark"}'.encode(),
    b'{"id": 1, "text": "plain"}',
    b"",
    b"   \t",
    "\u3000".encode(),
    b'{"id": 123456789012345678901234567890, "text": "an id beyond 64 bits"}',
    b'{"id": -9223372036854775809, "text": "just below int64"}',
    b'{"id": 18446744073709551615, "text": "the largest uint64"}',
    b'{"id": "f", "text": "a float", "score": 1.5}',
    b'{"id": "n", "text": "nested", "meta": {"a": [1, 2.0e400]}}',
    b'{"id": "dup", "text": "first", "text": "last wins"}',
    b'{"id": "esc", "text": "pair \\ud83d\\ude00 and \\u0000 and \\"quotes\\""}',
    b'{"id": "lone", "text": "\\ud800 alone"}',
    b'[1, 2, 3]',
    b'{"id": "nan", "text": "x", "v": NaN}',
    b'{"id": 2, "text": "trailing"} x',
    b'{"id": true, "text": "a boolean id"}',
    b'{"id": null, "text": "no id"}',
    b'{"id": "ctl", "text": "a \x01 control"}',
    b'{"id": "crlf", "text": "windows line end"}\r',
    '{"id": "ü", "text": "non-ASCII ünïcödé ☃"}'.encode(),
]


def _write(folder: Path, lines: list[bytes], gz: bool) -> Path:
    data = b"\n".join(lines) + b"\n"
    if gz:
        path = folder / "corpus.jsonl.gz"
        path.write_bytes(gzip.compress(data))
    else:
        path = folder / "corpus.jsonl"
        path.write_bytes(data)
    return path


def _read(path: Path, skip_invalid: bool) -> tuple[list[tuple[Any, ...]], list[int], str | None]:
    """Records (with their values' types), skipped line numbers and the error, if any."""
    stats = delink_io.JsonlStats()
    records: list[tuple[Any, ...]] = []
    try:
        for record in delink_io.read_jsonl(path, skip_invalid=skip_invalid, stats=stats):
            records.append(tuple((key, type(value).__name__, value) for key, value in record.items()))
    except InputError as err:
        return records, stats.skipped, str(err)
    return records, stats.skipped, None


def _plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every line through the standard library's parser, as before the fast path."""
    monkeypatch.setattr(delink_io, "_fast_record", lambda raw: None)


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("skip_invalid", [False, True])
def test_fast_jsonl_reads_as_the_standard_parser(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gz: bool, skip_invalid: bool) -> None:
    path = _write(tmp_path, LINES, gz)
    fast = _read(path, skip_invalid)
    _plain(monkeypatch)
    assert fast == _read(path, skip_invalid)
    if skip_invalid:
        assert fast[2] is None and fast[1]  # some lines were skipped, none stopped the run
    else:
        assert fast[2] is not None and ":11: " in fast[2] and "key 'text' appears twice" in fast[2]  # the repeated key, named by line


@pytest.mark.parametrize("skip_invalid", [False, True])
def test_gz_corpus_yields_the_plain_files_documents(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, skip_invalid: bool) -> None:
    """Documents, skipped lines and errors of a .gz corpus equal the plain file's, and the plain parser's."""
    plain_dir, gz_dir = tmp_path / "plain", tmp_path / "gz"
    plain_dir.mkdir()
    gz_dir.mkdir()
    plain, packed = _write(plain_dir, LINES, gz=False), _write(gz_dir, LINES, gz=True)

    def documents(path: Path) -> tuple[list[Any], list[str], str | None]:
        stats = CorpusStats()
        found: list[Any] = []
        try:
            for doc_id, text in read_documents([path], skip_invalid=skip_invalid, stats=stats):
                found.append((type(doc_id).__name__, doc_id, text))
        except InputError as err:
            return found, [line.rsplit(":", 1)[1] for line in stats.skipped_lines], str(err).replace(str(path), "<file>")
        return found, [line.rsplit(":", 1)[1] for line in stats.skipped_lines], None

    fast = documents(plain)
    assert documents(packed) == fast
    _plain(monkeypatch)
    assert documents(packed) == fast
    if skip_invalid:
        assert len(fast[0]) == 11 and fast[2] is None  # the line with a repeated key is skipped, not read as its last value


@pytest.mark.parametrize("line", [b'{"id": "bad-utf8", "text": "\xff\xfe"}', b'{"id": "utf8-surrogate", "text": "\xed\xa0\x80"}'])
@pytest.mark.parametrize("skip_invalid", [False, True])
def test_invalid_utf8_stops_both_paths_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: bytes, skip_invalid: bool) -> None:
    """Bytes that are not UTF-8 are refused with the same message (--skip-invalid does not skip them)."""
    path = _write(tmp_path, [b'{"id": 1, "text": "ok"}', line], gz=True)
    fast = _read(path, skip_invalid)
    assert fast[2] is not None and ":2: not valid UTF-8" in fast[2]
    _plain(monkeypatch)
    assert fast == _read(path, skip_invalid)


def test_gz_corpus_reads_as_gzip(tmp_path: Path) -> None:
    """ISA-L's decompression gives the standard module's bytes, also across gzip members."""
    lines = [json.dumps({"id": i, "text": "word " * (i % 97)}).encode() for i in range(5000)]
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines[:2500]) + b"\n") + gzip.compress(b"\n".join(lines[2500:]) + b"\n"))
    with open_binary(path) as fast, gzip.open(path, "rb") as plain:
        assert fast.read() == plain.read()


@pytest.mark.parametrize("damage", ["truncated", "corrupt", "checksum"])
def test_damaged_gz_corpus_is_one_line_naming_it(tmp_path: Path, damage: str) -> None:
    """Each decompressor fails in its own way; the reader names the file and the fix
    (data that is no gzip at all, or trailing data: tests/test_robustness.py)."""
    data = bytearray(gzip.compress(b'{"id": 1, "text": "x"}\n' * 1000))
    damaged = {
        "truncated": data[: len(data) // 2],
        "corrupt": data[:30] + bytes(b ^ 0xFF for b in data[30:32]) + data[32:],
        "checksum": data[:-6] + bytes([data[-6] ^ 1]) + data[-5:],
    }[damage]
    path = tmp_path / "c.jsonl.gz"
    path.write_bytes(bytes(damaged))
    with pytest.raises(InputError, match=r"c\.jsonl\.gz: damaged or truncated gzip data after line \d+ \(.+\); fetch or compress the file again$"):
        list(read_documents([path]))


@pytest.mark.parametrize("shard_bits", [1, 2, 5])
def test_split_shards_is_the_stable_split_by_top_bits(shard_bits: int) -> None:
    rng = np.random.default_rng(shard_bits)
    keys = rng.integers(0, 2**64 - 1, 20_000, dtype=np.uint64, endpoint=True)
    keys[:50] = keys[50:100]  # repeated keys keep their input order
    docs = np.sort(rng.integers(0, 1000, len(keys))).astype(np.uint32)
    out_keys, out_docs, bounds = grouping.split_shards(keys, docs, shard_bits)
    owner = (keys >> np.uint64(64 - shard_bits)).astype(np.int64)
    flags = rng.integers(0, 2, len(keys)).astype(np.uint8)
    per_shard = []
    for shard in range(1 << shard_bits):
        chosen = owner == shard
        assert np.array_equal(out_keys[bounds[shard] : bounds[shard + 1]], keys[chosen])
        assert np.array_equal(out_docs[bounds[shard] : bounds[shard + 1]], docs[chosen])
        per_shard.append(flags[chosen])
    expected = np.zeros(len(keys), dtype=bool)
    for shard in range(1 << shard_bits):
        expected[owner == shard] = per_shard[shard].view(bool)
    assert np.array_equal(grouping.gather_shard_flags(keys, shard_bits, np.concatenate(per_shard), bounds), expected)


@pytest.mark.parametrize("count", [0, 1, 2, 7, 1000, 40_000])
@pytest.mark.parametrize("shared_top_bits", [0, 12, 40])
def test_radix_sorted_bucket_is_numpys_sort(count: int, shared_top_bits: int) -> None:
    rng = np.random.default_rng(count + shared_top_bits)
    keys = rng.integers(0, 2**64 - 1, count, dtype=np.uint64, endpoint=True)
    if shared_top_bits:
        keys = (keys >> np.uint64(shared_top_bits)) | np.uint64(((1 << shared_top_bits) - 1) << (64 - shared_top_bits))
    if count > 4:
        keys[rng.integers(0, count, count // 3)] = keys[rng.integers(0, count, count // 3)]  # repeats
        keys[1] = keys[0] ^ np.uint64(0xFF)  # equal in the sorted bits, different below them
    expected = (keys & ~grouping._INDEX_MASK) | np.arange(count, dtype=np.uint64)
    expected.sort()
    assert np.array_equal(grouping._sorted_packed(keys), expected)


def _tokens_text(rng: random.Random, count: int) -> str:
    """Words of every length class (short, one BLAKE2b block, several), mixed case, some non-ASCII."""
    words = []
    for n in range(count):
        length = rng.choice([1, 2, 5, 8, 9, 40, 127, 128, 129, 255, 256, 257, 300])
        word = "".join(rng.choice("abcXYZ019") for _ in range(length))
        words.append(word if n % 7 else word + rng.choice(["é", "ﬁ", "Straße", "e\u0301", "İ"]))
    return " ".join(words)


@pytest.mark.parametrize("casefold", [True, False])
def test_compiled_digests_are_the_python_digests(casefold: bool) -> None:
    """ASCII tokens are digested by the compiled BLAKE2b, the others in Python: each is
    the keyed digest of its search form, as ``TokenHasher.digest`` computes it, also when
    threads share the hasher."""
    tokenizer = Tokenizer(LinkageRules(casefold=casefold))
    rng = random.Random(casefold)
    texts = [_tokens_text(rng, 200) for _ in range(8)]
    for secret in (bytes(range(32)), bytes(32), bytes(range(200, 232))):
        hasher = TokenHasher(tokenizer, secret, cache_limit=1 << 10)
        for text in texts:
            tokens = tokenizer.tokenize(text)
            expected = [hasher.digest(tokenizer.search_form(raw)) for raw in tokens.raw]
            assert hasher.hash_tokens(tokens).tolist() == expected
    shared = TokenHasher(tokenizer, bytes(range(32)))
    batches = [tokenizer.tokenize(text) for text in texts] * 4
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(shared.hash_tokens, batches))
    alone = TokenHasher(tokenizer, bytes(range(32)))
    assert all(np.array_equal(a, alone.hash_tokens(b)) for a, b in zip(together, batches))


@pytest.mark.parametrize("key_length", [1, 32, 64])
def test_ascii_digests_are_keyed_blake2b(key_length: int) -> None:
    key = bytes(range(7, 7 + key_length))
    words = ["a", "Ab", "x" * 127, "y" * 128, "Z" * 129, "w" * 256, "v" * 257, "ünï", "1,5"]
    text = " ".join(words)
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
    ends = starts + np.array([len(w) for w in words])
    state = blake2b.blake2b_keyed_state(np.frombuffer(key, dtype=np.uint8))
    for fold in (True, False):
        digests, plain = blake2b.ascii_digests(codes, starts, ends, fold, state)
        assert plain.tolist() == [w.isascii() for w in words]
        for word, digest, is_plain in zip(words, digests.tolist(), plain.tolist()):
            if is_plain:
                form = (word.lower() if fold else word).encode()
                assert digest == int.from_bytes(hashlib.blake2b(form, digest_size=8, key=key).digest(), "little")


_LOADED = """
import json, sys
from spacy_delink.linkage import tokenize
from spacy_delink.linkage.index import blake2b, builder, grouping, ngram_keys, shards, vocabulary
from spacy_delink.linkage.index.builder import IndexBuilder
from spacy_delink.linkage.tokenize import LinkageRules

def loaded():
    return {f"{module.__name__}.{name}": sorted(map(str, value.signatures))
            for module in (tokenize, vocabulary, blake2b, ngram_keys, grouping) for name, value in vars(module).items() if hasattr(value, "signatures")}

rules = LinkageRules()
shards.warm_kernels(rules)
warm = loaded()
documents = [(n, f"Doc {n}: the same words, ünïcode and WORDS again. " * (n % 3 + 1)) for n in range(40)]
IndexBuilder(rules, progress=False).build(documents, sys.argv[1])
print(json.dumps([warm, loaded()]))
"""


def test_warm_up_loads_the_kernels_the_build_calls(tmp_path: Path) -> None:
    """In a fresh process the warm-up loads every tokenizing and counting kernel, with the
    signatures the build then calls it with: the build loads (or compiles) none of them anew."""
    done = subprocess.run([sys.executable, "-c", _LOADED, str(tmp_path / "index")], capture_output=True, text=True, check=True)
    warm, after = json.loads(done.stdout)
    assert after == warm
    for kernel in ("tokenize._scan_codes", "index.vocabulary._assign", "index.blake2b.ascii_digests", "index.ngram_keys.extend_positions", "index.grouping._group_buckets"):
        assert warm[f"spacy_delink.linkage.{kernel}"], kernel


def _documents(count: int) -> Iterator[tuple[int, str]]:
    for n in range(count):
        yield n, f"document {n} with some words and some more words"


def test_failed_warm_up_is_the_builds_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(rules: LinkageRules, readings: tuple[str, ...]) -> None:
        raise InputError("the warm-up failed")

    monkeypatch.setattr(shards, "warm_kernels", fail)
    with pytest.raises(InputError, match="^the warm-up failed$"):
        IndexBuilder(progress=False, memory_mb=64).build(_documents(2000), tmp_path / "index")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_corpus_error_while_warming_up_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bad document found while the warm-up still runs stops the build with its own error
    once the warm-up's thread is free (the warm-up here ends when the corpus is read)."""
    read = threading.Event()

    def warm_until_read(rules: LinkageRules, readings: tuple[str, ...]) -> None:
        assert read.wait(60)

    def corpus() -> Iterator[tuple[int, str]]:
        yield from _documents(2000)
        read.set()
        yield 5, "a repeated id"

    monkeypatch.setattr(shards, "warm_kernels", warm_until_read)
    with pytest.raises(InputError, match=r"^duplicate document id 5 \(documents 6 and 2001\); ids must be unique$"):
        IndexBuilder(progress=False, memory_mb=64).build(corpus(), tmp_path / "index")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("cuts", [[], [0, 0, 5], [70_000, 70_001, 150_000], [1, 100_000, 199_999, 200_000]])
def test_group_of_parts_is_the_brute_force_grouping(threads: int, cuts: list[int]) -> None:
    """The pairs given in parts (some empty, cut anywhere) on any number of threads group as one sequence."""
    rng = np.random.default_rng(threads + len(cuts))
    count = 200_000
    distinct = rng.integers(0, 2**60, 30_000, dtype=np.uint64)
    keys = distinct[rng.zipf(1.2, count) % len(distinct)] | np.uint64(0xF << 60)  # shared top bits
    docs = np.sort(rng.integers(0, 3_000, count)).astype(np.uint32)
    bounds = [0, *cuts, count]
    unique, df, postings, pair_df = grouping.group(
        [keys[a:b] for a, b in zip(bounds, bounds[1:])], [docs[a:b] for a, b in zip(bounds, bounds[1:])], key_bits=60, threads=threads
    )
    pairs = sorted(set(zip(keys.tolist(), docs.tolist())))
    expected_unique = sorted({key for key, _ in pairs})
    frequency = {key: 0 for key in expected_unique}
    for key, _ in pairs:
        frequency[key] += 1
    assert unique.tolist() == expected_unique
    assert df.tolist() == [frequency[key] for key in expected_unique]
    assert postings.tolist() == [doc for _, doc in pairs]
    assert pair_df.tolist() == [frequency[key] for key in keys.tolist()]


def test_stream_built_on_dask_equals_the_threads_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A document stream tokenized on Dask workers: the warm-up runs there too, each task digests
    with its own hasher (the threads' shared one cannot be sent), and the bytes are the threads'."""
    pytest.importorskip("dask.distributed")
    monkeypatch.setattr(builder, "new_secret", lambda: bytes(range(32)))
    documents = [(n, f"document {n}: the farm near the river was sold, ünïcode and all. " * (n % 4 + 1)) for n in range(300)]
    rules = LinkageRules(max_n=4)
    IndexBuilder(rules, progress=False, shards=2, memory_mb=64).build(documents, tmp_path / "threads")
    IndexBuilder(rules, progress=False, shards=2, memory_mb=64, workers=2, dask=True).build(documents, tmp_path / "dask")
    tables = [json.loads((tmp_path / name / "manifest.json").read_text())["arrays"] for name in ("threads", "dask")]
    assert tables[0] == tables[1]
