"""SPEC §8 for scripts written without spaces and for paragraph ends: hand-worked cases, the
brute-force oracle on random corpora, old indexes refused, never a silent pass, pipelines."""
from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path

import pytest
import spacy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import examples
import spec_oracle
from spacy_delink.errors import DelinkError, IndexFormatError
from spacy_delink.linkage.attack import assess_text, detect
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.linkage.ngrams import analyze
from spacy_delink.linkage.readings import DEFAULT_READINGS, UnreadScriptWarning
from spacy_delink.linkage.tokenize import LinkageRules, SearchTokenizer, Tokenizer
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from spacy_delink.rewrite.loop import RewriteLoop, RewriteResult


def build(tmp_path: Path, corpus: list[str], rules: LinkageRules | None = None, readings: tuple[str, ...] = DEFAULT_READINGS) -> CorpusIndex:
    out = tmp_path / "index"
    IndexBuilder(rules or LinkageRules(), progress=False, readings=readings).build(
        [(f"d{i}", text) for i, text in enumerate(corpus)], out, overwrite=True
    )
    return CorpusIndex(out)


def protect(index: CorpusIndex, text: str, k: int, arity: int, readings: tuple[str, ...] = DEFAULT_READINGS) -> RewriteResult:
    """The rewriter's own loop, masks only (``delink protect`` with the Mask model), under ``readings``."""
    loop = RewriteLoop(
        name="test", detect=lambda t, carried=(): detect(index, t, k, arity, readings=readings, carried=carried), task=make_rewrite_task(),
        vocab=spacy.blank("en").vocab, llm=None, max_passes=0, mask="[REDACTED]", granularity="token", stats=Counter(),
    )
    return loop.run([text])[0]


def search_tokens(text: str, rules: LinkageRules | None = None) -> tuple[list[str], list[bool]]:
    tokens = SearchTokenizer(rules).tokenize(text)
    return tokens.raw, tokens.segment_start.tolist()


# -- paragraph ends ----------------------------------------------------------------------------------


def test_paragraph_ends_join_under_the_search_reading_only() -> None:
    """The issue's example: an engine's field holds "rule 59 1 the facts in" across two paragraph ends."""
    text = "the merits (Rule 59 § 1).\n\nTHE FACTS\n\nIn 1990"
    raw, starts = search_tokens(text)
    assert raw == ["the", "merits", "Rule", "59", "1", "THE", "FACTS", "In", "1990"]
    assert starts == [True] + [False] * 8
    exact = Tokenizer().tokenize(text)
    assert exact.raw == raw
    assert exact.segment_start.tolist() == [True, False, True, False, False, True, False, True, False]


def test_a_phrase_across_paragraphs_is_linkable(tmp_path: Path) -> None:
    """Hand-worked: every word and pair of the text is in two documents or more; "59 1 the" and
    "1 the facts in" only in d0, each across a paragraph end (their sub-phrases are in two)."""
    corpus = [
        "the merits (Rule 59 § 1).\n\nTHE FACTS\n\nIn 1990 the applicant",
        "Rule 59 § 1 applies. the merits",
        "THE FACTS In 1990. the merits. Rule 59 § 1",
        "1 the facts; facts in 1990",
    ]
    index = build(tmp_path, corpus)
    text = "the merits (Rule 59 § 1).\n\nTHE FACTS\n\nIn 1990"
    found = analyze(index, text, 2, reading="search").minimal()
    assert [text[o.start : o.end] for o in found] == ["59 § 1).\n\nTHE", "1).\n\nTHE FACTS\n\nIn"]
    assert [(o.start, o.end, o.support) for o in found] == spec_oracle.assess(corpus, text, 2, 8, reading="search")["ngrams"]
    assert analyze(index, text, 2, reading="exact").minimal() == []


def test_batched_texts_never_join(tmp_path: Path) -> None:
    """tokenize_batch separates texts by a paragraph end, which no longer breaks: each text still starts a segment."""
    tokens, counts = SearchTokenizer().tokenize_batch(["alpha beta", "gamma 申请", "", "delta"])
    assert counts.tolist() == [2, 3, 0, 1]
    assert tokens.segment_start.tolist() == [True, False, True, False, False, True]
    corpus = ["one two", "three four", "two three"]
    index = build(tmp_path, corpus)
    assert analyze(index, "two three", 2, reading="search").minimal()[0].support == 1


# -- scripts written without spaces ------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("申请人张伟于1997年在萨瓦河", ["申", "请", "人", "张", "伟", "于", "1997", "年", "在", "萨", "瓦", "河"]),
        ("１９９７年", ["１９９７", "年"]),
        ("東京タワーへ行きました", ["東", "京", "タ", "ワ", "ー", "へ", "行", "き", "ま", "し", "た"]),
        ("ｶﾀｶﾅ", ["ｶ", "ﾀ", "ｶ", "ﾅ"]),
        ("서울에서 만났다", ["서", "울", "에", "서", "만", "났", "다"]),
        ("ภาษาไทย", ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]),
        ("ພາສາລາວ", ["ພ", "າ", "ສ", "າ", "ລ", "າ", "ວ"]),
        ("ភាសា", ["ភ", "ស"]),  # the search form drops vowel signs (combining marks)
        ("မြန်မာ", ["မ", "န", "မ"]),
        ("iPhone手机2023款", ["iPhone", "手", "机", "2023", "款"]),
        ("๑๙๙๗ปี", ["๑๙๙๗", "ป"]),  # a number is one token; the vowel sign is a mark
    ],
)
def test_each_character_is_a_search_token(text: str, tokens: list[str]) -> None:
    """Hand-worked: one token per character; digits and Latin words whole; no gap where the script changes."""
    raw, starts = search_tokens(text)
    assert raw == tokens
    assert starts == [True] + [False] * (len(raw) - 1)
    oracle, breaks = spec_oracle.search_tokenize(text)
    assert [text[t.start : t.end] for t in oracle] == raw and breaks == starts


def test_the_exact_reading_splits_characters_too(tmp_path: Path) -> None:
    """The search form reads 士 as its look-alike 土: "女士家" (one document) and "女土家" (another)
    are one search key of df 2; only the exact reading by character finds the phrase an
    engine without that mapping finds (SPEC §8: linkable under either reading)."""
    tokens = Tokenizer().tokenize("申请人张伟于1997年在萨瓦河。ที่ดิน")
    assert tokens.raw == ["申", "请", "人", "张", "伟", "于", "1997", "年", "在", "萨", "瓦", "河", "ที่", "ดิ", "น"]
    assert tokens.segment_start.tolist() == [True] + [False] * 14  # "。" is no break character of §1
    corpus = ["她是女士家的客人", "妇女土家族的村子", "女士们", "土家人", "博士家里"]
    index = build(tmp_path, corpus)
    text = "女士家"
    assert analyze(index, text, 2, reading="search").minimal() == []
    assert [(text[o.start : o.end], o.support) for o in analyze(index, text, 2, reading="exact").minimal()] == [("女士家", 1)]
    assert [(s, e, n) for s, e, n in spec_oracle.assess(corpus, text, 2, 8)["ngrams"]] == [(0, 3, 1)]


def test_max_n_chars_bounds_characters_and_max_n_the_other_tokens() -> None:
    """Hand-worked with max_n = 2, max_n_chars = 3: "a b c 日本語です x y z"."""
    tokens = SearchTokenizer(LinkageRules(max_n=2, max_n_chars=3)).tokenize("a b c 日本語です x y z")
    assert tokens.raw == ["a", "b", "c", "日", "本", "語", "で", "す", "x", "y", "z"]
    # b c 日 本 語 (2 words, 3 characters); 語 で す x y; x y (a third word is too many)
    assert tokens.remaining.tolist() == [2, 5, 4, 3, 3, 5, 4, 3, 2, 2, 1]
    assert Tokenizer(LinkageRules(max_n=2)).tokenize("a b c d").remaining.tolist() == [2, 2, 2, 1]


def test_the_issue_example_is_linkable_and_protect_ends_it(tmp_path: Path) -> None:
    """Issue 34: "萨瓦河" occurs in one document only; the release was called protected unchanged."""
    source = "申请人张伟于1997年在萨瓦河附近登记了农场。"
    corpus = [source] + [
        f"申请人李{name}于199{i}年在{place}附近登记了农场。政府对申请的可受理性提出异议。"
        for i, (name, place) in enumerate(zip("明华强军红", ["长江", "黄河", "珠江", "淮河", "汉江"]))
    ]
    index = build(tmp_path, corpus)
    release = "申请人[PERSON]于1997年在萨瓦河附近登记了农场。政府对申请的可受理性提出异议。"
    record = assess_text(index, "r", release, 2)
    assert record["anonymity"] == 1 and record["unread_scripts"] == []
    assert {n["text"] for n in record["ngrams"]} >= {"萨"}
    assert not detect(index, release, 2, 3).protected
    assert not spec_oracle.protected(corpus, release, 2, 8, 3)
    result = protect(index, release, 2, 3)
    assert result.protected and "萨" not in result.text
    assert spec_oracle.protected(corpus, result.text, 2, 8, 3)


# -- the brute-force reference on random corpora --------------------------------------------------------

PIECES = ["申", "请", "人", "年", "河", "萨", "瓦", "東京", "タワー", "へ", "서울", "에서", "ภาษา", "ไทย", "ລາວ", "ភាសា", "မြန်",
          "alpha", "beta", "1997", "２０", "李"]
SEPARATORS = ["", "", "", " ", "。", "，", "\n\n", " [PERSON] ", "[LOC]", "\n \n", "-"]


@st.composite
def mixed_texts(draw: st.DrawFn) -> str:
    pieces = draw(st.lists(st.sampled_from(PIECES), min_size=0, max_size=10))
    return "".join(piece + draw(st.sampled_from(SEPARATORS)) for piece in pieces)


@settings(max_examples=examples(40), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(mixed_texts(), min_size=1, max_size=5), query=mixed_texts(), data=st.data())
def test_search_reading_matches_brute_force_with_scripts(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], query: str, data: st.DataObject
) -> None:
    assume(any(spec_oracle.tokenize(t)[0] for t in corpus))  # something to index
    max_n, max_n_chars = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 5))
    index = build(tmp_path_factory.mktemp("idx"), corpus, LinkageRules(max_n=max_n, max_n_chars=max_n_chars))
    text = data.draw(st.sampled_from([query, *corpus, "".join(corpus)]))
    for k in range(2, len(corpus) + 2):
        found = analyze(index, text, k, reading="search")
        expected = spec_oracle.assess(corpus, text, k, max_n, reading="search", max_n_chars=max_n_chars)
        assert ([(o.start, o.end, o.support) for o in found.minimal()], found.anonymity()) == (
            expected["ngrams"], expected["anonymity"]
        ), (k, max_n, max_n_chars)


@settings(max_examples=examples(25), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=st.lists(mixed_texts(), min_size=2, max_size=5), data=st.data())
def test_detection_and_protection_match_brute_force_with_scripts(
    tmp_path_factory: pytest.TempPathFactory, corpus: list[str], data: st.DataObject
) -> None:
    assume(any(spec_oracle.tokenize(t)[0] for t in corpus))  # something to index
    index = build(tmp_path_factory.mktemp("idx"), corpus, LinkageRules(max_n=3))
    text = data.draw(st.sampled_from([*corpus, "".join(corpus[:3])]))
    k, arity = data.draw(st.integers(2, 3)), data.draw(st.sampled_from([1, 2, 3]))
    assert detect(index, text, k, arity).protected == spec_oracle.protected(corpus, text, k, 3, arity, readings=DEFAULT_READINGS)
    result = protect(index, text, k, arity)
    assert result.protected and spec_oracle.protected(corpus, result.text, k, 3, arity)


# -- indexes built before, and never a silent pass -----------------------------------------------------


def test_an_index_of_the_old_search_reading_is_refused(tmp_path: Path) -> None:
    index = build(tmp_path, ["alpha beta", "beta gamma"])
    manifest_path = index.path / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["readings"]["search"]["version"]
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match=r"older search reading \(version 1.*paragraph ends.*rebuild it with `delink index"):
        CorpusIndex(index.path)


def test_an_index_built_before_never_calls_chinese_text_protected(tmp_path: Path) -> None:
    """An exact-only index of an earlier release (no reading version) read Chinese as whole runs."""
    from spacy_delink.linkage.index.format import sign
    from spacy_delink.linkage.index.keys import KeyFile

    corpus = ["申请人张伟于1997年在萨瓦河附近登记了农场。", "政府对申请的可受理性提出异议。"]
    index = build(tmp_path, corpus, readings=("exact",))
    manifest = dict(index.manifest)
    manifest["readings"] = {"exact": {"tokens": manifest["readings"]["exact"]["tokens"]}}  # as built before
    (index.path / "manifest.json").write_text(json.dumps(sign(manifest, KeyFile(index.key_path).secret(manifest["key_id"]))))
    index = CorpusIndex(index.path)
    text = "政府对此提出异议。"  # one exact token that no document holds: nothing is linkable under that reading
    with pytest.warns(UnreadScriptWarning, match=r"Han letters, which the exact reading reads only as whole runs.*rebuild the index"):
        record = assess_text(index, "r", text, 2, readings=("exact",))
    assert record["unread_scripts"] == ["Han"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnreadScriptWarning)
        detection = detect(index, text, 2, 3, readings=("exact",))
        assert detection.unread_scripts == ["Han"] and not detection.protected
        with pytest.raises(DelinkError, match="Han letters.*not reported protected"):
            protect(index, text, 2, 3, ("exact",))


def test_a_script_no_reading_splits_is_never_protected(tmp_path: Path) -> None:
    """Yi is written without spaces and no reading splits it: named, never protected, under both readings."""
    index = build(tmp_path, ["ꆈꌠꁱꂷ", "alpha beta"])
    with pytest.warns(UnreadScriptWarning, match=r"Yi letters.*review such text by hand"):
        detection = detect(index, "ꆈꌠꁱꂷ alpha", 2)
    assert detection.unread_scripts == ["Yi"] and not detection.protected
    assert detect(index, "申请 alpha", 2).unread_scripts == []


# -- pipelines in those languages ----------------------------------------------------------------------

ZH_SOURCE = "申请人张伟于1997年在萨瓦河附近登记了农场。"
ZH_CORPUS = [ZH_SOURCE] + [
    f"申请人李{name}于199{i}年在{place}附近登记了农场。政府对申请的可受理性提出异议。"
    for i, (name, place) in enumerate(zip("明华强军红", ["长江", "黄河", "珠江", "淮河", "汉江"]))
]
ZH_RELEASE = "申请人[PERSON]于1997年在萨瓦河附近登记了农场。政府对申请的可受理性提出异议。"
TH_CORPUS = ["นายสมชายซื้อที่ดินใกล้แม่น้ำปิงในปี 1997", "นายสมศักดิ์ซื้อที่ดินใกล้แม่น้ำน่าน", "นายสมพงษ์ซื้อที่ดินใกล้แม่น้ำยม"]
TH_RELEASE = "นาย[PERSON]ซื้อที่ดินใกล้แม่น้ำปิงในปี 1997"
KO_CORPUS = ["김민수는 1997년 사바강 근처에 농장을 등록했다.", "이영희는 한강 근처에 농장을 등록했다.", "박철수는 낙동강 근처에 농장을 등록했다."]
KO_RELEASE = "[PERSON]는 1997년 사바강 근처에 농장을 등록했다."


def blank(language: str, segmenter: str | None) -> spacy.language.Language:
    """A blank pipeline; Thai needs PyThaiNLP and Korean's default tokenizer mecab-ko, whose
    place spaCy's rule-based tokenizer takes here (docs/languages.md)."""
    if language == "th":
        pytest.importorskip("pythainlp", reason="spaCy's Thai tokenizer needs PyThaiNLP (pip install pythainlp)")
    if segmenter == "jieba":
        pytest.importorskip("jieba", reason="the jieba segmenter needs jieba (pip install jieba)")
    if language == "ko":
        return spacy.blank("ko", config={"nlp": {"tokenizer": {"@tokenizers": "spacy.Tokenizer.v1"}}})
    if segmenter is not None:
        return spacy.blank(language, config={"nlp": {"tokenizer": {"segmenter": segmenter}}})
    return spacy.blank(language)


@pytest.mark.parametrize(
    "language, segmenter, corpus, release",
    [
        ("zh", "char", ZH_CORPUS, ZH_RELEASE),
        ("zh", "jieba", ZH_CORPUS, ZH_RELEASE),
        ("th", None, TH_CORPUS, TH_RELEASE),
        ("ko", None, KO_CORPUS, KO_RELEASE),
    ],
)
def test_pipelines_put_spans_on_the_linkable_characters(
    tmp_path: Path, language: str, segmenter: str | None, corpus: list[str], release: str
) -> None:
    """Whatever spaCy's segmentation, each linkable range is covered by the fewest whole tokens
    around it (exactly its characters when the tokens are characters), and the rewriter ends them."""
    index = build(tmp_path, corpus)
    nlp = blank(language, segmenter)
    nlp.add_pipe("delink_risk", config={"index": str(index.path), "k": 2})
    nlp.add_pipe("delink_combinations", config={"index": str(index.path), "k": 2, "arity": 2})
    doc = nlp(release)
    assert doc.text == release
    expected = sorted(
        {(s, e) for reading in ("exact", "search") for s, e, _ in spec_oracle.assess(corpus, release, 2, 8, reading=reading)["ngrams"]}
        | {(s, e) for s, e, *_ in spec_oracle.assess_gap(corpus, release, 2, 8)["minimal"]}  # bridges around the mask (SPEC §9)
    )
    assert expected and doc._.delink_anonymity == 1
    starts = [t.idx for t in doc]
    ends = [t.idx + len(t) for t in doc]
    covers = sorted({
        (max(s for s in starts if s <= start), min(e for e in ends if e >= end)) for start, end in expected
    })
    assert sorted({(span.start_char, span.end_char) for span in doc.spans["linkable"]}) == covers
    if segmenter == "char":  # one token per character: the spans are the linkable characters themselves
        assert any(release[s:e] == "萨" for s, e in covers)
    rewriter = blank(language, segmenter)
    rewriter.add_pipe("delink_rewriter", config={"index": str(index.path), "k": 2, "arity": 3})
    rewritten = rewriter(release)
    assert rewritten._.delink_protected is True
    assert spec_oracle.protected(corpus, rewritten.text, 2, 8, 3)


# -- updates ---------------------------------------------------------------------------------------------


def test_updates_and_compaction_hold_the_character_levels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An updatable index of Chinese text stores max_n + max_n_chars levels; an update and a
    compaction store exactly what a build of all the documents stores."""
    from spacy_delink.linkage.index import builder
    from spacy_delink.linkage.index.update import compact_index, update_index
    from test_index_update import SECRET, stored

    monkeypatch.setattr(builder, "new_secret", lambda: SECRET)  # the updated index and the fresh build share their keys
    rules = LinkageRules(max_n=3, max_n_chars=4)
    base = [(f"d{i}", text) for i, text in enumerate(ZH_CORPUS[:3])]
    new = [(f"n{i}", text) for i, text in enumerate([ZH_SOURCE + "政府对申请的可受理性", "萨瓦河附近登记了农场 farm"])]
    for name, documents in (("updated", base), ("all", base + new)):
        IndexBuilder(rules, progress=False, updatable=True, shards=2).build(documents, tmp_path / name)
    update_index(tmp_path / "updated", new)
    updated, fresh = CorpusIndex(tmp_path / "updated"), CorpusIndex(tmp_path / "all")
    assert updated.max_tokens == fresh.max_tokens == 7
    assert stored(updated) == stored(fresh)
    compact_index(tmp_path / "updated", progress=False)
    assert stored(CorpusIndex(tmp_path / "updated")) == stored(fresh)


def test_an_update_that_needs_more_levels_is_refused(tmp_path: Path) -> None:
    from spacy_delink.errors import InputError
    from spacy_delink.linkage.index.update import update_index

    IndexBuilder(LinkageRules(), progress=False, updatable=True).build([("a", "the farm near the river"), ("b", "a farm")], tmp_path / "index")
    assert CorpusIndex(tmp_path / "index").max_tokens == 8  # English: the levels of max_n only
    with pytest.raises(InputError, match=r"n-grams of up to 17 tokens.*stores 8 levels; rebuild it with all the documents"):
        update_index(tmp_path / "index", [("c", ZH_SOURCE)])
    assert CorpusIndex(tmp_path / "index").documents == 2
