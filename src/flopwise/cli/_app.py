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


FAMILY_HELP = ("Read the config.json with this registered family's reader (an unsupported architecture's nearest "
               "family, as the refusal names it); the mapping is assumed.")


def warn_model_notes(model: Any) -> None:
    """Warnings on stderr that must not be missed: a family forced with --family, a quantization_config that could
    not be read. (Other notes are in the report and the JSON.)"""
    for note in model.notes:
        if "--family" in note or "quantization_config" in note:
            typer.echo(f"warning: {note}", err=True)
