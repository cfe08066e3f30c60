"""An installed plugin costs a spaCy user nothing until it is used.

spaCy imports the module behind every installed ``spacy_factories`` entry point whenever it
builds a ``Language`` (``spacy.blank``, ``spacy.load``), so those modules must not pull in
what only some commands need, nor compile anything: scikit-learn alone took a second of
every ``spacy.blank``, and coding an empty sequence at import half a second more.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

import spacy_delink
import spacy_delink.redaction as redaction

#: Modules a pipeline that does not train or measure a redactor never needs.
NOT_FOR_EVERY_PIPELINE = [
    "sklearn",
    "spacy_delink.redaction.baselines",
    "spacy_delink.redaction.privacy",
    "spacy_delink.redaction.evaluation",
]


def test_building_a_pipeline_imports_no_redaction_training_or_measurement() -> None:
    script = (
        "import json, sys, spacy\n"
        "nlp = spacy.blank('en')\n"
        "from spacy.language import Language\n"
        "factories = [f for f in ('delink_risk', 'delink_combinations', 'delink_rewriter', 'delink_redactor') if Language.has_factory(f)]\n"
        "from spacy_delink.linkage.index import codec\n"
        f"print(json.dumps({{'loaded': [m for m in {NOT_FOR_EVERY_PIPELINE!r} if m in sys.modules], 'factories': factories,"
        " 'compiled': len(codec._encode.signatures)}))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["factories"] == ["delink_risk", "delink_combinations", "delink_rewriter", "delink_redactor"]
    assert seen["loaded"] == []
    assert seen["compiled"] == 0  # nothing is coded (and so compiled) at import


@pytest.mark.parametrize("package", [spacy_delink, redaction], ids=["spacy_delink", "redaction"])
def test_every_public_name_loads_on_first_access(package: object) -> None:
    names = list(package.__all__)  # type: ignore[attr-defined]
    assert names == sorted(names) and dir(package) == names
    for name in names:
        assert getattr(package, name) is not None, name
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        getattr(package, "no_such_name")


def test_lazy_names_are_the_submodules_objects() -> None:
    from spacy_delink.redaction.baselines import logreg_word_weights
    from spacy_delink.redaction.component import DelinkRedactor

    assert redaction.logreg_word_weights is logreg_word_weights
    assert redaction.DelinkRedactor is DelinkRedactor
