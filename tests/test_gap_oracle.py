"""The SPEC oracle's gap reading (SPEC §9, notes/GAP.md) pinned to hand-computed cases.

Each case works the definitions out in a comment: the text's segments, its bridges, each
document's smallest gap m_d, df_s, the source, and what follows. Positions below are search
token positions (0 = a document's first token); "in*and" is the bridge with runs ("in",) and
("and",). The oracle must stay independent of the package (last test).
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
import spec_oracle
from spec_oracle import assess_gap, bridges, df_within, found_sources, protected

ALL = ("exact", "search", "gap")


def span(text: str, phrase: str) -> tuple[int, int]:
    start = text.index(phrase)
    return start, start + len(phrase)


# -- "[PERSON] was born in [DATE] and lives in [LOC]" -------------------------------------------

BORN = [
    "Ana was born in 1990 and lives in Celje.",  # in*and: one token between ("1990"): m = 1
    "Bor was born in Ptuj and lives in Kranj.",  # m = 1 ("ptuj")
    "Eva was born in May 1985 and lives in Koper.",  # m = 2 ("may 1985")
    "Ivo was born in 1970. He lives in Bled.",  # no "and": matches no bridge
]
TEXT = "[PERSON] was born in [DATE] and lives in [LOC]."
# Segments: [was born in] [and lives in] (the masks at both ends separate nothing): one stretch.
# Bridges: a suffix of the first x a prefix of the second, 3 x 3 = 9 (at most 6 tokens <= max_n 8).
# Every bridge holds "in" and "and", and every document holding one holds both segments around the
# gap, so for all nine: m = (1, 1, 2, None), df_0 = 0, df_1 = 2 ({0, 1}), df_s = 3 for s >= 2.
LEFT = ("was born in", "born in", "in")
RIGHT = ("and", "and lives", "and lives in")


def nine(text: str, support: int, slop: int, rule: str) -> list[tuple[int, int, int, int, str]]:
    return sorted((*span(text, f"{left} [DATE] {right}"), support, slop, rule) for left in LEFT for right in RIGHT)


def test_the_source_is_found_several_times() -> None:
    # Sources: documents holding [was born in] then [and lives in], 1..16 tokens apart: 0, 1 (1), 2 (2).
    # k = 3, each in turn: source 0 or 1 gives g = 1 and df_1 = 2 < 3 (linkable), source 2 gives g = 2
    # and df_2 = 3 (not); so linkable, support 2 at slop 1. Search n-grams at k = 3: "and" and the
    # n-grams holding it are in 3 documents, the rest in 4: none linkable, so the minimal bridge is
    # the shortest, "in [DATE] and", which every other bridge contains.
    found = assess_gap(BORN, TEXT, 3, 8)
    assert (found["source"], found["sources"]) == ("several", [0, 1, 2])
    assert found["bridges"] == nine(TEXT, 2, 1, "source")
    assert found["minimal"] == [(*span(TEXT, "in [DATE] and"), 2, 1, "source")]
    assert found["anonymity"] == 2
    # k = 2: df_1 = 2 and df_2 = 3 are both >= 2 under every source: nothing is linkable.
    assert assess_gap(BORN, TEXT, 2, 8)["bridges"] == []


def test_several_sources_give_the_smallest_support() -> None:
    # k = 4: source 0 or 1 gives support df_1 = 2, source 2 gives df_2 = 3: the bridge reports 2, slop 1.
    # The search n-gram "and" (df 3 < 4) is now linkable and lies inside every bridge: none is minimal.
    found = assess_gap(BORN, TEXT, 4, 8)
    assert found["bridges"] == nine(TEXT, 2, 1, "source")
    assert found["minimal"] == []
    assert found["anonymity"] == 2


def test_a_given_source_against_an_unknown_one() -> None:
    # Given source 2: g = 2, df_2 = 3, not < 3: no linkable bridge at k = 3.
    given = assess_gap(BORN, TEXT, 3, 8, source=2)
    assert (given["source"], given["sources"], given["bridges"], given["anonymity"]) == ("given", [2], [], None)
    # Given source 0: g = 1, df_1 = 2 < 3: linkable, support 2, slop 1.
    assert assess_gap(BORN, TEXT, 3, 8, source=0)["bridges"] == nine(TEXT, 2, 1, "source")
    # Given source 3 matches no bridge (no "and"): no reading, nothing linkable.
    assert assess_gap(BORN, TEXT, 3, 8, source=3)["bridges"] == []
    # A source id not in the collection: unknown. s* = min m_d = 1, df_1 = 2 < 3: linkable, support 2, slop 1.
    unknown = assess_gap(BORN, TEXT, 3, 8, source=len(BORN))
    assert (unknown["source"], unknown["sources"]) == ("unknown", [])
    assert unknown["bridges"] == nine(TEXT, 2, 1, "unknown")


def test_a_rewritten_text_has_an_unknown_source() -> None:
    # A third segment [she is a nurse] is in no document: no source is found. The nine bridges
    # across the first stretch read as before (s* = 1, df_1 = 2 < 3); bridges across the second
    # stretch ("in [LOC]. she", ...) or both need "she", in no document: not linkable.
    text = TEXT + " She is a nurse."
    assert found_sources(BORN, text, 16) == []
    found = assess_gap(BORN, text, 3, 8)
    assert found["source"] == "unknown"
    assert found["bridges"] == nine(text, 2, 1, "unknown")
    assert found["minimal"] == [(*span(text, "in [DATE] and"), 2, 1, "unknown")]


@pytest.mark.parametrize(
    "text",
    [
        "[PERSON] was born in [DATE] [PLACE] and lives in [LOC].",  # masks side by side: one stretch
        "[PERSON] was born in [DATE], <PLACE> and lives in ***.",  # punctuation between: one stretch
        "[PERSON]\n\nwas born in [DATE]\n\n[PLACE]\n\nand lives in [LOC]\n\n",  # masks at paragraph ends
    ],
    ids=["adjacent masks", "punctuation between masks", "paragraph ends"],
)
def test_masks_with_no_token_between_are_one_stretch(text: str) -> None:
    # Still two segments, [was born in] and [and lives in]: the same nine two-run bridges, none
    # across two stretches, and the same reading as TEXT (k = 3, sources 0, 1, 2).
    assert sorted(b.runs for b in bridges(text, 8)) == sorted(
        (tuple(left.split()), tuple(right.split())) for left in LEFT for right in RIGHT
    )
    found = assess_gap(BORN, text, 3, 8)
    assert found["source"] == "several"
    assert [(support, slop, rule) for _, _, support, slop, rule in found["bridges"]] == [(2, 1, "source")] * 9
    start = text.index(" in ") + 1  # "born in"
    assert found["minimal"] == [(start, text.index("and") + 3, 2, 1, "source")]


def test_a_paragraph_end_without_a_mask_joins_and_edge_masks_bridge_nothing() -> None:
    # No mask between "in" and "and": one segment, no stretch, no bridge, and no source to find.
    for text in ("[PERSON] was born in\n\nand lives in [LOC].", "[PERSON] was born in 1990 and lives"):
        assert bridges(text, 8) == []
        assert assess_gap(BORN, text, 3, 8)["source"] == "unknown"


# -- a bridge across two stretches ----------------------------------------------------------------

TWO = [
    "born in X and Y lives",  # born0 in1 x2 and3 y4 lives5
    "born in X and Q. and Y lives",  # born0 in1 x2 and3 q4 and5 y6 lives7
    "and Y lives. born in X and",  # and0 y1 lives2 born3 in4 x5 and6
]
TWO_TEXT = "born in [DATE] and [PLACE] lives"
# Segments [born in] [and] [lives]. Bridges: in*and, born in*and (first stretch), and*lives
# (second), in*and*lives, born in*and*lives (both): 5.
# m:          in*and  and*lives  in*and*lives
#   doc 0       1        1         1 + 1 = 2
#   doc 1       1        1 (and5)  and3: 1 + 3, and5: 3 + 1 = 4
#   doc 2       1        1 (and0)  None (no "lives" after and6)
# Found sources ([born in] [and] [lives], each gap 1..16): 0 (1, 1) and 1 (1, 3): several.


def test_a_bridge_across_two_stretches() -> None:
    assert len(bridges(TWO_TEXT, 8)) == 5
    assert len(bridges(TWO_TEXT, 3)) == 4  # born in*and*lives is 4 tokens
    assert found_sources(TWO, TWO_TEXT, 16) == [0, 1]
    # in*and*lives at k = 2: source 0, g = 2, df_2 = 1 (doc 0): linkable, support 1, slop 2; source 1,
    # g = 4, df_4 = 2: not. The single-stretch bridges have df = 3 at g = 1. Search n-grams all have
    # df 3. So in*and*lives and born in*and*lives are linkable, the first minimal.
    found = assess_gap(TWO, TWO_TEXT, 2, 8)
    assert found["bridges"] == [(0, len(TWO_TEXT), 1, 2, "source"), (*span(TWO_TEXT, "in [DATE] and [PLACE] lives"), 1, 2, "source")]
    assert found["minimal"] == [(*span(TWO_TEXT, "in [DATE] and [PLACE] lives"), 1, 2, "source")]
    # Given source 1: g = 4, df_4 = 2: nothing linkable.
    assert assess_gap(TWO, TWO_TEXT, 2, 8, source=1)["bridges"] == []


def test_df_grows_with_the_slop() -> None:
    # in*and*lives: m = (2, 4, None): df_0..df_5 = 0, 0, 1, 1, 2, 2 (at least one token between runs).
    assert [df_within(TWO, (("in",), ("and",), ("lives",)), s) for s in range(6)] == [0, 0, 1, 1, 2, 2]
    # in*and in SPRING below: m = (4, 1, 1): 0, 2, 2, 2, 3, 3.
    assert [df_within(SPRING, (("in",), ("and",)), s) for s in range(6)] == [0, 2, 2, 2, 3, 3]


# -- G = 1 against G = 16 -------------------------------------------------------------------------

SPRING = [
    "born in the spring of 1990 and lives",  # born0 in1 the2 spring3 of4 1990(5) and6 lives7
    "and lives. born in Ptuj and works",  # and0 lives1 born2 in3 ptuj4 and5 works6
    "and lives. born in Kranj and works",
]
SPRING_TEXT = "born in [DATE] and lives"
# Segments [born in] [and lives]; bridges in*and, born in*and (m = 4, 1, 1) and in*and lives,
# born in*and lives (m = 4, None, None: documents 1 and 2 have "and lives" only before "in").
# Every search n-gram of the text is in all three documents.


def test_the_largest_gap_decides() -> None:
    # G = 16: source found, document 0 (gap 4). in*and: g = 4, df_4 = 3: not linkable. in*and lives:
    # g = 4, df_4 = 1: linkable, support 1, slop 4, and born in*and lives, which contains it.
    wide = assess_gap(SPRING, SPRING_TEXT, 2, 8, max_gap=16)
    assert (wide["source"], wide["sources"]) == ("found", [0])
    assert wide["bridges"] == [(0, len(SPRING_TEXT), 1, 4, "source"), (*span(SPRING_TEXT, "in [DATE] and lives"), 1, 4, "source")]
    assert wide["minimal"] == [(*span(SPRING_TEXT, "in [DATE] and lives"), 1, 4, "source")]
    # Unknown source, G = 16: s* = 4 for in*and lives, df_4 = 1: the same bridges, rule "unknown".
    assert [entry[2:] for entry in assess_gap(SPRING, SPRING_TEXT, 2, 8, source=9)["minimal"]] == [(1, 4, "unknown")]
    # G = 1: document 0's gap of 4 is too wide: no source. in*and: s* = 1, df_1 = 2 (docs 1, 2): not
    # linkable; in*and lives matches nothing within 1.
    narrow = assess_gap(SPRING, SPRING_TEXT, 2, 8, arity=2, max_gap=1)
    assert (narrow["source"], narrow["bridges"], narrow["anonymity"]) == ("unknown", [], None)
    # Combinations at G = 1: candidates "born in", "and lives" (docs 0, 1, 2) and the maximal frequent
    # bridge born in*and read at s = 1 (docs 1, 2); every pair keeps >= 2 documents.
    assert not narrow["combination_linkable"]
    assert protected(SPRING, SPRING_TEXT, 2, 8, 2, ALL, max_gap=1)
    assert not protected(SPRING, SPRING_TEXT, 2, 8, 2, ALL, max_gap=16)


# -- a bridge combined with an n-gram -------------------------------------------------------------

FOX = [
    "red fox one blue sky",
    "red fox two blue sea",
    "green fox one blue sea",
    "red fox blue sky",  # "fox blue" with no token between: no match for fox*blue
]
FOX_TEXT = "red fox [X] blue sky"
# max_n = 2: the only bridge is fox*blue, m = (1, 1, 1, None). n-gram postings: "red fox" {0, 1, 3},
# "blue sky" {0, 3}, the rest larger: nothing linkable at k = 2. Source: [red fox] then [blue sky]
# 1..16 apart: document 0 only. fox*blue at g = 1: {0, 1, 2}, 3 >= 2: frequent, a candidate.
# Candidates: "red fox" {0, 1, 3}, "blue sky" {0, 3}, fox*blue {0, 1, 2}.
#   red fox + blue sky = {0, 3} (2); fox*blue + red fox = {0, 1} (2); fox*blue + blue sky = {0} (1: linkable).


def test_a_bridge_and_an_n_gram_together() -> None:
    alone = assess_gap(FOX, FOX_TEXT, 2, 2, arity=1)
    assert (alone["source"], alone["bridges"], alone["combination_linkable"], alone["anonymity"]) == ("found", [], False, None)
    pair = assess_gap(FOX, FOX_TEXT, 2, 2, arity=2)
    expected = {(frozenset({(*span(FOX_TEXT, "fox [X] blue"), 1), (*span(FOX_TEXT, "blue sky"), None)}), 1)}
    assert pair["combinations"] == expected
    assert (pair["combination_linkable"], pair["anonymity"]) == (True, 1)
    # Arity 3: the triple (support {0}) holds the linkable pair, so it is not minimal.
    assert assess_gap(FOX, FOX_TEXT, 2, 2, arity=3)["combinations"] == expected
    # Protected under exact and search at arity 2 (the pair of n-grams keeps 2 documents), not with gap.
    assert protected(FOX, FOX_TEXT, 2, 2, 2)
    assert not protected(FOX, FOX_TEXT, 2, 2, 2, ALL)
    assert protected(FOX, FOX_TEXT, 2, 2, 1, ALL)


def test_settings_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="max_gap=17 must be between 1 and 16"):
        assess_gap(FOX, FOX_TEXT, 2, 2, max_gap=17)
    with pytest.raises(ValueError, match="arity=4 must be between 1 and 3"):
        assess_gap(FOX, FOX_TEXT, 2, 2, arity=4)


def test_the_oracle_is_independent_of_the_package() -> None:
    """It imports nothing of spacy_delink (the standard library for types only) and opens no file: its tables come from ICU, tantivy and unicodedata."""
    tree = ast.parse(Path(spec_oracle.__file__).read_text(encoding="utf-8"))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= {"__future__", "dataclasses", "functools", "icu", "itertools", "re", "tantivy", "typing", "unicodedata"}
    calls = {node.func.id for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)}
    assert "open" not in calls
