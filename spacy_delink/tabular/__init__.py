"""Anonymized tables: their privacy level (``privacy_level``), the release's own k, l, t and risks, and an anonymizer (``anonymize``)."""
from .privacy_level import (
    PrivacyMeasure,
    PrivacyReport,
    conditional_entropy,
    discrimination_rate,
    entropy,
    entropy_change,
    joint_entropy,
    local_privacy_level,
    mutual_information,
    privacy_level,
)
from .release import GeneralizationCheck, ReleaseStatistics, Risks, check_generalization, release_statistics
from .table import Table, load_table, write_csv

__all__ = [
    "GeneralizationCheck",
    "PrivacyMeasure",
    "PrivacyReport",
    "ReleaseStatistics",
    "Risks",
    "Table",
    "check_generalization",
    "conditional_entropy",
    "discrimination_rate",
    "entropy",
    "entropy_change",
    "joint_entropy",
    "load_table",
    "local_privacy_level",
    "mutual_information",
    "privacy_level",
    "release_statistics",
    "write_csv",
]
