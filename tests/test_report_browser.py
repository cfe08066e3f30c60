"""The HTML reports in a real browser (headless Chromium through chromedriver).

What a person sees: the settings line, the warnings, the assess report's ranked table and
plot, the summary, the legend, coloured spans with tooltips, combinations listed by group
that outline their phrases when selected, the before/after view with the edits marked, and
document text and ids containing markup shown as text, never run. Screenshots at desktop
and phone width are saved under the test's tmp dir (``screenshots/``) for a person to look at.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

import srsly

from spacy_delink.evaluate.assess import assess_document
from spacy_delink.evaluate.job import evaluate_to_folder
from spacy_delink.evaluate.settings import EvaluationSettings
from spacy_delink.evaluate.assess_page import RANKED_COLUMNS, DocumentRisk, write_html_report
from spacy_delink.pages.markup import DOCS_PER_PAGE, ReportSettings, combination_counts
from spacy_delink.linkage.attack import assess_text
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.linkage.tokenize import LinkageRules

from conftest import shared_path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
HOSTILE_ID = '<img src=x onerror="document.body.setAttribute(\'data-pwned\', \'id\')">'
HOSTILE_TEXT = (
    "The farmer keeps bees near the river. <script>document.body.setAttribute('data-pwned', 'text')</script> "
    "He sold honey & wax in <b>Murska</b> Sobota."
)
ORIGINALS = [
    (HOSTILE_ID, HOSTILE_TEXT),
    ("b", "The farmer keeps goats near the lake. He sold cheese in Maribor."),
    ("c", "The baker sells bread near the river. She sold cakes in Celje."),
    ("d", "The baker sells cakes near the lake. She sold bread in Ptuj."),
]
DEIDENTIFIED = HOSTILE_TEXT.replace("Murska</b> Sobota", "[LOCATION]</b>")
REPO = Path(__file__).resolve().parents[1]
#: Semantic linkage after protection as a fake model reports it: high enough for the warning.
SEMANTIC_AFTER = {"top1": 0.5, "top10": 1.0, "mean_rank": 1.5, "median_rank": 1.5}
#: The assess template's page-1 block for no documents (the size test counts the documents' bytes alone).
EMPTY_SUMMARY: dict[str, Any] = {
    "summary": {"documents": 0, "linkable": 0, "skipped": 0}, "columns": RANKED_COLUMNS, "ranked": [], "plot_png": None,
    "plot_missing": "", "distribution": [],
}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("headless Chromium is not installed (Debian: apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install 'spacy-delink[test]')")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def evaluation_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("report")
    IndexBuilder(LinkageRules()).build(iter(ORIGINALS), tmp / "index")
    original = tmp / "original.jsonl"
    original.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in ORIGINALS), encoding="utf-8")
    deidentified = tmp / "deid.jsonl"
    deidentified.write_text(json.dumps({"id": HOSTILE_ID, "text": DEIDENTIFIED}) + "\n", encoding="utf-8")
    # A protected version: one word masked, one phrase rewritten (edits as `delink protect` writes them).
    masked = DEIDENTIFIED.replace("bees", "[REDACTED]", 1)
    protected_text = masked.replace("near the river", "by the water", 1)
    start = DEIDENTIFIED.index("bees")
    second = masked.index("near the river")
    edits = [
        {"start": start, "end": start + 4, "original": "bees", "replacement": "[REDACTED]", "pass": 1, "by": "mask"},
        {"start": second, "end": second + 14, "original": "near the river", "replacement": "by the water", "pass": 2, "by": "llm"},
    ]
    protected = tmp / "prot.jsonl"
    protected.write_text(json.dumps({"id": HOSTILE_ID, "text": protected_text, "edits": edits}) + "\n", encoding="utf-8")
    settings = EvaluationSettings(ks=[2, 3], arities=[1, 2])
    with pytest.MonkeyPatch.context() as patch:  # semantic linkage without the model: fixed figures
        import spacy_delink.evaluate.semantic as semantic

        patch.setattr(semantic, "semantic_linkage", _fake_semantic_linkage)
        evaluate_to_folder(
            lambda: CorpusIndex(tmp / "index"), [tmp / "index", original, deidentified, protected], tmp / "out", settings, progress=False
        )
    return tmp / "out" / "report.html"


def _fake_semantic_linkage(index: Any, collection: Any, documents: list[Any], progress: bool = True) -> dict[str, Any]:
    return {
        "available": True, "model": {"name": "fake-model"}, "collection_vectors": "test vectors", "collection": len(collection),
        "before": {"top1": 1.0, "top10": 1.0, "mean_rank": 1.0, "median_rank": 1.0}, "after": SEMANTIC_AFTER,
        "per_document": [{} for _ in documents],
    }


def _screenshots(browser: Any, name: str, folder: Path) -> list[Path]:
    """The page at desktop (1280 px) and phone (390 px) width, saved as test artifacts; the window is restored."""
    folder.mkdir(parents=True, exist_ok=True)
    shots = []
    try:
        for width in (1280, 390):
            browser.set_window_size(width, 1000)
            browser.execute_script("window.scrollTo(0, 0)")
            shot = folder / f"{name}-{width}.png"
            assert browser.save_screenshot(str(shot))
            shots.append(shot)
    finally:
        browser.set_window_size(1280, 1000)
    return shots


def _open(browser: Any, path: Path) -> None:
    browser.get(path.as_uri())
    browser.find_element("css selector", "article.doc")


def test_markup_in_texts_and_ids_is_shown_as_text(browser: Any, evaluation_report: Path) -> None:
    _open(browser, evaluation_report)
    assert browser.find_element("tag name", "body").get_attribute("data-pwned") is None  # no script of ours ran theirs
    assert browser.execute_script("return document.querySelectorAll('article img').length") == 0
    title = browser.find_element("css selector", "article.doc h2").text
    assert title == HOSTILE_ID
    before = browser.find_element("css selector", ".view.before .text").text
    assert "<script>document.body.setAttribute('data-pwned', 'text')</script>" in before
    assert "<b>[LOCATION]</b>" in before and "honey & wax" in before
    assert browser.execute_script("return document.querySelectorAll('.text script, .text b').length") == 0


def test_summary_plots_legend_spans_and_before_after(browser: Any, evaluation_report: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    _open(browser, evaluation_report)
    assert browser.find_element("css selector", "#summary table").text.startswith("k arity")
    plots = browser.find_elements("css selector", "#plots img[data-plot]")
    assert {p.get_attribute("data-plot") for p in plots} == {"linkage.png", "anonymity.png", "semantic_topk.png"}
    assert all(browser.execute_script("return arguments[0].naturalWidth", p) > 100 for p in plots)
    legend = browser.find_element("css selector", "#legend").text
    assert "df = 1" in legend and "mask inserted" in legend and "rewritten (LLM)" in legend
    # Risk by colour: the singled-out phrases are df=1 spans; hovering explains them.
    strongest = browser.find_element("css selector", ".view.before span.d1")
    ActionChains(browser).move_to_element(strongest).perform()
    tooltip = strongest.get_attribute("title")
    assert "occurs in 1 document of the original collection" in tooltip and "singles out" in tooltip
    # Before/after: the edits are marked by kind on the protected side, struck out on the other.
    # (a marked stretch may be drawn as several spans where other marks begin or end)
    marked: dict[str, str] = {}
    for kind in ("mask", "rewrite", "removed"):
        for span in browser.find_elements("css selector", f".view.after span.e-{kind}"):
            marked[kind] = marked.get(kind, "") + span.text
    assert marked == {"mask": "[REDACTED]", "rewrite": "bywater"}  # "the" was kept
    removed = "".join(s.text for s in browser.find_elements("css selector", ".view.before span.e-removed"))
    assert removed == "bees nearriver"


def test_selecting_a_combination_outlines_its_phrases(browser: Any, evaluation_report: Path) -> None:
    _open(browser, evaluation_report)
    summary = browser.find_element("css selector", "details.combos summary")
    summary.click()
    button = browser.find_element("css selector", "button.combo")
    phrases = [part.strip("“” ") for part in button.text.rsplit(" together", 1)[0].split(" + ")]
    button.click()
    outlined = browser.find_elements("css selector", ".view.before .sel")
    assert outlined and "active" in button.get_attribute("class")
    text = "".join(s.text for s in outlined)
    assert all(phrase.split()[0] in text for phrase in phrases)
    button.click()  # selecting again clears it
    assert not browser.find_elements("css selector", ".sel")


def test_assess_report_pages_and_stays_small_per_document(browser: Any, tmp_path: Path) -> None:
    IndexBuilder(LinkageRules()).build(iter(ORIGINALS), tmp_path / "index")
    index = CorpusIndex(tmp_path / "index")
    ids = [HOSTILE_ID] + [f"doc-{n}" for n in range(1, DOCS_PER_PAGE + 3)]
    records = [(DEIDENTIFIED, assess_text(index, doc_id, DEIDENTIFIED, 2, 2)) for doc_id in ids]
    pages = write_html_report(records, tmp_path / "report.html", ReportSettings(2, 2, str(tmp_path / "index")))
    assert [p.name for p in pages] == ["report.html", "report-2.html"]
    _open(browser, pages[0])  # issue 11 #15: an id with markup is shown, never run
    assert browser.find_element("css selector", "article.doc h2").text == HOSTILE_ID
    assert browser.find_element("tag name", "body").get_attribute("data-pwned") is None
    assert browser.execute_script("return document.querySelectorAll('article img, #ranked img').length") == 0
    assert HOSTILE_ID in browser.find_element("css selector", "#ranked").text
    _open(browser, pages[1])
    assert len(browser.find_elements("css selector", "article.doc")) == 3
    assert browser.find_element("css selector", "article.doc h2").text == f"doc-{DOCS_PER_PAGE}"
    assert browser.find_elements("css selector", ".view.before span.d1")
    assert browser.find_element("tag name", "html").get_attribute("lang") == "en"
    assert "displaCy" not in browser.title
    for page in pages:  # nothing from the network: no src/href to another host
        html = page.read_text(encoding="utf-8")
        assert "http://" not in html and "https://" not in html


def test_evaluate_report_warns_first_and_names_its_settings(browser: Any, evaluation_report: Path) -> None:
    """Issue 25: k, arity and the index on the page, what arity 2 leaves unchecked, warnings above the summary."""
    _open(browser, evaluation_report)
    settings = browser.find_element("css selector", "#settings").text
    index = str(evaluation_report.parent.parent / "index")
    assert settings.startswith(f"Checked under k 2 · arity 2 · readings exact, search and gap · index {index}")
    assert "Arity 2: combinations of three phrases were not checked." in settings
    warnings = browser.find_element("css selector", "#warnings")
    assert warnings.location["y"] < browser.find_element("css selector", "#summary").location["y"]
    text = warnings.text
    assert text.startswith("Read this first")
    assert "Semantic linkage stays high after protection" in text and "50.0%" in text and "100.0%" in text
    # tantivy ran here, so nothing says it did not
    assert "did not run" not in text
    header = browser.find_element("css selector", "#linkage thead").text
    assert "succeeds" not in header and header.split() == "k arity linkable before tantivy before linkable after tantivy after averted".split()
    assert "the attack succeeds" in browser.find_element("css selector", "#success").text.lower()


def _record(doc_id: str, text: str, anonymity: int | None, phrases: list[tuple[str, int]], combinations: int) -> tuple[str, dict[str, Any]]:
    """A hand-made assess record: ``phrases`` (text, support) are found in ``text``; ``combinations`` is a count."""
    ngrams = [{"start": text.index(p), "end": text.index(p) + len(p), "text": p, "support": s} for p, s in phrases]
    record = {
        "id": doc_id, "k": 5, "arity": 3, "linkage_risk": 0.0 if anonymity is None else 1 / anonymity, "anonymity": anonymity,
        "ngrams": ngrams, "combinations": [], "combination_linkable": combinations > 0,
        "combination_count": combinations, "combination_groups": 0, "combinations_capped": False,
    }
    return text, record


def test_assess_report_ranks_documents_most_at_risk_first(browser: Any, tmp_path: Path) -> None:
    """Anonymity first (not linkable last), then more linkable phrases, then more combinations; links reach the document."""
    text = "The farmer keeps bees near the river Sava and sells honey in Ptuj."
    records = [
        _record("not-linkable", text, None, [], 0),
        _record("anonymity-3", text, 3, [("farmer keeps", 3)], 0),
        _record("one-phrase-combinations", text, 1, [("river Sava", 1)], 10),
        _record("three-phrases", text, 1, [("bees near", 2), ("river Sava", 1), ("Ptuj", 1)], 0),
        _record("anonymity-2", text, 2, [("bees", 2), ("honey", 4)], 0),
        _record("one-phrase", text, 1, [("sells honey", 1)], 0),
    ] + [_record(f"filler-{n}", text, 4, [("farmer", 4)], 0) for n in range(DOCS_PER_PAGE)]
    # four N-grams, three whole phrases ("the river" and "Sava" have only a space between them)
    records.append(_record("last-but-worst", text, 1, [("keeps", 3), ("the river", 1), ("Sava", 1), ("honey", 1)], 0))
    pages = write_html_report(records, tmp_path / "report.html", ReportSettings(5, 3, "idx"))
    _open(browser, pages[0])
    rows = browser.find_elements("css selector", "#ranked tbody tr")
    order = [row.find_element("css selector", "td.document").text for row in rows]
    # three whole phrases each: "last-but-worst" has more of the text at risk (24 characters against 23)
    assert order[:6] == ["last-but-worst", "three-phrases", "one-phrase-combinations", "one-phrase", "anonymity-2", "anonymity-3"]
    assert order[-1] == "not-linkable" and len(order) == len(records)
    header = [cell.text for cell in browser.find_elements("css selector", "#ranked thead th")]
    assert header[:6] == ["#", "document", "anonymity", "linkable phrases", "linkable combinations", "text at risk"]
    cells = [cell.text for cell in rows[0].find_elements("css selector", "td")]
    assert cells[:6] == ["1", "last-but-worst", "1", "3", "0", f"{100 * 24 / len(text):.1f}%"]
    assert cells[6].startswith("“the river Sava” (in 1 document)")  # the earliest of the rarest, whole
    assert rows[2].find_element("css selector", "td.combinations").text == "10 in 0 groups"
    # The worst document is the last of the input; its text is first on page 1 (pages follow the ranking).
    rows[0].find_element("css selector", "a").click()
    assert browser.current_url.endswith(f"report.html#doc-{len(records) - 1}")
    assert browser.find_element("css selector", f"#doc-{len(records) - 1} h2").text == "last-but-worst"


@pytest.fixture(scope="module")
def sample_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    """The shipped sample assessed at k = 2, arity 3 as `delink assess` writes it (grouped)."""
    tmp = tmp_path_factory.mktemp("sample")
    corpus = [(r["id"], r["text"]) for r in srsly.read_jsonl(REPO / "samples" / "corpus.jsonl")]
    IndexBuilder(LinkageRules()).build(iter(corpus), tmp / "index")
    index = CorpusIndex(tmp / "index")
    report = [(r["text"], assess_document(index, r["id"], r["text"], 2, 3, 1000)) for r in srsly.read_jsonl(REPO / "samples" / "deidentified.jsonl")]
    pages = write_html_report(report, tmp / "report.html", ReportSettings(2, 3, str(tmp / "index")))
    return pages[0], [record for _, record in report]


def test_assess_report_lists_sliding_combinations_once(browser: Any, sample_report: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    page, records = sample_report
    _open(browser, page)
    assert browser.find_element("css selector", "#settings").text.startswith("Checked under k 2 · arity 3 · readings exact, search and gap · index ")
    plot = browser.find_element("css selector", "#plots img[data-plot='assessment.png']")
    assert browser.execute_script("return arguments[0].naturalWidth", plot) > 100
    texts = {r["id"]: r["text"] for r in srsly.read_jsonl(REPO / "samples" / "deidentified.jsonl")}
    expected = sorted(records, key=lambda r: DocumentRisk.of(texts[r["id"]], r).rank_key())  # stable: input order breaks ties
    shown = [cell.text for cell in browser.find_elements("css selector", "#ranked td.document")]
    assert shown == [r["id"] for r in expected]
    # The first document's combinations: one entry per group, the count of the rest of each group said in words.
    first = records[0]
    assert first["combination_count"] > first["combination_groups"] > 1
    combos = browser.find_element("css selector", "#doc-0 details.combos")
    combos.find_element("css selector", "summary").click()
    assert combos.find_element("css selector", "summary").text.startswith(
        f"{first['combination_count']:,}{'+' if combination_counts(first)[2] else ''} linkable combinations in the de-identified text,"
        f" in {first['combination_groups']} groups"
    )
    items = combos.find_elements("css selector", "button.combo")
    assert len(items) == len(first["combinations"]) == first["combination_groups"]
    for item, group in zip(items, first["combinations"]):
        slides = f"and {group['group_size'] - 1} more sliding these phrases along the same words"
        assert (slides in item.text) is (group["group_size"] > 1)
    grouped = next(i for i, g in enumerate(first["combinations"]) if g["group_size"] > 1)
    items[grouped].click()
    outlined = "".join(s.text for s in browser.find_elements("css selector", "#doc-0 .view.before .sel"))
    assert all(member["text"].split()[0] in outlined for member in first["combinations"][grouped]["members"])
    shots = _screenshots(browser, "assess-report", tmp_path / "screenshots")
    assert all(shot.stat().st_size > 10_000 for shot in shots)


def _triage_records() -> list[tuple[str, dict[str, Any]]]:
    """120 documents, all singled out but a few, as a real collection gives them (issue 36's privacy officer)."""
    words = "The applicant flew from Ljubljana to Maribor on 4 May and met the mayor of Ptuj near the river Sava."
    pieces = ["flew from Ljubljana", "Maribor on 4 May", "the mayor of Ptuj", "river Sava"]
    records = []
    for n in range(120):
        phrases = [(piece, 1) for piece in pieces[: n % 5]]
        anonymity = None if n % 17 == 5 else 1
        records.append(_record(f"case-{n:03d}", words, anonymity, phrases if anonymity else [], (n * 7) % 30 if anonymity else 0))
    return records


def _visible_ids(browser: Any) -> list[str]:
    return browser.execute_script(
        "return Array.from(document.querySelectorAll('#ranked tbody tr')).filter(r => !r.hidden)"
        ".map(r => r.querySelector('td.document').textContent)")


def test_the_ranked_table_sorts_filters_and_reaches_a_document(browser: Any, tmp_path: Path) -> None:
    """Issue 36: 100+ documents triaged from one table, sorted and filtered in the page, details one select away."""
    records = _triage_records()
    pages = write_html_report(records, tmp_path / "report.html", ReportSettings(5, 3, "idx"))
    _open(browser, pages[0])
    ranked = _visible_ids(browser)
    assert len(ranked) == len(records)
    assert browser.find_element("id", "shown").text == f"{len(records)} of {len(records)} documents shown"

    def sort_by(key: str) -> None:
        browser.find_element("css selector", f"#ranked th[data-key='{key}'] button.sort").click()

    def column(key: str) -> list[str]:
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('#ranked tbody tr td." + key + "')).map(c => c.getAttribute('data-sort'))")

    sort_by("at_risk")  # ascending first, then descending
    shares = [int(v) for v in column("at_risk")]
    assert shares == sorted(shares) and shares[0] < shares[-1]
    sort_by("at_risk")
    assert [int(v) for v in column("at_risk")] == sorted(shares, reverse=True)
    assert browser.find_element("css selector", "#ranked th[data-key='at_risk']").get_attribute("aria-sort") == "descending"
    sort_by("document")
    assert _visible_ids(browser) == sorted(ranked)
    sort_by("rank")  # back to the ranking
    assert _visible_ids(browser) == ranked

    browser.find_element("id", "filter").send_keys("CASE-01")  # ids and phrases, any case
    assert _visible_ids(browser) == [i for i in ranked if i.startswith("case-01")]
    assert browser.find_element("id", "shown").text == f"10 of {len(records)} documents shown"
    browser.find_element("id", "filter").clear()
    browser.find_element("id", "filter").send_keys("mayor of ptuj")
    by_id = {r["id"]: r for _, r in records}
    with_phrase = [i for i in ranked if any(g["text"] == "the mayor of Ptuj" for g in by_id[i]["ngrams"])]
    assert _visible_ids(browser) == with_phrase and 0 < len(with_phrase) < len(records)
    browser.execute_script("var f = document.getElementById('filter'); f.value = ''; f.dispatchEvent(new Event('input'))")
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "show")).select_by_value("none")
    not_linkable = [r["id"] for _, r in records if r["anonymity"] is None]
    assert sorted(_visible_ids(browser)) == sorted(not_linkable) and not_linkable
    Select(browser.find_element("id", "show")).select_by_value("1")
    assert len(_visible_ids(browser)) == len(records) - len(not_linkable)

    # A document deep in the input, reached from its row: its facts say what the row says.
    target = "case-118"
    assert target in _visible_ids(browser)
    row = browser.find_element("css selector", "#ranked tr[data-doc='118']")
    cells = {c.get_attribute("class").split()[0]: c.text for c in row.find_elements("css selector", "td")}
    row.find_element("css selector", "td.document a").click()
    article = browser.find_element("id", "doc-118")
    assert article.find_element("css selector", "h2").text == target
    facts = article.find_element("css selector", ".facts").text
    for label, key in (("anonymity", "anonymity"), ("linkable phrases", "phrases"), ("linkable combinations", "combinations"),
                       ("text at risk", "at_risk")):
        assert f"{label} {cells[key]}" in facts
    article.find_element("css selector", ".back a").click()  # and back to its row
    assert browser.current_url.endswith("report.html#row-118")


def test_the_page_script_counts_as_the_report_does(browser: Any, sample_report: tuple[Path, list[dict[str, Any]]]) -> None:
    """delink serve's page computes a document's facts in report.js; they must equal report.py's, word for word."""
    page, records = sample_report
    texts = {r["id"]: r["text"] for r in srsly.read_jsonl(REPO / "samples" / "deidentified.jsonl")}
    _open(browser, page)
    tricky = "Met in\u00a0Murska Sobota \U0001F600 on 4 May, then Ptuj."
    ngrams = [{"start": tricky.index(p), "end": tricky.index(p) + len(p), "text": p, "support": 1} for p in ("in", "Murska", "Sobota", "Ptuj")]
    cases = [(texts[r["id"]], r) for r in records] + [(tricky, {"anonymity": 1, "ngrams": ngrams, "combinations": []})]
    for text, record in cases:
        # offsets count code points in Python; the astral emoji before "Ptuj" checks that report.js does too
        in_page = browser.execute_script("return window.delinkRisk.facts(arguments[0], arguments[1])", text, record)
        assert [tuple(fact) for fact in in_page] == DocumentRisk.of(text, record).facts()


def test_report_screenshot_for_the_docs(browser: Any, sample_report: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    """The ranked table of the shipped sample (k=2, arity 3) at desktop width: docs/img/report.png, shown in docs/evaluate.md."""
    _open(browser, sample_report[0])
    shot = tmp_path / "report.png"
    browser.set_window_size(1280, 820)
    try:
        browser.execute_script("document.querySelector('#summary h2').scrollIntoView()")
        browser.find_element("css selector", "#ranked tbody tr details.more summary").click()  # one row's other phrases
        assert browser.save_screenshot(str(shot))
    finally:
        browser.set_window_size(1280, 1000)
    assert shot.stat().st_size > 10_000
    if os.environ.get("DELINK_UPDATE_SCREENSHOTS"):  # DELINK_UPDATE_SCREENSHOTS=1 pytest -k screenshot_for_the_docs
        shutil.copyfile(shot, REPO / "docs" / "img" / "report.png")


def test_evaluate_report_screenshots(browser: Any, evaluation_report: Path, tmp_path: Path) -> None:
    _open(browser, evaluation_report)
    shots = _screenshots(browser, "evaluate-report", tmp_path / "screenshots")
    assert [shot.name for shot in shots] == ["evaluate-report-1280.png", "evaluate-report-390.png"]
    assert all(shot.stat().st_size > 10_000 for shot in shots)


def test_without_matplotlib_the_assess_report_says_so_in_words(
    browser: Any, sample_report: tuple[Path, list[dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    _, records = sample_report
    texts = {r["id"]: r["text"] for r in srsly.read_jsonl(REPO / "samples" / "deidentified.jsonl")}
    page = write_html_report([(texts[r["id"]], r) for r in records], tmp_path / "report.html", ReportSettings(2, 3, "idx"))[0]
    _open(browser, page)
    assert not browser.find_elements("css selector", "#plots img")
    missing = browser.find_element("css selector", "#plots [data-plot-missing='assessment.png']").text
    assert missing.startswith("Plot not drawn") and "pip install 'spacy-delink[plots]'" in missing
    assert browser.find_element("css selector", "#distribution").text.split()[-2:] == ["1", str(len(records))]


@pytest.mark.slow
def test_tab_documents_stay_under_120_kb_each(tmp_path: Path) -> None:
    """The longest TAB documents, before and after (every linkable phrase masked), each under 120 KB.

    The bound was 100 KB under the exact and search readings alone (measured: 97,503, 92,836 and 88,758
    bytes). The gap reading (SPEC §9) adds what a reader needs to see: its linkable bridges before
    (54 of 1,046 phrases of 001-79392), and in the masked version the bridges that the new masks
    leave linkable (92 phrases where the old rules found none), with their marks. Measured with
    it: 115,559, 107,764 and 103,355 bytes; the marked-up text of each view stays capped (DOC_BUDGET)."""
    from spacy_delink.evaluate.utility import compare_texts
    from spacy_delink.pages.markup import ReportDocument, write_pages
    from spacy_delink.evaluate.tab import load_tab, redact_spans

    benchmark = load_tab(shared_path("tab"))
    IndexBuilder(LinkageRules()).build(iter(benchmark.corpus), tmp_path / "index")
    index = CorpusIndex(tmp_path / "index")
    settings = ReportSettings(2, 3, "index")
    empty = write_pages(tmp_path / "empty.html", "assess.html", "t", settings, EMPTY_SUMMARY, [])[0].stat().st_size
    sizes = []
    for doc_id, text in sorted(benchmark.inputs, key=lambda item: -len(item[1]))[:3]:
        before = assess_text(index, doc_id, text, 2, 3)
        masked = redact_spans(text, [(g["start"], g["end"]) for g in before["ngrams"]])
        after = assess_text(index, doc_id, masked, 2, 3)
        changes = compare_texts(index.tokenizer, text, masked)[2]
        document = ReportDocument(doc_id, text, before, masked, after, changes, [("anonymity", "1")])
        page = write_pages(tmp_path / f"{doc_id}.html", "assess.html", "t", settings, EMPTY_SUMMARY, [document])[0]
        sizes.append(page.stat().st_size - empty)
    assert max(sizes) <= 120_000, sizes
