"""TensorRT-LLM's attention-DP balance (`attention_dp_config.enable_balance`, PR #6061; tech blog 10, 'ADP Balance
Strategy'): the executor holds context requests back so that the attention-DP ranks run their prompts in the same
iteration instead of one rank's prompt stalling every other rank's decodes.

Each iteration, with every rank's counts gathered (PyExecutor._balance_adp_requests):

    every rank has a context request and a free slot:   the wait counter restarts; if every rank also generates,
                                                        hold for batching_wait_iters iterations, then schedule
    otherwise:                                          the wait counter counts this iteration; hold, unless it
                                                        reached timeout_iters or some rank has nothing to
                                                        generate (no rank waits behind an idle one)

The simulator runs the ranks as one scheduler whose requests the server deals out evenly, so 'every rank has a
context' reads as at least `groups` requests waiting, 'every rank generates' as at least `groups` running, and a
free slot as room for `groups` more. The wait counter runs in iterations with nothing waiting too, restarting each
time it reaches timeout_iters: it is kept as the iteration it last restarted at, and after iterations that were not
asked (nothing waited) taken at its phase in that cycle, so a context that arrives mid-cycle waits out the rest.
"""

from __future__ import annotations

__all__ = ["AdpBalance"]


class AdpBalance:
    """The hold decision of one engine's attention-DP balance, iteration by iteration (`hold`)."""

    __slots__ = ("groups", "timeout_iters", "batching_wait_iters", "_restarted_at", "_batching", "_asked_at")

    def __init__(self, groups: int, timeout_iters: int, batching_wait_iters: int):
        self.groups = groups
        self.timeout_iters = timeout_iters
        self.batching_wait_iters = batching_wait_iters
        self._restarted_at = 0  # the iteration the wait counter last restarted at
        self._batching = 0  # iterations held so far for batching
        self._asked_at = -1  # the last iteration asked

    def hold(self, step: int, num_waiting: int, num_running: int, max_running: int) -> bool:
        """Whether iteration `step` schedules no new context (call once per iteration that has one waiting)."""
        g = self.groups
        generating = num_running >= g
        if step > self._asked_at + 1 and self.timeout_iters:  # unasked iterations: the counter kept cycling
            self._restarted_at = step - (step - self._restarted_at) % self.timeout_iters
        self._asked_at = step
        if num_waiting >= g and num_running + g <= max_running:
            self._restarted_at = step
            if generating:
                if self._batching < self.batching_wait_iters:
                    self._batching += 1
                    return True
                self._batching = 0
            return False
        if step - self._restarted_at >= self.timeout_iters or not generating:
            self._restarted_at = step
            return False
        return True
