"""`flopwise models`, `flopwise hardware` and `flopwise engines`: the built-in catalogs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flopwise.cli import _app
from flopwise.cli._app import app, print_json
from flopwise.params import HELP


@app.command()
def models(
    match: Annotated[str | None, typer.Argument(help="Only the models with this in an id or alias (e.g. qwen3).")]
    = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The built-in model catalog: ids, aliases, parameter counts and shapes."""
    from flopwise.report.catalog_tables import model_rows, model_table  # imported when the command runs

    rows = model_rows(match)
    if json_out:
        print_json({"models": rows})
    else:
        _app.console.print(model_table(rows))


@app.command()
def hardware(
    match: Annotated[str | None, typer.Argument(help="Only the parts with this in their id or name (e.g. h100).")]
    = None,
    hardware_file: Annotated[Path | None, typer.Option("--hardware-file", help=HELP["hardware_file"])] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The built-in hardware catalog (plus a user file), with the source of every number."""
    from flopwise.report.catalog_tables import hardware_rows, hardware_table  # imported when the command runs
    from flopwise.specs.hardware import hardware_catalog, load_hardware_file

    catalog = load_hardware_file(hardware_file) if hardware_file else hardware_catalog()
    rows = hardware_rows(catalog, match)
    if json_out:
        print_json({"hardware": rows})
    else:
        _app.console.print(hardware_table(rows))


@app.command()
def engines(
    name: Annotated[str | None, typer.Argument(help="One family (vllm, sglang, trtllm, llamacpp, ...), or a family "
                                               "at a version (vllm@0.11): the releases up to it.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The serving-engine catalog: each family's releases, what changes at each, and the sources."""
    from flopwise.report.catalog_tables import engine_note, engine_rows, engine_table  # imported when it runs

    rows, note = engine_rows(name), engine_note(name)
    if json_out:
        print_json({"engines": rows, **({"note": note} if note else {})})
    else:
        _app.console.print(engine_table(rows))
        if note:
            _app.console.print(note)
