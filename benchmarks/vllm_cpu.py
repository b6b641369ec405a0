"""What the vLLM CPU benchmarks share: building the random-weight model, starting vLLM's CPU build on it
(`scripts/vllm_cpu_server.py` gives the command), waiting for it to answer `/health`, and waiting for a quiet
machine."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

__all__ = ["ROOT", "VLLM_PY", "build_model", "start_server", "wait_healthy", "wait_quiet"]

ROOT = Path(__file__).resolve().parent.parent
VLLM_PY = ROOT / ".venv-vllm" / "bin" / "python"


def build_model(model_dir: Path, config: dict[str, Any], *, quiet: bool = False) -> None:
    """The random-weight Llama-shaped model of `config` (merged into the server script's defaults) in model_dir."""
    code = ("import sys, pathlib; sys.path.insert(0, 'scripts'); import vllm_cpu_server as v; "
            f"v.CONFIG.update({config!r}); v.build(pathlib.Path({str(model_dir)!r}))")
    subprocess.run([str(VLLM_PY), "-c", code], cwd=ROOT, check=True, stdout=subprocess.DEVNULL if quiet else None)


def start_server(model_dir: Path, port: int, log: Path, served: str, env: dict[str, str] | None = None
                 ) -> subprocess.Popen:
    """`vllm serve` of model_dir as `served` on port (the server script's command, its environment updated with
    `env`), logging to `log`, in its own session (so a kill takes its workers too)."""
    extra = f"env.update({env!r}); " if env else ""
    code = ("import os, sys; sys.path.insert(0, 'scripts'); import vllm_cpu_server as v; from pathlib import Path; "
            f"cmd, env = v.serve_command(Path({str(model_dir)!r}), {port}, kv_cache_gib=2); "
            f"cmd[cmd.index('--served-model-name') + 1] = {served!r}; {extra}"
            "os.execve(cmd[0], cmd, env)")
    return subprocess.Popen([str(VLLM_PY), "-c", code], cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def wait_healthy(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 400) -> None:
    """Block until `url`/health answers 200; exit with the log's path if the server dies or never answers."""
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f"vLLM exited with code {proc.returncode}; see {log}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise SystemExit(f"vLLM not healthy after {timeout_s:.0f} s; see {log}")


def wait_quiet(limit_s: float) -> float:
    """Wait (up to limit_s) until the 1-minute load average is below 1 (the server needs both cores); returns
    the load average then."""
    t0 = time.time()
    while os.getloadavg()[0] >= 1.0 and time.time() - t0 < limit_s:
        time.sleep(5)
    return os.getloadavg()[0]
