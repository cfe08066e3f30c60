"""Measuring the attack: per-document assessment records and the HTML report."""
from .assess import AssessSummary, assess_file
from .report import ReportSettings, write_html_report

__all__ = ["AssessSummary", "ReportSettings", "assess_file", "write_html_report"]
