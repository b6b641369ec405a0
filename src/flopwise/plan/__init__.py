"""SLA-driven search over deployments: candidates, closed-form pruning, simulated capacity, Pareto frontier,
launch commands."""

from flopwise.plan.search import PlanRequest, PlanResult, plan

__all__ = ["PlanRequest", "PlanResult", "plan"]
