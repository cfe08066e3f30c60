"""k-anonymity for set-valued records (query logs, baskets, keyword sets).

Implements Motwani & Nabar, "Anonymizing Unstructured Data" (2008): publish every record
as a set shared by at least k-1 other records, with as few item additions and deletions
as possible.
"""
from __future__ import annotations

from .bounds import LowerBound, exact_anonymization, lower_bound, lower_bounds, random_groups
from .core import SetAnonymization, anonymize_sets, make_buckets, publish, verify_k_anonymous
from .online import extend_release
from .records import LoadReport, SetRecord, TermNormalizer, load_set_records, query_threads

__all__ = [
    "LoadReport",
    "LowerBound",
    "SetAnonymization",
    "SetRecord",
    "TermNormalizer",
    "anonymize_sets",
    "exact_anonymization",
    "extend_release",
    "load_set_records",
    "lower_bound",
    "lower_bounds",
    "make_buckets",
    "publish",
    "query_threads",
    "random_groups",
    "verify_k_anonymous",
]
