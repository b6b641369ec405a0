"""Prompts to send: random text of a token length, ShareGPT JSON, JSONL, and shared-prefix sets.

Every source returns a list of `Prompt`s, deterministic for a seed. Random text is drawn per request so that
no two prompts share a prefix (unless asked to), which keeps a server's prefix cache from flattering it.
Token lengths are exact with a tokenizer and approximate without one (see `tokenize`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from flopwise.bench.tokenize import ApproxCounter, TokenCounter
from flopwise.errors import WorkloadError

__all__ = ["Prompt", "PromptSource", "random_text", "load_sharegpt", "load_jsonl", "load_dataset"]

# Short, frequent English words: one byte-level BPE token each, with their leading space.
_WORDS = tuple("""the of and to in is was for on are with as his they be at one have this from or had by
word but what some we can out other were all there when up use your how said an each she which do their time
if will way about many then them write would like so these her long make thing see him two has look more day
could go come did number sound no most people my over know water than call first who may down side been now
find any new work part take get place made live where after back little only round man year came show every
good me give our under name very through just form great think say help low line differ turn cause much mean
before move right boy old too same tell does set three want air well also play small end put home read hand
port large spell add even land here must big high such follow act why ask men change went light kind off need
house picture try us again animal point mother world near build self earth father head stand own page should
country found answer school grow study still learn plant cover food sun four between state keep eye never last
let thought city tree cross farm hard start might story saw far sea draw left late run while press close night
real life few north open seem together next white children begin got walk example ease paper group always
music those both mark often letter until mile river car feet care second book carry took science eat room
friend began idea fish mountain stop once base hear horse cut sure watch color face wood main enough plain
girl usual young ready above ever red list though feel talk bird soon body dog family direct pose leave song
measure door product black short numeral class wind question happen complete ship area half rock order fire
south problem piece told knew pass since top whole king space heard best hour better true during hundred five
remember step early hold west ground interest reach fast verb sing listen six table travel less morning ten
simple several vowel toward war lay against pattern slow center love person money serve appear road map rain
rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine note wait plan
figure star box noun field rest correct able pound done beauty drive stood contain front teach week final gave
green oh quick develop ocean warm free minute strong special mind behind clear tail produce fact street inch
multiply nothing course stay wheel full force blue object decide surface deep moon island foot system busy
test record boat common gold possible plane stead dry wonder laugh thousand ago ran check game shape equate
hot miss brought heat snow tire bring yes distant fill east paint language among""".split())


@dataclass(frozen=True, slots=True, kw_only=True)
class Prompt:
    """One prompt. `input_tokens` is the client's count (exact with a tokenizer); `output_len` the tokens
    to ask for (max_tokens, with ignore_eos where the server accepts it)."""

    text: str
    input_tokens: int
    output_len: int
    messages: tuple[dict[str, Any], ...] | None = None


def random_text(rng: np.random.Generator, num_tokens: int, counter: TokenCounter) -> str:
    """Random words of about `num_tokens` tokens; exactly that many under a real tokenizer."""
    if num_tokens <= 0:
        return ""
    words = rng.choice(len(_WORDS), size=num_tokens + 16)
    text = " ".join(_WORDS[i] for i in words)
    while counter.count(text) < num_tokens:
        text += " " + " ".join(_WORDS[i] for i in rng.choice(len(_WORDS), size=num_tokens // 2 + 16))
    return counter.truncate(text, num_tokens)


class PromptSource:
    """Prompt i for any i >= 0, deterministic in (seed, i), so a resumed run sends the same prompts.

    Random text: lengths uniform within +-range_ratio of input_len / output_len. With `shared_prefix_len`,
    prompt i starts with shared prefix i % num_prefixes (for prefix-cache tests) and goes on with its own
    random suffix of input_len tokens. With a dataset, prompt i is item i (cycled). Warm-up prompts come from a
    separate stream (`warmup=True`), so they never warm the cache for a measured prompt."""

    def __init__(self, *, input_len: int = 512, output_len: int = 128, seed: int = 0,
                 counter: TokenCounter | None = None, range_ratio: float = 0.0, shared_prefix_len: int = 0,
                 num_prefixes: int = 1, items: list[Prompt] | None = None) -> None:
        _check_lengths(input_len, output_len)
        if shared_prefix_len < 0 or num_prefixes < 1:
            raise WorkloadError("--shared-prefix-len must be >= 0 and --num-prefixes >= 1")
        if not 0 <= range_ratio < 1:
            raise WorkloadError(f"--range-ratio must be in [0, 1); got {range_ratio}")
        if items is not None and not items:
            raise WorkloadError("the dataset has no usable prompts")
        self.input_len, self.output_len, self.seed = input_len, output_len, seed
        self.counter = counter or ApproxCounter()
        self.range_ratio = range_ratio
        self.items = items
        self.prefixes = [random_text(np.random.default_rng((seed, 2, g)), shared_prefix_len, self.counter)
                         for g in range(num_prefixes)] if shared_prefix_len else []

    def __call__(self, i: int, warmup: bool = False) -> Prompt:
        if self.items is not None:
            n = len(self.items)
            return self.items[(n - 1 - i) % n if warmup else i % n]
        rng = np.random.default_rng((self.seed, int(warmup), i))
        n_in, n_out = self._length(rng, self.input_len), self._length(rng, self.output_len)
        text = random_text(rng, n_in, self.counter)
        if self.prefixes:
            text = self.prefixes[i % len(self.prefixes)] + " " + text
        return Prompt(text=text, input_tokens=self.counter.count(text), output_len=n_out)

    def _length(self, rng: np.random.Generator, mean: int) -> int:
        if self.range_ratio <= 0:
            return mean
        lo, hi = max(1, round(mean * (1 - self.range_ratio))), max(1, round(mean * (1 + self.range_ratio)))
        return int(rng.integers(lo, hi + 1))


def load_sharegpt(path: str | Path, *, seed: int = 0, counter: TokenCounter | None = None,
                  output_len: int | None = None, max_input_len: int = 4096) -> list[Prompt]:
    """ShareGPT JSON: a list of {"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}.
    The first human turn is the prompt; the reply's token count is the output length unless `output_len`
    is given. Conversations with fewer than two turns, or prompts over `max_input_len`, are skipped;
    the rest are shuffled with `seed`."""
    counter = counter or ApproxCounter()
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise WorkloadError(f"cannot read ShareGPT file {path}: {e}") from e
    if not isinstance(data, list):
        raise WorkloadError(f"{path} is not a ShareGPT file (expected a JSON list of conversations)")
    pairs = []
    for conv in data:
        turns = (conv.get("conversations") or conv.get("conversation") or []) if isinstance(conv, dict) else []
        if len(turns) < 2:
            continue
        prompt, reply = str(turns[0].get("value", "")), str(turns[1].get("value", ""))
        n_in = counter.count(prompt)
        n_out = output_len or max(1, counter.count(reply))
        if 1 <= n_in <= max_input_len:
            pairs.append(Prompt(text=prompt, input_tokens=n_in, output_len=n_out))
    return _shuffled(pairs, seed, path)


def load_jsonl(path: str | Path, *, counter: TokenCounter | None = None,
               output_len: int | None = None) -> list[Prompt]:
    """JSONL, one object a line: {"prompt": str} or {"messages": [...]}, optionally with "output_len"
    (or "max_tokens"). Without a length, `output_len` applies. Kept in file order."""
    counter = counter or ApproxCounter()
    out = []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise WorkloadError(f"cannot read {path}: {e}") from e
    for k, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise WorkloadError(f"{path}:{k}: not JSON ({e})") from e
        messages = obj.get("messages")
        text = obj.get("prompt") or ("\n".join(str(m.get("content", "")) for m in messages) if messages else None)
        if not isinstance(text, str):
            raise WorkloadError(f"{path}:{k}: needs a \"prompt\" string or a \"messages\" list")
        n_out = obj.get("output_len") or obj.get("max_tokens") or output_len
        if not n_out:
            raise WorkloadError(f"{path}:{k}: no output length; add \"output_len\" or pass --output-len")
        out.append(Prompt(text=text, input_tokens=counter.count(text), output_len=int(n_out),
                          messages=tuple(messages) if messages else None))
    if not out:
        raise WorkloadError(f"{path} has no prompts")
    return out


def load_dataset(path: str | Path, *, seed: int = 0, counter: TokenCounter | None = None,
                 output_len: int | None = None) -> list[Prompt]:
    """JSONL for .jsonl (file order), ShareGPT JSON otherwise (shuffled with seed)."""
    p = Path(path)
    if p.suffix == ".jsonl":
        return load_jsonl(p, counter=counter, output_len=output_len)
    return load_sharegpt(p, seed=seed, counter=counter, output_len=output_len)


def _shuffled(items: list[Prompt], seed: int, path: str | Path) -> list[Prompt]:
    if not items:
        raise WorkloadError(f"{path} has no usable prompts")
    order = np.random.default_rng(seed).permutation(len(items))
    return [items[i] for i in order]


def _check_lengths(input_len: int, output_len: int) -> None:
    if input_len < 1 or output_len < 1:
        raise WorkloadError(f"--input-len and --output-len must be >= 1 (got {input_len}, {output_len})")
