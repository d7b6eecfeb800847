"""What this installation is: ``build_info()`` (version, Python, platform, the compiler that built the
engine, whether it has OpenMP, debug flags), its one-line form for ``terrazero --version``, and
``check_num_threads``, the run-time guard that warns when threads are requested from a serial engine.

The compile-time facts come from ``terrazero_env._build_flags``, built by ``setup.py`` with the same
flags as the engine (see its docstring for the OpenMP probe and ``TERRAZERO_DEBUG``).
"""

from __future__ import annotations

import platform
import sysconfig
import warnings
from typing import Any

from ._version import __version__

__all__ = ["build_info", "check_num_threads", "version_line"]

# OpenMP specification versions by their ``_OPENMP`` date macro (OpenMP ARB).
_OPENMP_SPECS = {200203: "2.0", 200505: "2.5", 200805: "3.0", 201107: "3.1", 201307: "4.0", 201511: "4.5",
                 201811: "5.0", 202011: "5.1", 202111: "5.2", 202411: "6.0"}


def _flags() -> Any:
    try:
        from . import _build_flags
    except ImportError as exc:  # pragma: no cover - only in a tree built before this module existed
        raise ImportError("terrazero_env._build_flags is not built; rebuild the engine "
                          "(pip install ., or python setup.py build_ext --inplace)") from exc
    return _build_flags


def build_info() -> dict[str, Any]:
    """How this installation was built, as plain data.

    Keys: ``version`` (package), ``python`` (running interpreter), ``platform`` (sysconfig platform tag),
    ``compiler`` (as the compiler names itself), ``openmp`` (bool: the engine steps worlds on
    ``num_threads`` threads), ``openmp_version`` (specification, e.g. ``"4.5"``; ``None`` when serial),
    ``debug`` (bool: ``TERRAZERO_DEBUG=1`` build with bounds checks, unoptimised).
    """
    f = _flags()
    spec = int(f.OPENMP_SPEC)
    return {
        "version": __version__,
        "python": platform.python_version(),
        "platform": sysconfig.get_platform(),
        "compiler": f.COMPILER,
        "openmp": spec > 0,
        "openmp_version": (_OPENMP_SPECS.get(spec, str(spec)) if spec > 0 else None),
        "debug": bool(f.DEBUG),
    }


def version_line() -> str:
    """``terrazero --version``: one line with the version and the build facts."""
    b = build_info()
    omp = f"OpenMP {b['openmp_version']}" if b["openmp"] else "serial (no OpenMP)"
    kind = "debug build (bounds checks on)" if b["debug"] else "release build"
    return (f"terrazero-env {b['version']} (engine: {b['compiler']}, {omp}, {kind}; "
            f"Python {b['python']} on {b['platform']})")


def check_num_threads(num_threads: int, *, openmp: bool | None = None, stacklevel: int = 3) -> int:
    """Validate ``num_threads`` for the engine and return it.

    Raises ``ValueError`` below 1. Above 1 on a serial engine (built without OpenMP) it warns once per
    call site with a ``RuntimeWarning`` saying the worlds run on one thread: results are the same
    (worlds are independent and seeded), only slower. ``openmp`` overrides the build's flag (tests).
    """
    n = int(num_threads)
    if n < 1:
        raise ValueError(f"num_threads must be >= 1, got {num_threads}")
    has_omp = build_info()["openmp"] if openmp is None else bool(openmp)
    if n > 1 and not has_omp:
        warnings.warn(f"num_threads={n} requested, but this terrazero-env engine was built without OpenMP "
                      f"(compiler: {_flags().COMPILER}); worlds step on one thread. Rebuild with an "
                      "OpenMP-capable compiler (see docs/install.md) or use num_workers for "
                      "parallel worlds.", RuntimeWarning, stacklevel=stacklevel)
    return n

