"""``redact_url``: the one rule for every URL a message shows (corpus inputs, the LLM endpoint)."""
from __future__ import annotations

import pytest

from spacy_delink.llm.models.openai_compatible import OpenAICompatibleModel
from spacy_delink.urls import redact_url

SECRET = "hunter2-s3cr3t"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        # user info, every query value (secret-looking or not) and the fragment
        (f"https://me:{SECRET}@host:8443/v1?api-version=7&api-key={SECRET}#{SECRET}",
         "https://***@host:8443/v1?api-version=***&api-key=***#***"),
        (f"http://{SECRET}@127.0.0.1:8000/v1", "http://***@127.0.0.1:8000/v1"),
        (f"http://[::1]:8080/v1?token={SECRET}", "http://[::1]:8080/v1?token=***"),
        (f"s3://bucket/key.jsonl?versionId={SECRET}", "s3://bucket/key.jsonl?versionId=***"),
        ("https://host/v1?flag", "https://host/v1?flag=***"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    ],
)
def test_redact_url_shows_scheme_host_port_path_and_query_names_only(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert SECRET not in redact_url(url)


def test_the_llm_endpoint_is_shown_by_the_same_rule() -> None:
    model = OpenAICompatibleModel(
        f"http://u:{SECRET}@127.0.0.1:9/v1?api-version=2024&sig={SECRET}", "m", api_key_env=None, timeout=1.0, deadline=1.0,
        retries=0, backoff=0.0, max_in_flight=1, temperature=0.0, max_tokens=16, context_length=512, breaker_threshold=1,
        breaker_cooldown=1.0,
    )
    assert model.url == "http://***@127.0.0.1:9/v1/chat/completions?api-version=***&sig=***"
