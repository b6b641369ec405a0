"""Optimization techniques as transforms of a deployment and its workload, and the trade-off ledger.

- `scenario.py`: `Scenario` (deployment, with its speculative decoding, + request shape + prefix hits), `rebuild`.
- `speculative.py`: draft models, EAGLE/MTP/Medusa heads, n-gram lookup; speedup, best k, break-even batch
  (the setting is `specs/speculative.py`, a round's cost `cost/speculative.py`).
- `quantization.py`: weight and KV formats, with accuracy-risk notes and their sources.
- `prefix_cache.py`: prefill tokens and FLOPs a hit ratio saves; shared prefix blocks.
- `kv_structure.py`: MHA / GQA / MQA / MLA / sliding-window what-ifs: KV bytes per token and concurrency.
- `batching.py`: prefill under a token budget; chunked prefill's TTFT vs ITL tail.
- `parallelism.py`: tensor parallelism and a different GPU; roofs and machine balance.
- `ledger.py`: the metrics users feel, next to a baseline, better or worse.
- `tries.py`: the `--try` grammar of `flopwise compare`. `explain.py`: `flopwise explain`.
"""
