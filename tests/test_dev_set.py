"""The measured dev set (`benchmarks/data/`) is well formed: every case has its published row, ids are unique, and
every usable case names a model, GPU and engine flopwise knows, so `benchmarks/accuracy.py` can score it."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

import pytest

from flopwise.specs.hardware import get_hardware
from flopwise.specs.model_catalog import get_model
from flopwise.validation.cases import load_cases
from flopwise.validation.engines import case_engine

DATA = Path(__file__).parent.parent / "benchmarks" / "data"
REGIMES = {"single_request", "static_batch", "capacity", "online_rate", "online_concurrency", "max_load",
           "speculative"}
CASE_FILES = sorted(DATA.glob("cases-*.jsonl"))


def _cases(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_row_ids_are_unique_across_the_set():
    ids = [c["row_id"] for path in CASE_FILES for c in _cases(path)]
    assert len(CASE_FILES) >= 9 and len(ids) >= 500
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.name)
def test_every_case_has_its_published_row(path):
    measured = DATA / path.name.replace("cases-", "measured-").replace(".jsonl", ".csv")
    with measured.open(newline="") as f:
        published = {int(r["row_id"]): r for r in csv.DictReader(f)}
    for c in _cases(path):
        row = published[c["row_id"]]  # a KeyError names the case without a source row
        assert row["source_url_or_ref"].strip(), c["row_id"]
        assert c["regime"] in REGIMES, c["row_id"]
        if c["usable"]:
            assert c["metric_key"] and (c.get("expected") is not None or c.get("expected_range")), c["row_id"]


@pytest.mark.parametrize("path", CASE_FILES, ids=lambda p: p.name)
def test_usable_cases_name_what_flopwise_knows(path):
    for c in _cases(path):
        if not c["usable"]:
            continue
        args = c["args"]
        get_model(args["model"])
        get_hardware(args["gpu"])
        case_engine(c, c["command"])


def _accuracy_script():
    spec = importlib.util.spec_from_file_location("accuracy", DATA.parent / "accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_current_release_slice_takes_the_issues_engines_and_gpus():
    """`accuracy.py`'s second summary: vLLM 0.9+, SGLang 0.5+, TensorRT-LLM 0.20+ and llama.cpp on H100 / H200 / A100
    / B200 / GeForce / Apple, the engines and GPUs of the issue's unseen sources."""
    is_current = _accuracy_script().is_current
    cases = {c.row_id: c for path in CASE_FILES for c in load_cases(path)}
    expected = {
        7414: True,   # vLLM 0.18.0, H100 SXM
        4810: True,   # SGLang 0.5.9, H100 SXM
        6541: True,   # TensorRT-LLM 1.2.0rc2, B200
        5703: True,   # llama.cpp b6123, M2 Ultra
        3201: False,  # vLLM 0.7.3 (before 0.9), H200
        6801: False,  # SGLang 0.4.7.post1 (before 0.5), A100 PCIe
        7005: False,  # TensorRT-LLM 0.16 (before 0.20), H100 SXM
        5400: False,  # SGLang 0.5.5.post3 on a GH200 (not a GPU the issue names)
        6004: False,  # llama.cpp on a Radeon RX 7900 XTX
    }
    assert {row: is_current(cases[row]) for row in expected} == expected
