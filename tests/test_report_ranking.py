"""The assess report's triage table without a browser: whole phrases, the ranking, the words (issue 36 item 5)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from spacy_delink.evaluate.assess_page import DocumentRisk, whole_phrases, write_html_report
from spacy_delink.pages.markup import DOCS_PER_PAGE, ReportSettings

TEXT = "On the flight. On 4 May he landed in Ljubljana and met the mayor."


def _ngram(text: str, phrase: str, support: int, after: int = 0) -> dict[str, Any]:
    start = text.index(phrase, after)
    return {"start": start, "end": start + len(phrase), "text": phrase, "support": support}


def _record(doc_id: str, text: str, ngrams: list[dict[str, Any]], anonymity: int | None = 1, combinations: int = 0,
            groups: int = 0) -> tuple[str, dict[str, Any]]:
    return text, {
        "id": doc_id, "k": 2, "arity": 3, "anonymity": anonymity, "ngrams": ngrams, "combinations": [],
        "combination_count": combinations, "combination_groups": groups, "combinations_capped": False,
    }


def test_overlapping_and_touching_fragments_are_one_whole_phrase() -> None:
    """Issue 36: the worst phrase read "flight. On 4", a fragment of the stretch a reader must rewrite."""
    ngrams = [_ngram(TEXT, "the flight. On", 2), _ngram(TEXT, "flight. On 4", 1), _ngram(TEXT, "4 May", 1),
              _ngram(TEXT, "Ljubljana", 1), _ngram(TEXT, "the mayor", 1)]
    phrases = whole_phrases(TEXT, ngrams)
    assert [(p.text, p.support) for p in phrases] == [
        ("the flight. On 4 May", 1), ("Ljubljana", 1), ("the mayor", 1)
    ]
    # only whitespace between two linkable N-grams: one phrase; a word between them: two
    spaced = "in  Murska\u00a0Sobota, near Lendava"
    phrases = whole_phrases(spaced, [_ngram(spaced, "Murska", 1), _ngram(spaced, "Sobota", 1), _ngram(spaced, "Lendava", 1)])
    assert [p.text for p in phrases] == ["Murska\u00a0Sobota", "Lendava"]


def test_facts_count_distinct_whole_phrases_and_label_groups_as_groups() -> None:
    text = "Ptuj and Ptuj again, near Ptuj castle."
    record = _record("a", text, [_ngram(text, "Ptuj", 1), _ngram(text, "Ptuj", 1, 5), _ngram(text, "Ptuj castle", 1)],
                     combinations=742, groups=10)[1]
    risk = DocumentRisk.of(text, record)
    assert [p.text for p in risk.phrases] == ["Ptuj", "Ptuj castle"]
    covered = len("Ptuj") * 2 + len("Ptuj castle")  # every occurrence is text at risk
    assert risk.facts() == [("anonymity", "1"), ("linkable phrases", "2"), ("linkable combinations", "742 in 10 groups"),
                            ("text at risk", f"{100 * covered / len(text):.1f}%")]


def _ranked_ids(page: Path) -> list[str]:
    table = page.read_text("utf-8").split('id="ranked"', 1)[1].split("</table>", 1)[0]
    return re.findall(r'<td class="document" data-sort="[^"]*"><a href="[^"]*">([^<]*)</a>', table)


def test_the_ranking_separates_documents_that_all_have_anonymity_1(tmp_path: Path) -> None:
    """Issue 36: every document of a real collection had anonymity 1; the ranking kept them in input order."""
    text = "The farmer keeps bees near the river Sava and sells honey in Ptuj every May."
    records = [
        _record("one-short-phrase", text, [_ngram(text, "Ptuj", 1)]),
        _record("one-long-phrase", text, [_ngram(text, "bees near the river Sava", 1)]),
        _record("two-phrases", text, [_ngram(text, "bees", 1), _ngram(text, "Ptuj", 1)]),
        _record("combinations-only", text, [], combinations=3, groups=1),
        _record("one-phrase-and-combinations", text, [_ngram(text, "Ptuj", 1)], combinations=5, groups=2),
        _record("not-linkable", text, [], anonymity=None),
    ]
    page = write_html_report(records, tmp_path / "report.html", ReportSettings(2, 3, "idx"))[0]
    assert _ranked_ids(page) == ["two-phrases", "one-phrase-and-combinations", "one-long-phrase", "one-short-phrase",
                                 "combinations-only", "not-linkable"]


def test_document_pages_follow_the_ranking_and_rows_link_to_their_document(tmp_path: Path) -> None:
    """Issue 36: the details were spread over pages in input order; the most at risk are now on page 1."""
    text = "The farmer keeps bees near the river Sava and sells honey in Ptuj."
    records = [_record(f"low-{n}", text, [_ngram(text, "Ptuj", 1)]) for n in range(DOCS_PER_PAGE + 5)]
    records.append(_record("worst", text, [_ngram(text, "bees", 1), _ngram(text, "Sava", 1), _ngram(text, "honey", 1)]))
    pages = write_html_report(records, tmp_path / "report.html", ReportSettings(2, 3, "idx"))
    first = pages[0].read_text("utf-8")
    last = len(records) - 1
    assert f'<a href="report.html#doc-{last}">worst</a>' in first
    documents = first.split('id="documents"', 1)[1]
    assert documents.index(f'id="doc-{last}"') < documents.index('id="doc-0"')
    assert f'href="report.html#row-{last}"' in documents  # and back to its row
    assert '<a href="report-2.html#doc-' in first  # the rest of the ranking is on page 2


def test_skipped_inputs_are_said_when_there_are_any(tmp_path: Path) -> None:
    records = [_record("a", TEXT, [_ngram(TEXT, "Ljubljana", 1)])]
    with_skipped = write_html_report(records, tmp_path / "a.html", ReportSettings(2, 3, "idx", skipped=3))[0].read_text("utf-8")
    assert "3 inputs were skipped and are not in this report" in with_skipped
    assert 'id="skipped"' not in write_html_report(records, tmp_path / "b.html", ReportSettings(2, 3, "idx"))[0].read_text("utf-8")


def test_phrases_and_ids_in_the_table_are_escaped(tmp_path: Path) -> None:
    text = 'He wrote <img src=x onerror="alert(1)"> twice.'
    records = [_record('<b id="x">', text, [_ngram(text, '<img src=x onerror="alert(1)">', 1)])]
    table = write_html_report(records, tmp_path / "r.html", ReportSettings(2, 3, "idx"))[0].read_text("utf-8")
    table = table.split('id="ranked"', 1)[1].split("</table>", 1)[0]
    assert "<img" not in table and "<b id" not in table
    assert "&lt;img src=x onerror=&#34;alert(1)&#34;&gt;" in table
