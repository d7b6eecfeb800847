"""The README is a guide a newcomer pastes from: every Python snippet runs as written, every
``terrazero`` command it names exists, and every link to a file of the checkout points at one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDES = ["README.md", "docs/status.md", "docs/training.md", "docs/install.md", "docs/design.md"]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


@pytest.mark.parametrize("index", range(len(_blocks("python"))))
def test_every_python_snippet_of_the_readme_runs(index, tmp_path):
    code = _blocks("python")[index]
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"snippet {index}:\n{code}\n{done.stderr[-3000:]}"


def test_the_readme_opens_with_the_install_and_a_loop():
    first_python = README.index("```python")
    assert README.index("pip install -e") < first_python < 6000  # the first screens, not after a report
    assert "env.step(" in _blocks("python")[0]


def _commands() -> set[tuple[str, ...]]:
    """``terrazero GROUP [SUBCOMMAND]`` as named in the README's code and table cells."""
    out = set()
    for m in re.finditer(r"terrazero ((?:maps )?[a-z][a-z-]*)", README):
        words = tuple(m.group(1).split())
        if words[0] not in ("env",):  # "terrazero-env", the project's name
            out.add(words)
    return out


def test_every_command_the_readme_names_exists():
    from terrazero_env.cli import make_parser

    commands = _commands()
    assert ("train",) in commands and ("eval",) in commands and ("realism",) in commands
    parser = make_parser()
    for words in sorted(commands):
        with pytest.raises(SystemExit) as done:
            parser.parse_args([*words, "--help"])
        assert done.value.code == 0, words


@pytest.mark.parametrize("guide", GUIDES)
def test_links_to_files_of_the_checkout_resolve(guide):
    path = ROOT / guide
    text = path.read_text(encoding="utf-8")
    missing = []
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (path.parent / target).exists():
            missing.append(target)
    assert not missing, f"{guide} links to missing files: {missing}"
