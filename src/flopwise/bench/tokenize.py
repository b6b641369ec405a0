"""Counting tokens on the client: a real tokenizer when one is given, else a documented approximation.

The approximation (`ApproxCounter`) counts one token per whitespace-separated word of common English and four
characters per token for anything else. Byte-level BPE tokenizers (Llama 3, Qwen, GPT-2 style) encode each of the
words that `prompts.random_text` draws from (short, frequent English words, each preceded by a space) as one
token, so random text of N words is about N tokens (typically within a few percent). The server's `usage`
replaces the estimate in every record, with its source recorded, so only the prompt's construction is approximate.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from flopwise.errors import WorkloadError

__all__ = ["TokenCounter", "ApproxCounter", "HFTokenizer", "load_counter"]


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
            from tokenizers import Tokenizer  # type: ignore[import-not-found]
        except ImportError as e:
            raise WorkloadError("--tokenizer needs the `tokenizers` package: pip install tokenizers") from e
        p = Path(path)
        f = p / "tokenizer.json" if p.is_dir() else p
        if not f.is_file():
            raise WorkloadError(f"no tokenizer.json at {path}; pass a tokenizer directory or its tokenizer.json")
        self._tok = Tokenizer.from_file(str(f))
        self.name = f"tokenizer:{p.name}"

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)

    def truncate(self, text: str, n: int) -> str:
        ids = self._tok.encode(text, add_special_tokens=False).ids
        return text if len(ids) <= n else self._tok.decode(ids[:n])


def load_counter(tokenizer: str | Path | None) -> TokenCounter:
    return HFTokenizer(tokenizer) if tokenizer else ApproxCounter()
