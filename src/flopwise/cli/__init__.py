"""Command line: parses arguments, calls the library, prints. No logic lives here.

Each command is a module in this package that registers itself on `app` when `cli/_app.py`'s `LazyGroup`
imports it, which it does only for the command that runs.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

from flopwise.cli._app import app
from flopwise.errors import FlopwiseError

__all__ = ["app", "main", "run"]


def _error(message: str) -> None:
    """One line on stderr (rich is not needed for it)."""
    text = " ".join(message.split())
    if sys.stderr.isatty():
        sys.stderr.write(f"\x1b[1;31merror:\x1b[0m {text}\n")
    else:
        sys.stderr.write(f"error: {text}\n")


def run(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on `argv` (default: sys.argv[1:]) and return its exit code. Every error a user can cause is one
    line on stderr and exit code 2: flopwise's own (`flopwise.errors`) and the option parser's (a value of the
    wrong type, an unknown option)."""
    try:
        rv = app(args=list(sys.argv[1:] if argv is None else argv), prog_name="flopwise", standalone_mode=False)
    except FlopwiseError as e:
        _error(str(e))
        return 2
    except NoArgsIsHelpError as e:
        e.show()
        return 0
    except UsageError as e:
        where = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
        _error(f"{e.format_message()}{where}")
        return 2
    except ClickException as e:
        _error(e.format_message())
        return 2 if e.exit_code in (0, 1) else e.exit_code
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    return rv if isinstance(rv, int) else 0


def main() -> None:
    sys.exit(run())
