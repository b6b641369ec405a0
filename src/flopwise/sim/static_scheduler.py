"""Static batching, the baseline continuous batching improves on (FasterTransformer-era servers).

When the engine is idle it waits for a full batch: `max_num_seqs` requests, or as many as the KV pool can
hold at their final length (prompt + output - 1 tokens, reserved up front, so nothing is ever preempted), or
whatever is waiting when no further request can arrive. It prefills the whole batch in one step, then decodes
until the batch's last request finishes; nobody joins in between. Finished requests stop costing compute
(no padding), which flatters this baseline slightly. With speculative decoding each decode verifies
`decode_tokens` positions, so the reservation holds decode_tokens - 1 more slots.
"""

from __future__ import annotations

from flopwise.sim.base import BaseScheduler, SchedulerOutput
from flopwise.sim.request import Request

__all__ = ["StaticScheduler"]


class StaticScheduler(BaseScheduler):
    def schedule(self, now: float, more_coming: bool = True) -> SchedulerOutput:
        out = self.new_output()
        if self.running:
            for req in self.running:
                out.add(req, self.decode_tokens)
            return out
        kv, waiting = self.kv, self.waiting
        free = kv.num_free_blocks
        size = 0
        for req in waiting:
            need = kv.blocks_needed(req, self._reserve(req))
            if size == self.max_num_seqs or need > free:
                break
            free -= need
            size += 1
        full = size == self.max_num_seqs or size < len(waiting) or not more_coming
        if not size or not full:
            return out
        for _ in range(size):
            req = waiting.popleft()
            kv.allocate(req, self._reserve(req))
            self._start(req, now)
            out.add(req, req.num_prompt_tokens)
        return out

    def _reserve(self, req: Request) -> int:
        """Tokens of KV held from admission: the final length, plus the last round's unverified guesses."""
        return req.num_prompt_tokens + req.max_tokens - 1 + self.decode_tokens - 1

    def admission_open(self) -> bool:
        return not self.running
