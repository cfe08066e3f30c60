"""Incremental updates and compaction (issue 14): an updated index answers as a fresh build.

The reference is always a fresh, updatable build of the union under the same secret and
shard count, so two indexes can be compared key by key: every level's stored n-grams
with their posting lists must be equal, and so must every query's record (supports,
linkable n-grams, combinations, anonymity) and, at arity 1, the SPEC's brute force.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spec_oracle
from spacy_delink.errors import IndexFormatError, InputError
from spacy_delink.linkage.attack import assess_text
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder, builder, open_index
from spacy_delink.linkage.index.commit import build_lock
from spacy_delink.linkage.index.format import BASE_FORMAT_VERSION, FORMAT_VERSION
from spacy_delink.linkage.index.update import compact_index, update_index
from spacy_delink.linkage.tokenize import LinkageRules
from conftest import Outcome, examples
from test_index_integrity import KILLED, _die_at

SECRET = bytes(range(32))
RULES = LinkageRules(max_n=4)
Corpus = list[tuple[Any, str]]


@pytest.fixture(autouse=True)
def fixed_secret(monkeypatch: pytest.MonkeyPatch) -> bytes:
    """Builds draw this secret, so that an updated index and a fresh build share their keys."""
    monkeypatch.setattr(builder, "new_secret", lambda: SECRET)
    return SECRET


def build(out: Path, corpus: Corpus, shards: int = 2, updatable: bool = True, **kwargs: Any) -> None:
    IndexBuilder(RULES, progress=False, shards=shards, updatable=updatable).build(corpus, out, **kwargs)


def stored(index: CorpusIndex) -> dict[int, dict[int, tuple[int, ...]]]:
    """Every level's stored n-grams: key → documents (the row numbers themselves may differ)."""
    return {
        n: {int(key): tuple(level.documents(row).tolist()) for row, key in enumerate(level.keys_by_row().tolist())}
        for n, level in index.levels.items()
    }


def records(index: CorpusIndex, texts: list[str], k: int, arity: int) -> list[dict[str, Any]]:
    return [assess_text(index, i, text, k, arity) for i, text in enumerate(texts)]


def arrays(index: Path) -> dict[str, Any]:
    return json.loads((index / "manifest.json").read_text())["arrays"]


def _random_corpus(rng: np.random.Generator, documents: int) -> Corpus:
    """Short texts over a tiny vocabulary: many shared n-grams, many of df 1, some breaks."""
    words = ["a", "b", "c", "d", "e", "farm", "river"]
    texts = []
    for _ in range(documents):
        parts = [" ".join(rng.choice(words, size=int(rng.integers(1, 7)))) for _ in range(int(rng.integers(1, 3)))]
        texts.append(". ".join(parts))
    return [(f"d{i}", text) for i, text in enumerate(texts)]


# --- exactness --------------------------------------------------------------------------


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), documents=st.integers(2, 9), data=st.data())
def test_updates_answer_as_a_fresh_build_of_the_union(
    tmp_path_factory: pytest.TempPathFactory, seed: int, documents: int, data: st.DataObject
) -> None:
    rng = np.random.default_rng(seed)
    corpus = _random_corpus(rng, documents)
    cuts = sorted(data.draw(st.sets(st.integers(1, documents - 1), min_size=1, max_size=min(2, documents - 1))))
    shards = data.draw(st.sampled_from([1, 2, 4]))
    tmp = tmp_path_factory.mktemp("update")
    build(tmp / "updated", corpus[: cuts[0]], shards)
    for start, stop in zip(cuts, [*cuts[1:], documents]):
        update_index(tmp / "updated", corpus[start:stop])
    build(tmp / "fresh", corpus, shards)
    updated, fresh = CorpusIndex(tmp / "updated"), CorpusIndex(tmp / "fresh")
    assert len(updated.deltas) == len(cuts) and updated.manifest["format_version"] == FORMAT_VERSION
    assert stored(updated) == stored(fresh)
    assert (updated.documents, updated.tokens, updated.doc_ids) == (fresh.documents, fresh.tokens, fresh.doc_ids)
    texts = [text for _, text in corpus[:3]] + [" ".join(text for _, text in corpus[-2:]), "farm river a b c d e"]
    for k in range(2, 6):
        for text in texts:
            for reading in ("exact", "search"):
                assert spec_oracle.assess([t for _, t in corpus], text, k, RULES.max_n, reading=reading) == _arity1(updated, text, k, reading)
        for arity in (1, 2, 3):
            assert records(updated, texts, k, arity) == records(fresh, texts, k, arity)


def _arity1(index: CorpusIndex, text: str, k: int, reading: str) -> dict[str, Any]:
    """What ``spec_oracle.assess`` answers, under one reading."""
    from spacy_delink.linkage.ngrams import analyze

    analysis = analyze(index, text, k, reading=reading)
    return {"ngrams": sorted((o.start, o.end, o.support) for o in analysis.minimal()), "anonymity": analysis.anonymity()}


def test_an_ngram_the_base_never_counted_gets_its_base_document(tmp_path: Path) -> None:
    """The hard case: "quiet farm" was not stored (df_B(quiet) = 1), so its base document is only in the text."""
    base = [("a", "the quiet farm near the river"), ("b", "the farm near the river"), ("c", "a farm")]
    build(tmp_path / "index", base)
    index = CorpusIndex(tmp_path / "index")
    two = index.tokenize("quiet farm")[1]
    from spacy_delink.linkage.index.hashing import extend

    key = extend(two[:1], two[1:])
    assert index.levels[2].lookup(key)[0][0] == -1  # not stored: its prefix occurs in one document
    update_index(tmp_path / "index", [("d", "a quiet farm")])
    updated = CorpusIndex(tmp_path / "index")
    rows, df = updated.levels[2].lookup(key)
    assert df.tolist() == [2] and updated.levels[2].documents(int(rows[0])).tolist() == [0, 3]
    assert assess_text(updated, "q", "quiet farm", k=3)["anonymity"] == 2  # a naive sum of deltas says 1
    build(tmp_path / "fresh", base + [("d", "a quiet farm")])
    assert stored(updated) == stored(CorpusIndex(tmp_path / "fresh"))


def test_update_then_compact_equals_a_fresh_build_byte_for_byte(tmp_path: Path) -> None:
    corpus = _random_corpus(np.random.default_rng(7), 30)
    build(tmp_path / "index", corpus[:12], shards=4)
    update_index(tmp_path / "index", corpus[12:20])
    update_index(tmp_path / "index", corpus[20:])
    summary = compact_index(tmp_path / "index", shards=4, progress=False)
    build(tmp_path / "fresh", corpus, shards=4)
    assert arrays(tmp_path / "index") == arrays(tmp_path / "fresh")  # every file's size and SHA-256
    compacted = CorpusIndex(tmp_path / "index")
    assert compacted.manifest["format_version"] == BASE_FORMAT_VERSION and not compacted.deltas and summary.documents == 30
    assert compacted.doc_ids == [doc_id for doc_id, _ in corpus]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh", "fresh.ids.json", "fresh.key", "index", "index.ids.json", "index.key"]
    # The compacted index is updatable again.
    update_index(tmp_path / "index", [("late", "a farm near the river")])
    assert CorpusIndex(tmp_path / "index").documents == 31


def test_compacting_an_index_without_deltas_changes_nothing(tmp_path: Path) -> None:
    build(tmp_path / "index", _random_corpus(np.random.default_rng(1), 5))
    before = (tmp_path / "index" / "manifest.json").read_bytes()
    summary = compact_index(tmp_path / "index", progress=False)
    assert any("nothing to compact" in note for note in summary.notes)
    assert (tmp_path / "index" / "manifest.json").read_bytes() == before


def test_external_ids_are_updated_and_compacted_too(tmp_path: Path) -> None:
    corpus = _random_corpus(np.random.default_rng(3), 8)
    build(tmp_path / "index", corpus[:5], doc_ids="external")
    update_index(tmp_path / "index", corpus[5:])
    assert CorpusIndex(tmp_path / "index").document_number("d6") == 6
    with pytest.raises(InputError, match="already in index"):
        update_index(tmp_path / "index", [("d2", "again")])
    compact_index(tmp_path / "index", shards=2, progress=False)
    build(tmp_path / "fresh", corpus, doc_ids="external")
    assert arrays(tmp_path / "index") == arrays(tmp_path / "fresh")
    assert not (tmp_path / "index.ids.json").exists()


# --- refusals ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("new", "message"),
    [
        ([("x", "one"), ("b", "two")], "document id 'b' .new document 2. is already in index"),
        ([("x", "one"), ("y", "two"), ("x", "three")], "duplicate document id 'x' .new documents 1 and 3."),
        ([], "the update has no documents"),
    ],
)
def test_duplicate_ids_are_refused_before_any_work(tmp_path: Path, new: Corpus, message: str) -> None:
    build(tmp_path / "index", [("a", "the farm"), ("b", "the river")])
    before = {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(InputError, match=message):
        update_index(tmp_path / "index", new)
    assert {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_an_index_built_without_a_forward_store_says_how_to_make_one(tmp_path: Path) -> None:
    build(tmp_path / "index", [("a", "the farm"), ("b", "the river")], updatable=False)
    for action in (lambda: update_index(tmp_path / "index", [("c", "x")]), lambda: compact_index(tmp_path / "index")):
        with pytest.raises(InputError, match="built without a forward store.*--updatable --overwrite"):
            action()


def test_a_corrupted_or_missing_delta_is_detected_on_open(tmp_path: Path) -> None:
    build(tmp_path / "index", [("a", "the farm near the river"), ("b", "the farm")])
    update_index(tmp_path / "index", [("c", "the farm near the mill")])
    delta = tmp_path / "index" / "delta-0001"
    pristine = tmp_path / "pristine"
    shutil.copytree(delta, pristine)
    data = bytearray((delta / "level-2.ef").read_bytes())
    data[len(data) // 2] ^= 0x04
    (delta / "level-2.ef").write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="checksum mismatch in delta-0001/level-2.ef"):
        CorpusIndex(tmp_path / "index")
    (delta / "forward.rows").unlink()
    with pytest.raises(IndexFormatError, match="delta-0001/forward.rows is missing"):
        CorpusIndex(tmp_path / "index", verify=False)
    shutil.rmtree(delta)
    shutil.copytree(pristine, delta)
    CorpusIndex(tmp_path / "index")
    manifest_path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["deltas"][0]["first_document"] = 1  # renumber the delta's documents
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="fails authentication"):
        CorpusIndex(tmp_path / "index")
    manifest["deltas"] = []  # hide the delta from a reader of the format with deltas
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match=f"'deltas' does not fit format {FORMAT_VERSION}"):
        CorpusIndex(tmp_path / "index")


# --- kills ------------------------------------------------------------------------------

BASE = [("a", "the quiet farm near the river"), ("b", "the farm near the river"), ("c", "a farm")]
NEW = [("d", "a quiet farm"), ("e", "the river near the mill")]


def _is_old_or_new(index: CorpusIndex, tmp: Path) -> None:
    """The index in place answers exactly as the base or as base + NEW, and its ids fit."""
    reference = tmp / ("ref-new" if index.documents == 5 else "ref-old")
    if not reference.exists():
        build(reference, BASE + NEW if index.documents == 5 else BASE)
    assert stored(index) == stored(CorpusIndex(reference))
    assert index.doc_ids == [doc_id for doc_id, _ in (BASE + NEW)[: index.documents]]


@pytest.mark.parametrize("operation", ["update", "compact"])
def test_a_kill_at_any_instant_leaves_a_usable_index(tmp_path: Path, operation: str) -> None:
    out = tmp_path / "work" / "index"
    refs = tmp_path / "refs"
    refs.mkdir()
    completed = False
    for step in range(1, 200):
        shutil.rmtree(out.parent, ignore_errors=True)
        build(out, BASE)
        if operation == "compact":
            update_index(out, NEW)
        action: Callable[[], object] = (lambda: update_index(out, NEW)) if operation == "update" else (lambda: compact_index(out, progress=False))
        code = _die_at(step, action)
        try:
            index = CorpusIndex(out)
        except IndexFormatError as err:  # a compaction between its directory's two renames
            assert operation == "compact" and "interrupted while replacing it" in str(err), (step, str(err))
        else:
            _is_old_or_new(index, refs)
        # The next operation cleans up whatever the kill left, and succeeds.
        if operation == "update":
            if CorpusIndex(out).documents == 3:
                update_index(out, NEW)
            else:  # killed after its commit point: the next writer only finds a lock file left
                with build_lock(out):
                    pass
        else:
            compact_index(out, progress=False)
        after = CorpusIndex(out)
        _is_old_or_new(after, refs)
        assert after.documents == 5 and sorted(p.name for p in out.parent.iterdir()) == ["index", "index.ids.json", "index.key"]
        assert sorted(p.name for p in out.iterdir() if p.is_dir()) == (["delta-0001"] if operation == "update" else [])
        if code == 0:
            completed = True
            break
        assert code == KILLED, f"the {operation} failed at step {step} instead of being killed"
    assert completed


def test_a_second_writer_is_refused_while_an_update_runs(tmp_path: Path) -> None:
    build(tmp_path / "index", BASE)
    with build_lock(tmp_path / "index"):
        with pytest.raises(InputError, match="another `delink index` is writing"):
            update_index(tmp_path / "index", NEW)


# --- readers and the command line -------------------------------------------------------


def test_open_index_sees_an_update_made_after_it_opened(tmp_path: Path) -> None:
    build(tmp_path / "index", BASE)
    first = open_index(tmp_path / "index")
    assert open_index(tmp_path / "index") is first
    update_index(tmp_path / "index", NEW)
    assert open_index(tmp_path / "index").documents == 5


def test_delink_index_update_and_compact_on_the_command_line(tmp_path: Path, delink: Callable[..., Outcome]) -> None:
    def jsonl(path: Path, corpus: Corpus) -> Path:
        path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in corpus), encoding="utf-8")
        return path

    base, new = jsonl(tmp_path / "base.jsonl", BASE), jsonl(tmp_path / "new.jsonl", NEW)
    out = tmp_path / "index"
    assert delink("index", base, "-o", out, "--max-n", 4, "--shards", 2, "--updatable").returncode == 0
    result = delink("index", "--update", out, new)
    assert result.returncode == 0 and "added 2 documents" in result.stderr and "delta-0001" in result.stderr
    again = delink("index", "--update", out, new)
    assert again.returncode == 1 and again.stderr_lines == [
        f"error: document id 'd' (new document 1) is already in index {out}; an update adds new documents only: "
        "drop it from the input, or rebuild the index to change a document"
    ]
    both = delink("index", "--update", out, new, "-o", tmp_path / "other")
    assert both.returncode == 1 and "--update adds to an existing index and takes no --output" in both.stderr
    assert delink("index", new).returncode == 1
    compacted = delink("compact", out, "--shards", 2)
    assert compacted.returncode == 0 and "compacted 5 documents" in compacted.stderr
    build(tmp_path / "fresh", BASE + NEW)
    assert arrays(out) == arrays(tmp_path / "fresh")


def test_the_forward_store_is_sealed_in_chunks_under_the_index_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In the clear, the rows would be the corpus under a word-substitution cipher; each read opens only its chunks."""
    from spacy_delink.linkage.index import forward, packing
    from spacy_delink.linkage.index.hashing import ForwardCipher

    rng = np.random.default_rng(2)
    words = [f"w{i}" for i in range(5000)]  # a vocabulary of 13-bit rows: 5 documents per 8 KiB chunk
    corpus = [(f"d{i}", " ".join(rng.choice(words, size=1000))) for i in range(40)]
    build(tmp_path / "index", corpus)
    index = CorpusIndex(tmp_path / "index")
    assert index.forward is not None and index.manifest["forward"]["cipher"] == "aes-256-gcm-siv/8KiB-chunks"
    segment = index.forward[0]
    rows, rem, _ = segment.tokens(0, index.documents)
    expected = [key for _, text in corpus for reading in index.readings for key in index.tokenize(text, reading)[1].tolist() if reading != "gap"]
    assert index.levels[1].keys_by_row()[rows].tolist() == expected  # each document's tokens under each reading in turn
    bits = index.manifest["forward"]["bits"]
    raw = np.fromfile(tmp_path / "index" / "forward.rows", dtype="<u8")
    plain_words = packing.packed_words(len(rows), bits)
    chunks = -(-plain_words // ForwardCipher.CHUNK_WORDS)
    assert chunks >= 4 and len(raw) == plain_words + 2 * chunks  # each chunk carries its 16-byte tag
    clear = forward.token_values(rows, rem)
    assert not np.array_equal(packing.unpack(raw, 0, len(clear), bits), clear)
    opened: list[int] = []
    unseal = ForwardCipher.unseal
    monkeypatch.setattr(ForwardCipher, "unseal", lambda self, chunk, sealed: opened.append(chunk) or unseal(self, chunk, sealed))
    for number in range(index.documents):
        opened.clear()
        one, _, _ = segment.tokens(number, number + 1)
        start = int(segment.offsets[number])
        assert np.array_equal(one, rows[start : start + len(one)])
        first_word, stop_word = start * bits // 64, packing.packed_words(start + len(one), bits)
        assert opened == list(range(first_word // ForwardCipher.CHUNK_WORDS, (stop_word - 1) // ForwardCipher.CHUNK_WORDS + 1))
    monkeypatch.setattr(builder, "new_secret", lambda: bytes(range(1, 33)))
    build(tmp_path / "other", corpus)
    assert (tmp_path / "other" / "forward.rows").read_bytes() != (tmp_path / "index" / "forward.rows").read_bytes()


def test_an_altered_forward_store_fails_its_tag(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    words = [f"w{i}" for i in range(5000)]
    build(tmp_path / "index", [(f"d{i}", " ".join(rng.choice(words, size=1000))) for i in range(20)])
    rows_file = tmp_path / "index" / "forward.rows"
    pristine = rows_file.read_bytes()
    data = bytearray(pristine)
    data[100] ^= 0x01
    rows_file.write_bytes(bytes(data))
    index = CorpusIndex(tmp_path / "index", verify=False)  # the checksums would catch it first
    assert index.forward is not None
    with pytest.raises(IndexFormatError, match=r"index .*index: forward\.rows: chunk 0 fails authentication: it was altered"):
        index.forward[0].tokens(0, 1)
    sealed = 8 * (1024 + 2)  # bytes of one sealed chunk: swapping two whole chunks fails too (each is bound to its place)
    rows_file.write_bytes(pristine[sealed : 2 * sealed] + pristine[:sealed] + pristine[2 * sealed :])
    with pytest.raises(IndexFormatError, match="chunk 0 fails authentication"):
        CorpusIndex(tmp_path / "index", verify=False).forward[0].tokens(0, 1)  # type: ignore[index]


def test_an_index_with_the_old_forward_store_is_refused_with_how_to_rebuild(tmp_path: Path) -> None:
    """Releases before AES-GCM-SIV wrote no ``forward.cipher`` (their store was a BLAKE2b keystream)."""
    from spacy_delink.linkage.index.format import sign

    build(tmp_path / "index", [("a", "the farm near the river"), ("b", "the farm")])
    manifest_path = tmp_path / "index" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    for cipher, message in [
        (None, r"index .*index was built with the old forward-store cipher .*; rebuild it with `delink index <corpus> -o .*index --updatable --overwrite`"),
        ("rot13/v9", "seals its forward store with 'rot13/v9', unknown to this spacy-delink; upgrade spacy-delink"),
    ]:
        old = {**manifest, "forward": {k: v for k, v in manifest["forward"].items() if k != "cipher"}}
        if cipher is not None:
            old["forward"]["cipher"] = cipher
        manifest_path.write_text(json.dumps(sign(old, SECRET)))
        for action in (
            lambda: CorpusIndex(tmp_path / "index"),
            lambda: update_index(tmp_path / "index", [("c", "x")]),
            lambda: compact_index(tmp_path / "index", progress=False),
        ):
            with pytest.raises(IndexFormatError, match=message):
                action()
    build(tmp_path / "plain", [("a", "the farm near the river"), ("b", "the farm")], updatable=False)
    assert CorpusIndex(tmp_path / "plain").forward is None  # plain indexes are untouched by the forward store's version