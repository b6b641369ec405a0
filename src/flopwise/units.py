"""Human-readable numbers (decimal SI: GB = 1e9 bytes)."""

from __future__ import annotations


def _si(x: float, unit: str) -> str:
    for div, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.2f} {prefix}{unit}"
    return f"{x:.0f} {unit}"


def fmt_flops(x: float) -> str:
    return _si(x, "FLOP")


def fmt_bytes(x: float) -> str:
    return _si(x, "B")


def fmt_s(x: float) -> str:
    if x >= 1:
        return f"{x:.2f} s"
    if x >= 1e-3:
        return f"{x * 1e3:.2f} ms"
    return f"{x * 1e6:.1f} us"


def fmt_rate(x: float) -> str:
    """A rate (requests/s) to two decimals, or two significant digits below 0.005 (a slow rate profile's 0.004
    req/s is not 0.00)."""
    return f"{x:.2g}" if 0 < abs(x) < 0.005 else f"{x:.2f}"
