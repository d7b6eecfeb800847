"""Import direction around the training code: nothing under ``agents/`` imports the CLI (the CLI sits
on top and calls ``agents.train.train_from_args``), no module of ``agents/`` imports another that
imports it back (directly or around a longer loop, counting imports inside functions and under
``TYPE_CHECKING``), and the CLI, the metrics and the training options load without torch, so
``terrazero maps ...`` never pays for it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

AGENTS = Path(__file__).resolve().parents[1] / "agents"
#: The package ``agents/`` is installed as; relative imports resolve against it.
PACKAGE = "terrazero_env.agents"


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "." * node.level + (node.module or "")
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def _is_cli(module: str) -> bool:
    """``terrazero_env.cli`` (or a name in it), absolute or relative from ``agents``."""
    return any(module == base or module.startswith(base + ".") for base in ("terrazero_env.cli", "..cli"))


def test_no_module_under_agents_imports_the_cli():
    files = sorted(AGENTS.glob("*.py"))
    assert files, f"no sources under {AGENTS}"
    offenders = {f.name: sorted(m for m in _imported_modules(f) if _is_cli(m)) for f in files}
    assert not {k: v for k, v in offenders.items() if v}


def test_the_check_catches_a_cli_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from terrazero_env.cli import _cmd_train\n", encoding="utf-8")
    assert any(_is_cli(m) for m in _imported_modules(bad))
    bad.write_text("from ..cli import add_train_arguments\n", encoding="utf-8")
    assert any(_is_cli(m) for m in _imported_modules(bad))


def test_cli_metrics_and_train_options_import_without_torch():
    code = ("import sys, terrazero_env.cli, terrazero_env.evaluation.metrics, terrazero_env.config.train_options; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ------------------------------------------------------------------------- no import cycle


def _absolute(node: ast.ImportFrom) -> str:
    """The module a ``from ... import`` statement of a module of :data:`PACKAGE` reads from."""
    if node.level == 0:
        return node.module or ""
    parts = PACKAGE.split(".")
    base = parts[:len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _sibling(module: str, names: set[str]) -> str | None:
    """The module of ``agents/`` (a file stem, or ``__init__`` for the package itself) that an absolute
    module name is, or lies in; None outside the package."""
    if module == PACKAGE:
        return "__init__"
    if module.startswith(PACKAGE + "."):
        stem = module[len(PACKAGE) + 1:].split(".")[0]
        return stem if stem in names else None
    return None


def import_graph(folder: Path) -> dict[str, set[str]]:
    """Which modules of ``folder`` (a flat package installed as :data:`PACKAGE`) each module imports,
    by file stem: every import statement anywhere in the source (inside functions and under
    ``TYPE_CHECKING`` too), ``from . import x`` naming module ``x`` when ``x.py`` exists, else the
    package's ``__init__``."""
    names = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps.update(m for a in node.names if (m := _sibling(a.name, names)) is not None)
            elif isinstance(node, ast.ImportFrom):
                module = _absolute(node)
                if module == PACKAGE:  # from . import x: a submodule, or a name of the package itself
                    deps.update(a.name if a.name in names else "__init__" for a in node.names)
                elif (m := _sibling(module, names)) is not None:
                    deps.add(m)
        deps.discard(path.stem)
        graph[path.stem] = deps
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle of ``graph`` found by a depth-first search, each as the path that closes it
    (``[a, b, a]``: a imports b, which imports a back)."""
    cycles, state = [], {}  # state: 1 on the current path, 2 done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycles.append(path[path.index(dep):] + [node, dep])  # dep is on the path: node != dep
            elif dep not in state:
                visit(dep, path + [node])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return cycles


def test_no_module_under_agents_imports_one_that_imports_it_back():
    graph = import_graph(AGENTS)
    assert {"ppo", "modelzip", "train", "settings"} <= graph.keys()
    assert "collect" in graph["ppo"] and "checkpoint" in graph["settings"]  # the graph sees the imports
    assert not import_cycles(graph)


def test_the_cycle_check_catches_an_import_back_inside_a_function(tmp_path):
    (tmp_path / "a.py").write_text("from . import b\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("def f():\n    from .a import g\n    return g\n", encoding="utf-8")
    (tmp_path / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                   "    from terrazero_env.agents.d import D\n", encoding="utf-8")
    (tmp_path / "d.py").write_text("from .e import x\n", encoding="utf-8")
    (tmp_path / "e.py").write_text("from . import c\n", encoding="utf-8")
    graph = import_graph(tmp_path)
    assert graph["b"] == {"a"} and graph["c"] == {"d"}
    cycles = import_cycles(graph)
    assert ["a", "b", "a"] in cycles
    assert any(set(c) == {"c", "d", "e"} for c in cycles)
    (tmp_path / "b.py").write_text("import json\n", encoding="utf-8")
    (tmp_path / "e.py").write_text("from .. import cli\n", encoding="utf-8")
    assert not import_cycles(import_graph(tmp_path))
