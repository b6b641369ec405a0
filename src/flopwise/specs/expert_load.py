"""How unevenly routed tokens land on expert-parallel ranks when nothing rebalances them: a measured default.

Under expert parallelism a MoE layer waits for its busiest rank (the all-to-all is a barrier), so the step
runs at s = (rows on the busiest rank) / (mean rows per rank) (`Deployment.expert_skew`, `cost/step.py`).

The one published measurement found (TensorRT-LLM tech blog 4, "Scaling Expert Parallelism in TensorRT-LLM",
Table 1): DeepSeek-R1 at EP 32 (8 of its 256 routed experts per rank, top-8 routing, attention DP, iterations
100-200 of a trtllm-bench run), no expert load balancer: the hottest rank receives 1.564 times more routed tokens
than the mean (s = 2.564, averaged over layers and iterations), and the hottest expert 10.95 times more than the
mean expert. With the static load balancer (EPLB, 288 slots) s = 1.11.

Other EP sizes, by the blog's own account of where the excess comes from (a rank is hot because it holds a hot
expert): the hot experts' surplus is shared by the j = E / ep experts on a rank, so the excess over the mean
scales as 1 / j,
    s(ep) = 1 + 1.564 x 8 / j       (DeepSeek-V3/R1: EP 8 -> 1.39, EP 16 -> 1.78, EP 32 -> 2.56, EP 64 -> 4.13)
and s never exceeds what top-k routing allows: a rank holding j experts gets at most min(j, k) rows per token,
so s <= ep x min(j, k) / k. The measurement is of DeepSeek's router; other routers (Mixtral's, Qwen3's, gpt-oss's)
have no published figure, so they default to balanced routing (s = 1). An assumption, not a measurement, beyond
EP 32 and for datasets other than the blog's (machine translation); state `--expert-skew` (1.11 with EPLB) to
override it.

How many distinct experts a step reads (`experts_touched`). Under uniform routing T tokens, each picking k of E
experts, touch E·(1 - (1 - k/E)^T) in expectation; any uneven popularity touches fewer (1 - (1 - p)^T is concave in
p), and real routers are uneven (the same blog's hottest expert: 10.95x the mean). With popularity p_e = (k/E)·X_e,
X_e ~ Gamma(a, 1/a) (mean 1, coefficient of variation 1/sqrt(a)), an expert stays untouched by T - 1 tokens with
probability E[exp(-(T - 1)·k·X/E)] = (1 + (T - 1)·k/(E·a))^(-a), so with the first token's k experts exact:
    touched(T) = E - (E - k)·(1 + (T - 1)·k/(E·a))^(-a)
(T = 1: k; a -> infinity: the uniform count, to first order in k/E; T -> infinity: E). `ROUTING_SHAPE` a = 2
(coefficient of variation 0.71) is fitted on the dev set's 721 MoE rows (DeepSeek-V3 / R1, gpt-oss, Qwen3,
MiniMax-M2, GLM, Llama 4, Mixtral, on vLLM, SGLang and TensorRT-LLM): median 15.3% -> 14.1%, 202 rows closer and 134
further by more than a point; decode at 9-128 sequences was 7-19% too slow (too many expert bytes). The blog's
figure for DeepSeek's router is more uneven: a hottest expert 10.95x the mean of 256 is the expected maximum of
256 draws at a ~ 0.5 (chi-squared with one degree of freedom). So the measured router (`MEASURED_FAMILIES`) gets
its own shape, `MEASURED_ROUTING_SHAPE` a = 1, fitted on the dev set's 276 rows of that router (DeepSeek-V3 / R1 /
V3.2, Kimi-K2 on vLLM, SGLang, TensorRT-LLM and llama.cpp, H200 / B200 / MI300X / MI355X / H20) between the
global fit and the blog's: a = 2 / 1.5 / 1 / 0.75 / 0.5 score them 12.5 / 12.2 / 11.7 / 12.0 / 12.2% median (their
online rows 12.5 -> 11.3%; SGLang's decode at 8-64 sequences was 10-26% too slow); every other router keeps
`ROUTING_SHAPE`, having no measurement of its own.
"""

from __future__ import annotations

from flopwise.specs.model import ModelSpec

__all__ = ["MEASURED_FAMILIES", "EPLB_SKEW", "ROUTING_SHAPE", "MEASURED_ROUTING_SHAPE", "routing_shape",
           "default_expert_skew", "experts_touched"]

MEASURED_FAMILIES = ("deepseek", "deepseek-v3.2")  # routers of the DeepSeek-V3 kind (Kimi-K2 ships as one)
EXCESS_AT_8_PER_RANK = 1.564  # TensorRT-LLM blog 4, Table 1: (max - mean) / mean at EP 32, no EPLB
EPLB_SKEW = 1.11  # the same table with the static load balancer (288 slots, EP 32 / EP 36)
ROUTING_SHAPE = 2.0  # fitted: the gamma shape of expert popularity (module docstring, `experts_touched`)
MEASURED_ROUTING_SHAPE = 1.0  # fitted: the same for the measured router (DeepSeek's), more uneven


def routing_shape(model: ModelSpec) -> float:
    """The gamma shape of `model`'s expert popularity: the measured router's own, else the one fitted for all."""
    return MEASURED_ROUTING_SHAPE if model.family in MEASURED_FAMILIES else ROUTING_SHAPE


def default_expert_skew(model: ModelSpec, ep: int) -> float:
    """s(ep) of the module docstring: 1 without expert parallelism or for a router without a measurement."""
    moe = [lay.mlp for lay in model.layers if lay.mlp.is_moe]
    if ep <= 1 or not moe or model.family not in MEASURED_FAMILIES:
        return 1.0
    experts, top_k = moe[0].num_experts, moe[0].experts_per_token
    per_rank = experts / ep
    skew = 1.0 + EXCESS_AT_8_PER_RANK * 8.0 / per_rank
    return min(skew, ep * min(per_rank, top_k) / top_k, 16.0)


def experts_touched(num_experts: int, top_k: int, tokens: float, shape: float = ROUTING_SHAPE) -> float:
    """Expected distinct experts `tokens` tokens (at least 1) route to, under gamma-distributed popularity of `shape`
    (module docstring): E - (E - k)·(1 + (T - 1)·k/(E·a))^(-a)."""
    e, k = float(num_experts), float(top_k)
    untouched: float = (1.0 + max(tokens - 1.0, 0.0) * k / (e * shape)) ** -shape
    return e - (e - k) * untouched
