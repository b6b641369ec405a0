"""The README's examples run as printed: every `flopwise ...` line of its shell blocks that is cheap enough runs
through the CLI (in-process) and exits 0, and its Python block runs. The ones left out need what a test cannot
have (a server to load, minutes of microbenchmarks and the files they write), each with its reason."""

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from flopwise.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"
NOT_RUN = {  # prefix -> why it is not run here
    "flopwise bench --url": "needs a running OpenAI-compatible server (the bench tests use the built-in mock)",
    "flopwise profile": "microbenchmarks this machine for minutes (tests/test_profile.py runs a quick profile)",
    "flopwise calibrate": "reads the files `flopwise profile` and `flopwise bench` write",
    "flopwise estimate --hardware-file my-host.toml": "reads the file `flopwise profile` writes",
    "flopwise plan --model qwen3-32b": "simulates a 32B model on up to 8 GPUs of two kinds for minutes; "
                                       "benchmarks/plan_stability.py runs its Qwen3-32B case",
}


def _blocks(text: str) -> list[tuple[str, str]]:
    return re.findall(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M)


def _commands() -> list[str]:
    out = []
    for lang, body in _blocks(README.read_text()):
        if lang not in ("", "bash", "sh"):
            continue
        joined = body.replace("\\\n", " ")
        for line in joined.splitlines():
            cmd = line.split("  #")[0].split(" # ")[0].strip()
            if cmd.startswith("flopwise "):
                out.append(cmd)
    return out


COMMANDS = _commands()


def test_readme_has_examples():
    assert len(COMMANDS) >= 8
    assert any(c.startswith("flopwise plan") for c in COMMANDS)


@pytest.mark.parametrize("cmd", COMMANDS)
def test_readme_shell_example_runs_as_printed(cmd, tmp_path, monkeypatch):
    why = next((w for p, w in NOT_RUN.items() if cmd.startswith(p)), None)
    if why:
        pytest.skip(why)
    (tmp_path / "src").symlink_to(README.parent / "src")  # paths in the README are relative to the repository root
    monkeypatch.chdir(tmp_path)  # --html and friends write here, not into the checkout
    res = CliRunner().invoke(app, shlex.split(cmd)[1:])
    assert res.exit_code == 0, f"{cmd}\n{res.output[-3000:]}"
