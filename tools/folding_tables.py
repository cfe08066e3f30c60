"""Write the folding tables of the search reading: ``ascii_folding.txt`` and ``decimal_digits.txt``.

SPEC §8 folds every character that Lucene's ASCIIFoldingFilter maps to ASCII (tantivy's
``ascii_fold`` filter uses the same table) and every decimal digit of any script (Unicode
Nd) to its ASCII digit, as ICU's folding does. Both are facts read off the engines, not
written by hand, so this development tool derives them:

* ``ascii_folding.txt``: every code point (surrogates aside) run alone through tantivy's
  ``ascii_fold`` filter (a raw tokenizer, no lower-casing); a line for each one it changes;
* ``decimal_digits.txt``: every code point ICU classes as Nd, with its digit value (ICU
  carries a newer Unicode than Python's ``unicodedata``).

::

    pip install tantivy icukit-pyicu
    python tools/folding_tables.py

Each line is ``<code point>\\t<output code points>`` (hexadecimal), as in ``confusables.txt``.
The tool prints each shipped table's SHA-256: ``search_form.TABLE_DIGESTS`` must list them
(the package refuses a table whose digest differs). Then ``python tools/folding_tables.py
--built`` prints the digest of the table the package builds from them under this Python's
Unicode version, for ``search_form.BUILT_DIGESTS`` (only such a table is cached on disk).
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "spacy_delink" / "linkage" / "data"
_CODE_POINTS = range(0x110000)
_UNICODE_LICENSE = "# Unicode data: Copyright (c) Unicode, Inc. Used under the Unicode License v3 (https://www.unicode.org/license.txt)."
_FACTS = "# Facts read off the engine's filter (what it outputs for each character); no code of it is copied."


def _is_surrogate(cp: int) -> bool:
    return 0xD800 <= cp <= 0xDFFF


def ascii_folding() -> tuple[dict[int, str], str]:
    """``{code point: ASCII text}`` for every code point tantivy's ``ascii_fold`` changes, and tantivy's version."""
    import tantivy

    analyzer = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw()).filter(tantivy.Filter.ascii_fold()).build()
    table: dict[int, str] = {}
    for cp in _CODE_POINTS:
        if _is_surrogate(cp):
            continue
        folded = "".join(analyzer.analyze(chr(cp)))
        if folded != chr(cp):
            table[cp] = folded
    return table, f"{tantivy.__version__} (Filter.ascii_fold, the table of Lucene's ASCIIFoldingFilter)"


def decimal_digits() -> tuple[dict[int, str], str]:
    """``{code point: ASCII digit}`` for every Unicode Nd character, and ICU's versions."""
    import icu

    table = {
        cp: str(icu.Char.digit(chr(cp), 10))
        for cp in _CODE_POINTS
        if not _is_surrogate(cp) and icu.Char.charType(chr(cp)) == icu.UCharCategory.DECIMAL_DIGIT_NUMBER
    }
    return table, f"ICU {icu.ICU_VERSION}, Unicode {icu.UNICODE_VERSION}"


def write(name: str, title: str, note: str, table: dict[int, str], source: str) -> str:
    """Writes ``data/<name>`` and returns the SHA-256 of the whole file."""
    lines = [f"{cp:04X}\t{' '.join(f'{ord(c):04X}' for c in out)}" for cp, out in sorted(table.items())]
    text = f"# {title}\n# Derived by tools/folding_tables.py from {source}; {len(lines)} lines.\n{note}\n" + "\n".join(lines) + "\n"
    (DATA / name).write_text(text, encoding="utf-8")
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def print_built_digest() -> None:
    """The line of ``search_form.BUILT_DIGESTS`` for this Python (the package must already list the table digests)."""
    import unicodedata

    sys.path.insert(0, str(DATA.parents[2]))
    from spacy_delink.linkage import search_form

    digest = search_form._table_digest(*search_form._build_table())
    print(f'    "{unicodedata.unidata_version}": "{digest}",  # Python {sys.version_info.major}.{sys.version_info.minor}', file=sys.stderr)


def main() -> None:
    if sys.argv[1:] == ["--built"]:
        print_built_digest()
        return
    digests = {
        "ascii_folding.txt": write(
            "ascii_folding.txt", "ASCII folding (Lucene ASCIIFoldingFilter's table) of single characters, for spacy-delink's search reading.",
            _FACTS,
            *ascii_folding(),
        ),
        "decimal_digits.txt": write(
            "decimal_digits.txt", "Decimal digits (Unicode Nd) and their ASCII digit, for spacy-delink's search reading.", _UNICODE_LICENSE,
            *decimal_digits(),
        ),
    }
    digests["confusables.txt"] = hashlib.sha256((DATA / "confusables.txt").read_bytes()).hexdigest()  # tools/confusables_table.py
    for name, digest in digests.items():
        print(f'    "{name}": "{digest}",', file=sys.stderr)


if __name__ == "__main__":
    main()
