"""A dataset of scenario files: lazy loading, a bounded cache, balanced sampling.

    from terrazero_env.maps import Dataset
    ds = Dataset("scenarios/*.tzb")                 # or a folder, or a manifest file (below)
    ds = Dataset("bundled")                         # the manifest shipped with the package
    ds.groups                                       # {(region, scenario type): [indices]}
    m = ds[ds.sample(rng)]                          # MapData, read on first use, cached
    venv = terrazero_env.make_vec(16, "planner", dataset=ds)   # each world reset draws a scenario

Every file is described by a manifest entry ``{region, source, type}``: from ``manifest.json`` in the
dataset's folder (``{"file name": {"region": ..., "source": ..., "type": ...}}``) where present,
otherwise from the file's own metadata (``region``/``location``, ``source``, ``scenario_type``),
``"unknown"`` where absent. ``sample`` draws a (region, type) group uniformly, then a file uniformly
within it, so a batch stays balanced across regions and scenario types whatever their sizes.

A manifest file (``.yaml``/``.yml``/``.json``) names the files itself: ``scenarios`` maps each file
(relative to ``root``, itself relative to the manifest's folder; default that folder) to its entry,
and ``cache_size`` is optional. Every named file must exist and be a ``.tzb``; errors name the
manifest and the file. :meth:`Dataset.check` verifies every file's checksums (a corrupt file is
named) before a run starts::

    root: ../maps
    cache_size: 8
    scenarios:
      grid_town.tzb: {region: procedural, source: grid, type: urban}
"""

from __future__ import annotations

import glob as _glob
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from ..foundation import safe_yaml
from ..foundation.safe_files import UnsafeFileError, load_json, read_text
from .schema import MapData
from .terrabin import load, read_sections

__all__ = ["Dataset", "ManifestError", "bundled_datasets", "dataset_manifest_path", "read_manifest"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
MAX_SCENARIOS = 1_000_000
"""Most files one manifest may name (bounds the work a manifest can cause)."""
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""Largest manifest file read (bytes)."""
_ENTRY_KEYS = ("region", "source", "type")


class ManifestError(ValueError):
    """A dataset manifest file is malformed; the message names the file and the entry."""


def _bundled_dir() -> Path:
    from importlib import resources

    return Path(str(resources.files("terrazero_env.assets"))) / "datasets"


def bundled_datasets() -> list[str]:
    """Names of the dataset manifests shipped with the package (``Dataset("bundled")``)."""
    return sorted(p.stem for p in _bundled_dir().glob("*.yaml"))


def _is_manifest(source: str | os.PathLike[str]) -> bool:
    """A manifest file by its suffix, or a bare name (no folder, no suffix, no such path) of a bundled one."""
    p = Path(os.fspath(source))
    return p.suffix in MANIFEST_SUFFIXES or (len(p.parts) == 1 and p.suffix == "" and not p.exists()
                                             and not any(c in p.name for c in "*?["))


def dataset_manifest_path(source: str | os.PathLike[str]) -> Path:
    """The manifest file ``source`` names: a path to an existing file, or the name of a bundled manifest."""
    p = Path(os.fspath(source))
    if p.is_file():
        return p
    if p.suffix == "" and len(p.parts) == 1:
        q = _bundled_dir() / f"{p.name}.yaml"
        if q.is_file():
            return q
    raise FileNotFoundError(f"dataset manifest {os.fspath(source)!r} not found (neither a file nor a bundled "
                            f"dataset: {', '.join(bundled_datasets())})")


def read_manifest(path: str | os.PathLike[str]) -> tuple[list[Path], dict[str, dict[str, str]], int | None]:
    """The files a manifest file names (checked to exist), their entries and its ``cache_size``."""
    path = Path(path)
    try:
        doc: Any = (load_json(read_text(path, MAX_MANIFEST_BYTES, "dataset manifest"), f"dataset manifest {path}")
                    if path.suffix == ".json" else safe_yaml.load_file(path))
    except UnsafeFileError as e:
        raise ManifestError(str(e)) from None
    except (OSError, ValueError) as e:  # yaml.YAMLError is not a ValueError
        raise ManifestError(f"dataset manifest {path}: unreadable ({e})") from None
    except Exception as e:
        raise ManifestError(f"dataset manifest {path}: not valid YAML ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("scenarios"), dict) or not doc["scenarios"]:
        raise ManifestError(f"dataset manifest {path}: needs a non-empty 'scenarios' mapping "
                            "{file name: {region, source, type}}")
    unknown = set(doc) - {"root", "cache_size", "scenarios"}
    if unknown:
        raise ManifestError(f"dataset manifest {path}: unknown keys {sorted(map(str, unknown))} "
                            "(allowed: root, cache_size, scenarios)")
    cache_size = doc.get("cache_size")
    if cache_size is not None and (isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 1):
        raise ManifestError(f"dataset manifest {path}: cache_size must be an integer >= 1, got {cache_size!r}")
    root = doc.get("root", ".")
    if not isinstance(root, str):
        raise ManifestError(f"dataset manifest {path}: root must be a folder path, got {root!r}")
    if len(doc["scenarios"]) > MAX_SCENARIOS:
        raise ManifestError(f"dataset manifest {path}: more than {MAX_SCENARIOS} scenarios")
    base = path.parent / root
    files: list[Path] = []
    entries: dict[str, dict[str, str]] = {}
    for name, entry in doc["scenarios"].items():
        entry = {} if entry is None else entry
        if not isinstance(name, str) or not name.endswith(".tzb"):
            raise ManifestError(f"dataset manifest {path}: scenario {name!r} is not a .tzb file name")
        if not isinstance(entry, dict) or set(entry) - set(_ENTRY_KEYS) or \
                not all(isinstance(v, str) for v in entry.values()):
            raise ManifestError(f"dataset manifest {path}: scenario {name!r} needs an entry of strings with keys "
                                f"among {list(_ENTRY_KEYS)}, got {entry!r}")
        f = base / name
        if not f.is_file():
            raise FileNotFoundError(f"dataset manifest {path} names {name!r}, but {f} does not exist")
        files.append(f)
        entries[f.name] = dict(entry)
    if len(entries) != len(files):
        raise ManifestError(f"dataset manifest {path}: two scenarios share a file name")
    return files, entries, cache_size


class Dataset:
    """Scenario files (``.tzb``) with their manifest; maps load on first use and at most
    ``cache_size`` stay open (least recently used are dropped)."""

    def __init__(self, source: str | os.PathLike[str] | list[str | os.PathLike[str]], *, cache_size: int | None = None,
                 manifest: dict[str, dict[str, str]] | None = None):
        """``source``: a list of ``.tzb`` paths, a folder, a glob pattern, a manifest file or the name
        of a bundled manifest (``"bundled"``). ``cache_size``: maps held open (default: the manifest
        file's ``cache_size``, else 32)."""
        self.manifest_path: Path | None = None
        if isinstance(source, (list, tuple)):
            files = [Path(p) for p in source]
        elif _is_manifest(source):
            self.manifest_path = dataset_manifest_path(source)
            files, listed, listed_cache = read_manifest(self.manifest_path)
            manifest = {**listed, **(manifest or {})}
            if cache_size is None:
                cache_size = listed_cache
        else:
            s = os.fspath(source)
            files = [Path(p) for p in sorted(_glob.glob(os.path.join(s, "*.tzb") if os.path.isdir(s) else s))]
        if cache_size is None:
            cache_size = 32
        if cache_size < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        if not files:
            raise FileNotFoundError(f"no .tzb files found for {source!r}")
        self.files = files
        self.cache_size = cache_size
        self._cache: OrderedDict[int, MapData] = OrderedDict()
        folder_manifest: dict[str, dict[str, str]] = {}
        mf = files[0].parent / "manifest.json"
        if manifest is None and mf.is_file():
            try:
                folder_manifest = load_json(read_text(mf, MAX_MANIFEST_BYTES, "dataset manifest"),
                                            f"dataset manifest {mf}")
            except UnsafeFileError as e:
                raise ManifestError(str(e)) from None
            if not isinstance(folder_manifest, dict) or not all(
                    isinstance(v, dict) and all(isinstance(x, str) for x in v.values())
                    for v in folder_manifest.values()):
                raise ManifestError(f"dataset manifest {mf}: needs an object {{file name: {{region, source, "
                                    f"type}}}} of strings, got a {type(folder_manifest).__name__} that is not")
        given = manifest or folder_manifest
        self.manifest: list[dict[str, str]] = []
        for f in files:
            entry = dict(given.get(f.name, {}))
            if not {"region", "source", "type"} <= set(entry):
                _, meta = read_sections(f, verify=False)
                md = meta.get("metadata")
                md = md if isinstance(md, dict) else {}
                entry.setdefault("region", str(md.get("region", md.get("location", "unknown"))))
                entry.setdefault("source", str(md.get("source", md.get("generator", "unknown"))))
                entry.setdefault("type", str(md.get("scenario_type", "unknown")))
            self.manifest.append(entry)
        groups: dict[tuple[str, str], list[int]] = {}
        for i, e in enumerate(self.manifest):
            groups.setdefault((e["region"], e["type"]), []).append(i)
        self.groups = groups
        self._group_keys = sorted(groups)

    def __len__(self) -> int:
        return len(self.files)

    def __getstate__(self) -> dict[str, Any]:
        # Copies and pickles carry the file list and manifest; the cache refills on demand (a cached
        # map reads back the same).
        return {**self.__dict__, "_cache": OrderedDict()}

    def __getitem__(self, i: int) -> MapData:
        i = int(i)
        if not 0 <= i < len(self.files):
            raise IndexError(f"dataset index {i} out of range (0..{len(self.files) - 1})")
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        m = load(self.files[i])
        self._cache[i] = m
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return m

    def sample(self, rng: np.random.Generator, n: int | None = None) -> int | np.ndarray:
        """Index (or ``n`` indices) drawn balanced across (region, type) groups."""
        k = 1 if n is None else n
        g = rng.integers(0, len(self._group_keys), k)
        out = np.array([self.groups[self._group_keys[j]][rng.integers(0, len(self.groups[self._group_keys[j]]))]
                        for j in g])
        return int(out[0]) if n is None else out

    def check(self) -> None:
        """Read every file with its checksums verified: a missing, truncated or corrupt file raises
        (``FileNotFoundError`` or ``TerrabinError``) naming it, before any world uses it."""
        for f in self.files:
            if not f.is_file():
                raise FileNotFoundError(f"dataset file {f} does not exist")
            read_sections(f, verify=True)

    def expected_shares(self) -> np.ndarray:
        """The probability :meth:`sample` draws each file, float64 ``[len(self)]`` (group share
        divided among the group's files)."""
        p = np.zeros(len(self.files))
        for members in self.groups.values():
            p[members] = 1.0 / (len(self.groups) * len(members))
        return p

    @property
    def cached(self) -> int:
        """Maps currently held open."""
        return len(self._cache)
