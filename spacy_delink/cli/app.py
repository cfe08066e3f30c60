"""The ``delink`` application object and its entry point.

Each command is a thin wrapper: it parses options, calls the library function that holds
the job, shows progress and reports errors in one convention (docs/cli.md):

* every error is one line on stderr, ``error: <what>, <where>; <how to fix>``;
* exit status 2 for a command line that does not parse (unknown option, missing
  argument, a value of the wrong type), 1 for everything found while running.
"""
from __future__ import annotations

import sys
from typing import Optional

import click
import typer

from .. import __version__
from ..errors import DelinkError

USAGE_ERROR = 2
RUN_ERROR = 1

app = typer.Typer(
    name="delink",
    help="Protect de-identified documents against search-based linkage attacks. Rules: docs/linkage-rules.md",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help texts hold [default: ...] and [thread]: print them as written
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"spacy-delink {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Optional[bool] = typer.Option(
        None, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Protect de-identified documents against search-based linkage attacks (docs/linkage-rules.md)."""


def main(argv: Optional[list[str]] = None) -> None:
    """Console-script entry point: every failure becomes one ``error:`` line and a non-zero status."""
    command = typer.main.get_command(app)
    try:
        command.main(args=argv, prog_name="delink", standalone_mode=False)
    except click.exceptions.Exit as done:
        sys.exit(done.exit_code)
    except click.exceptions.Abort:
        typer.echo("error: interrupted; rerun the command (outputs are written atomically, protect resumes)", err=True)
        sys.exit(RUN_ERROR)
    except click.UsageError as err:
        where = f"delink {err.ctx.command_path.split(' ', 1)[1]}" if err.ctx and " " in err.ctx.command_path else "delink"
        typer.echo(f"error: {err.format_message()}; see `{where} --help`", err=True)
        sys.exit(USAGE_ERROR)
    except click.ClickException as err:
        typer.echo(f"error: {err.format_message()}", err=True)
        sys.exit(RUN_ERROR)
    except DelinkError as err:
        typer.echo(f"error: {err}", err=True)
        sys.exit(RUN_ERROR)
    sys.exit(0)
