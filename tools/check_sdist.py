"""Check an sdist's contents against the source tree: everything a build needs, nothing else.

Required: every Cython source under ``cyext/`` (``.pyx``, ``.pxd``, ``.pxi``, ``.h``), every Python module
of the installed packages, every bundled map, spec, preset and attribution file under ``assets/``, the replay viewer's script and
stylesheet, and
``setup.py``, ``pyproject.toml``, ``MANIFEST.in``, ``README.md``, ``LICENSE``, ``CHANGELOG.md``.
Forbidden: generated C, compiled modules, caches, tests, examples, benchmarks, docs, tools and runs.
Prints what is missing or extra and exits non-zero on either.

    python tools/check_sdist.py dist/terrazero_env-0.1.0.tar.gz [--root .]
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import tarfile
from pathlib import Path

FORBIDDEN = ["*.c", "*.cpp", "*.so", "*.pyd", "*.dylib", "*.o", "*.html", "*.pyc", "*/__pycache__/*",
             "*/.pytest_cache/*", "*/.ruff_cache/*", "tests/*", "examples/*", "benchmarks/*", "docs/*",
             "tools/*", "runs/*", "out/*", "build/*", "dist/*", ".ci/*", ".github/*", ".venv/*"]
TOP = ["setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md"]
PY_PACKAGE_DIRS = ["terrazero_env", "wrappers", "agents", "assets"]


def required_files(root: Path) -> set[str]:
    """Paths (relative to the source root) a build from source needs."""
    need = {t for t in TOP}
    for pat in ("*.pyx", "*.pxd", "*.pxi", "*.h"):
        need |= {p.relative_to(root).as_posix() for p in (root / "cyext").glob(pat)}
    for d in PY_PACKAGE_DIRS:
        need |= {p.relative_to(root).as_posix() for p in (root / d).rglob("*.py") if "__pycache__" not in p.parts}
    for pat in ("*.tzb", "*.yaml", "*.md"):
        need |= {p.relative_to(root).as_posix() for p in (root / "assets").rglob(pat)}
    for pat in ("*.js", "*.css"):  # the replay viewer's page assets
        need |= {p.relative_to(root).as_posix() for p in (root / "terrazero_env" / "viewer_assets").glob(pat)}
    return need


def sdist_members(path: Path) -> set[str]:
    """Member file paths with the ``NAME-VERSION/`` prefix stripped."""
    with tarfile.open(path) as tf:
        names = [m.name for m in tf.getmembers() if m.isfile()]
    return {n.split("/", 1)[1] for n in names if "/" in n}


def check(sdist: Path, root: Path) -> list[str]:
    """Problems found (empty when the sdist is complete and clean)."""
    have = sdist_members(sdist)
    problems = [f"missing: {p}" for p in sorted(required_files(root) - have)]
    problems += [f"should not be shipped: {p}" for p in sorted(have)
                 if any(fnmatch.fnmatch(p, pat) for pat in FORBIDDEN)]
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sdist", type=Path)
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent)
    args = ap.parse_args(argv)
    problems = check(args.sdist, args.root.resolve())
    for p in problems:
        print(p)
    n = len(sdist_members(args.sdist))
    print(f"{args.sdist.name}: {n} files, {'OK' if not problems else f'{len(problems)} problem(s)'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
