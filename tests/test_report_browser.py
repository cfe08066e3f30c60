"""The HTML reports in a real browser (headless Chromium through chromedriver).

What a person sees: the summary, the plots, the legend, coloured spans with tooltips,
combinations that outline their phrases when selected, the before/after view with the
edits marked, and document text and ids containing markup shown as text, never run.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

from spacy_delink.evaluate.job import evaluate_to_folder
from spacy_delink.evaluate.metrics import EvaluationSettings
from spacy_delink.evaluate.report import DOCS_PER_PAGE, write_html_report
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
    settings = EvaluationSettings(ks=[2, 3], arities=[1, 2], semantic=False)
    evaluate_to_folder(lambda: CorpusIndex(tmp / "index"), [tmp / "index", original, deidentified, protected], tmp / "out", settings, progress=False)
    return tmp / "out" / "report.html"


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
    assert {p.get_attribute("data-plot") for p in plots} == {"linkage.png", "anonymity.png"}
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
    pages = write_html_report(records, tmp_path / "report.html")
    assert [p.name for p in pages] == ["report.html", "report-2.html"]
    _open(browser, pages[0])  # issue 11 #15: an id with markup is shown, never run
    assert browser.find_element("css selector", "article.doc h2").text == HOSTILE_ID
    assert browser.find_element("tag name", "body").get_attribute("data-pwned") is None
    assert browser.execute_script("return document.querySelectorAll('article img').length") == 0
    _open(browser, pages[1])
    assert len(browser.find_elements("css selector", "article.doc")) == 3
    assert browser.find_element("css selector", "article.doc h2").text == f"doc-{DOCS_PER_PAGE}"
    assert browser.find_elements("css selector", ".view.before span.d1")
    assert browser.find_element("tag name", "html").get_attribute("lang") == "en"
    assert "displaCy" not in browser.title
    for page in pages:  # nothing from the network: no src/href to another host
        html = page.read_text(encoding="utf-8")
        assert "http://" not in html and "https://" not in html


@pytest.mark.slow
def test_tab_documents_stay_under_100_kb_each(tmp_path: Path) -> None:
    """The longest TAB documents, before and after (every linkable phrase masked), each under 100 KB."""
    from spacy_delink.evaluate.metrics import compare_texts
    from spacy_delink.evaluate.report import ReportDocument, write_pages
    from spacy_delink.evaluate.tab import load_tab, redact_spans

    benchmark = load_tab(shared_path("tab"))
    IndexBuilder(LinkageRules()).build(iter(benchmark.corpus), tmp_path / "index")
    index = CorpusIndex(tmp_path / "index")
    empty = write_pages(tmp_path / "empty.html", "t", "", [], 2)[0].stat().st_size
    sizes = []
    for doc_id, text in sorted(benchmark.inputs, key=lambda item: -len(item[1]))[:3]:
        before = assess_text(index, doc_id, text, 2, 3)
        masked = redact_spans(text, [(g["start"], g["end"]) for g in before["ngrams"]])
        after = assess_text(index, doc_id, masked, 2, 3)
        changes = compare_texts(index.tokenizer, text, masked)[2]
        document = ReportDocument(doc_id, text, before, masked, after, changes, [("anonymity", "1")])
        page = write_pages(tmp_path / f"{doc_id}.html", "t", "", [document], 2)[0]
        sizes.append(page.stat().st_size - empty)
    assert max(sizes) <= 100_000, sizes
