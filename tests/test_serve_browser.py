"""The page of `delink serve` in a real browser (headless Chromium through chromedriver), on a real server.

A reviewer types or drops a text, assesses it and sees exactly the linkable phrases of the
API's record highlighted, with the report's tooltips and combinations; protects it and
sees the API's protected text with the edits marked; copies and downloads it; does all of
it from the keyboard, at 1280 px and at phone width; hostile text stays text. Screenshots
are saved under the test's tmp folder.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from serve_process import ServeProcess
from spacy_delink.evaluate.assess_page import DocumentRisk
from spacy_delink.pages.markup import combination_counts
from test_report_browser import browser  # noqa: F401  (the same headless Chromium, skipped with a reason if absent)
from test_serve import SAMPLES, WAIT_S, read_jsonl, run_cli

HOSTILE = "He sold <img src=x onerror=\"document.body.setAttribute('data-pwned','1')\"> honey & wax <script>document.body.setAttribute('data-pwned','2')</script> in [LOCATION]."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    workdir = tmp_path_factory.mktemp("serve-page")
    result = run_cli("index", SAMPLES / "corpus.jsonl", "--output", workdir / "index")
    assert result.returncode == 0, result.stderr
    with ServeProcess(workdir / "index", log=workdir / "serve.log") as process:
        yield process


@pytest.fixture(scope="module")
def downloads(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("downloads")


#: Installed before the page's own scripts: script errors and content-security-policy violations, for the test to read.
WATCH_ERRORS = """
window.__problems = [];
window.addEventListener('error', function (e) { window.__problems.push('error: ' + e.message); });
document.addEventListener('securitypolicyviolation', function (e) { window.__problems.push('csp: ' + e.violatedDirective + ' ' + e.blockedURI); });
"""


@pytest.fixture(scope="module")
def page_browser(browser: Any, downloads: Path) -> Any:
    """The report tests' headless Chromium, saving downloads to ``downloads`` and watching for problems."""
    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH_ERRORS})
    return browser


def wait_for(condition: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() <= deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {WAIT_S:.0f} s waiting for {what}")


def api(server: ServeProcess, endpoint: str, text: str) -> dict[str, Any]:
    response = httpx.post(f"{server.url}/v1/{endpoint}", json={"text": text, "k": 2, "arity": 3}, timeout=120)
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()["records"][0]
    return record


def merged(ranges: list[list[int]]) -> list[list[int]]:
    out: list[list[int]] = []
    for start, end in sorted(ranges):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


#: The pieces of a view's text, each with whether a span matching the selector covers it.
PIECES = """
var selector = arguments[1], pieces = [];
document.querySelector(arguments[0] + ' .text').childNodes.forEach(function (node) {
  pieces.push([node.textContent, node.nodeType === 1 && node.matches(selector)]);
});
return pieces;
"""


def pieces(driver: Any, view: str, selector: str) -> list[tuple[str, bool]]:
    return [(text, bool(inside)) for text, inside in driver.execute_script(PIECES, view, selector)]


def marked_ranges(driver: Any, view: str, selector: str) -> list[list[int]]:
    """Character ranges of a view's text under spans matching ``selector``."""
    ranges, offset = [], 0
    for text, inside in pieces(driver, view, selector):
        if inside:
            ranges.append([offset, offset + len(text)])
        offset += len(text)
    return merged(ranges)


def unmarked(driver: Any, view: str, selector: str) -> str:
    return "".join(text for text, inside in pieces(driver, view, selector) if not inside)


def open_page(driver: Any, server: ServeProcess) -> None:
    driver.get(server.url + "/")
    wait_for(lambda: driver.find_element("id", "limits").text, "the server's settings on the page")


def type_text(driver: Any, text: str) -> None:
    area = driver.find_element("id", "text")
    area.clear()
    area.send_keys(text)


def test_assess_protect_copy_and_download(page_browser: Any, server: ServeProcess, downloads: Path, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    text = read_jsonl(SAMPLES / "deidentified.jsonl")[0]["text"]
    open_page(page_browser, server)
    assert page_browser.find_element("id", "k").get_attribute("value") == "2"
    assert page_browser.find_element("id", "arity").get_attribute("value") == "3"
    assert not page_browser.find_element("id", "key-field").is_displayed()  # no key on this server
    type_text(page_browser, text)
    page_browser.find_element("id", "assess").click()
    wait_for(lambda: page_browser.find_elements("css selector", "#document article.doc .view.before"), "the assessed text")

    record = api(server, "assess", text)
    assert marked_ranges(page_browser, ".view.before", "[data-g]") == merged([[g["start"], g["end"]] for g in record["ngrams"]])
    members = [[m["start"], m["end"]] for c in record["combinations"][:50] for m in c["members"]]
    assert marked_ranges(page_browser, ".view.before", "[data-m]") == merged(members)
    assert page_browser.find_element("css selector", ".view.before .text").text == text.strip()
    # The report's words and counts (issue 36: the page said "combinations 10" where the report said 742 in 10 groups).
    facts = [span.text for span in page_browser.find_elements("css selector", "article.doc .facts > span")]
    assert facts == [f"{label} {value}" for label, value in DocumentRisk.of(text, record).facts()]
    assert record["combination_count"] > record["combination_groups"] > 1
    capped = "+" if combination_counts(record)[2] else ""  # the list stopped at the report cap: at least that many
    assert f"linkable combinations {record['combination_count']:,}{capped} in {record['combination_groups']} groups" in facts
    combos = page_browser.find_element("css selector", "details.combos summary").get_attribute("textContent")
    assert combos.startswith(f"{record['combination_count']:,}{capped} linkable combinations in the de-identified text, "
                             f"in {record['combination_groups']} groups")
    legend = page_browser.find_element("id", "legend").text
    assert "singled out: the phrase occurs in one document only" in legend and "mask inserted" in legend

    singled_out = page_browser.find_element("css selector", ".view.before .text span.d1")
    ActionChains(page_browser).move_to_element(singled_out).perform()
    tip = wait_for(lambda: singled_out.get_attribute("title"), "the report's tooltip")
    assert "occurs in 1 document of the original collection: a search for it singles out its source." in tip

    page_browser.find_element("css selector", "details.combos summary").click()
    page_browser.find_element("css selector", "button.combo").click()
    outlined = page_browser.find_elements("css selector", ".view.before .text span.sel")
    assert outlined and all("cm" in span.get_attribute("class") for span in outlined)

    page_browser.find_element("id", "protect").click()
    shown = wait_for(lambda: page_browser.find_elements("css selector", "#protected-view .text"), "the protected text")[0]
    protected = api(server, "protect", text)
    assert shown.text == protected["text"].strip()
    assert page_browser.execute_script("return document.querySelector('#protected-view .text').textContent") == protected["text"]
    masks = page_browser.find_elements("css selector", "#protected-view .text span.e-mask")
    assert masks and all(span.text == "[REDACTED]" for span in masks)
    # What the edits kept reads the same on both sides: the marks are exactly the edits.
    kept = unmarked(page_browser, "#protected-view", ".e-mask, .e-rewrite")
    assert kept == unmarked(page_browser, ".view.before", ".e-removed") and len(kept) < len(text)
    assert "checked at k=2, arity 3" in page_browser.find_element("id", "summary").text
    page_browser.set_window_size(1280, 1500)
    page_browser.execute_script("window.scrollTo(0, document.getElementById('status').offsetTop - 10)")
    page_browser.save_screenshot(str(tmp_path / "serve-page-1280.png"))
    page_browser.set_window_size(1280, 1000)

    page_browser.execute_cdp_cmd("Browser.grantPermissions", {"origin": server.url, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    page_browser.find_element("id", "copy").click()
    wait_for(lambda: "copied" in page_browser.find_element("id", "status").text, "the copy")
    pasted = page_browser.execute_async_script("navigator.clipboard.readText().then(arguments[0], function (e) { arguments[0]('error: ' + e); });")
    assert pasted == protected["text"]
    page_browser.find_element("id", "download-text").click()
    saved = wait_for(lambda: (downloads / "protected.txt").exists() and (downloads / "protected.txt").read_text(encoding="utf-8"), "the download")
    assert saved == protected["text"]
    page_browser.find_element("id", "download-record").click()
    wait_for(lambda: (downloads / "protected.json").exists() and (downloads / "protected.json").stat().st_size, "the record")
    assert json.loads((downloads / "protected.json").read_text(encoding="utf-8")) == protected

    page_browser.set_window_size(390, 900)  # a phone
    try:
        assert page_browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        columns = page_browser.execute_script("return getComputedStyle(document.querySelector('.views')).gridTemplateColumns")
        assert len(columns.split()) == 1, columns  # the two texts one under the other
        page_browser.execute_script("document.getElementById('document').scrollIntoView()")
        page_browser.save_screenshot(str(tmp_path / "serve-page-390.png"))
    finally:
        page_browser.set_window_size(1280, 1000)
    assert page_browser.execute_script("return window.__problems") == []  # no script error, no content-security-policy violation


def test_the_page_works_from_the_keyboard(page_browser: Any, server: ServeProcess) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    def press(key: str) -> None:  # to whatever has the focus, as a person would
        ActionChains(page_browser).send_keys(key).perform()

    open_page(page_browser, server)
    type_text(page_browser, "The applicant's farm near the river Sava was registered in 1997.")
    for _ in range(12):  # Tab from the text box to the Assess button: file, k, arity, then the button
        press(Keys.TAB)
        if page_browser.switch_to.active_element.get_attribute("id") == "assess":
            break
    assert page_browser.switch_to.active_element.get_attribute("id") == "assess"
    press(Keys.ENTER)
    wait_for(lambda: page_browser.find_elements("css selector", ".view.before .text span.d1"), "a result after Enter")
    press(Keys.TAB)
    assert page_browser.switch_to.active_element.get_attribute("id") == "protect"
    press(Keys.ENTER)
    wait_for(lambda: page_browser.find_elements("css selector", "#protected-view .text span.e-mask"), "the protected text after Enter")
    outline = page_browser.execute_script("return getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"  # the focused control is visible


def test_a_dropped_file_is_read_and_hostile_text_stays_text(page_browser: Any, server: ServeProcess) -> None:
    open_page(page_browser, server)
    page_browser.execute_script(
        "var data = new DataTransfer(); data.items.add(new File([arguments[0]], 'case.txt', {type: 'text/plain'}));"
        "document.getElementById('text').dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true}));",
        HOSTILE,
    )
    wait_for(lambda: page_browser.find_element("id", "text").get_attribute("value") == HOSTILE, "the dropped file in the text box")
    assert "case.txt" in page_browser.find_element("id", "status").text
    page_browser.find_element("id", "protect").click()
    shown = wait_for(lambda: page_browser.find_elements("css selector", "#protected-view .text"), "the protected text")[0]
    assert "<script>" in page_browser.find_element("css selector", ".view.before .text").text
    assert shown.text == api(server, "protect", HOSTILE)["text"].strip()
    assert page_browser.find_element("tag name", "body").get_attribute("data-pwned") is None
    assert not page_browser.find_elements("css selector", "#document img, #document script")


def test_refusals_are_shown_to_the_reviewer(page_browser: Any, server: ServeProcess) -> None:
    open_page(page_browser, server)
    page_browser.find_element("id", "assess").click()
    assert "Paste or drop a text first" in page_browser.find_element("id", "status").text
    type_text(page_browser, "x" * 10)
    page_browser.execute_script("document.getElementById('k').value = '1'")
    page_browser.find_element("id", "assess").click()
    message = wait_for(lambda: "HTTP 422" in page_browser.find_element("id", "status").text and page_browser.find_element("id", "status").text, "the refusal")
    assert "weaker_than_server" in message or "k must be" in message
