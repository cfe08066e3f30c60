"""Anonymized tables: their privacy level (``privacy_level``), and an anonymizer (``anonymize``)."""
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
from .table import Table, load_table, write_csv

__all__ = [
    "PrivacyMeasure",
    "PrivacyReport",
    "Table",
    "conditional_entropy",
    "discrimination_rate",
    "entropy",
    "entropy_change",
    "joint_entropy",
    "load_table",
    "local_privacy_level",
    "mutual_information",
    "privacy_level",
    "write_csv",
]
