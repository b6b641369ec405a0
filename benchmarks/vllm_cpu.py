"""What the vLLM CPU benchmarks share: waiting for a server they started to answer `/health`."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx

__all__ = ["wait_healthy"]


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
