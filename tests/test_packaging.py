"""Packaging: the sdist is complete and clean, the OpenMP probe falls back to a serial build,
the build facts and the version are reported once, and threads on a serial engine warn."""

from __future__ import annotations

import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import warnings
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

import terrazero_env
from terrazero_env._build_info import build_info, check_num_threads, version_line
from terrazero_env.cli import main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import check_sdist  # noqa: E402


def _tar(path: Path, names: list[str]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for n in names:
            data = b"x"
            info = tarfile.TarInfo(f"terrazero_env-0.1.0/{n}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


def test_sdist_check_names_missing_sources_and_generated_files(tmp_path):
    """The checker itself can fail: a tarball without engine.pxi but with generated C is reported on both."""
    need = sorted(check_sdist.required_files(ROOT))
    assert "cyext/engine.pxi" in need and "cyext/_engine.pyx" in need and "LICENSE" in need
    names = [n for n in need if n != "cyext/engine.pxi"] + ["cyext/_engine.c", "tests/test_x.py"]
    problems = check_sdist.check(_tar(tmp_path / "bad.tar.gz", names), ROOT)
    assert problems == ["missing: cyext/engine.pxi", "should not be shipped: cyext/_engine.c",
                        "should not be shipped: tests/test_x.py"]
    assert check_sdist.check(_tar(tmp_path / "good.tar.gz", need), ROOT) == []


def test_sdist_carries_every_build_source_and_no_generated_files(tmp_path):
    """A freshly made sdist holds the Cython sources, assets, README, licence and changelog, and no
    generated C, compiled modules, caches or tests (a sdist without the .pyx fails to build with
    'cyext/_engine.pyx doesn't match')."""
    pytest.importorskip("setuptools")
    r = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    (sdist,) = tmp_path.glob("terrazero_env-*.tar.gz")
    assert sdist.name == f"terrazero_env-{terrazero_env.__version__}.tar.gz"
    assert check_sdist.check(sdist, ROOT) == []


def test_build_info_reports_version_compiler_openmp_and_debug():
    """build_info() is plain data from the compiled module; one version everywhere."""
    from terrazero_env import _build_flags

    b = build_info()
    assert set(b) == {"version", "python", "platform", "compiler", "openmp", "openmp_version", "debug"}
    assert b["version"] == terrazero_env.__version__
    try:
        installed = version("terrazero-env")
    except PackageNotFoundError:  # a source tree that was never pip-installed has no metadata
        installed = None
    assert installed in (None, terrazero_env.__version__)
    assert b["compiler"] and b["compiler"] != "unknown"
    # The compiler's own _OPENMP macro agrees with the build's probe.
    assert b["openmp"] is _build_flags.OPENMP_REQUESTED
    assert (b["openmp_version"] is None) == (not b["openmp"])
    assert isinstance(b["debug"], bool) and b["debug"] is _build_flags.DEBUG


def test_cli_version_prints_version_and_build_facts(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out == version_line()
    assert out.startswith(f"terrazero-env {terrazero_env.__version__} (engine: ")
    assert ("OpenMP" in out) if build_info()["openmp"] else ("serial (no OpenMP)" in out)


def test_threads_on_a_serial_engine_warn_and_bad_counts_raise():
    with pytest.warns(RuntimeWarning, match=r"num_threads=4 .* without OpenMP"):
        assert check_num_threads(4, openmp=False) == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_num_threads(4, openmp=True) == 4
        assert check_num_threads(1, openmp=False) == 1
    with pytest.raises(ValueError, match="num_threads must be >= 1, got 0"):
        check_num_threads(0)


def test_make_vec_warns_about_threads_exactly_when_the_build_is_serial():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = terrazero_env.make_vec(num_worlds=2, preset="quick", num_threads=2)
        env.close()
    warned = any("without OpenMP" in str(w.message) for w in caught)
    assert warned is (not build_info()["openmp"])


def _build_flags_only(tmp_path: Path, cc: str | None) -> tuple[object, str]:
    """Build only ``_build_flags`` with this setup.py (cyext/ holds just that .pyx) and import it."""
    pytest.importorskip("Cython")
    pytest.importorskip("setuptools")
    shutil.copy2(ROOT / "setup.py", tmp_path / "setup.py")
    (tmp_path / "cyext").mkdir()
    shutil.copy2(ROOT / "cyext" / "_build_flags.pyx", tmp_path / "cyext" / "_build_flags.pyx")
    (tmp_path / "terrazero_env").mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CC", "TERRAZERO_OPENMP")}
    if cc is not None:
        env["CC"] = cc
    r = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    (so,) = (tmp_path / "terrazero_env").glob("_build_flags*")
    spec = importlib.util.spec_from_file_location("terrazero_env._build_flags", so)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, r.stdout + r.stderr


@pytest.mark.skipif(os.name == "nt", reason="the wrapper is a POSIX shell script")
def test_compiler_rejecting_openmp_gives_a_serial_build_that_says_so(tmp_path):
    """The macOS/MSVC case (a compiler without OpenMP), reproduced with one that refuses -fopenmp: the build
    succeeds, says once that the engine is serial, and the compiled flags say no OpenMP."""
    mod, log = _build_flags_only(tmp_path, str(ROOT / "tools" / "cc_no_openmp.sh"))
    assert mod.OPENMP_SPEC == 0 and mod.OPENMP_REQUESTED is False
    assert log.count("building a SERIAL engine") == 1


@pytest.mark.skipif(sys.platform != "linux", reason="GCC with libgomp is the OpenMP compiler checked here")
def test_compiler_accepting_openmp_gives_an_openmp_build(tmp_path):
    mod, log = _build_flags_only(tmp_path, None)
    assert mod.OPENMP_SPEC >= 201107 and mod.OPENMP_REQUESTED is True
    assert "building with OpenMP (-fopenmp)" in log
