"""Fast-forward through runs of identical decode steps, with the same result as stepping one at a time.

Between two events that change the batch (an arrival that can be admitted, a request finishing, a KV
shortage), every step decodes the same B requests, one token each, with every context one longer than the
step before. Such a run of k steps is planned in O(B) and applied in O(B), instead of O(B) per step:

- k >= 1 = the fewest tokens any running request still has to generate (the run ends with that request's last
  token), cut so that the blocks the run needs, sum_i blocks(c_i + k) - held_i, fit in the free pool (beyond
  that the step-by-step path preempts), and cut at the first step ending at or after the next arrival when
  the scheduler could admit it;
- step j (1-based) of a full-attention model is a decode of B rows with context sum C + B(j - 1), whose cost
  (`cost.step`) is convex and nearly linear in j: only attention depends on j, and it combines a compute and
  a memory time, each affine in the context sum, by a max or a p-norm (both convex). So times are evaluated
  at the ends of [1, k] and at midpoints, recursively, until the midpoint lies within a relative 1e-9 of the
  chord, and interpolated in between (for a convex function the chord's largest gap is about its midpoint
  gap; for an affine one it is 0): a few cost calls per run instead of k, and step times within ~1e-9 of
  exact. Sliding-window models (whose per-row min(c, w) breaks convexity) evaluate every step.
Speculative deployments are never fast-forwarded (the engine skips this): each step emits a random number of
tokens per request, so no two steps are alike.
"""

from __future__ import annotations

from collections.abc import Callable

from flopwise.cost.step import decode_step_timer, step_time
from flopwise.sim.base import BaseScheduler
from flopwise.sim.shape import ShapeBuilder
from flopwise.specs.deployment import Deployment

__all__ = ["plan_decode_run", "run_durations"]

_REL_TOL = 1e-9


def plan_decode_run(sched: BaseScheduler, max_decodes: int) -> int:
    """Steps the current batch can decode unchanged (ignoring arrivals), or 0 when the next step is not a
    plain decode of every running request."""
    running = sched.running
    if not running or len(running) > max_decodes:
        return 0
    last = running[-1]  # the newest request is the likeliest to be still prefilling
    if last.num_computed_tokens != last.num_tokens - 1:
        return 0
    if sched.waiting and sched.admission_open():  # before the O(batch) horizon, which it often spares
        return 0
    k = sched.run_horizon()
    return sched.decode_steps_that_fit(k) if k else 0


def run_durations(dep: Deployment, builder: ShapeBuilder, sched: BaseScheduler, k: int) -> list[float]:
    """Durations (s) of the k decode steps of a run of the current batch."""
    if builder.full_only:
        b = len(sched.running)
        c0 = sched.decode_context_sum()
        return _chord_fill(decode_step_timer(dep, b), k, c0, b)  # step j's context sum: c0 + b (j - 1)
    ctx = sched.decode_contexts()
    return [step_time(dep, builder.decode_rows([c + j - 1 for c in ctx])) for j in range(1, k + 1)]


def _chord_fill(f: Callable[[int], float], k: int, x1: int = 1, dx: int = 1) -> list[float]:
    """[g(1), ..., g(k)] for g(j) = f(x1 + dx (j - 1)) convex and nearly linear, evaluating f only where g bends by
    more than _REL_TOL (g(j) is stored at j - 1)."""
    first = f(x1)
    if k == 1:
        return [first]
    vals = [first] * k
    vals[k - 1] = f(x1 + dx * (k - 1))
    stack = [(1, k)]
    while stack:
        a, b = stack.pop()
        if b - a < 2:
            continue
        m = (a + b) // 2
        fa, fb = vals[a - 1], vals[b - 1]
        fm = f(x1 + dx * (m - 1))
        slope = (fb - fa) / (b - a)
        if abs(fm - (fa + slope * (m - a))) <= _REL_TOL * fm:
            for j in range(a + 1, b):
                vals[j - 1] = fa + slope * (j - a)
        else:
            vals[m - 1] = fm
            stack.append((a, m))
            stack.append((m, b))
    return vals
