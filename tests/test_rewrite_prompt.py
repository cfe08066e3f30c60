"""The rewrite task's prompt template (``llm.tasks.rewrite.prompt``): Jinja, checked when read."""
from __future__ import annotations

from pathlib import Path

import pytest

from spacy_delink.errors import InputError
from spacy_delink.llm.tasks.rewrite import make_rewrite_task
from spacy_delink.llm.tasks.rewrite.prompt import DEFAULT_TEMPLATE, read_template


def test_a_template_missing_a_variable_or_in_the_old_str_format_form_is_one_clear_line(tmp_path: Path) -> None:
    old = tmp_path / "old.txt"
    old.write_text("Mark spans {open}like this{close}; use {mask}.\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"must use \{\{ open \}\}, \{\{ close \}\}, \{\{ mask \}\}, \{\{ prompt_examples \}\}"):
        read_template(old)
    broken = tmp_path / "broken.jinja"
    broken.write_text("{{ open }}{{ close }}{{ mask }}\n{% for example in prompt_examples %}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"broken.jinja:\d+: .*fix the Jinja syntax"):
        read_template(broken)
    with pytest.raises(InputError, match="not found"):
        read_template(tmp_path / "missing.jinja")


def test_a_users_template_lays_out_the_prompt_and_the_shipped_one_is_valid(tmp_path: Path) -> None:
    assert read_template(DEFAULT_TEMPLATE).startswith("You rewrite")
    mine = tmp_path / "mine.jinja"
    mine.write_text(
        "Rewrite {{ open }}..{{ close }}, else {{ mask }}.{% for example in prompt_examples %}\n"
        "Q: {{ example.request }} A: {{ example.answer }}{% endfor %}\n",
        encoding="utf-8",
    )
    task = make_rewrite_task(template=str(mine))
    task.use_mask("<M>")
    preamble = task.prompt_template.split("\ncontext=")[0]
    assert preamble.startswith("Rewrite ⟦..⟧, else <M>.\nQ: [{\"id\": 1, \"context\": ")
    assert preamble.count("\nQ: ") == len(task.examples)
