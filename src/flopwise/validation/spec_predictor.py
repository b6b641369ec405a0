"""Predict speculative-decoding speedups (validation rows with `command: speculative`).

A row gives the target deployment, the method (eagle, medusa, draft), the measured mean accepted tokens per
target step (tau) and, for `draft`, the draft model. The proposal depth and tree are the methods' published
defaults, since the rows do not state them:
- eagle: EAGLE-1's default tree `mc_sim_7b_63`: 25 draft tokens over depth 5 (k = 5 head steps), 26 positions
  verified (SafeAILab/EAGLE `model/choices.py`);
- medusa: Medusa-1's `mc_sim_7b_63` tree over 5 heads: 63 candidates + the root = 64 positions verified
  (FasterDecoding/Medusa); its heads are costed as EAGLE-style heads (techniques/speculative.py);
- draft: Hugging Face assisted generation's default of 5 assistant tokens (`num_assistant_tokens`), a chain.
Speedup = end-to-end time of plain decoding / with speculation, both static-batch (prefill included), as
Spec-Bench times whole generations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flopwise.specs.model_catalog import get_model
from flopwise.specs.speculative import SpeculativeSpec
from flopwise.techniques.ledger import request_latency_s
from flopwise.techniques.scenario import Scenario
from flopwise.validation.engines import case_deployment

if TYPE_CHECKING:
    from flopwise.validation.cases import Case

__all__ = ["predict_speculative", "METHOD_DEFAULTS"]

# method -> (k draft steps, positions verified per step or None for the chain of k + 1)
METHOD_DEFAULTS: dict[str, tuple[int, int | None]] = {"eagle": (5, 26), "medusa": (5, 64), "draft": (5, None)}


def predict_speculative(case: Case) -> float:
    a = case.args
    method = a["method"]
    k, tree = METHOD_DEFAULTS[method]
    draft = get_model(a["draft_model"]) if method == "draft" else None
    spec = SpeculativeSpec(method=method, k=k, mean_accepted=float(a["mean_accepted_tokens"]), draft_model=draft,
                           verify_tokens=tree)
    dep, _ = case_deployment(case.raw, "estimate", a)
    base = Scenario(deployment=dep, input_len=int(a["input_len"]), output_len=int(a["output_len"]),
                    batch=int(a.get("batch") or 1))
    out = base.output_len - 1

    def e2e(scn: Scenario) -> float:
        ttft, tpot = request_latency_s(scn)
        return ttft + out * tpot

    return e2e(base) / e2e(base.with_deployment(case_deployment(case.raw, "estimate", a, speculative=spec)[0]))
