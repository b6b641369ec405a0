"""The import direction of `src/flopwise`, written once: a package may import only packages of its own layer or
below. Every import counts, at module top or inside a function, with one exception: a `_repr_html_` method may
import a renderer from `report` (Jupyter display of a lower layer's record; nothing else in it runs report code).
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "flopwise"

# lowest first; a package sits in exactly one layer (top-level modules by their name without .py)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "validate", "units", "display", "catalog"),
    ("specs", "params"),
    ("cost",),
    ("workload", "metrics"),
    ("sim",),
    ("cluster", "estimate"),
    ("techniques", "bench", "profile"),
    ("plan", "calibrate", "validation"),
    ("launch", "report"),
    ("results",),
    ("api", "__init__"),
    ("cli", "__main__"),
)
LEVEL = {name: i for i, layer in enumerate(LAYERS) for name in layer}
DISPLAY_ONLY = ("_repr_html_", "report")  # (method name, package it may import lazily)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _edges() -> list[tuple[str, str, str, int]]:
    """(importing package, imported package, file, line) for every import of another flopwise package."""
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        src = _package(module) if module != "flopwise" else "__init__"
        tree = ast.parse(path.read_text())
        exempt: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == DISPLAY_ONLY[0]:
                exempt |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names if node.module == "flopwise"]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                if not name.startswith("flopwise.") or name == "flopwise":
                    continue
                dst = _package(name)
                if dst == src or (id(node) in exempt and dst == DISPLAY_ONLY[1]):
                    continue
                out.append((src, dst, str(path.relative_to(SRC)), node.lineno))
    return out


def test_every_package_has_a_layer():
    found = {p.stem if p.is_file() else p.name for p in SRC.iterdir()
             if (p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))}
    assert found - set(LEVEL) == set(), "add the new package to LAYERS"


def test_no_import_goes_up_a_layer():
    upward = [f"{f}:{line}: {s} (layer {LEVEL[s]}) imports {d} (layer {LEVEL[d]})"
              for s, d, f, line in _edges() if LEVEL[d] > LEVEL[s]]
    assert upward == []


def test_no_lower_layer_imports_the_front_door_or_the_planners():
    """The issue's rule in its own words: nothing below the API imports api.py, plan/, techniques/ or report/."""
    front = {"api": LEVEL["api"], "plan": LEVEL["plan"], "techniques": LEVEL["techniques"], "report": LEVEL["report"]}
    bad = [(s, d, f) for s, d, f, _ in _edges() if d in front and LEVEL[s] < front[d]]
    assert bad == []


def test_the_checker_sees_an_upward_import(tmp_path, monkeypatch):
    """The walk is not vacuous: a cost module importing the simulator is reported."""
    pkg = tmp_path / "flopwise"
    (pkg / "cost").mkdir(parents=True)
    (pkg / "cost" / "bad.py").write_text("def f():\n    from flopwise.sim import simulate\n")
    monkeypatch.setattr(__import__(__name__), "SRC", pkg)
    assert [(s, d) for s, d, _, _ in _edges()] == [("cost", "sim")]
