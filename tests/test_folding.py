"""SPEC §8's folding (issue 35): every character ASCII folding maps to letters or digits and every
Nd digit read as the engines read them, in input texts and in an LLM's answers; the tables
verified where they are read and cached; an index built with other tables refused.

The engines' readings come from the engines (tantivy's ``ascii_fold`` probed here, ICU's
digit values), never from the package's data files.
"""
from __future__ import annotations

import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
import spacy

import spec_oracle
from conftest import require_module
from fake_openai_server import DISGUISES, FakeOpenAI
from spacy_delink.errors import DelinkError, InputError
from spacy_delink.linkage import search_form
from spacy_delink.linkage.attack import detect
from spacy_delink.linkage.index import CorpusIndex, IndexBuilder
from spacy_delink.linkage.tokenize import LinkageRules
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from spacy_delink.llm.tasks.rewrite.content import introduces_lookalikes
from test_rewriter import judge_one

tantivy = require_module("tantivy", "the ASCII folding is probed from tantivy's own filter (the test extra)")
icu = require_module("icu", "Nd digits come from ICU (pip install icukit-pyicu, the test extra)")

#: The issue's hostile answer: turned e and a negative circled nineteen.
HOSTILE = "Thǝ procǝedings ǝnded in ⓳93"


def _ascii_folding() -> dict[str, str]:
    """Every character tantivy's ascii_fold maps to text holding ASCII letters or digits, with that text's letters and digits, lower-cased."""
    analyzer = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw()).filter(tantivy.Filter.ascii_fold()).build()
    found = {}
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        out = "".join(analyzer.analyze(chr(cp)))
        if out != chr(cp) and any(c.isalnum() for c in out):
            found[chr(cp)] = "".join(c for c in out if c.isalnum()).lower()
    return found


def _nd_digits() -> dict[str, str]:
    return {
        chr(cp): str(icu.Char.digit(chr(cp), 10))
        for cp in range(0x110000)
        if not 0xD800 <= cp <= 0xDFFF and icu.Char.charType(chr(cp)) == icu.UCharCategory.DECIMAL_DIGIT_NUMBER
    }


@pytest.fixture(scope="module")
def engine_reading() -> dict[str, str]:
    """What the engines read each folded character as: ASCII folding's letters and digits, or the Nd digit."""
    return {**_ascii_folding(), **_nd_digits()}


def _disguising(engine_reading: dict[str, str]) -> list[str]:
    """The characters a reader does not see as ASCII letters with accents (ǝ, þ, ⓳, ١, not é)."""
    return sorted(c for c in engine_reading if not unicodedata.normalize("NFD", c)[0].isascii())


def _searched(text: str) -> str:
    """The letters and digits of ``text``'s search form (``⑴`` folds to ``(1)``: a search reads ``1``)."""
    return "".join(c for c in search_form.fold_text(text) if c.isalnum())


# -- the search form --------------------------------------------------------------------------------


def test_the_issues_characters_fold_as_the_engines_read_them() -> None:
    assert search_form.fold_text(HOSTILE) == "the proceedings ended in 1993"
    for written, read in {
        "ǝ ɐ ɔ ʇ ɥ ʌ ʍ ʎ ʞ ᴉ": "e a o t h v w y k i", "þ Þ": "th th", "ß": "ss", "⓳ ❶": "19 1", "in ⓳94": "in 1994",
        "❶❾❾❹": "1994", "Drɐvɐ": "drava", "١٩٩٤": "1994", "१९९४": "1994", "۱۹۹۴": "1994",
    }.items():
        assert search_form.fold_text(written) == read, written


def test_every_folded_character_reads_as_the_engines_read_it(engine_reading: dict[str, str]) -> None:
    """The whole table: each character ASCII folding maps to letters or digits (~1150) and each Nd digit (770)."""
    assert len(engine_reading) > 1800
    wrong = {c: (_searched(c), read) for c, read in engine_reading.items() if _searched(c) != read}
    assert wrong == {}


def test_the_search_form_is_the_oracles_on_every_code_point() -> None:
    """The package's compiled table against the oracle (ICU skeletons, tantivy's ascii_fold, ICU's Nd digits).

    No difference is intended: both read Python's ``unicodedata`` for NFKC, NFD and categories,
    and the package's data files were derived from the same engines by tools/.
    """
    starts, chars = search_form.fold_table()
    differ = []
    for cp in range(0x110000):
        if 0xD800 <= cp <= 0xDFFF:
            continue
        package = "".join(map(chr, chars[starts[cp] : starts[cp + 1]].tolist()))
        if package != spec_oracle.search_form(chr(cp)):
            differ.append(hex(cp))
    assert differ == []


# -- input texts: linkable when their folded form is -------------------------------------------------


@pytest.fixture(scope="module")
def word_index(tmp_path_factory: pytest.TempPathFactory, engine_reading: dict[str, str]) -> tuple[CorpusIndex, dict[str, str]]:
    """One document per distinct reading ("alpha <reading> omega") and two about other things."""
    readings = sorted(set(engine_reading.values()))
    corpus = [f"alpha {read} omega" for read in readings] + ["alpha and omega", "the alpha and the omega"]
    out = tmp_path_factory.mktemp("folding") / "index"
    IndexBuilder(LinkageRules(max_n=3), progress=False).build([(f"d{i}", t) for i, t in enumerate(corpus)], out)
    return CorpusIndex(out), {read: f"d{i}" for i, read in enumerate(readings)}


def test_every_folded_character_in_an_input_is_linkable(word_index: tuple[CorpusIndex, dict[str, str]], engine_reading: dict[str, str]) -> None:
    """``alpha ǝ omega`` is linkable at k = 2: its search form is one document's phrase (before issue 35, 222 were not)."""
    index, _ = word_index
    unlinked = [c for c in _disguising(engine_reading) if detect(index, f"alpha {c} omega", 2).protected]
    assert unlinked == []


def test_an_unrelated_character_stays_unlinked(word_index: tuple[CorpusIndex, dict[str, str]]) -> None:
    """The check can fail: a symbol no table maps is no word, so nothing is singled out."""
    index, _ = word_index
    assert detect(index, "alpha ✓ omega", 2).protected


# -- the rewriter refuses them ------------------------------------------------------------------------


def test_the_lookalike_check_refuses_every_folded_character(engine_reading: dict[str, str]) -> None:
    context = "He was born in \u27e6Ormož\u27e7 near the river Drava."
    accepted = [c for c in _disguising(engine_reading) if not introduces_lookalikes(context, f"a t{c}wn")]
    assert accepted == []
    assert not introduces_lookalikes(context, "a naïve café town in Štajerska")  # accents read as the letters
    assert not introduces_lookalikes("Sold in ⟦١٩٩٤⟧ to ٣ buyers.", "in ٢٠٠٠")  # the context writes Arabic-Indic digits
    assert not introduces_lookalikes("Die ⟦Straße⟧ in Graz.", "die große Gasse")  # the context writes ß
    assert introduces_lookalikes("Sold in ⟦1994⟧.", "in ١٩٩٥") and introduces_lookalikes("the ⟦farm⟧", "a þing")


def test_the_issues_answers_are_refused() -> None:
    text = "The proceedings ended in 1993, when the Supreme Court ruled."
    span = (0, len("The proceedings ended in 1993"))
    for answer in (HOSTILE, "Thǝ procǝedings ǝnded in ❶❾❾❸", "The proceedings ended in ١٩٩٣", "Þe proceedings ended in १९९३"):
        outcome = judge_one(make_rewrite_task(context="sentence"), text, span, answer)
        reasons = {reason for reason, n in outcome["rejected"].items() if n}
        assert outcome["accepted"] == [] and reasons and reasons <= {"lookalike", "echo"}, (answer, reasons)
    assert judge_one(make_rewrite_task(context="sentence"), text, span, "The case closed that year")["accepted"]  # a real rewrite passes


# -- a hostile endpoint, end to end -------------------------------------------------------------------

CORPUS = [
    "The applicant's farm near the river Mura was sold in 1994.",
    "The applicant's farm was sold.",
    "The farm near the river was sold in the spring.",
    "The bank sold a farm in the north.",
]
TEXT = "Her farm was sold in 1994 near the river Mura."
K = 2


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


FOLDING_DISGUISES = ["turned", "thorn", "negative_circled", "negative_circled_number", "arabic_indic", "devanagari"]


@pytest.mark.parametrize("disguise", FOLDING_DISGUISES)
def test_a_hostile_endpoint_cannot_hide_letters_or_digits_behind_folding(index_path: Path, server: FakeOpenAI, disguise: str) -> None:
    """The answer writes the span back with characters an engine folds; it is refused and the output protected."""
    nlp = spacy.blank("en")
    config = {
        "index": str(index_path), "k": K, "max_passes": 2, "cache_dir": None,
        "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": server.base_url, "name": f"disguise:{disguise}",
                  "retries": 1, "backoff": 0.0, "timeout": 5.0},
    }
    rewriter = nlp.add_pipe("delink_rewriter", config=config)
    doc = nlp(TEXT)
    flagged = " ".join(e["original"] for e in doc._.delink_edits if "original" in e) or TEXT
    assert DISGUISES[disguise](flagged) != flagged or disguise == "thorn"  # the disguise writes what was flagged otherwise
    assert doc._.delink_protected is True
    assert spec_oracle.protected(CORPUS, doc.text, K, 8, 1)
    assert {e["by"] for e in doc._.delink_edits} == {"mask"}
    failures = rewriter.failures()
    assert sum(n for reason, n in failures.items() if reason in ("rejected_echo", "rejected_lookalike")) > 0
    assert not {reason for reason, n in failures.items() if n} - {"rejected_echo", "rejected_lookalike"}


# -- verified tables ----------------------------------------------------------------------------------


@pytest.fixture
def fresh_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A private cache directory and the in-process tables forgotten, before and after."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    search_form.fold_tables.cache_clear()
    search_form.fold_table.cache_clear()
    yield tmp_path / "spacy-delink"
    search_form.fold_tables.cache_clear()
    search_form.fold_table.cache_clear()


def test_an_edited_cache_is_rebuilt_never_used(fresh_tables: Path) -> None:
    if unicodedata.unidata_version not in search_form.BUILT_DIGESTS:
        pytest.skip(f"no shipped digest of the table under Unicode {unicodedata.unidata_version}: nothing is cached")
    search_form.fold_table()
    [cache] = list(fresh_tables.glob("searchform-*.npz"))
    with np.load(cache) as saved:
        starts, chars = saved["starts"].copy(), saved["chars"].copy()
    chars[starts[ord("ǝ")]] = ord("ǝ")  # one edited entry: ǝ reads as itself again
    np.savez(cache, starts=starts, chars=chars)
    search_form.fold_table.cache_clear()
    assert search_form.fold_text(HOSTILE) == "the proceedings ended in 1993"
    with np.load(cache) as saved:  # and the cache was written again, right
        assert saved["chars"][saved["starts"][ord("ǝ")]] == ord("e")


def test_a_cache_for_an_unknown_unicode_is_never_read(fresh_tables: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(search_form, "BUILT_DIGESTS", {})
    assert search_form.fold_text("ǝ") == "e"
    assert list(fresh_tables.glob("*.npz")) == []


def test_the_built_table_is_the_shipped_one() -> None:
    """BUILT_DIGESTS is up to date with the tables and the folding code (tools/folding_tables.py --built)."""
    expected = search_form.BUILT_DIGESTS.get(unicodedata.unidata_version)
    if expected is None:
        pytest.skip(f"no shipped digest under Unicode {unicodedata.unidata_version}")
    assert search_form._table_digest(*search_form._build_table()) == expected


class _EditedData:
    """``importlib.resources.files`` for a package whose ``data/<name>`` has one line edited."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def files(self, package: str) -> Path:
        return self.root


def _edit_one_entry(monkeypatch: pytest.MonkeyPatch, root: Path, name: str) -> None:
    """The package's data as a copy in ``root`` whose ``name`` has one entry's output changed."""
    shipped = Path(search_form.__file__).parent / "data"
    (root / "data").mkdir(parents=True)
    for table in shipped.glob("*.txt"):
        (root / "data" / table.name).write_bytes(table.read_bytes())
    text = (root / "data" / name).read_text(encoding="utf-8")
    line = re.search(r"^[0-9A-F]{4,6}\t[0-9A-F ]+$", text, re.MULTILINE)
    assert line is not None
    (root / "data" / name).write_text(text.replace(line.group(), line.group()[:-1] + ("1" if line.group()[-1] != "1" else "2"), 1), encoding="utf-8")
    monkeypatch.setattr(search_form, "resources", _EditedData(root))
    search_form.fold_tables.cache_clear()
    search_form.fold_table.cache_clear()


@pytest.mark.parametrize("name", sorted(search_form.TABLE_DIGESTS))
def test_an_edited_shipped_table_is_refused_in_one_line(fresh_tables: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, name: str) -> None:
    _edit_one_entry(monkeypatch, tmp_path / "package", name)
    with pytest.raises(DelinkError) as refused:
        search_form.fold_text("ǝ")
    message = str(refused.value)
    assert "\n" not in message and f"data/{name}" in message and "reinstall" in message


#: A fresh ``delink`` process that reads the package's data from another folder (an installation whose file was edited).
_DELINK_WITH_DATA = """
import sys
from pathlib import Path
from spacy_delink.linkage import search_form
DATA = Path(sys.argv.pop(1))
class Edited:
    def files(self, package):
        return DATA
search_form.resources = Edited()
from spacy_delink.cli.app import main
main(sys.argv[1:])
"""


def test_the_cli_refuses_an_edited_table_with_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A new process, whose fold table cache is valid: the edited file is refused all the same, nothing written."""
    IndexBuilder(progress=False).build([("d0", "Drava 1994"), ("d1", "Mura")], tmp_path / "index")
    (tmp_path / "in.jsonl").write_text('{"id": 1, "text": "Drɐvɐ ١٩٩٤"}\n', encoding="utf-8")
    with monkeypatch.context() as edit:
        _edit_one_entry(edit, tmp_path / "package", "ascii_folding.txt")
    search_form.fold_tables.cache_clear()
    search_form.fold_table.cache_clear()
    out = tmp_path / "out.jsonl"
    args = ["assess", str(tmp_path / "index"), str(tmp_path / "in.jsonl"), "--output", str(out), "--arity", "1"]
    run = subprocess.run([sys.executable, "-c", _DELINK_WITH_DATA, str(tmp_path / "package"), *args], capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and not out.exists(), run.stderr
    [line] = run.stderr.strip().splitlines()
    assert line.startswith("error: spacy_delink/linkage/data/ascii_folding.txt is not the table this spacy-delink shipped")
    clean = subprocess.run([sys.executable, "-m", "spacy_delink", *args], capture_output=True, text=True, timeout=600)
    assert clean.returncode == 0 and out.exists(), clean.stderr  # the same command on the shipped tables


# -- an index built with other tables -------------------------------------------------------------------

#: The search form's version before issue 35 (Unicode 14.0.0 and the UTS #39 file's digest).
BEFORE_ISSUE_35 = "unicode-14.0.0/uts39-2cb257e1e4a91e03"


def test_an_index_built_with_the_old_tables_is_refused_with_a_rebuild_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert search_form.table_version() != BEFORE_ISSUE_35 and "/fold-" in search_form.table_version()
    with monkeypatch.context() as old:
        old.setattr("spacy_delink.linkage.index.format.table_version", lambda: BEFORE_ISSUE_35)
        IndexBuilder(progress=False).build([("d0", "Drava 1994"), ("d1", "Mura")], tmp_path / "index")
    index = CorpusIndex(tmp_path / "index")
    with pytest.raises(InputError, match=r"built with search form unicode-14\.0\.0/uts39-.*rebuild it with `delink index"):
        detect(index, "Drɐvɐ ١٩٩٤", 2)


def test_the_version_follows_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """One changed entry of the built table is another version: an index is never read with other folding."""
    starts, chars = search_form.fold_table()
    edited = chars.copy()
    edited[starts[ord("þ")]] = ord("p")
    before = search_form.table_version()
    monkeypatch.setattr(search_form, "fold_table", lambda: (starts, edited))
    assert search_form.table_version() != before
