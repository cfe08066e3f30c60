"""Linkable combinations grouped by *sliding*: one entry per choice of stretches of text.

A document whose source is in the collection has hundreds of minimal linkable
combinations that are the same information read through different windows: "The
applicant's farm near the river Sava" + X, "applicant's farm near the river Sava was" +
X, ... (each member is a maximal frequent n-gram, so along a clause they overlap like
sliding windows). A reader needs each distinct pairing once.

Definitions (over the combinations of one record, each member a character range):

* two members *overlap* when their ranges share a character (then they share a token:
  tokens do not overlap, and a member starts and ends on token boundaries);
* a *run* is a maximal chain of members that overlap one after the other: sorted by
  start, a member belongs to the current run when it starts before the run's end;
* two combinations are in the same *group* when they have as many members and their
  members lie in the same runs (the same multiset of runs). So a combination and the one
  obtained by sliding a member along the words of its run are in one group, and so is any
  chain of such slides.

A group is represented by its first combination in the rules' order (size, support,
start offsets), which has the group's smallest support; groups are listed in the order of
their first combinations, so the most identifying pairing comes first. Grouping changes
only what is listed: the decision and the scores are computed from every combination.
"""
from __future__ import annotations

from typing import Any, Sequence


def member_runs(combinations: Sequence[dict[str, Any]]) -> dict[tuple[int, int], int]:
    """Each member range ``(start, end)`` of the combinations → the number of its run (in text order)."""
    spans = sorted({(m["start"], m["end"]) for combination in combinations for m in combination["members"]})
    runs: dict[tuple[int, int], int] = {}
    run, run_end = -1, -1
    for start, end in spans:
        if start >= run_end:
            run += 1
            run_end = end
        else:
            run_end = max(run_end, end)
        runs[(start, end)] = run
    return runs


def group_numbers(combinations: Sequence[dict[str, Any]]) -> list[int]:
    """The group of each combination: groups numbered in the order of their first combination."""
    runs = member_runs(combinations)
    numbers: dict[tuple[int, ...], int] = {}
    groups = []
    for combination in combinations:
        key = tuple(sorted(runs[(m["start"], m["end"])] for m in combination["members"]))
        groups.append(numbers.setdefault(key, len(numbers)))
    return groups


def grouped_combinations(combinations: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per group: its first combination with ``group_size``, the number of combinations it stands for."""
    firsts: dict[int, dict[str, Any]] = {}
    sizes: dict[int, int] = {}
    for combination, group in zip(combinations, group_numbers(combinations)):
        firsts.setdefault(group, combination)
        sizes[group] = sizes.get(group, 0) + 1
    return [{**firsts[group], "group_size": sizes[group]} for group in sorted(firsts)]
