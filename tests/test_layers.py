"""Every import rule of docs/design.md's "Layers" section, checked on the source: each module of the
package sits in one layer, and every import it makes (at the top of the module or inside a function)
points to its own layer or one below. The layer of each module is read from the table in
docs/design.md, so the table and this test cannot drift apart."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Where each top-level package folder of the checkout lives (pyproject.toml's package-dir).
PACKAGE_DIRS = {
    "terrazero_env": ROOT / "terrazero_env",
    "terrazero_env.agents": ROOT / "agents",
    "terrazero_env.wrappers": ROOT / "wrappers",
}


def _design_layers() -> list[tuple[str, list[str]]]:
    """The layers of docs/design.md's table, top first: (name, module patterns named in its row)."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    start = text.index("## Layers")
    end = text.index("\n## ", start + 1)
    layers = []
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        patterns = re.findall(r"`([^`]+)`", cells[1])
        layers.append((cells[0], patterns))
    return layers


def _pattern_module(pattern: str) -> str | None:
    """A table entry (``terrazero_env/engine.py``, ``agents/``, ``cyext/... -> terrazero_env._engine``) as a
    dotted module prefix; None for an entry that is not a Python module of the package."""
    if "->" in pattern:
        return pattern.split("->")[1].strip()
    if re.fullmatch(r"terrazero_env(\.\w+)+", pattern):
        return pattern
    if re.fullmatch(r"\w+\.py", pattern):  # a module beside the one named before it in the row
        pattern = "terrazero_env/" + pattern
    path = pattern.rstrip("/")
    if path.endswith("/__init__.py"):
        path = path[: -len("/__init__.py")]
    for package, folder in PACKAGE_DIRS.items():
        rel = folder.relative_to(ROOT).as_posix()
        if path == rel or path.startswith(rel + "/"):
            rest = path[len(rel):].lstrip("/")
            rest = rest[:-3] if rest.endswith(".py") else rest
            return ".".join([package] + [p for p in rest.split("/") if p])
    return None


def _layer_of() -> dict[str, int]:
    """Dotted module prefix -> layer index (0 is the bottom)."""
    layers = _design_layers()
    out: dict[str, int] = {}
    for index, (_, patterns) in enumerate(reversed(layers)):
        for pattern in patterns:
            module = _pattern_module(pattern)
            if module is not None:
                out[module] = index
    return out


def _layer(module: str, table: dict[str, int]) -> int | None:
    """The layer of the longest table prefix of ``module``."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in table and (key != "terrazero_env" or module == key):  # the root names its __init__ only
            return table[key]
    return None


def _modules() -> dict[str, tuple[Path, bool]]:
    """Every Python module of the package: dotted name -> (file, is a package's ``__init__``)."""
    out = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            if package == "terrazero_env" and rel.parts[0] in ("agents", "wrappers"):
                continue
            parts = list(rel.with_suffix("").parts)
            is_init = parts[-1] == "__init__"
            if is_init:
                parts = parts[:-1]
            out[".".join([package] + parts)] = (path, is_init)
    return out


def _imports(module: str, path: Path, is_init: bool) -> set[str]:
    """The package modules ``module`` imports anywhere in its source, as dotted names (a name taken from
    a package, ``from . import x``, counts as the submodule ``x`` where one exists)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names if a.name.startswith("terrazero_env"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_init else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("terrazero_env"):
                names.update(f"{target}.{a.name}" for a in node.names)
    return names


def _resolve(name: str, modules: dict) -> str:
    """``terrazero_env.maps.MapData`` -> ``terrazero_env.maps``: the longest prefix that is a module."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        if key in modules or key in ("terrazero_env._engine", "terrazero_env._packing", "terrazero_env._build_flags"):
            return key
    return name


def test_the_layer_table_is_read():
    layers = _design_layers()
    names = [name for name, _ in layers]
    assert names[0] == "CLI" and "engine" in names and len(names) >= 7, names


def test_every_module_has_a_layer():
    table = _layer_of()
    missing = sorted(m for m in _modules() if _layer(m, table) is None)
    assert not missing, f"docs/design.md's layer table names no layer for {missing}"


def test_no_module_imports_a_layer_above_its_own():
    table = _layer_of()
    modules = _modules()
    names = {index: name for index, (name, _) in enumerate(reversed(_design_layers()))}
    upward = []
    for module, (path, is_init) in modules.items():
        own = _layer(module, table)
        for name in sorted(_imports(module, path, is_init)):
            target = _resolve(name, modules)
            theirs = _layer(target, table)
            if theirs is not None and own is not None and theirs > own:
                upward.append(f"{module} ({names[own]}) imports {target} ({names[theirs]})")
    assert not upward, "imports pointing up the layers:\n" + "\n".join(upward)


def test_the_check_catches_an_upward_import(tmp_path):
    table = _layer_of()
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from ..engine import Engine\n", encoding="utf-8")
    names = _imports("terrazero_env.maps.bad", bad, False)
    assert "terrazero_env.engine.Engine" in names
    assert _layer("terrazero_env.engine", table) > _layer("terrazero_env.maps.bad", table)


def test_maps_and_config_import_nothing_from_the_engine():
    modules = _modules()
    bottom = [m for m in modules if m.startswith(("terrazero_env.maps", "terrazero_env.config"))]
    engine = ("terrazero_env._engine", "terrazero_env.engine", "terrazero_env.drivers")
    offenders = {}
    for module in bottom:
        path, is_init = modules[module]
        hits = sorted(n for n in _imports(module, path, is_init) if _resolve(n, modules) in engine)
        if hits:
            offenders[module] = hits
    assert not offenders, offenders


@pytest.mark.parametrize("suffix", [".pyx", ".pxi", ".pxd"])
def test_the_compiled_engine_imports_neither_config_nor_maps(suffix):
    pattern = re.compile(r"^\s*(?:from\s+(\S+)\s+c?import|c?import\s+(\S+))", re.M)
    offenders = []
    for path in sorted((ROOT / "cyext").glob(f"*{suffix}")):
        for match in pattern.finditer(path.read_text(encoding="utf-8")):
            name = match.group(1) or match.group(2)
            if "terrazero_env" in name or name.lstrip(".").split(".")[0] in ("config", "maps"):
                offenders.append(f"{path.name}: {name}")
    assert not offenders, offenders


def test_the_packing_kernels_import_nothing_from_the_package():
    text = (ROOT / "cyext" / "_packing.pyx").read_text(encoding="utf-8")
    assert not re.search(r"^\s*(from\s+\.|from\s+terrazero_env|import\s+terrazero_env)", text, re.M)


def test_torch_is_imported_by_the_learner_only():
    """``agents/`` is the only layer that imports torch; the CLI imports it inside the commands that run
    the learner (train, eval), and nothing below the learner imports it at all."""
    offenders = []
    for module, (path, _) in _modules().items():
        if module.startswith("terrazero_env.agents"):
            continue
        for node in ast.walk(tree := ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(n == "torch" or n.startswith("torch.") for n in names):
                top_level = node in tree.body
                if module != "terrazero_env.cli" or top_level:
                    offenders.append(f"{module}:{node.lineno}")
    assert not offenders, offenders


def test_the_env_layer_loads_without_torch():
    code = ("import sys, terrazero_env, terrazero_env.envs, terrazero_env.maps, terrazero_env.render, "
            "terrazero_env.evaluation.suites, terrazero_env.replay, terrazero_env.drivers; print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
