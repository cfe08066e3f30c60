"""The shared protection check (conftest.assert_protected) can fail under each reading it checks by default."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import assert_protected, build_index

#: "supply. He" is one phrase to a search engine (SPEC §8), in one document only.
SENTENCE_END = [
    "The applicant intended to supply. He was arrested in Ormož in 1997.",
    "The applicant intended to stay. She was arrested in Ljubljana.",
    "He intended to leave the country. He was arrested.",
    "Nobody intended to supply anything.",
]
#: "red ~ green" around a mask is a sloppy phrase of two documents (SPEC §9); each word is in three.
AROUND_A_MASK = ["red blue green.", "red green.", "blue green.", "red blue."]


@pytest.mark.parametrize(
    ("corpus", "text", "k", "protected_under"),
    [
        (SENTENCE_END, "The [PERSON] intended to supply. He was arrested.", 2, ("exact",)),
        (AROUND_A_MASK, "red [MASK] green.", 3, ("exact", "search")),
    ],
)
def test_a_text_linkable_under_one_reading_fails_the_default_check(
    tmp_path: Path, corpus: list[str], text: str, k: int, protected_under: tuple[str, ...]
) -> None:
    index = build_index(tmp_path, corpus)
    assert_protected(corpus, text, k, index=index, readings=protected_under)  # protected by the readings before it
    with pytest.raises(AssertionError, match="the oracle finds .* linkable under \\('exact', 'search', 'gap'\\)"):
        assert_protected(corpus, text, k, index=index)
