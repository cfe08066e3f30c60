"""Measure where the folding tables of the search reading disagree (docs/linkage-rules.md §8), as JSON.

Three readings of one character, each applied alone:

* ``uts39``: the search form without the engine tables (NFKC, marks dropped, case folded,
  UTS #39 prototypes), the search form before SPEC §8 named ASCII folding and Nd digits;
* ``ascii``: tantivy's ``ascii_fold`` (Lucene's ASCIIFoldingFilter table), case folded;
* ``icu``: ICU's NFKC_Casefold with marks dropped and Nd digits as ASCII digits, the core
  of ICU's folding (UTR #30 folds more, e.g. some letters with strokes).

A character is counted where the ASCII folding maps it to letters or digits, or where it is
an Nd digit. It also counts how many of them the rewriter's ``lookalike`` check accepted
before issue 35 (scripts and forms of writing only) and accepts now, in a Latin context,
and how many code points a query also reads the other way (``read_both_ways``)::

    pip install tantivy icukit-pyicu
    PYTHONPATH=. python tools/compare_folding_tables.py
"""
from __future__ import annotations

import json
import unicodedata
from dataclasses import replace
from typing import Any


def _ascii_alnum(text: str) -> bool:
    return text.isascii() and any(c.isalnum() for c in text)


def _tokens(text: str) -> str:
    """What a search reads of a folded string: its letters and digits."""
    return "".join(c for c in text if c.isalnum())


def main() -> None:
    import icu

    from spacy_delink.linkage import search_form
    from spacy_delink.llm.tasks.rewrite import content

    tables = search_form.fold_tables()
    before = replace(tables, ascii={}, digits={})
    uts39 = {ch: search_form.fold_char(ch, before) for ch in {*tables.ascii, *tables.digits}}
    nfkc_cf = icu.Normalizer2.getInstance(None, "nfkc_cf", icu.UNormalizationMode2.COMPOSE)

    def icu_fold(ch: str) -> str:
        if ch in tables.digits:
            return tables.digits[ch]
        return "".join(c for c in unicodedata.normalize("NFD", str(nfkc_cf.normalize(ch))) if not unicodedata.category(c).startswith("M"))

    ascii_only = {ch: out.casefold() for ch, out in tables.ascii.items()}
    rows: dict[str, list[str]] = {"ascii_vs_uts39_added": [], "ascii_vs_uts39_conflict": [], "digit_vs_uts39_conflict": [], "ascii_vs_icu_conflict": []}
    for ch, out in sorted(ascii_only.items()):
        old = _tokens(uts39[ch])
        if old != _tokens(out):
            rows["ascii_vs_uts39_conflict" if _ascii_alnum(old) else "ascii_vs_uts39_added"].append(ch)
        icu_read = _tokens(icu_fold(ch))
        if _ascii_alnum(icu_read) and icu_read != _tokens(out):
            rows["ascii_vs_icu_conflict"].append(ch)
    for ch, digit in sorted(tables.digits.items()):
        if uts39[ch] != digit and _ascii_alnum(_tokens(uts39[ch])):
            rows["digit_vs_uts39_conflict"].append(ch)
    newly_folded = [ch for ch in {*rows["ascii_vs_uts39_added"], *rows["ascii_vs_uts39_conflict"]} if ch not in tables.digits]
    newly_folded += [ch for ch, d in tables.digits.items() if uts39[ch] != d]
    context = "He was born in \u27e6Ormo\u017e\u27e7 near the river Drava."

    def accepted_before(ch: str) -> bool:
        replacement = f"a t{ch}wn"
        return not (content._writings(replacement) - content._writings(context) or content._mixes_scripts(replacement))

    report: dict[str, Any] = {
        "unicode": {"python": unicodedata.unidata_version, "icu": icu.UNICODE_VERSION},
        "ascii_folding_characters": len(search_form._verified_table("ascii_folding.txt")),
        "ascii_folding_to_letters_or_digits": len(tables.ascii),
        "nd_digits": len(tables.digits),
        "uts39_prototypes": len(tables.prototypes),
        "newly_folded_letters_or_digits": len(newly_folded),
        "lookalike_accepted_before": sum(map(accepted_before, newly_folded)),
        "lookalike_accepted_now": sum(not content.introduces_lookalikes(context, f"a t{ch}wn") for ch in newly_folded),
        # every code point a query also reads the other way (SPEC §8: linkable under either table)
        "read_both_ways": len(search_form.alternate_readings()),
    }
    for name, chars in rows.items():
        report[name] = {"count": len(chars), "examples": {ch: {"ascii": ascii_only.get(ch), "digit": tables.digits.get(ch), "uts39": uts39.get(ch), "icu": icu_fold(ch)} for ch in chars[:12]}}
    print(json.dumps(report, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
