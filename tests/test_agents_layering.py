"""Import direction around the training code: nothing under ``agents/`` imports the CLI (the CLI sits
on top and calls ``agents.train.train_from_args``), and the CLI, the metrics and the training options
load without torch, so ``terrazero maps ...`` never pays for it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

AGENTS = Path(__file__).resolve().parents[1] / "agents"


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
