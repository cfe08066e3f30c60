"""A fake endpoint whose answers change facts (the never-invent checks' adversary).

``HostileOpenAI`` is ``fake_openai_server.FakeOpenAI`` with two more behaviours:

* ``script``: each item's replacement is ``script[span]`` (set by the test), else the span's
  words in another order — how a model states another fact in a well-formed answer;
* ``1871``: every span answered with "in 1871" (the issue's model whose answer was accepted
  in 12 of 12 sample outputs).
"""
from __future__ import annotations

import json
from typing import Any

from fake_openai_server import FakeOpenAI, prompt_items

#: The issue's examples: (sentence, flagged span, hostile replacement, the reason it must get).
ISSUE_EXAMPLES = [
    ("The Supreme Court dismissed the applicants' appeal, upholding the judgment.",
     "dismissed the applicants' appeal, upholding", "dismissed the the appeal was upheld", "broken_sentence"),
    ("The deposit was deposited with the court in time.", "was deposited", "was not deposited", "negation"),
    ("The Regional Court convicted the applicants of fraud.", "convicted the applicants", "convicted the first applicant", "invented_number"),
    ("The applicants alleged that the proceedings had been unfair.", "The applicants alleged that the proceedings",
     "The applicants said the proceedings", "negation"),
    ("The claim related to Law no. 466. They requested compensation for the loss.", "to Law no. 466. They requested compensation",
     "to the Supreme Court", "invented_name"),
    ("The farm near the river Sava was registered in 1997.", "the river Sava", "the river in 1871", "invented_number"),
]


class HostileOpenAI(FakeOpenAI):
    """``FakeOpenAI`` plus the ``script`` and ``1871`` behaviours (module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.script: dict[str, str] = {}

    def answer(self, behaviour: str, prompt: str) -> tuple[int, Any]:
        if behaviour not in ("script", "1871"):
            return super().answer(behaviour, prompt)
        with self.lock:
            self.prompts.append(prompt)
        answer = [
            {
                "id": item["id"],
                "span": item["span"],
                "replacement": "in 1871" if behaviour == "1871" else self.script.get(item["span"], " ".join(reversed(item["span"].split()))),
            }
            for item in prompt_items(prompt)
        ]
        return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": json.dumps(answer)}}]}
