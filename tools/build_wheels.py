"""Build a wheel for every CPython 3.10-3.13 found on this machine and smoke-test each in its own venv.

Interpreters are looked for as ``python3.X`` on ``PATH``, under ``$PYENV_ROOT/versions`` (default
``~/.pyenv``) and through ``uv python find`` when uv is installed. Each wheel is built with that
interpreter (``pip wheel``, isolated build: setuptools, Cython and numpy come from the index), installed
into a fresh venv with its dependencies, and checked by ``tools/smoke_test.py --expect-installed`` run
from a scratch directory so the checkout cannot shadow the install. Prints a table and writes
``dist/wheels/report.json`` with, per version: the interpreter, built, tested, the wheel and the
build facts the installed wheel reports. These are plain ``linux_*``/``macosx_*`` wheels for local use;
the publishable (manylinux, delocated) ones come from cibuildwheel (``.github/workflows/release.yml``).

    python tools/build_wheels.py [--versions 3.10 3.12] [--out dist/wheels] [--keep-venvs]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS = ["3.10", "3.11", "3.12", "3.13"]


def _version_of(python: str) -> str | None:
    try:
        out = subprocess.run([python, "-c", "import sys, platform; print(platform.python_implementation(), "
                              "'%d.%d' % sys.version_info[:2])"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    impl, _, ver = out.stdout.strip().partition(" ")
    return ver if out.returncode == 0 and impl == "CPython" else None


def find_interpreters(wanted: list[str]) -> dict[str, str]:
    """``{"3.X": path}`` for each wanted version with a working CPython interpreter."""
    cands: list[str] = []
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    if pyenv.is_dir():  # real interpreters before PATH, whose python3.X may be a pyenv shim
        cands += [str(p / "bin" / "python3") for p in sorted(pyenv.iterdir()) if (p / "bin" / "python3").exists()]
    for v in wanted:
        if (p := shutil.which(f"python{v}")) is not None:
            cands.append(p)
    if shutil.which("uv"):
        for v in wanted:
            r = subprocess.run(["uv", "python", "find", v], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip():
                cands.append(r.stdout.strip())
    found: dict[str, str] = {}
    for c in cands:
        v = _version_of(c)
        if v in wanted and v not in found:
            found[v] = c
    return dict(sorted(found.items(), key=lambda kv: tuple(map(int, kv[0].split(".")))))


def _run(cmd: list[str], log: Path, cwd: Path | None = None, env: dict[str, str] | None = None) -> bool:
    with log.open("a") as f:
        f.write(f"\n$ {' '.join(cmd)}\n")
        f.flush()
        return subprocess.run(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, env=env).returncode == 0


def build_and_test(ver: str, python: str, out: Path, keep_venv: bool) -> dict:
    """Build the wheel for one interpreter and smoke-test it in a fresh venv."""
    rec: dict = {"python": ver, "interpreter": python, "built": False, "tested": False}
    log = out / f"cp{ver.replace('.', '')}.log"
    log.write_text("")
    tmp = Path(tempfile.mkdtemp(prefix=f"tz-wheel-{ver}-"))
    t0 = time.perf_counter()
    try:
        wdir = tmp / "wheel"
        if not _run([python, "-m", "pip", "wheel", "--no-deps", "-w", str(wdir), str(ROOT)], log):
            rec["error"] = f"build failed (see {log})"
            return rec
        wheel = next(wdir.glob("terrazero_env-*.whl"))
        shutil.copy2(wheel, out / wheel.name)
        rec.update(built=True, wheel=wheel.name, build_s=round(time.perf_counter() - t0, 1))
        venv = tmp / "venv"
        bin_dir = venv / ("Scripts" if os.name == "nt" else "bin")
        vpy = str(bin_dir / "python")
        scratch = tmp / "scratch"
        scratch.mkdir()
        ok = (_run([python, "-m", "venv", str(venv)], log)
              and _run([vpy, "-m", "pip", "install", "--quiet", str(out / wheel.name)], log))
        if not ok:
            rec["error"] = f"install failed (see {log})"
            return rec
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        r = subprocess.run([vpy, str(ROOT / "tools" / "smoke_test.py"), "--expect-installed"], cwd=scratch,
                           capture_output=True, text=True, env=env)
        with log.open("a") as f:
            f.write(r.stdout + r.stderr)
        cli = subprocess.run([str(bin_dir / "terrazero"), "--version"], cwd=scratch, capture_output=True,
                             text=True, env=env)
        rec["cli_version"] = cli.stdout.strip()
        if r.returncode == 0 and cli.returncode == 0:
            rec["tested"] = True
            rec["build_info"] = json.loads(r.stdout.strip().splitlines()[-1])
        else:
            rec["error"] = f"smoke test failed: {(r.stdout + r.stderr).strip().splitlines()[-1:]} (see {log})"
        rec["total_s"] = round(time.perf_counter() - t0, 1)
        return rec
    finally:
        if keep_venv:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", nargs="+", default=VERSIONS, help="CPython versions to look for")
    ap.add_argument("--out", type=Path, default=ROOT / "dist" / "wheels")
    ap.add_argument("--keep-venvs", action="store_true")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    found = find_interpreters(args.versions)
    results = [build_and_test(v, p, args.out, args.keep_venvs) for v, p in found.items()]
    results += [{"python": v, "interpreter": None, "built": False, "tested": False, "error": "not found"}
                for v in args.versions if v not in found]
    print(f"{'python':<8}{'built':<7}{'tested':<8}{'wheel / error'}")
    for r in results:
        print(f"{r['python']:<8}{'yes' if r['built'] else 'no':<7}{'yes' if r['tested'] else 'no':<8}"
              f"{r.get('wheel', '') if r['tested'] else r.get('error', '')}")
    (args.out / "report.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0 if found and all(r["tested"] for r in results if r["interpreter"]) else 1


if __name__ == "__main__":
    sys.exit(main())
