"""Write ``spacy_delink/linkage/data/confusables.txt``: UTS #39 prototypes of single characters.

The search reading (docs/linkage-rules.md §8) maps look-alike characters to their UTS #39
skeleton. The package ships the mapping as data, so that reading the rules needs no ICU at
run time; this development tool derives it from ICU's own spoof checker (PyICU), which
carries Unicode's confusables data::

    pip install icukit-pyicu   # PyICU with ICU bundled
    python tools/confusables_table.py

For every code point that is its own canonical decomposition, the line
``<code point>\\t<prototype code points>`` is written when ICU's skeleton of the character
differs from it. Decomposable characters need no line: the search form decomposes (NFD)
before it maps, as the skeleton algorithm does. ``tests/test_search_reading.py`` checks the
file against ICU's skeletons when PyICU is installed. A new file needs its SHA-256 in
``search_form.TABLE_DIGESTS`` (``python tools/folding_tables.py`` prints it), or the package refuses it.
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parents[1] / "spacy_delink" / "linkage" / "data" / "confusables.txt"


def prototypes() -> tuple[dict[int, str], str]:
    """``{code point: prototype}`` for every NFD-stable character ICU maps, and ICU's versions."""
    import icu

    checker = icu.SpoofChecker()
    nfd = icu.Normalizer2.getNFDInstance()
    table: dict[int, str] = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        char = chr(cp)
        if nfd.normalize(char) != char:
            continue
        skeleton = checker.getSkeleton(0, char)
        if skeleton != char:
            table[cp] = skeleton
    return table, f"ICU {icu.ICU_VERSION}, Unicode {icu.UNICODE_VERSION}"


def main() -> None:
    table, versions = prototypes()
    lines = [f"{cp:04X}\t{' '.join(f'{ord(c):04X}' for c in proto)}" for cp, proto in sorted(table.items())]
    body = "\n".join(lines) + "\n"
    header = (
        "# UTS #39 prototypes (confusables) of single characters, for the search reading of spacy-delink.\n"
        f"# Derived by tools/confusables_table.py from {versions}; {len(lines)} lines.\n"
        "# Unicode data: Copyright (c) Unicode, Inc. Used under the Unicode License v3 (https://www.unicode.org/license.txt).\n"
        f"# SHA-256 of the lines below: {hashlib.sha256(body.encode()).hexdigest()}\n"
    )
    TARGET.write_text(header + body, encoding="utf-8")
    print(f"wrote {TARGET} ({len(lines)} prototypes, {versions})", file=sys.stderr)


if __name__ == "__main__":
    main()
