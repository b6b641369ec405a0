"""The physics: time and bytes of one engine step, memory and KV capacity."""

from flopwise.cost.batch import BatchShape, batch_shape, decode_shape, prefill_shape
from flopwise.cost.memory import MemoryPlan, memory_plan
from flopwise.cost.step import OpCost, StepCost, step_cost, step_time

__all__ = ["BatchShape", "batch_shape", "decode_shape", "prefill_shape", "MemoryPlan", "memory_plan",
           "OpCost", "StepCost", "step_cost", "step_time"]
