"""The ``._.delink_*`` attributes every delink component writes, registered once per process.

Every name carries the ``delink_`` prefix, so none collides with another package's
``span._.support`` or ``doc._.protected``; an attribute of that name registered by
someone else is never overwritten (``force=True``) but refused with a clear error.

Values are plain (no getters over live objects) so they survive ``Doc.to_bytes``,
``DocBin`` and ``nlp.pipe(..., n_process=2)``. Token risks are stored as one list in
``doc.user_data`` and read through a getter, which is cheaper than a value per token.

The Doc scores combine what every component found: each records its own exact
anonymity under its own name in ``doc.user_data[FINDINGS_KEY]`` and ``doc._.delink_anonymity``
is the smallest of them, so the scores never depend on the order of the pipes and are
never less severe than what any one component found.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional, Union

import numba as nb
import numpy as np
from spacy.tokens import Doc, Span, Token

from .. import _kernels  # noqa: F401  (announces a compile of these kernels)
from ..errors import DelinkError
from ..linkage.scores import risk_from_anonymity

if TYPE_CHECKING:
    from spacy.training import Example

TOKEN_RISK_KEY = "delink.token_risk"
#: ``{component name: its exact anonymity (or None)}`` for the current text.
FINDINGS_KEY = "delink.anonymity_by_component"
#: ``user_data`` keys of delink's own values start with this; they describe one text.
DATA_PREFIX = "delink."
#: spaCy keeps extension values in ``user_data`` under ``(EXTENSION_MARK, name, start, end)``.
EXTENSION_MARK = "._."
_registered = False

Owner = Union[type[Doc], type[Span], type[Token]]


def _token_risk(token: Token) -> float:
    risks = token.doc.user_data.get(TOKEN_RISK_KEY)
    return float(risks[token.i]) if risks else 0.0


def _span_risk(span: Span) -> float:
    """``1 / span._.delink_support``, read from the support itself: a risk stored beside
    every support would be a second value per phrase to write, for nothing."""
    data: dict[Any, Any] = span.doc.user_data  # typed str-keyed; spaCy's own extension keys are tuples
    support = data.get((EXTENSION_MARK, "delink_support", span.start_char, span.end_char))
    return 1.0 / support if support else 0.0


def register(owner: Owner, name: str, *, default: Any = None, getter: Optional[Callable[..., Any]] = None) -> None:
    """Register ``owner._.name`` unless it exists; refuse one that another package registered differently."""
    if owner.has_extension(name):
        existing_default, _method, existing_getter, _setter = owner.get_extension(name)
        same_getter = (existing_getter is None and getter is None) or (
            existing_getter is not None
            and getter is not None
            and (existing_getter.__module__, existing_getter.__qualname__) == (getter.__module__, getter.__qualname__)
        )
        if not same_getter or (getter is None and existing_default != default):
            raise DelinkError(
                f"{owner.__name__}._.{name} is already registered by other code with another definition; "
                f"remove that registration (spacy-delink owns the ._.delink_* names)"
            )
        return
    if getter is not None:
        owner.set_extension(name, getter=getter)
    else:
        owner.set_extension(name, default=default)


def register_extensions() -> None:
    """Register the Doc, Span and Token extensions of the linkage components, once."""
    global _registered
    if _registered:
        return
    register(Doc, "delink_anonymity")
    register(Doc, "delink_risk", default=0.0)
    register(Doc, "delink_combinations")
    register(Doc, "delink_combination_linkable", default=False)
    register(Span, "delink_support")
    register(Span, "delink_readings")
    register(Span, "delink_risk", getter=_span_risk)
    register(Span, "delink_combinations")
    register(Token, "delink_risk", getter=_token_risk)
    register(Doc, "delink_source")
    register(Doc, "delink_passes", default=0)
    register(Doc, "delink_edits")
    register(Doc, "delink_protected")
    _registered = True


def set_token_risks(doc: Doc, first: np.ndarray, stop: np.ndarray, risks: np.ndarray) -> None:
    """``token._.delink_risk`` = the highest risk of the spans covering the token (0 where
    none does); span ``i`` covers tokens ``[first[i], stop[i])`` at risk ``risks[i]``."""
    token_risks = _highest_risks(
        len(doc), np.asarray(first, dtype=np.int64), np.asarray(stop, dtype=np.int64), np.asarray(risks, dtype=np.float64)
    )
    doc.user_data[TOKEN_RISK_KEY] = token_risks.tolist()


@nb.njit(cache=True, nogil=True)
def _highest_risks(length: int, first: np.ndarray, stop: np.ndarray, risks: np.ndarray) -> np.ndarray:
    """``set_token_risks``'s values in one compiled pass over the spans' tokens (spans cover
    a token or a few each): a few numpy passes per distinct risk cost more on a document."""
    highest = np.zeros(length)
    for i in range(len(first)):
        for token in range(first[i], stop[i]):
            highest[token] = max(highest[token], risks[i])
    return highest


def record_anonymity(doc: Doc, component: str, anonymity: int | None) -> None:
    """Record one component's exact anonymity and set the Doc scores to the most severe record.

    Every record is exact under its component's (k, arity), and the combinations result
    already includes arity 1, so the smallest support any component found is a search
    the adversary can run: ``doc._.delink_anonymity`` is that minimum, in any pipe order.
    A component that runs again (same name) replaces its own record.
    """
    findings = dict(doc.user_data.get(FINDINGS_KEY) or {})
    findings[component] = anonymity
    doc.user_data[FINDINGS_KEY] = findings
    found = [value for value in findings.values() if value is not None]
    doc._.delink_anonymity = min(found) if found else None
    doc._.delink_risk = risk_from_anonymity(doc._.delink_anonymity)


def carry_over(source: Doc, target: Doc) -> None:
    """Give ``target`` (a Doc on a new text) what ``source`` held that does not depend on the old text.

    Kept as given: the ``nlp.pipe(..., as_tuples=True)`` context, ``doc.cats`` and every
    ``user_data`` entry, including Doc-level extension values of other packages. Dropped:
    Span- and Token-level extension values (spaCy keys them by character offsets of the
    old text) and delink's own values (``delink.*`` keys, ``._.delink_*`` attributes),
    which describe the old text. Tokens, their attributes, ``doc.ents``, ``doc.spans`` and
    ``doc.tensor`` cannot survive a new text: pipes placed after the rewriter annotate it.
    """
    target._context = source._context
    target.cats = dict(source.cats)
    for key, value in source.user_data.items():
        if isinstance(key, tuple) and len(key) == 4 and key[0] == EXTENSION_MARK:
            if key[2] is not None or str(key[1]).startswith("delink_"):
                continue
        elif isinstance(key, str) and key.startswith(DATA_PREFIX):
            continue
        target.user_data[key] = value


def linkage_score(examples: Iterable["Example"], **_: Any) -> dict[str, float | None]:
    """Shares over the predicted Docs; linkage has no gold standard, so references are not read.

    ``delink_linkable_share``: Docs with a linkable phrase or combination (anonymity set);
    ``delink_mean_risk``: mean ``doc._.delink_risk``; ``delink_protected_share``: Docs a
    rewriter checked and found protected (None when no Doc went through a rewriter).
    """
    docs = [example.predicted for example in examples]
    if not docs:
        return {"delink_linkable_share": None, "delink_mean_risk": None, "delink_protected_share": None}
    protected = [doc._.delink_protected for doc in docs]
    return {
        "delink_linkable_share": sum(doc._.delink_anonymity is not None for doc in docs) / len(docs),
        "delink_mean_risk": sum(float(doc._.delink_risk) for doc in docs) / len(docs),
        "delink_protected_share": (
            None if all(value is None for value in protected) else sum(value is True for value in protected) / len(docs)
        ),
    }
