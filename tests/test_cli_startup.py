"""CLI start-up (issue 17): a command's code is imported only when it runs, and help screens render as written.
No timings are asserted here (`benchmarks/startup.py` measures them); what is checked is what gets imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from flopwise.cli import run
from flopwise.cli._app import COMMANDS

SRC = Path(__file__).resolve().parents[1] / "src"
HEAVY = ("numpy", "flopwise.sim", "flopwise.bench", "flopwise.profile", "flopwise.plan", "flopwise.cost",
         "flopwise.calibrate", "httpx", "plotly")


def modules_after(argv: list[str]) -> set[str]:
    code = (f"import sys, json\nfrom flopwise.cli import run\nrc = run({argv!r})\n"
            "sys.__stderr__.write('\\nMODULES ' + json.dumps(sorted(sys.modules)) + '\\n')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=300)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    return set(json.loads(line.removeprefix("MODULES ")))


@pytest.mark.parametrize("command", ["estimate", "simulate", "compare", "explain", "calibrate", "profile"])
def test_help_imports_no_library_code(command):
    loaded = modules_after([command, "--help"])
    assert not [m for m in loaded if m.split(".")[0] == "numpy" or m.startswith(HEAVY)], command


def test_import_flopwise_is_light():
    proc = subprocess.run([sys.executable, "-c", "import flopwise, flopwise.cli, sys; print(sorted(sys.modules))"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=300)
    loaded = eval(proc.stdout)  # noqa: S307 - our own output
    assert not [m for m in loaded if m.startswith(HEAVY)]


def test_a_command_imports_only_its_own_code():
    loaded = modules_after(["models", "--json"])
    assert not [m for m in loaded if m.startswith(("flopwise.sim", "flopwise.bench", "flopwise.profile",
                                                   "flopwise.plan", "httpx"))]


def test_help_renders_as_written(capsys):
    assert run(["simulate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "normal:MEAN:STD" in " ".join(out.split()) and "lognormal:MEDIAN:SIGMA" in " ".join(out.split())
    assert "<bool>" not in out and "Ⓜ" not in out
    assert "--enable-prefix-caching / --no-enable-prefix-caching" in out


def test_top_level_help_lists_every_command(capsys):
    assert run(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert f"  {name} " in out


def test_unknown_command_suggests(capsys):
    assert run(["estimat"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "estimate" in err
