"""The custom attributes every delink component writes, registered once per process.

They are plain values (no getters over live objects) so they survive ``Doc.to_bytes``,
``DocBin`` and ``nlp.pipe(..., n_process=2)``. Token risks are stored as one list in
``doc.user_data`` and read through a getter, which is cheaper than a value per token.
"""
from __future__ import annotations

from spacy.tokens import Doc, Span, Token

TOKEN_RISK_KEY = "delink.token_risk"
_registered = False


def _token_risk(token: Token) -> float:
    risks = token.doc.user_data.get(TOKEN_RISK_KEY)
    return float(risks[token.i]) if risks else 0.0


def register_extensions() -> None:
    """Register (with ``force=True``) the Doc, Span and Token extensions, once."""
    global _registered
    if _registered:
        return
    Doc.set_extension("anonymity", default=None, force=True)
    Doc.set_extension("linkage_risk", default=0.0, force=True)
    Doc.set_extension("combinations", default=None, force=True)
    Doc.set_extension("combination_linkable", default=False, force=True)
    Span.set_extension("support", default=None, force=True)
    Span.set_extension("linkage_risk", default=0.0, force=True)
    Span.set_extension("combinations", default=None, force=True)
    Token.set_extension("linkage_risk", getter=_token_risk, force=True)
    Doc.set_extension("delink_source", default=None, force=True)
    Doc.set_extension("delink_passes", default=0, force=True)
    Doc.set_extension("delink_edits", default=None, force=True)
    Doc.set_extension("protected", default=None, force=True)
    _registered = True


def set_token_risks(doc: Doc, spans: list[Span]) -> None:
    """``token._.linkage_risk`` = the highest risk of the spans covering the token."""
    risks = [0.0] * len(doc)
    for span in spans:
        risk = float(span._.linkage_risk)
        for i in range(span.start, span.end):
            if risk > risks[i]:
                risks[i] = risk
    doc.user_data[TOKEN_RISK_KEY] = risks
