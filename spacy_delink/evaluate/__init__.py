"""Measuring the attack: per-document assessment records and the HTML report."""
from .assess import AssessSummary, assess_file
from ..pages.markup import ReportSettings
from .assess_page import write_html_report

__all__ = ["AssessSummary", "ReportSettings", "assess_file", "write_html_report"]
