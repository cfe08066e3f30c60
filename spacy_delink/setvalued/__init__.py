"""k-anonymity for set-valued records (query logs, baskets, keyword sets).

Implements Motwani & Nabar, "Anonymizing Unstructured Data" (2008): publish every record
as a set shared by at least k-1 other records, with as few item additions and deletions
as possible (or deletions only); k^m-anonymity (Terrovitis et al. 2008) as the weaker
notion; a reviewer's baseline and a frequent-itemset utility measure to judge them by.
"""
from __future__ import annotations

from ..extras import require_extra

require_extra("setvalued", "spacy_delink.setvalued")  # SciPy and scikit-learn: before an ImportError from deep inside

from .bounds import LowerBound, exact_anonymization, lower_bound, lower_bounds, nearest_frequent_sets, random_groups
from .core import SetAnonymization, anonymize_sets, make_buckets, publish, verify_k_anonymous
from .km import anonymize_km, km_level, verify_km_anonymous
from .online import extend_release
from .records import LoadReport, SetRecord, TermNormalizer, load_set_records, query_threads
from .utility import ItemsetUtility, frequent_itemsets, itemset_utility

__all__ = [
    "ItemsetUtility",
    "LoadReport",
    "LowerBound",
    "SetAnonymization",
    "SetRecord",
    "TermNormalizer",
    "anonymize_km",
    "anonymize_sets",
    "exact_anonymization",
    "extend_release",
    "frequent_itemsets",
    "itemset_utility",
    "km_level",
    "load_set_records",
    "lower_bound",
    "lower_bounds",
    "make_buckets",
    "nearest_frequent_sets",
    "publish",
    "query_threads",
    "random_groups",
    "verify_k_anonymous",
    "verify_km_anonymous",
]
