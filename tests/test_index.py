"""The index and `analyze` against the naive SPEC reading; on-disk format and its failures."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import build_index, examples
import spec_oracle
from spacy_delink.linkage.ngrams import analyze
from spacy_delink.errors import IndexFormatError, InputError
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.linkage.tokenize import LinkageRules

from test_tokenization import texts


def result(index: CorpusIndex, text: str, k: int) -> dict[str, object]:
    analysis = analyze(index, text, k)
    return {
        "ngrams": sorted((o.start, o.end, o.support) for o in analysis.minimal()),
        "anonymity": analysis.anonymity(),
    }


CORPUS = [
    "The applicant's farm near the river Mura was sold.",
    "The applicant's farm was sold in 1994.",
    "The farm near the river was sold.",
]


def test_hand_worked_example(corpus_index: CorpusIndex) -> None:
    index = corpus_index
    text = "Her farm near the river Mura was sold."
    # df: "her" 0 | "farm near the river" 2 (docs 0, 2) | "river mura" 1 (doc 0) | "mura" 1
    # k=2: minimal linkable = "Mura" (df 1); "river Mura" contains it; anonymity 1.
    expected_mura = (text.index("Mura"), text.index("Mura") + 4, 1)
    assert result(index, text, 2) == {"ngrams": [expected_mura], "anonymity": 1}
    # k=3: unigram df: farm 3, near 2 (d0, d2), the 3, river 2 (d0, d2), Mura 1, was 3, sold 3.
    # "farm near" (df 2) contains "near", "the river" contains "river": not minimal.
    minimal = result(index, text, 3)["ngrams"]
    spans = {text[s:e]: df for s, e, df in minimal}
    assert spans == {"near": 2, "river": 2, "Mura": 1}
    assert result(index, text, 3)["anonymity"] == 1


def test_df_zero_is_not_linkable(corpus_index: CorpusIndex) -> None:
    assert result(corpus_index, "Completely unrelated words", 2) == {"ngrams": [], "anonymity": None}


def test_documents_and_postings(corpus_index: CorpusIndex) -> None:
    index = corpus_index
    tokens, digests = index.tokenize("farm")
    level = index.levels[1]
    row = int(level.lookup(digests)[0][0])
    assert [index.doc_ids[d] for d in level.documents(row)] == ["d0", "d1", "d2"]
    assert index.documents == 3 and index.tokens == sum(len(spec_oracle.tokenize(t)[0]) for t in CORPUS)


@settings(max_examples=examples(120), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpus=st.lists(texts(), min_size=1, max_size=6),
    query=texts(),
    max_n=st.integers(min_value=1, max_value=4),
    data=st.data(),
)
def test_matches_brute_force_for_every_k(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], query: str, max_n: int, data: st.DataObject
) -> None:
    assume(any(spec_oracle.tokenize(t)[0] for t in corpus))  # a corpus without tokens proves nothing
    tmp = tmp_path_factory.mktemp("idx")
    index = build_index(tmp, corpus, max_n=max_n)
    # Queries drawn from the corpus itself exercise the frequent and the rare side.
    text = data.draw(st.sampled_from([query, *corpus, " ".join(corpus)]))
    for k in range(2, len(corpus) + 2):
        expected = spec_oracle.assess(corpus, text, k, max_n)
        assert result(index, text, k) == expected, f"k={k}"


def test_reduction_is_lossless_on_a_repetitive_corpus(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    vocab = ["a", "b", "c", "d", "e", "f"]
    corpus = [" ".join(rng.choice(vocab, size=40)) for _ in range(12)]
    index = build_index(tmp_path, corpus, max_n=5)
    for text in corpus[:4] + [" ".join(rng.choice(vocab, size=60))]:
        for k in (2, 3, 5, 13):
            assert result(index, text, k) == spec_oracle.assess(corpus, text, k, 5)


def _df_distribution(index: CorpusIndex, n: int) -> list[int]:
    level = index.levels[n]
    return sorted(len(level.documents(row)) for row in range(len(level)))


def test_partitions_shards_and_spilled_work_give_the_same_index(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(300)]
    corpus = [" ".join(rng.choice(vocab, size=400)) for _ in range(40)]
    in_memory = build_index(tmp_path / "a", corpus, max_n=4)
    assert in_memory.shard_bits == 0
    builder = IndexBuilder(LinkageRules(max_n=4), memory_mb=64, progress=False)
    builder.memory_bytes = 200_000  # several partitions, 16 shards, work arrays spilled to files
    summary = builder.build([(f"d{i}", t) for i, t in enumerate(corpus)], tmp_path / "b" / "index")
    assert summary.partitions > 1 and summary.shards > 1
    spilled = CorpusIndex(tmp_path / "b" / "index")
    for n in range(1, 5):
        # Each build draws its own secret, so compare what the keys carry: df distributions.
        assert _df_distribution(in_memory, n) == _df_distribution(spilled, n)
    for text in corpus[5:8]:
        assert result(spilled, text, 3) == result(in_memory, text, 3) == spec_oracle.assess(corpus, text, 3, 4)


def test_no_plaintext_in_the_index(tmp_path: Path) -> None:
    secret_word = "Zwieselstein"
    build_index(tmp_path, [f"The farm of {secret_word} near the river.", "Another farm near the river."])
    for file in (tmp_path / "index").iterdir():
        data = file.read_bytes()
        assert secret_word.lower().encode() not in data.lower(), file.name
        assert b"farm" not in data.lower(), file.name


def test_key_file_is_separate_and_required(tmp_path: Path) -> None:
    build_index(tmp_path, CORPUS)
    key = tmp_path / "index.key"
    assert key.exists() and not (tmp_path / "index" / "index.key").exists()
    assert oct(key.stat().st_mode & 0o777) == "0o600"
    moved = tmp_path / "elsewhere.key"
    key.rename(moved)
    with pytest.raises(IndexFormatError, match="key file"):
        CorpusIndex(tmp_path / "index")
    assert CorpusIndex(tmp_path / "index", key_file=moved).documents == 3
    other = tmp_path / "other"
    IndexBuilder(progress=False).build([("x", "some text")], other)
    with pytest.raises(IndexFormatError, match="does not belong"):
        CorpusIndex(tmp_path / "index", key_file=tmp_path / "other.key")


def test_key_file_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DELINK_KEY_FILE", str(tmp_path / "secret.key"))
    IndexBuilder(progress=False).build([("x", "some text")], tmp_path / "index")
    assert (tmp_path / "secret.key").exists()
    assert CorpusIndex(tmp_path / "index").documents == 1


def test_truncated_corrupted_newer_and_missing(tmp_path: Path) -> None:
    build_index(tmp_path, CORPUS)
    path = tmp_path / "index"
    pristine = tmp_path / "pristine"
    shutil.copytree(path, pristine)

    keys = path / "shard-0000.level-1.ef"
    keys.write_bytes(keys.read_bytes()[:-3])
    with pytest.raises(IndexFormatError, match="truncated"):
        CorpusIndex(path)

    shutil.rmtree(path)
    shutil.copytree(pristine, path)
    data = bytearray(keys.read_bytes())
    data[5] ^= 0xFF
    keys.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="checksum"):
        CorpusIndex(path)
    CorpusIndex(path, verify=False)  # the fast path skips the checksum pass

    shutil.rmtree(path)
    shutil.copytree(pristine, path)
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["format_version"] = 99
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="newer"):
        CorpusIndex(path)

    (path / "manifest.json").unlink()
    with pytest.raises(IndexFormatError, match="manifest.json"):
        CorpusIndex(path)
    with pytest.raises(IndexFormatError, match="not an index directory"):
        CorpusIndex(tmp_path / "nowhere")


def test_other_rules_are_refused(tmp_path: Path) -> None:
    index = build_index(tmp_path, CORPUS, max_n=3)
    index.check_rules(LinkageRules(max_n=2))
    with pytest.raises(InputError, match="rules differ"):
        index.check_rules(LinkageRules(max_n=5))
    with pytest.raises(InputError, match="rules differ"):
        index.check_rules(LinkageRules(max_n=3, casefold=False))


def test_bad_corpora(tmp_path: Path) -> None:
    builder = IndexBuilder(progress=False)
    with pytest.raises(InputError, match="no documents"):
        builder.build([], tmp_path / "a")
    with pytest.raises(InputError, match="no tokens"):
        builder.build([("a", ""), ("b", " ... ")], tmp_path / "b")
    with pytest.raises(InputError, match="duplicate document id"):
        builder.build([("a", "x"), ("a", "y")], tmp_path / "c")
    assert not any(p.name.startswith((".a", ".b", ".c")) for p in tmp_path.iterdir()), "partial index left behind"
    assert not (tmp_path / "a").exists()
    with pytest.raises(InputError, match="k must be"):
        analyze(build_index(tmp_path, CORPUS), "text", 1)


def test_empty_documents_count_but_add_nothing(tmp_path: Path) -> None:
    index = build_index(tmp_path, ["", "farm near the river", "   "])
    assert index.documents == 3
    assert result(index, "farm", 2)["anonymity"] == 1
