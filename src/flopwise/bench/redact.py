"""Credentials never reach a saved file or the console: URL user-info, API keys, bearer tokens.

- `split_userinfo(url)`: the URL without `user:pass@` and the (user, password) pair, sent as HTTP basic auth.
- `redact_url(url)`: the URL as saved and printed, user-info replaced by `***@`.
- `Redactor`: masks the given secrets (the API key, the URL password, header values) and anything shaped like a
  credential in text a server sent back (`Bearer <token>`, `sk-...` keys, `"api_key": "..."`), as `***`.
- `plaintext_credentials_warning(url, has_credentials)`: a warning when credentials would cross the network
  unencrypted (http:// to a host that is not loopback).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["split_userinfo", "redact_url", "Redactor", "plaintext_credentials_warning", "MASK"]

MASK = "***"
_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{4,}"),
    re.compile(r"(?i)(basic\s+)[A-Za-z0-9+/=]{4,}"),
    re.compile(r"()\bsk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"(?i)([\"']?(?:api[_-]?key|token|password|secret|authorization)[\"']?\s*[:=]\s*[\"']?)"
               r"[^\s\"',}]{4,}"),
    re.compile(r"(//)[^/@\s:]+:[^/@\s]+@"),  # user:pass@ in a URL
)


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """(url without user-info, (user, password) or None)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc)), (parts.username or "", parts.password or "")


def redact_url(url: str) -> str:
    """`url` with any user-info replaced by ***@ (for run.json, records and the console)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=MASK + "@" + parts.netloc.rsplit("@", 1)[1]))


class Redactor:
    """Masks known secrets and credential-shaped substrings in text; `redactor(text)`."""

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        # longest first, so a secret that contains another is masked whole; very short ones would mask noise
        self._secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for s in self._secrets:
            text = text.replace(s, MASK)
        for pat in _PATTERNS:
            text = pat.sub(lambda m: m.group(1) + MASK + ("@" if m.group(0).endswith("@") else ""), text)
        return text


def _is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain") or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plaintext_credentials_warning(url: str, has_credentials: bool) -> str | None:
    """A warning when credentials would be sent over plain HTTP to a host that is not loopback."""
    parts = urlsplit(url)
    if not has_credentials and parts.password is None:
        return None
    if parts.scheme != "http" or _is_loopback(parts.hostname or ""):
        return None
    return (f"credentials (API key, URL password or auth header) go unencrypted over http:// to {parts.hostname}; "
            "use https:// or a tunnel")
