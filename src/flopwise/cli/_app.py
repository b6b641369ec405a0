"""The typer application, the table of commands, and the consoles the commands print to.

Start-up: `flopwise estimate --help` must not import the simulator, the load generator or the profiler. The
application is a `LazyGroup`: it lists every command from `COMMANDS` and imports a command's module only when that
command runs (or shows its help); the module registers itself on `app` when imported. Help is plain click text
(`rich_markup_mode=None`): rich markup would turn `normal:M:S` into an emoji and label flags `<bool>`. The consoles
(`console`, `err_console`) are made on first use, so rich is imported by the commands that print with it, not by
`--help`.
"""

from __future__ import annotations

import difflib
import importlib
import json
import sys
from typing import Any

import typer
from typer._click.exceptions import UsageError
from typer.core import TyperGroup
from typer.main import get_command_from_info, get_group_from_info

__all__ = ["app", "COMMANDS", "print_json", "warn_model_notes", "FAMILY_HELP", "console", "err_console"]  # noqa: F822 - made by __getattr__

# command -> (module that registers it, one line for `flopwise --help`; the command's docstring is its full help)
COMMANDS: dict[str, tuple[str, str]] = {
    "estimate": ("estimate_cmd", "Time, throughput and memory of a static batch: prefill vs decode, which roof binds."),
    "simulate": ("simulate_cmd", "Queueing, batching and KV capacity under a request stream: latency percentiles."),
    "compare": ("compare_cmd", "What each technique does to FLOPs, TTFT, TPOT, throughput at an SLA and memory."),
    "explain": ("explain_cmd", "Prefill vs decode on the roofline, and what each optimization moves, in numbers."),
    "plan": ("plan_cmd", "The deployments with the most goodput per GPU (or dollar) inside an SLA."),
    "bench": ("bench_cmd", "Measure a real OpenAI-compatible server (vLLM, SGLang, TGI, llama.cpp, ...)."),
    "profile": ("profile_cmd", "Microbenchmark this machine and write a hardware file with its fitted profile."),
    "calibrate": ("calibrate_cmd", "Fit a hardware entry's efficiency profile to measurements."),
    "models": ("catalog_cmds", "The built-in model catalog: ids, aliases, parameter counts and shapes."),
    "hardware": ("catalog_cmds", "The built-in hardware catalog (plus a user file), with sources."),
    "engines": ("catalog_cmds", "The serving-engine catalog: releases, what changes at each, sources."),
}


class LazyGroup(TyperGroup):
    """A click group whose commands are imported when they are asked for (see the module docstring)."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in COMMANDS:
            return None
        if cmd_name not in self.commands:
            importlib.import_module(f"flopwise.cli.{COMMANDS[cmd_name][0]}")  # registers on `app`
            self.commands[cmd_name] = _click_command(cmd_name)
        return self.commands[cmd_name]

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """An unknown command is matched against every command's name (not only those imported so far)."""
        try:
            return self._click_resolve_command(ctx, args)
        except UsageError as e:
            close = difflib.get_close_matches(args[0], list(COMMANDS)) if args else []
            if close:
                e.message = f"{e.message.rstrip('.')}. Did you mean {', '.join(repr(c) for c in close)}?"
            raise

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """The command list from `COMMANDS` (importing every command to read its docstring would cost a second)."""
        with formatter.section("Commands"):
            formatter.write_dl([(name, short) for name, (_, short) in COMMANDS.items()])


app = typer.Typer(
    name="flopwise",
    help="Estimate, simulate, measure and plan LLM inference: what you will get, and where the bottleneck is.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    cls=LazyGroup,
    context_settings={"max_content_width": 120},
)


@app.callback()
def _root() -> None:
    """Estimate, simulate, measure and plan LLM inference: what you will get, and where the bottleneck is."""


def _click_command(name: str) -> Any:
    """The click command (or group, for `bench`) that importing its module registered on `app`."""
    for info in app.registered_commands:
        if (info.name or info.callback.__name__.replace("_", "-")) == name:  # type: ignore[union-attr]
            return get_command_from_info(info, pretty_exceptions_short=app.pretty_exceptions_short,
                                         rich_markup_mode=app.rich_markup_mode)
    for group in app.registered_groups:
        if group.name == name:
            return get_group_from_info(group, pretty_exceptions_short=app.pretty_exceptions_short,
                                       suggest_commands=app.suggest_commands, rich_markup_mode=app.rich_markup_mode)
    raise RuntimeError(f"internal: module {COMMANDS[name][0]} did not register command '{name}'")


def __getattr__(name: str) -> Any:
    """`console` (stdout) and `err_console` (stderr), made on first use (rich is imported then)."""
    if name not in ("console", "err_console"):
        raise AttributeError(name)
    from rich.console import Console

    # Piped or captured output gets a wide page instead of rich's 80-column default, so tables stay readable.
    # An error is one line however long: stderr does not wrap at the terminal's width.
    made = (Console(width=None if sys.stdout.isatty() else 160) if name == "console"
            else Console(stderr=True, soft_wrap=True))
    globals()[name] = made
    return made


def print_json(obj: Any) -> None:
    """One JSON object on stdout, nothing else."""
    typer.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


FAMILY_HELP = ("Read the config.json with this registered family's reader (an unsupported architecture's nearest "
               "family, as the refusal names it); the mapping is assumed.")


def warn_model_notes(dep: Any) -> None:
    """Warnings on stderr that must not be missed: a family forced with --family, a quantization_config that could
    not be read, an engine version past the catalog's releases. (Other notes are in the report and the JSON.)"""
    for note in dep.model.notes:
        if "--family" in note or "quantization_config" in note:
            typer.echo(f"warning: {note}", err=True)
    if dep.engine.version_note:
        typer.echo(f"warning: {dep.engine.version_note}", err=True)
