"""One exception family, so the CLI can turn every expected failure into a one-line message."""
from __future__ import annotations


class DelinkError(Exception):
    """An expected failure with a message that says what, where and how to fix it.

    The CLI prints ``error: <message>`` and exits with status 1 for these; anything
    else is a bug and keeps its traceback.
    """


class InputError(DelinkError, ValueError):
    """Bad user input: a malformed file, a missing field, an invalid option value."""


class IndexFormatError(DelinkError):
    """An index directory that is missing, truncated, corrupted or from another format."""
