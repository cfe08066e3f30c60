"""The ``delink`` application object and its entry point.

Each command is a thin wrapper: it parses options, calls the library function that holds
the job, shows progress and reports errors in one convention (docs/cli.md):

* every error is one line on stderr, ``error: <what>, <where>; <how to fix>``;
* exit status 2 for a command line that does not parse (unknown command or option,
  missing argument, a value of the wrong type), 1 for everything found while running;
* summaries, notes and warnings go to stderr (a warning as one ``warning: ...`` line), data
  (reports, tables) to stdout or files;
* the text commands come first in ``delink --help``, the companion methods in a panel of
  their own (``COMPANIONS``).
"""
from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Optional

import typer
from typer.core import TyperGroup

from .. import __version__
from ..errors import DelinkError

if TYPE_CHECKING:
    from ..claims import CheckedUnder

USAGE_ERROR = 2
RUN_ERROR = 1
INTERRUPTED = 130  # 128 + SIGINT, as shells report a command stopped by Ctrl-C
DOCS = "https://github.com/spacy-delink/spacy-delink/blob/main/docs"


def _click_exception(name: str) -> type[Exception]:
    """The click exception class ``name`` as the installed typer raises it.

    Recent typer releases carry their own copy of click (``typer._click``) while older ones
    raise ``click``'s classes, so ``import click`` would catch nothing on the former; the
    public ``typer.BadParameter`` derives from the right ``UsageError`` and
    ``ClickException`` in both.
    """
    return next(cls for cls in typer.BadParameter.__mro__ if cls.__name__ == name)


UsageError = _click_exception("UsageError")
_ClickException = _click_exception("ClickException")

#: The help panel of the companion methods (docs/companions.md), after the text commands.
COMPANIONS = "Companion methods (docs/companions.md)"
#: The text commands, in the order of a first run.
TEXT_COMMANDS = ("index", "assess", "protect", "evaluate", "compact")


class _PanelGroup(TyperGroup):
    """``delink --help`` as plain text (no markup) with the commands in panels: the text core first, then the companions."""

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)

        def place(name: str) -> tuple[bool, int]:
            companion = getattr(self.commands[name], "rich_help_panel", None) == COMPANIONS
            return companion, TEXT_COMMANDS.index(name) if name in TEXT_COMMANDS else len(TEXT_COMMANDS)

        return sorted(names, key=place)  # stable: others keep their order of registration

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        panels: dict[str, list[tuple[str, str]]] = {}
        names = [name for name in self.list_commands(ctx) if not self.commands[name].hidden]
        limit = formatter.width - 6 - max(map(len, names), default=0)
        for name in names:
            command = self.commands[name]
            panels.setdefault(getattr(command, "rich_help_panel", None) or "Commands", []).append(
                (name, command.get_short_help_str(limit))
            )
        for panel, rows in panels.items():
            with formatter.section(panel):
                formatter.write_dl(rows)


app = typer.Typer(
    name="delink",
    cls=_PanelGroup,
    help=(
        "Protect de-identified documents against search-based linkage attacks.\n\n"
        "\b\n"  # click: keep the next lines as written (no wrapping inside the addresses)
        f"The rules:    {DOCS}/linkage-rules.md\n"
        f"The commands: {DOCS}/cli.md"
    ),
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
    version: bool = typer.Option(
        False, "--version", callback=_show_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Protect de-identified documents against search-based linkage attacks (docs/linkage-rules.md)."""


def output_name(path: str | Path) -> str:
    """How a summary names where the results went (``-`` is stdout)."""
    return "stdout" if str(path) == "-" else str(path)


def echo_claims(summary: str, checked: "CheckedUnder") -> None:
    """A summary that claims something of the documents, with what its settings left unchecked (``claims.py``)."""
    typer.echo(summary, err=True)
    if checked.unchecked:
        typer.echo(checked.unchecked, err=True)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _usage_error(err: Exception, args: list[str], commands: Iterable[str]) -> str:
    """``error: <what>, in `delink <command>`; see `delink <command> --help```."""
    ctx = getattr(err, "ctx", None)
    if ctx is not None and ctx.command_path:
        where = ctx.command_path
    else:  # the option parser's own errors carry no context: name the command from the arguments
        named = next((arg for arg in args if arg in commands), None)
        where = f"delink {named}" if named else "delink"
    what = _one_line(err.format_message()).rstrip(".")  # type: ignore[attr-defined]
    return f"error: {what[:1].lower()}{what[1:]}, in `{where}`; see `{where} --help`"


@contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Show warnings as they come, one ``warning: ...`` line each on stderr (the CLI convention)."""

    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
        typer.echo(f"warning: {message}", err=True)

    with warnings.catch_warnings():
        warnings.simplefilter("always", UserWarning)
        warnings.showwarning = show
        yield


def main(argv: Optional[list[str]] = None) -> None:
    """Console-script entry point: every failure becomes one ``error:`` line and a non-zero status."""
    command = typer.main.get_command(app)
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        with _warnings_as_lines():
            result = command.main(args=args, prog_name="delink", standalone_mode=False)
    except typer.Abort:  # Ctrl-C, as typer releases without their own click report it
        result = INTERRUPTED
    except UsageError as err:
        if type(err).__name__ == "NoArgsIsHelpError":  # `delink` alone: the help, as click shows it
            typer.echo(err.format_message(), err=True)  # type: ignore[attr-defined]
        else:
            typer.echo(_usage_error(err, args, getattr(command, "commands", {})), err=True)
        sys.exit(USAGE_ERROR)
    except _ClickException as err:
        typer.echo(f"error: {_one_line(err.format_message())}", err=True)  # type: ignore[attr-defined]
        sys.exit(RUN_ERROR)
    except DelinkError as err:
        typer.echo(f"error: {_one_line(str(err))}", err=True)
        sys.exit(RUN_ERROR)
    except OSError as err:  # a file the command needed: unreadable, unwritable, disk full
        where = f" ({err.filename})" if err.filename else ""
        typer.echo(f"error: {err.strerror or err}{where}; check the path, its permissions and the free space", err=True)
        sys.exit(RUN_ERROR)
    # standalone_mode=False returns the status of an explicit exit (--version; Ctrl-C as 130) instead of raising it
    if result == INTERRUPTED:
        typer.echo("error: interrupted; rerun the command (outputs are written atomically, protect resumes)", err=True)
    sys.exit(result if isinstance(result, int) else 0)
