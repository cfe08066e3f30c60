"""The ``._.delink_*`` attributes every delink component writes, registered once per process.

Every name carries the ``delink_`` prefix, so none collides with another package's
``span._.support`` or ``doc._.protected``; an attribute of that name registered by
someone else is never overwritten (``force=True``) but refused with a clear error.

Values are plain (no getters over live objects) so they survive ``Doc.to_bytes``,
``DocBin`` and ``nlp.pipe(..., n_process=2)``. Token risks are stored as one list in
``doc.user_data`` and read through a getter, which is cheaper than a value per token.
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Union

from spacy.tokens import Doc, Span, Token

from ..errors import DelinkError

TOKEN_RISK_KEY = "delink.token_risk"
_registered = False

Owner = Union[type[Doc], type[Span], type[Token]]


def _token_risk(token: Token) -> float:
    risks = token.doc.user_data.get(TOKEN_RISK_KEY)
    return float(risks[token.i]) if risks else 0.0


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
    register(Span, "delink_risk", default=0.0)
    register(Span, "delink_combinations")
    register(Token, "delink_risk", getter=_token_risk)
    register(Doc, "delink_source")
    register(Doc, "delink_passes", default=0)
    register(Doc, "delink_edits")
    register(Doc, "delink_protected")
    _registered = True


def set_token_risks(doc: Doc, spans: list[Span]) -> None:
    """``token._.delink_risk`` = the highest risk of the spans covering the token."""
    risks = [0.0] * len(doc)
    for span in spans:
        risk = float(span._.delink_risk)
        for i in range(span.start, span.end):
            if risk > risks[i]:
                risks[i] = risk
    doc.user_data[TOKEN_RISK_KEY] = risks
