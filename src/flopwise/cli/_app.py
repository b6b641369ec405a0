"""The typer application and shared console objects."""

from __future__ import annotations

import json
import sys
from typing import Any

import typer
from rich.console import Console

app = typer.Typer(
    name="flopwise",
    help="Estimate, simulate, measure and plan LLM inference: what you will get, and where the bottleneck is.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# Piped or captured output gets a wide page instead of rich's 80-column default, so tables stay readable.
console = Console(width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True)


def print_json(obj: Any) -> None:
    """One JSON object on stdout, nothing else."""
    typer.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))
