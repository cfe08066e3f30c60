"""What a request to ``/v1/assess`` and ``/v1/protect`` may hold, and how it becomes a job.

Strict JSON types (a number is not a text, ``true`` is not a k), no unknown fields (a
misspelt ``arity`` would silently mean the default), no key given twice in one object
(as the command line's JSONL reader), one of ``text``, ``texts`` or ``documents``. The records that come back are the library's own, described here only as
objects: their fields are documented with `delink assess` and `delink protect`
(docs/cli.md), and may grow.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Union

from ..extras import require_extra

require_extra("serve", "delink serve")  # one line naming the extra, before FastAPI's own ImportError

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from ..batch import batch_documents
from ..errors import InputError
from ..linkage.combinations import check_arity
from ..linkage.ngrams import check_k
from .limits import ApiError
from .settings import ServeSettings

#: Most validation problems named in one error message.
PROBLEMS_SHOWN = 3


class Document(BaseModel):
    """A text with the id its record will carry."""

    model_config = ConfigDict(extra="forbid", strict=True)
    id: Union[StrictStr, StrictInt] = Field(description="A unique, non-empty string or an integer.")
    text: StrictStr


class TextsRequest(BaseModel):
    """One text, a list of texts (ids 0, 1, ...) or a list of documents; k and arity default to the server's."""

    model_config = ConfigDict(
        extra="forbid", strict=True,
        json_schema_extra={"examples": [{"texts": ["The applicant's farm near the river Sava was registered in 1997."], "k": 2, "arity": 3}]},
    )
    text: Optional[StrictStr] = Field(None, description="One text (its record's id is 0).")
    texts: Optional[list[StrictStr]] = Field(None, description="Texts; their records' ids are their positions.")
    documents: Optional[list[Document]] = Field(None, description="Texts with ids.")
    k: Optional[StrictInt] = Field(None, description="Linkable when fewer than k documents match (>= 2) [default: the server's].")
    arity: Optional[StrictInt] = Field(None, description="1: single phrases; 2 or 3: also combinations [default: the server's].")


class RecordsResponse(BaseModel):
    """The records, one per text in input order, as `delink assess` / `delink protect` write them."""

    records: list[dict[str, Any]]


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable, for programs: body_too_large, invalid_json, invalid_request, ...")
    message: str = Field(description="For people: what was refused and how to fix it.")


class ErrorResponse(BaseModel):
    error: ErrorDetail


@dataclass(frozen=True)
class Job:
    """A request made ready: checked documents and the protection they are asked at."""

    documents: list[tuple[Any, str]]
    k: int
    arity: int

    @property
    def characters(self) -> int:
        return sum(len(text) for _, text in self.documents)


def _problems(err: ValidationError) -> str:
    problems = [f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in err.errors(include_input=False)]
    more = f" (and {len(problems) - PROBLEMS_SHOWN} more)" if len(problems) > PROBLEMS_SHOWN else ""
    return "; ".join(problems[:PROBLEMS_SHOWN]) + more


def _no_repeated_key(pairs: list[tuple[str, Any]]) -> None:
    """Refuses a JSON object that gives a key twice: a parser keeps the last value and drops the others silently,
    so two "text" fields would be checked as one text while a reader of the body sees the other."""
    keys = [key for key, _ in pairs]
    if len(set(keys)) < len(keys):
        repeated = next(key for position, key in enumerate(keys) if key in keys[:position])
        raise ValueError(f"gives the key {repeated!r} twice in one object")


def parse_job(body: bytes, settings: ServeSettings) -> Job:
    """The job a body asks for, or the refusal that says what is wrong with it."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as err:
        raise ApiError(400, "invalid_json", f"the body is not JSON ({err}); send a JSON object such as {{\"texts\": [\"...\"]}}") from None
    try:
        json.loads(body, object_pairs_hook=_no_repeated_key)
    except ValueError as err:
        raise ApiError(400, "invalid_json", f"the body {err}; give each key once (the command line refuses such a line too)") from None
    try:
        request = TextsRequest.model_validate(data)
    except ValidationError as err:
        raise ApiError(422, "invalid_request", f"invalid request: {_problems(err)}") from None
    given = [name for name in ("text", "texts", "documents") if getattr(request, name) is not None]
    if len(given) != 1:
        raise ApiError(422, "invalid_request", f"give exactly one of text, texts or documents, got {', '.join(given) or 'none'}")
    if request.documents is not None:
        texts: list[str] = [document.text for document in request.documents]
        ids: Optional[list[Any]] = [document.id for document in request.documents]
    else:
        texts, ids = ([request.text] if request.text is not None else request.texts or []), None
    if len(texts) > settings.max_texts:
        raise ApiError(413, "too_many_texts", f"{len(texts)} texts in one request, over the limit of {settings.max_texts}; split the batch")
    for position, text in enumerate(texts):
        if len(text) > settings.max_chars:
            raise ApiError(
                413, "text_too_long",
                f"{given[0]}[{position}] has {len(text):,} characters, over the limit of {settings.max_chars:,}; split the text",
            )
    k = settings.k if request.k is None else request.k
    arity = settings.arity if request.arity is None else request.arity
    try:
        check_k(k)
        check_arity(arity, allow_single=True)
        documents = batch_documents(texts, ids, where=given[0])
    except InputError as err:
        raise ApiError(422, "invalid_request", str(err)) from None
    if not settings.allow_weaker and (k < settings.k or arity < settings.arity):
        raise ApiError(
            422, "weaker_than_server",
            f"k={k}, arity {arity} is less protection than this server enforces (k >= {settings.k}, arity >= {settings.arity}); "
            "ask for at least that, or leave k and arity out",
        )
    return Job(documents, k, arity)
