"""The ``delink assess`` record of one text: what the attack found, as JSON-able data.

The detectors compute (``attack``, ``ngrams``, ``gap``, ``combinations``); this module only
formats what they found: the phrases (minimal linkable n-grams of every reading and the gap
reading's minimal linkable bridges), the combinations (every reading's head, merged), the
scores and the readings. ``attack.assess_text`` runs the attack and returns this record.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from .combinations import CombinationAnalysis
from .gap import GapAnalysis
from .ngrams import LinkageAnalysis, minimal_across, reading_names

if TYPE_CHECKING:
    from .attack import Detection


def assess_record(detection: Detection, doc_id: Any, max_combinations: int) -> dict[str, Any]:
    """One output record (the schema of ``delink assess``) of a detection; ``max_combinations``
    caps the list of all readings' combinations."""
    record = {
        "id": doc_id,
        "k": detection.k,
        "arity": detection.arity,
        "readings": list(detection.readings),
        "linkage_risk": detection.linkage_risk,
        "anonymity": detection.anonymity,
        "ngrams": phrase_records(detection),
        "combinations": _merged_combination_records(detection, max_combinations),
        "combination_linkable": detection.combination_linkable,
        "unread_scripts": detection.unread_scripts,
    }
    if "gap" in detection.readings:
        gap = detection.part("gap").analysis
        assert isinstance(gap, GapAnalysis)
        record["gap"] = {"max_gap": gap.max_gap, "source": gap.source_rule}
    return record


def phrase_records(detection: Detection) -> list[dict[str, Any]]:
    """The ``ngrams`` list of a record: every reading's minimal linkable n-grams and the gap
    reading's minimal linkable bridges (SPEC §9, with their slop and rule), by start then end."""
    records = ngram_records([part.analysis for part in detection.parts if isinstance(part.analysis, LinkageAnalysis)])
    for part in detection.parts:
        if isinstance(part.analysis, GapAnalysis):
            records = sorted(records + bridge_records(part.analysis), key=lambda r: (r["start"], r["end"]))
    return records


def ngram_records(analyses: Sequence[LinkageAnalysis]) -> list[dict[str, Any]]:
    """The minimal linkable sets of every reading, with offsets (``ngrams.minimal_across``)."""
    columns = {name: column.tolist() for name, column in minimal_across(analyses).items()}
    text = analyses[0].text if analyses else ""
    return [
        {"start": start, "end": end, "text": text[start:end], "support": support, "readings": reading_names(bits)}
        for start, end, support, bits in zip(columns["start"], columns["end"], columns["support"], columns["readings"])
    ]


def bridge_records(analysis: GapAnalysis) -> list[dict[str, Any]]:
    """The minimal linkable bridges as phrase entries (SPEC §9): the text from the first word to
    the last, masks included, and the slop the adversary searches with."""
    columns = {name: column.tolist() for name, column in analysis.minimal_arrays().items()}
    text = analysis.text
    return [
        {
            "start": start, "end": end, "text": text[start:end], "support": support, "readings": ["gap"],
            "slop": slop, "rule": "source" if rule else "unknown",
        }
        for start, end, support, slop, rule in zip(columns["start"], columns["end"], columns["support"], columns["slop"], columns["rule"])
    ]


def combination_records(text: str, result: CombinationAnalysis, max_combinations: int) -> list[dict[str, Any]]:
    """One reading's ``combinations`` list (the head of the SPEC order, capped)."""
    records = []
    for combination in result.head(max_combinations):
        members = sorted((result.candidates[i] for i in combination.members), key=lambda o: (o.start, o.end))
        records.append(
            {
                "members": [{"start": m.start, "end": m.end, "text": text[m.start : m.end]} for m in members],
                "support": combination.support,
            }
        )
    return records


def _merged_combination_records(detection: Detection, max_combinations: int) -> list[dict[str, Any]]:
    """The head of every reading's combinations together, in SPEC §5's order (size, support,
    start offsets), capped at ``max_combinations``; one that several readings find with the same
    members is one record naming them, with its smallest support. Each reading's own head holds
    its first ``max_combinations``, so the head of their union is among them."""
    merged: dict[tuple[tuple[int, int], ...], dict[str, Any]] = {}
    for part in detection.parts:
        if part.combinations is None:
            continue
        for record in combination_records(detection.text, part.combinations, max_combinations):
            members = tuple((m["start"], m["end"]) for m in record["members"])
            known = merged.get(members)
            if known is None:
                merged[members] = {**record, "readings": [part.reading]}
            else:
                known["support"] = min(known["support"], record["support"])
                if part.reading not in known["readings"]:  # the search reading's two tables name it once
                    known["readings"].append(part.reading)
    ordered = sorted(merged.values(), key=lambda r: (len(r["members"]), r["support"], [m["start"] for m in r["members"]]))
    return ordered[:max_combinations]
