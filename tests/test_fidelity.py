"""Never invent, never contradict (``llm.tasks.rewrite.fidelity``): every reason, through the fake endpoint.

Each of issue 37's examples goes through the task and ``OpenAICompatible.v1`` to a hostile
endpoint (``hostile_openai``) and comes back refused for its reason; faithful answers
(a paraphrase, a generalization of the sentence's own year) are accepted; a model that
answers "in 1871" everywhere gets nothing accepted on the shipped samples.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
import spacy

from fake_openai_server import prompt_items
from hostile_openai import ISSUE_EXAMPLES, HostileOpenAI
from spacy_delink.errors import InputError
from spacy_delink.llm.models.openai_compatible import make_openai_compatible
from spacy_delink.llm.tasks.rewrite import RESULT_KEY, make_rewrite_task
from spacy_delink.llm.tasks.rewrite.fidelity import FIDELITY_REASONS, FidelityCheck

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
#: Document frequencies of a toy collection, for ``rarer_word``.
#: Every other word has df 10.
DF = {"river": 40, "near": 20, "close": 30, "stream": 30, "watercourse": 1, "the": 48, "on": 48}


def frequencies(text: str) -> list[int]:
    return [DF.get(word.lower().strip(".,"), 10) for word in text.split()] or [0]


@pytest.fixture(scope="module")
def server() -> Iterator[HostileOpenAI]:
    with HostileOpenAI() as fake:
        yield fake


def verdicts(server: HostileOpenAI, text: str, spans: list[tuple[int, int]], script: dict[str, str], **task: Any) -> dict[str, Any]:
    """The task's result for ``spans`` of ``text`` when the endpoint answers ``script``."""
    server.script = script
    rewrite = make_rewrite_task(spans_per_prompt=1, **task)
    rewrite.use_document_frequencies(frequencies)
    return verdicts_with(rewrite, server, text, spans)


@pytest.mark.parametrize(("sentence", "span", "replacement", "reason"), ISSUE_EXAMPLES)
def test_each_issue_example_is_refused_for_its_reason(server: HostileOpenAI, sentence: str, span: str, replacement: str, reason: str) -> None:
    start = sentence.index(span)
    result = verdicts(server, sentence, [(start, start + len(span))], {span: replacement})
    assert result["accepted"] == [] and result["rejected"][reason] == 1, result["rejected"]


@pytest.mark.parametrize(
    ("sentence", "span", "replacement", "reason"),
    [
        # invented_number: a new year, a number word, digits in a name
        ("The farm was registered in 1997.", "registered in 1997", "registered in 1871", "invented_number"),
        ("The farm was sold to the neighbours.", "the neighbours", "three neighbours", "invented_number"),
        # ... or one the sentence holds, once more (Qwen 0.5B on TAB: who was convicted changes)
        ("The judge convicted the applicants and sentenced the first applicant to prison.", "convicted the applicants",
         "convicted the first applicant", "invented_number"),
        # invented_name: a court, a person, a town the sentence does not name
        ("The farm was sold to the neighbours.", "to the neighbours", "to Mr Novak", "invented_name"),
        ("The appeal was heard by the court.", "by the court", "by the Constitutional Court", "invented_name"),
        # rarer_word: "watercourse" (df 1) is rarer than "river" (df 40), the rarest word it replaces
        ("The farm near the river was sold.", "near the river", "near the watercourse", "rarer_word"),
        # negation: added, dropped, a modal added, an allegation stated as fact
        ("The fee was paid in time.", "was paid", "was never paid", "negation"),
        ("The fee was not paid in time.", "was not paid", "was paid", "negation"),
        ("The court found that the fee was paid.", "found that the fee was paid", "found that the fee may have been paid", "negation"),
        ("He claimed that the house was sold.", "claimed that the house was sold", "showed that the house was sold", "negation"),
        # broken_sentence: a doubled word, a lower-case start, a lost final mark
        ("The tenants sued the company.", "sued the company", "sued the the company", "broken_sentence"),
        ("The tenants sued the company.", "The tenants", "tenants", "broken_sentence"),
        ("The tenants sued the company.", "sued the company.", "took them to court and", "broken_sentence"),
        # ... and a sentence end inside the span dropped: Qwen 0.5B's "cattle. In" → "in" ("a herd of in 1995")
        ("The applicant kept a herd of Cika cattle. In 1995 the farm was sold.", "cattle. In", "in", "broken_sentence"),
        # ... or a paragraph end: Qwen 0.5B on TAB ("continued the action. On down to commence")
        ("He went bankrupt on that day and the trustee continued the action.\n\nThe trial was set down to commence in May.",
         "continued the action.\n\nThe trial was set", "continued the action. On", "broken_sentence"),
    ],
)
def test_hostile_answers_per_reason(server: HostileOpenAI, sentence: str, span: str, replacement: str, reason: str) -> None:
    start = sentence.index(span)
    result = verdicts(server, sentence, [(start, start + len(span))], {span: replacement})
    assert result["accepted"] == [] and result["rejected"][reason] == 1, result["rejected"]


@pytest.mark.parametrize(
    ("sentence", "span", "replacement"),
    [
        ("The farm was registered in 1997.", "registered in 1997", "registered in the 1990s"),  # the generalizer's form
        ("The farm near the river was sold.", "near the river", "close to the stream"),  # df 30 >= 20, the rarest replaced
        ("The Court dismissed the appeal.", "The Court dismissed", "The Court rejected"),
        ("The applicants appealed. On that day the court ruled.", "The applicants appealed. On", "An appeal was lodged. On"),
        ("The applicants appealed.\n\nOn that day the court ruled.", "The applicants appealed.\n\nOn", "An appeal was lodged.\n\nOn"),
    ],
)
def test_faithful_answers_are_accepted(server: HostileOpenAI, sentence: str, span: str, replacement: str) -> None:
    start = sentence.index(span)
    result = verdicts(server, sentence, [(start, start + len(span))], {span: replacement})
    assert result["accepted"] == [[start, start + len(span), replacement]], result["rejected"]


def test_checks_can_be_chosen_and_unknown_ones_are_refused(server: HostileOpenAI) -> None:
    sentence, span = "The fee was paid in time.", "was paid"
    start = sentence.index(span)
    result = verdicts(server, sentence, [(start, start + 8)], {span: "was never paid"}, fidelity=["invented_name"])
    assert result["accepted"] == [[start, start + 8, "was never paid"]]
    with pytest.raises(InputError, match="task.fidelity: unknown check"):
        make_rewrite_task(fidelity=["lies"])
    assert FidelityCheck("[REDACTED]").checks == FIDELITY_REASONS


def test_the_1871_model_gets_no_answer_accepted_on_the_samples(server: HostileOpenAI, delink: Callable[..., Any], tmp_path: Path) -> None:
    index = tmp_path / "index"
    assert delink("index", str(SAMPLES / "corpus.jsonl"), "--output", str(index)).returncode == 0
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_rewriter", config={
        "index": str(index), "k": 2, "arity": 1, "max_passes": 1, "cache_dir": None,
        "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": server.base_url, "name": "1871",
                  "retries": 1, "backoff": 0.0, "timeout": 5.0},
    })
    rewriter = nlp.get_pipe("delink_rewriter")
    texts = [json.loads(line)["text"] for line in (SAMPLES / "deidentified.jsonl").read_text().splitlines()]
    docs = list(nlp.pipe(texts))
    assert all(doc._.delink_protected for doc in docs)
    assert not any(e["by"] == "llm" for doc in docs for e in doc._.delink_edits)
    assert all("1871" not in doc.text for doc in docs)
    refused = {k: v for k, v in rewriter.stats.items() if k.startswith("rejected_")}
    assert refused.get("rejected_invented_number", 0) > 0, refused


# -- whole sentences (task.unit = "sentence") ----------------------------------------------------
SENTENCES = "The farm near the river Sava was registered in 1997. The owner kept bees. It was sold."


def test_sentence_items_hold_whole_sentences_and_the_phrases_to_drop() -> None:
    task = make_rewrite_task(unit="sentence", spans_per_prompt=5)
    sava, year = SENTENCES.index("Sava"), SENTENCES.index("1997")
    doc = task.request_doc(spacy.blank("en").vocab, SENTENCES, [(sava, sava + 4), (year, year + 4)])
    ((prompt,), _), = list(task.generate_prompts([doc]))
    items = prompt_items(prompt)
    first = SENTENCES[: SENTENCES.index(" The owner")]
    assert items == [{"id": 1, "context": f"⟦{first}⟧", "span": first, "remove": ["Sava", "1997"]}]  # one item for both
    assert "remove" in prompt and "Keep every other fact" in prompt
    with pytest.raises(InputError, match="task.unit must be one of span, sentence"):
        make_rewrite_task(unit="clause")


def test_sentence_examples_are_the_generalizers_own_outputs() -> None:
    from spacy_delink.llm.models.generalize import candidates
    from spacy_delink.llm.tasks.rewrite.prompt import SENTENCE_EXAMPLES, read_examples

    examples = read_examples(SENTENCE_EXAMPLES)
    generalized = 0
    for example in examples:
        assert all(phrase in example["span"] and phrase not in example["replacement"] for phrase in example["remove"])
        forms = [form for c in candidates(example["span"], "en") if example["span"][c.start : c.end] in " ".join(example["remove"])
                 or any(p in example["span"][c.start : c.end] for p in example["remove"]) for form in c.forms]
        generalized += any(form.lower() in example["replacement"].lower() for form in forms)
    assert generalized >= 2


def test_a_rewritten_sentence_replaces_its_sentence_and_is_checked(server: HostileOpenAI, tmp_path: Path) -> None:
    from spacy_delink.linkage.index import IndexBuilder

    corpus = [
        "The farm near the river Sava was registered in 1997. The owner kept bees. It was sold.",
        "A farm near a river was registered in the 1990s. The owner kept bees. It was sold.",
        "A farm near a river was registered in the 1990s. The owner kept bees. It was sold, we hear.",
        "The owner kept bees. It was sold.",
    ]
    IndexBuilder(progress=False).build([(f"d{i}", t) for i, t in enumerate(corpus)], tmp_path / "index")
    first = SENTENCES[: SENTENCES.index(" The owner")]
    rewritten = "A farm near a river was registered in the 1990s."
    server.script = {first: rewritten}
    nlp = spacy.blank("en")
    nlp.add_pipe("delink_rewriter", config={
        "index": str(tmp_path / "index"), "k": 2, "arity": 1, "max_passes": 1, "cache_dir": None, "keep_source": True,
        "task": {"@llm_tasks": "spacy_delink.Rewrite.v1", "unit": "sentence"},
        "model": {"@llm_models": "spacy_delink.OpenAICompatible.v1", "base_url": server.base_url, "name": "script",
                  "retries": 1, "backoff": 0.0, "timeout": 5.0},
    })
    doc = nlp(SENTENCES)
    assert doc.text == f"{rewritten} The owner kept bees. It was sold." and doc._.delink_protected
    assert [(e["start"], e["end"], e["original"], e["by"]) for e in doc._.delink_edits] == [(0, len(first), first, "llm")]
    # The same sentence with a phrase to drop still in it is an echo; one that invents a year is refused too.
    task = make_rewrite_task(unit="sentence")
    sava = SENTENCES.index("Sava")
    for answer, reason in ((first.replace("1997", "the 1990s"), "echo"), (rewritten.replace("the 1990s", "1871"), "invented_number")):
        server.script = {first: answer}
        result = verdicts_with(task, server, SENTENCES, [(sava, sava + 4)])
        assert result["accepted"] == [] and result["rejected"][reason] == 1, (answer, result["rejected"])


def verdicts_with(task: Any, server: HostileOpenAI, text: str, spans: list[tuple[int, int]]) -> dict[str, Any]:
    model = make_openai_compatible(server.base_url, "script", retries=1, backoff=0.0, timeout=5.0)
    doc = task.request_doc(spacy.blank("en").vocab, text, spans)
    prompts, shards = zip(*task.generate_prompts([doc]))
    (answered,) = task.parse_responses(shards, model(prompts))
    result: dict[str, Any] = answered.user_data[RESULT_KEY]
    return result
