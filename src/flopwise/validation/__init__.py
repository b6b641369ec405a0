"""Scoring predictions against published measurements (`benchmarks/data/cases-dev.jsonl`)."""

from flopwise.validation.cases import Case, Outcome, load_cases, predict_case, score_cases

__all__ = ["Case", "Outcome", "load_cases", "predict_case", "score_cases"]
