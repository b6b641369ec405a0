"""What a bench run is asked for, checked once for the CLI and the Python API (`flopwise.bench`): load levels,
the URL, extra headers and request-body fields, and the two calls made before anything is measured (is anything
listening; which model does the server serve).

Load levels follow `vllm bench serve`: `--burstiness` alone (with the default Poisson arrivals) makes gamma
arrivals of that shape, and an infinite burstiness gives constant gaps.
"""

from __future__ import annotations

import json
import math
import socket
import ssl
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from flopwise.bench.arrivals import Load
from flopwise.bench.redact import Redactor, redact_url, split_userinfo
from flopwise.errors import WorkloadError
from flopwise.validate import number

__all__ = ["ARRIVALS", "PREFLIGHT_TIMEOUT_S", "base_url", "check_ca_bundle", "check_url", "extra_body", "headers",
           "http_kwargs", "loads", "numbers", "preflight", "served_model", "whole_numbers"]

ARRIVALS = ("poisson", "gamma", "constant")
PREFLIGHT_TIMEOUT_S = 5.0


def numbers(value: str | float | Sequence[float] | None, option: str) -> list[float]:
    """A comma-separated list ("1,2,4", "inf", "max") or Python numbers, as floats; NaN refused."""
    if value is None or value == "":
        return []
    if isinstance(value, str):
        if any(not p.strip() for p in value.split(",")):
            raise WorkloadError(f"{option}: '{value}' has an empty entry; write numbers separated by commas, e.g. "
                                "1,2,4 or inf")
        try:
            vals = [math.inf if p.strip() in ("inf", "max") else float(p) for p in value.split(",")]
        except ValueError:
            raise WorkloadError(f"{option}: cannot read '{value}'; write numbers separated by commas, e.g. 1,2,4 "
                                "or inf") from None
    elif isinstance(value, (int, float)):
        vals = [float(value)]
    else:
        vals = [float(v) for v in value]
    if any(math.isnan(v) for v in vals):
        raise WorkloadError(f"{option}: cannot read '{value}': nan is not a number of anything")
    return vals


def whole_numbers(value: str | int | Sequence[int] | None, option: str) -> list[int]:
    """Whole numbers >= 1 (concurrency levels), from a comma-separated list or Python integers."""
    out = []
    for v in numbers(value, option):
        if not math.isfinite(v) or v != int(v) or v < 1:
            raise WorkloadError(f"{option} takes whole numbers >= 1 (e.g. 1,4,16); got '{value}'")
        out.append(int(v))
    return out


def loads(rate: str | float | Sequence[float] | None, concurrency: str | int | Sequence[int] | None,
          arrival: str, burstiness: float, max_concurrency: int | None, rescale: bool = False) -> list[Load]:
    """The load levels asked for: closed loops at each concurrency, or open loops at each rate (none: one burst
    at an infinite rate)."""
    rates, counts = numbers(rate, "--request-rate"), whole_numbers(concurrency, "--concurrency")
    if rates and counts:
        raise WorkloadError("give --request-rate (open loop) or --concurrency (closed loop), not both; "
                            "use --max-concurrency to cap an open loop")
    if arrival not in ARRIVALS:
        raise WorkloadError(f"unknown --arrival '{arrival}'; use {', '.join(ARRIVALS)}")
    if not burstiness > 0:
        raise WorkloadError(f"--burstiness must be > 0 (1 = Poisson); got {burstiness}")
    if any(not r > 0 for r in rates):
        raise WorkloadError(f"--request-rate must be > 0 requests/s (or inf), got {rate}")
    if counts:
        shaping = [name for name, given in (("--arrival", arrival != "poisson"), ("--burstiness", burstiness != 1.0),
                                            ("--max-concurrency", max_concurrency is not None)) if given]
        if shaping:  # a closed loop sends the next request when one finishes: no arrival process, no cap
            raise WorkloadError(f"{' and '.join(shaping)} shape an open loop (--request-rate); a closed loop at "
                                "--concurrency sends each request as another finishes: drop them or use "
                                "--request-rate")
        return [Load(kind="concurrency", concurrency=c) for c in counts]
    if arrival == "poisson" and burstiness != 1.0:
        arrival = "gamma"
    if math.isinf(burstiness):
        arrival, burstiness = "constant", 1.0
    return [Load(kind=arrival, rate=r, burstiness=burstiness, max_concurrency=max_concurrency,  # type: ignore[arg-type]
                 rescale=rescale) for r in rates or [math.inf]]


def check_url(url: str) -> None:
    """An http(s) URL with a host and a valid port, or one clear error."""
    try:
        parts = urlsplit(url)
    except ValueError as e:  # e.g. an unclosed IPv6 bracket; not echoed, it may carry credentials
        raise WorkloadError(f"--url is not a valid URL ({e}); e.g. http://127.0.0.1:8000 or "
                            "http://[::1]:8000") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WorkloadError(f"--url {redact_url(url)}: give an http:// or https:// URL with a host, "
                            "e.g. http://127.0.0.1:8000")
    try:
        parts.port  # noqa: B018 - raises for a bad port
    except ValueError:
        raise WorkloadError(f"--url {redact_url(url)}: the port is not a number in 0-65535") from None


def headers(values: Sequence[str] | Mapping[str, str] | None) -> dict[str, str]:
    """Extra request headers from NAME:VALUE items (or a mapping); no line breaks, no spaces in a name."""
    if isinstance(values, Mapping):
        items = [(str(k), ":", str(v), f"{k}:{v}") for k, v in values.items()]
    else:
        items = [(*text.partition(":"), text) for text in values or []]
    out = {}
    for k, sep, v, text in items:
        if not sep or not k.strip() or any(c in k for c in " \r\n") or any(c in v for c in "\r\n"):
            raise WorkloadError(f"--header '{text}': write NAME:VALUE, e.g. --header 'X-Team: infra'")
        out[k.strip()] = v.strip()
    return out


def extra_body(text: str | Mapping[str, Any] | None, temperature: float | None,
               top_p: float | None) -> dict[str, Any]:
    """Fields merged into every request body: a JSON object (text, @file, or a mapping), then the sampling
    settings given."""
    body: dict[str, Any] = {}
    if isinstance(text, Mapping):
        body = dict(text)
    elif text:
        try:
            src = Path(text[1:]).read_text() if text.startswith("@") else text
            body = json.loads(src)
        except (OSError, ValueError) as e:
            raise WorkloadError(f"--extra-body: not a JSON object ({e}); "
                                "e.g. --extra-body '{\"top_k\": 20}'") from None
        if not isinstance(body, dict):
            raise WorkloadError("--extra-body must be a JSON object, e.g. '{\"top_k\": 20}'")
    if temperature is not None:
        body["temperature"] = number(temperature, "--temperature", lo=0)
    if top_p is not None:
        body["top_p"] = number(top_p, "--top-p", lo=0, hi=1, lo_open=True)
    return body


def check_ca_bundle(path: str | Path) -> None:
    """A --ca-bundle that exists and parses as PEM certificates (checked before any request is sent)."""
    try:
        ssl.create_default_context(cafile=str(path))
    except (OSError, ssl.SSLError, ValueError) as e:
        raise WorkloadError(f"--ca-bundle {path}: not a readable PEM file of certificates ({e})") from None


def http_kwargs(url: str, api_key: str | None, extra_headers: Mapping[str, str], insecure: bool,
                ca_bundle: str | Path | None) -> dict[str, Any]:
    """httpx arguments for the calls made outside the load generator (the served-model lookup)."""
    clean, userinfo = split_userinfo(url)
    h = dict(extra_headers)
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    return {"headers": h, "auth": httpx.BasicAuth(*userinfo) if userinfo else None,
            "verify": False if insecure else (str(ca_bundle) if ca_bundle else True), "trust_env": False}


def base_url(url: str) -> str:
    """The server's root: the URL without user-info and without a /v1 or endpoint suffix."""
    base = split_userinfo(url.rstrip("/"))[0]
    for suffix in ("/v1/completions", "/v1/chat/completions", "/v1"):
        base = base.removesuffix(suffix)
    return base


def preflight(url: str, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> None:
    """Fail in seconds, before any measurement, when nothing listens at the URL."""
    parts = urlsplit(split_userinfo(url)[0])
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__)
        raise WorkloadError(f"nothing answers at {redact_url(url)} ({host}:{port}: {why}); start the server or "
                            "fix --url") from None


def served_model(url: str, http: Mapping[str, Any]) -> str:
    """The first model the server lists at /v1/models."""
    base = base_url(url)
    try:
        r = httpx.get(base + "/v1/models", timeout=10, **http)
        return str(r.json()["data"][0]["id"])
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError) as e:
        msg = Redactor([*(http["headers"].values())])(str(e))
        raise WorkloadError(f"--model not given and {redact_url(base)}/v1/models did not name one ({msg}); "
                            "pass --model") from e
