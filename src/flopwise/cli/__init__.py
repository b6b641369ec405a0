"""Command line: parses arguments, calls the library, prints. No logic lives here.

Each command is a module in this package that registers itself on `app`.
"""

from __future__ import annotations

import sys

from flopwise.cli._app import app, err_console
from flopwise.errors import FlopwiseError

# Importing registers the commands.
from flopwise.cli import catalog_cmds as _catalog_cmds  # noqa: E402,F401
from flopwise.cli import estimate_cmd as _estimate_cmd  # noqa: E402,F401
from flopwise.cli import profile_cmd as _profile_cmd  # noqa: E402,F401
from flopwise.cli import calibrate_cmd as _calibrate_cmd  # noqa: E402,F401
from flopwise.cli import simulate_cmd as _simulate_cmd  # noqa: E402,F401
from flopwise.cli import bench_cmd as _bench_cmd  # noqa: E402,F401
from flopwise.cli import compare_cmd as _compare_cmd  # noqa: E402,F401
from flopwise.cli import explain_cmd as _explain_cmd  # noqa: E402,F401
from flopwise.cli import plan_cmd as _plan_cmd  # noqa: E402,F401

__all__ = ["app", "main"]


def main() -> None:
    try:
        app()
    except FlopwiseError as e:
        err_console.print(f"[bold red]error:[/] {e}", markup=True, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
