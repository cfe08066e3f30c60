"""Measuring the attack: per-document assessment records and the HTML report."""
from .assess import AssessSummary, assess_file
from .report import write_html_report

__all__ = ["AssessSummary", "assess_file", "write_html_report"]
