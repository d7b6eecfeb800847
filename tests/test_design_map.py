"""docs/design.md's table of where each concept lives is the one list of the engine's units: every
Cython declaration (``.pxd``) and include (``.pxi``) file of ``cyext/`` must be named in it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _table_names() -> set[str]:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    start = text.index("## Where each concept lives")
    end = text.index("\n## ", start + 1)
    rows = [line for line in text[start:end].splitlines() if line.startswith("|")]
    return set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*\.px[di])", "\n".join(rows)))


def test_every_engine_unit_is_in_the_design_map():
    units = {p.name for p in (ROOT / "cyext").iterdir() if p.suffix in (".pxd", ".pxi")}
    assert units, "no cyext units found"
    missing = sorted(units - _table_names())
    assert not missing, f"docs/design.md's table does not name {missing}"


def test_the_design_map_names_no_unit_that_does_not_exist():
    units = {p.name for p in (ROOT / "cyext").iterdir() if p.suffix in (".pxd", ".pxi")}
    stale = sorted(_table_names() - units)
    assert not stale, f"docs/design.md's table names {stale}, which cyext/ does not hold"
