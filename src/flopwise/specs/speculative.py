"""Speculative decoding as a deployment setting: who proposes, how many tokens, how many are accepted.

Each round, a proposer guesses `k` tokens per sequence; the target model then runs ONE step over the k+1
positions (the last accepted token and the k guesses) and keeps the longest agreeing prefix plus one token of
its own (Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding"; Chen et al. 2023,
"Accelerating Large Language Model Decoding with Speculative Sampling"). With an i.i.d. per-token acceptance
rate alpha, the number of accepted guesses J is a geometric truncated at k,

    P(J = j) = alpha^j (1 - alpha)   for j < k,        P(J = k) = alpha^k        (so P(J >= j) = alpha^j),

and the tokens emitted per target step are J + 1 (the bonus token counts, so it is not capped at k), with
mean (Leviathan et al. 2023, eq. 1)

    E[tokens] = sum_{j=0..k} alpha^j = (1 - alpha^(k+1)) / (1 - alpha)      alpha -> 1: k + 1;   alpha = 0: 1

Measured speeds usually quote the mean accepted tokens per step (Spec-Bench's tau, EAGLE's "average acceptance
length"), which is E[tokens] itself: give it instead of alpha, and alpha follows by inverting the formula.

Proposers (`method`):
- `draft`: a separate (smaller) model on the same GPUs (vLLM's draft-model speculation; Spec-Bench "SpS");
- `eagle` / `eagle3` / `mtp`: a one-layer head on the target's features (EAGLE-1/2 heads, Li et al. 2024; EAGLE-3
  heads, Li et al. 2025, which fuse features of three layers and need their own checkpoints; DeepSeek-V3
  multi-token prediction). Priced alike; the launch commands name the engine's method for each (`launch/`);
- `medusa`: k extra heads on the target's last hidden state, run once per round (Cai et al. 2024);
- `ngram`: prompt lookup (n-gram matching in the context, Saxena 2023; vLLM `[ngram]`): no model at all.
Tree drafts (EAGLE, Medusa) verify more than k+1 positions: `verify_tokens` sets that width (EAGLE-1's default
tree `mc_sim_7b_63` has 25 nodes plus the root, i.e. 26 positions). What a round costs is `cost/speculative.py`.

The text form (`parse_speculative`, used by `--speculative` and `compare --try spec=`):

    draft:llama-3.2-1b,k=4,alpha=0.7      eagle,k=3,accepted=2.6      medusa,k=5,accepted=2.5,tree=64
    ngram,k=4,alpha=0.5                   none
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from flopwise.errors import SpecError
from flopwise.specs.model import ModelSpec
from flopwise.specs.model_catalog import get_model

__all__ = ["METHODS", "HEAD_METHODS", "SpeculativeSpec", "expected_tokens", "acceptance_rate",
           "parse_speculative", "SPECULATIVE_EXAMPLES"]

METHODS = ("draft", "eagle", "eagle3", "mtp", "medusa", "ngram")
HEAD_METHODS = ("eagle", "eagle3", "mtp", "medusa")
SPECULATIVE_EXAMPLES = "'eagle,k=3,accepted=2.6', 'draft:llama-3.2-1b,k=4,alpha=0.7', 'ngram,k=4,alpha=0.5'"
_EPS = 1e-12


def expected_tokens(alpha: float, k: int) -> float:
    """Expected tokens per target step, (1 - alpha^(k+1)) / (1 - alpha) (Leviathan et al. 2023, eq. 1)."""
    if not 0.0 <= alpha <= 1.0:
        raise SpecError(f"acceptance rate alpha must be in [0, 1], got {alpha:g}")
    if k < 0:
        raise SpecError(f"k must be >= 0, got {k}")
    if alpha > 1.0 - _EPS:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def acceptance_rate(mean_accepted: float, k: int) -> float:
    """The alpha at which `expected_tokens(alpha, k) == mean_accepted` (increasing in alpha: bisection)."""
    if not 1.0 <= mean_accepted <= k + 1:
        raise SpecError(f"mean accepted tokens per step must be in [1, k+1 = {k + 1}], got {mean_accepted:g}")
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if expected_tokens(mid, k) < mean_accepted:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True, slots=True, kw_only=True)
class SpeculativeSpec:
    """A speculative-decoding setup. Give exactly one of `alpha` (per-token acceptance rate) and
    `mean_accepted` (measured tokens per target step, bonus included)."""

    method: str
    k: int
    alpha: float | None = None
    mean_accepted: float | None = None
    draft_model: ModelSpec | None = None
    verify_tokens: int | None = None  # positions verified per sequence (a tree); None: the chain of k + 1

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise SpecError(f"unknown speculative method '{self.method}'; use one of {', '.join(METHODS)}")
        if not isinstance(self.k, int) or isinstance(self.k, bool) or not 1 <= self.k <= 64:
            raise SpecError(f"k (tokens proposed per step) must be an integer in [1, 64], got {self.k!r}")
        if (self.alpha is None) == (self.mean_accepted is None):
            raise SpecError("give either alpha (acceptance rate per token) or accepted (mean tokens per step)")
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise SpecError(f"alpha must be in [0, 1], got {self.alpha:g}")
        if self.mean_accepted is not None and not 1.0 <= self.mean_accepted <= self.k + 1:
            raise SpecError(f"accepted tokens per step must be in [1, k+1 = {self.k + 1}], got {self.mean_accepted:g}")
        if (self.method == "draft") != (self.draft_model is not None):
            raise SpecError("a draft model is needed for method 'draft' (and only for it): write draft:<model>")
        if self.verify_tokens is not None and self.verify_tokens < self.k + 1:
            raise SpecError(f"a tree verifies at least k+1 = {self.k + 1} positions, got {self.verify_tokens}")

    @property
    def tokens_per_step(self) -> float:
        """E[tokens] per target step."""
        if self.mean_accepted is not None:
            return self.mean_accepted
        assert self.alpha is not None
        return expected_tokens(self.alpha, self.k)

    @property
    def rate(self) -> float:
        """The per-token acceptance rate, given or implied by `mean_accepted` at this k."""
        return self.alpha if self.alpha is not None else acceptance_rate(self.tokens_per_step, self.k)

    @property
    def positions(self) -> int:
        """Positions the target verifies per sequence and step (k + 1, or the tree's width); each takes a KV
        slot while it is verified."""
        return self.verify_tokens or self.k + 1

    def with_k(self, k: int) -> SpeculativeSpec:
        """The same proposer at another k, at the same per-token acceptance rate (a chain: no tree)."""
        return replace(self, k=k, alpha=self.rate, mean_accepted=None, verify_tokens=None)

    def text(self) -> str:
        """The `parse_speculative` form, e.g. 'draft:meta-llama/Llama-3.2-1B,k=4,alpha=0.7'."""
        who = f"draft:{self.draft_model.name}" if self.draft_model else self.method
        acc = f"alpha={self.alpha:g}" if self.alpha is not None else f"accepted={self.mean_accepted:g}"
        tree = f",tree={self.verify_tokens}" if self.verify_tokens else ""
        return f"{who},k={self.k},{acc}{tree}"

    def label(self) -> str:
        return f"spec={self.text()}"


def _number(key: str, v: str, cast: type[int] | type[float]) -> float:
    try:
        return cast(v)
    except ValueError:
        raise SpecError(f"{key} needs a {'whole ' if cast is int else ''}number, got '{v}'") from None


def parse_speculative(text: str) -> SpeculativeSpec | None:
    """`method[:draft-model],k=N,alpha=A|accepted=T[,tree=W]`, or 'none' (no speculation)."""
    if text.strip().lower() in ("none", "off", ""):
        return None
    head, *opts = [p.strip() for p in text.split(",")]
    method, _, draft = head.partition(":")
    if method not in METHODS:
        raise SpecError(f"speculative method '{method}' is not one of {', '.join(METHODS)} "
                        f"(e.g. {SPECULATIVE_EXAMPLES})")
    if (method == "draft") != bool(draft):
        raise SpecError("write draft:<model>,k=..,alpha=.. (only the draft method names a model)")
    kw: dict[str, str] = {}
    for o in opts:
        key, eq, v = o.partition("=")
        if not eq or key not in ("k", "alpha", "accepted", "tree"):
            raise SpecError(f"unknown speculative option '{o}'; use k=, alpha= or accepted=, tree=")
        kw[key] = v
    if "k" not in kw:
        raise SpecError("speculative decoding needs k= (tokens proposed per step)")
    return SpeculativeSpec(
        method=method, k=int(_number("k", kw["k"], int)),
        alpha=_number("alpha", kw["alpha"], float) if "alpha" in kw else None,
        mean_accepted=_number("accepted", kw["accepted"], float) if "accepted" in kw else None,
        draft_model=get_model(draft) if draft else None,
        verify_tokens=int(_number("tree", kw["tree"], int)) if "tree" in kw else None)
