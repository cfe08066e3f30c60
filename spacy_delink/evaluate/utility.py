"""What protection cost the text: tokens changed, masks added and edits by kind, from a token-level diff."""
from __future__ import annotations

import difflib
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..linkage.tokenize import Tokenizer
from .inputs import Document


@dataclass
class Change:
    """One changed region: character ranges in the de-identified and protected texts, and its kind."""

    before: tuple[int, int]
    after: tuple[int, int]
    kind: str  # "mask" or "rewrite" (inserted on the protected side), "removed" (de-identified side only)


def _runs(starts: Any, ends: Any, first: int, last: int, text: str, masks: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Character ranges of tokens ``first..last-1``, consecutive tokens joined unless a mask lies between."""
    runs: list[list[int]] = []
    for i in range(first, last):
        start, end = int(starts[i]), int(ends[i])
        if runs and not any(runs[-1][1] <= m_start < start for m_start, _ in masks):
            runs[-1][1] = end
        else:
            runs.append([start, end])
    return [(a, b) for a, b in runs]


def compare_texts(tokenizer: Tokenizer, before: str, after: str) -> tuple[int, int, list[Change]]:
    """Tokens of ``before``, how many of them the protection changed, and the changed regions.

    The diff runs on tokens (so "tokens changed" counts words, not characters). Within a
    changed stretch, removed tokens are marked on the de-identified side, and on the
    protected side each inserted mask is a "mask" change and each run of new words a
    "rewrite"; masks put between kept tokens count too.
    """
    a, b = tokenizer.tokenize(before), tokenizer.tokenize(after)
    old_masks, new_masks = a.masks, b.masks
    matcher = difflib.SequenceMatcher(None, a.raw, b.raw, autojunk=False)
    opcodes = matcher.get_opcodes()
    kept = sum(i2 - i1 for tag, i1, i2, _, _ in opcodes if tag == "equal")
    changes: list[Change] = []

    def inserted_masks(old_low: int, old_high: int, low: int, high: int) -> list[tuple[int, int]]:
        """Masks in ``after[low:high]`` beyond those ``before[old_low:old_high]`` already had."""
        had = Counter(before[s:e] for s, e in old_masks if old_low <= s and e <= old_high)
        fresh = []
        for s, e in new_masks:
            if low <= s and e <= high:
                if had[after[s:e]]:
                    had[after[s:e]] -= 1
                else:
                    fresh.append((s, e))
        return fresh

    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            for i, j in zip(range(i1, i2 - 1), range(j1, j2 - 1)):
                gap_before = before[int(a.ends[i]) : int(a.starts[i + 1])]
                gap_after = after[int(b.ends[j]) : int(b.starts[j + 1])]
                if gap_before != gap_after:
                    at = int(a.ends[i])
                    fresh = inserted_masks(at, int(a.starts[i + 1]), int(b.ends[j]), int(b.starts[j + 1]))
                    changes += [Change((at, at), mask, "mask") for mask in fresh]
            continue
        low = int(b.ends[j1 - 1]) if j1 > 0 else 0
        high = int(b.starts[j2]) if j2 < len(b) else len(after)
        at = int(a.ends[i1 - 1]) if i1 > 0 else 0
        for run in _runs(a.starts, a.ends, i1, i2, before, old_masks):
            changes.append(Change(run, (low, low), "removed"))
        for run in _runs(b.starts, b.ends, j1, j2, after, new_masks):
            changes.append(Change((at, at), run, "rewrite"))
        old_high = int(a.starts[i2]) if i2 < len(a) else len(before)
        changes += [Change((at, at), mask, "mask") for mask in inserted_masks(at, old_high, low, high)]
    changes.sort(key=lambda change: (change.after, change.before))
    return len(a), len(a) - kept, changes


def utility_of(tokenizer: Tokenizer, document: Document) -> tuple[dict[str, Any], list[Change]]:
    assert document.protected is not None
    tokens, changed, changes = compare_texts(tokenizer, document.deidentified, document.protected)
    edits = Counter(str(edit.get("by", "unknown")) for edit in document.edits or [])
    return {
        "tokens": tokens,
        "tokens_changed": changed,
        "masks_added": len(tokenizer.mask_spans(document.protected)) - len(tokenizer.mask_spans(document.deidentified)),
        "edits": dict(edits) if document.edits is not None else None,
    }, changes
