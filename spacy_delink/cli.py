"""The `delink` command line (also `python -m spacy_delink`).

Each command is a thin wrapper: it parses options, calls the library, shows progress and
turns :class:`~spacy_delink.errors.DelinkError` into a one-line message and exit status 1.
"""
from __future__ import annotations

import sys

import typer

from .errors import DelinkError

app = typer.Typer(
    name="delink",
    help="Protect de-identified documents against search-based linkage attacks.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def fail(message: str) -> "typer.Exit":
    """Print a one-line error and return the Exit to raise (status 1)."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=1)


def main() -> None:
    """Console-script entry point: run the app, mapping expected errors to exit status 1."""
    try:
        app()
    except DelinkError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(1)
