"""Counting tokens on the client: a real tokenizer when one is given, the server's own through vLLM's
`/tokenize` when it offers one, else a documented approximation.

`ServerTokenizer` asks the server (POST /tokenize {"prompt", "add_special_tokens": false} -> {"tokens"},
POST /detokenize {"tokens"} -> {"prompt"}) and adds the special tokens the server puts before a completions
prompt (BOS: the difference between a count with and without them), so that `count` is the server's
usage.prompt_tokens for the completions endpoint. On the chat endpoint usage also counts the chat template, which
the counts here leave out. With neither a tokenizer nor /tokenize, the summary compares the server's
usage.prompt_tokens with the client's count and warns when they differ.

The approximation (`ApproxCounter`) counts one token per whitespace-separated word of common English and four
characters per token for anything else. Byte-level BPE tokenizers (Llama 3, Qwen, GPT-2 style) encode each of the
words that `prompts.random_text` draws from (short, frequent English words, each preceded by a space) as one
token, so random text of N words is about N tokens (typically within a few percent). The server's `usage`
replaces the estimate in every record, with its source recorded, so only the prompt's construction is approximate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import httpx

from flopwise.errors import WorkloadError

__all__ = ["TokenCounter", "ApproxCounter", "HFTokenizer", "ServerTokenizer", "load_counter"]


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def truncate(self, text: str, n: int) -> str:
        """The longest prefix of `text` with at most `n` tokens."""
        ...


class ApproxCounter:
    """Whitespace words; a word longer than 8 characters counts len/4 tokens (rounded up)."""

    name = "approx"

    def count(self, text: str) -> int:
        return sum(1 if len(w) <= 8 else -(-len(w) // 4) for w in text.split())

    def truncate(self, text: str, n: int) -> str:
        return " ".join(text.split()[:n])


class HFTokenizer:
    """A Hugging Face `tokenizer.json` loaded with the `tokenizers` package (special tokens not added)."""

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise WorkloadError("--tokenizer needs the `tokenizers` package: pip install tokenizers") from e
        p = Path(path)
        f = p / "tokenizer.json" if p.is_dir() else p
        if not f.is_file():
            raise WorkloadError(f"no tokenizer.json at {path}; pass a tokenizer directory or its tokenizer.json")
        try:
            self._tok = Tokenizer.from_file(str(f))
        except Exception as e:  # the tokenizers package raises a bare Exception for a malformed file
            raise WorkloadError(f"--tokenizer {f}: not a Hugging Face tokenizer.json "
                                f"({str(e).splitlines()[0][:200]})") from None
        self.name = f"tokenizer:{p.name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def truncate(self, text: str, n: int) -> str:
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return text if len(ids) <= n else self._tok.decode(ids[:n])


def load_counter(tokenizer: str | Path | None) -> TokenCounter:
    return HFTokenizer(tokenizer) if tokenizer else ApproxCounter()


class ServerTokenizer:
    """The served model's tokenizer through vLLM's /tokenize and /detokenize (see the module docstring).
    `probe` returns None where the server offers no usable /tokenize."""

    def __init__(self, client: httpx.Client, model: str, num_special: int) -> None:
        self._client, self._model, self.num_special = client, model, num_special
        self.name = "server:/tokenize"

    @classmethod
    def probe(cls, base_url: str, model: str, *, headers: dict[str, str] | None = None, auth: Any = None,
              verify: bool | str = True, timeout_s: float = 10.0) -> ServerTokenizer | None:
        client = httpx.Client(base_url=base_url, headers=headers, auth=auth, verify=verify, timeout=timeout_s,
                              trust_env=False)
        try:
            with_special = cls._ids(client, model, "hello world", True)
            plain = cls._ids(client, model, "hello world", False)
            if with_special is None or plain is None or not plain:
                client.close()
                return None
            return cls(client, model, max(len(with_special) - len(plain), 0))
        except (httpx.HTTPError, OSError):
            client.close()
            return None

    @staticmethod
    def _ids(client: httpx.Client, model: str, text: str, special: bool) -> list[int] | None:
        r = client.post("/tokenize", json={"model": model, "prompt": text, "add_special_tokens": special})
        if r.status_code != 200:
            return None
        try:
            ids = r.json().get("tokens")
        except ValueError:
            return None
        return ids if isinstance(ids, list) and all(isinstance(i, int) for i in ids) else None

    def _tokens(self, text: str) -> list[int]:
        ids = self._ids(self._client, self._model, text, False)
        if ids is None:
            raise WorkloadError("the server's /tokenize stopped answering; pass --tokenizer or --no-server-tokenizer")
        return ids

    def count(self, text: str) -> int:
        return len(self._tokens(text)) + self.num_special

    def truncate(self, text: str, n: int) -> str:
        ids = self._tokens(text)
        keep = max(n - self.num_special, 0)
        if len(ids) <= keep:
            return text
        r = self._client.post("/detokenize", json={"model": self._model, "tokens": ids[:keep]})
        try:
            out = r.json().get("prompt") if r.status_code == 200 else None
        except ValueError:
            out = None
        if not isinstance(out, str):
            raise WorkloadError("the server's /detokenize did not answer; pass --tokenizer or --no-server-tokenizer")
        return out

    def close(self) -> None:
        self._client.close()
