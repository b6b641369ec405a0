"""SLA-driven search over deployments: candidates, closed-form pruning, sustained capacity with intervals,
ties, Pareto frontier, trade-offs. Launch commands are rendered from its result by `flopwise.launch`."""

from flopwise.plan.search import PlanRequest, PlanResult, plan

__all__ = ["PlanRequest", "PlanResult", "plan"]
