"""Build the Cython engine: every ``cyext/NAME.pyx`` becomes the extension ``terrazero_env.NAME``.

OpenMP is optional. Before compiling, the build probes whether the compiler accepts OpenMP (GCC/Clang
``-fopenmp``, MSVC ``/openmp``, Apple clang ``-Xpreprocessor -fopenmp -lomp`` with a Homebrew or
``LIBOMP_PREFIX`` libomp) by compiling and linking a tiny C file; without it the engine is built serial
(``cython.parallel.prange`` compiles to a plain loop) and the build says so once. The result is
compiled into ``terrazero_env._build_flags`` and reported by ``terrazero_env.build_info()``.

Environment: ``TERRAZERO_DEBUG=1`` compiles with bounds checks on and no optimisation (for index
errors in the engine); ``TERRAZERO_OPENMP=0`` forces a serial build, ``=1`` makes a missing OpenMP an
error instead of a fallback (default ``auto``).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
DEBUG = os.environ.get("TERRAZERO_DEBUG", "0") == "1"
OPENMP_MODE = os.environ.get("TERRAZERO_OPENMP", "auto").strip().lower()
if OPENMP_MODE not in ("auto", "0", "1"):
    raise SystemExit(f"TERRAZERO_OPENMP must be 'auto', '0' or '1', got {OPENMP_MODE!r}")

DIRECTIVES = {
    "language_level": "3",
    "boundscheck": DEBUG,
    "wraparound": True,  # Python-level setup code uses negative slices; hot loops use raw pointers
    "initializedcheck": DEBUG,
    "cdivision": True,
    "embedsignature": True,
}

_OPENMP_PROBE = r"""
#include <omp.h>
int main(void) {
    int n = 0;
    #pragma omp parallel reduction(+:n)
    n += 1;
    return (n >= 1 && omp_get_max_threads() >= 1) ? 0 : 1;
}
"""


def _homebrew_libomp() -> list[Path]:
    """libomp prefixes to try with Apple clang: ``LIBOMP_PREFIX``, then Homebrew's two locations."""
    cands = [os.environ.get("LIBOMP_PREFIX", ""), "/opt/homebrew/opt/libomp", "/usr/local/opt/libomp"]
    return [Path(c) for c in cands if c and (Path(c) / "include" / "omp.h").is_file()]


def _openmp_candidates(compiler_type: str) -> list[tuple[str, list[str], list[str], list[str], list[str]]]:
    """(label, compile args, link args, include dirs, library dirs) to try, most common first."""
    if compiler_type == "msvc":
        return [("/openmp", ["/openmp"], [], [], [])]
    cands = [("-fopenmp", ["-fopenmp"], ["-fopenmp"], [], [])]
    if sys.platform == "darwin":
        for prefix in _homebrew_libomp():
            cands.append((f"-Xpreprocessor -fopenmp -lomp ({prefix})", ["-Xpreprocessor", "-fopenmp"],
                          ["-lomp", f"-Wl,-rpath,{prefix / 'lib'}"], [str(prefix / "include")],
                          [str(prefix / "lib")]))
    return cands


class BuildExt(build_ext):
    """``build_ext`` that probes OpenMP with the compiler it will use, then cythonizes and compiles."""

    def _probe_openmp(self) -> tuple[str, list[str], list[str], list[str], list[str]] | None:
        tmp = Path(tempfile.mkdtemp(prefix="terrazero-omp-"))
        try:
            src = tmp / "probe.c"
            src.write_text(_OPENMP_PROBE)
            for label, cargs, largs, incs, libdirs in _openmp_candidates(self.compiler.compiler_type):
                try:
                    objs = self.compiler.compile([str(src)], output_dir=str(tmp), extra_postargs=cargs,
                                                 include_dirs=incs)
                    self.compiler.link_executable(objs, "probe", output_dir=str(tmp), extra_postargs=largs,
                                                  library_dirs=libdirs)
                except Exception:  # noqa: BLE001 -- any compile or link failure means "not this flag set"
                    continue
                return label, cargs, largs, incs, libdirs
            return None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def build_extensions(self) -> None:
        import numpy as np
        from Cython.Build import cythonize

        msvc = self.compiler.compiler_type == "msvc"
        omp = None
        if OPENMP_MODE != "0":
            omp = self._probe_openmp()
            if omp is None and OPENMP_MODE == "1":
                raise SystemExit("TERRAZERO_OPENMP=1 but the compiler accepts none of the OpenMP flag sets "
                                 f"{[c[0] for c in _openmp_candidates(self.compiler.compiler_type)]}")
        if omp is None:
            why = "TERRAZERO_OPENMP=0" if OPENMP_MODE == "0" else "the compiler does not accept OpenMP"
            print(f"terrazero-env: {why}; building a SERIAL engine (num_threads > 1 will warn and run on "
                  "one thread; use num_workers for parallel worlds).", file=sys.stderr, flush=True)
        else:
            print(f"terrazero-env: building with OpenMP ({omp[0]})", file=sys.stderr, flush=True)

        if msvc:
            opt = ["/Od", "/Zi"] if DEBUG else ["/O2"]
        else:
            opt = ["-O0", "-g"] if DEBUG else ["-O3"]
        macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                  ("TERRAZERO_OPENMP", "1" if omp else "0"), ("TERRAZERO_DEBUG", "1" if DEBUG else "0")]
        for ext in self.extensions:
            ext.include_dirs += [np.get_include(), "cyext"] + (omp[3] if omp else [])
            ext.library_dirs += omp[4] if omp else []
            ext.define_macros += macros
            ext.extra_compile_args += opt + (omp[1] if omp else [])
            ext.extra_link_args += omp[2] if omp else []
        # Cythonize here rather than at import so an sdist carries the .pyx sources, not generated C.
        # Keep setuptools' own Extension objects (they carry state from finalize_options); take only the
        # generated C sources from cythonize.
        generated = {e.name: e.sources for e in cythonize(self.extensions, compiler_directives=DIRECTIVES,
                                                           include_path=["cyext"], force=self.force, quiet=True)}
        for ext in self.extensions:
            ext.sources = generated[ext.name]
        super().build_extensions()


def _extensions() -> list[Extension]:
    pyx = sorted(p.relative_to(HERE).as_posix() for p in (HERE / "cyext").glob("*.pyx"))
    if not pyx:
        raise SystemExit("no Cython sources found under cyext/ (an incomplete source tree or sdist)")
    return [Extension(f"terrazero_env.{Path(p).stem}", [p]) for p in pyx]


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildExt})
