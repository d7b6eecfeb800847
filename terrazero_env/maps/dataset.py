"""A dataset of scenario files: lazy memory-mapped loading, a bounded cache, balanced sampling.

    from terrazero_env.maps import Dataset
    ds = Dataset("scenarios/*.tzb")                 # or a folder
    ds.groups                                       # {(region, scenario type): [indices]}
    m = ds[ds.sample(rng)]                          # MapData, memory-mapped, cached
    venv = terrazero_env.make_vec(16, "planner", dataset=ds)   # each world reset draws a scenario

Every file is described by a manifest entry ``{region, source, type}``: from ``manifest.json`` in the
dataset's folder (``{"file name": {"region": ..., "source": ..., "type": ...}}``) where present,
otherwise from the file's own metadata (``region``/``location``, ``source``, ``scenario_type``),
``"unknown"`` where absent. ``sample`` draws a (region, type) group uniformly, then a file uniformly
within it, so a batch stays balanced across regions and scenario types whatever their sizes.
"""

from __future__ import annotations

import glob as _glob
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from .schema import MapData
from .terrabin import load, read_sections

__all__ = ["Dataset"]


class Dataset:
    """Scenario files (``.tzb``) with their manifest; maps load on first use and at most
    ``cache_size`` stay open (least recently used are dropped)."""

    def __init__(self, source: str | os.PathLike[str] | list[str | os.PathLike[str]], *, cache_size: int = 32,
                 manifest: dict[str, dict[str, str]] | None = None):
        if cache_size < 1:
            raise ValueError(f"cache_size must be >= 1, got {cache_size}")
        if isinstance(source, (list, tuple)):
            files = [Path(p) for p in source]
        else:
            s = os.fspath(source)
            files = [Path(p) for p in sorted(_glob.glob(os.path.join(s, "*.tzb") if os.path.isdir(s) else s))]
        if not files:
            raise FileNotFoundError(f"no .tzb files found for {source!r}")
        self.files = files
        self.cache_size = cache_size
        self._cache: OrderedDict[int, MapData] = OrderedDict()
        folder_manifest: dict[str, dict[str, str]] = {}
        mf = files[0].parent / "manifest.json"
        if manifest is None and mf.is_file():
            folder_manifest = json.loads(mf.read_text())
        given = manifest or folder_manifest
        self.manifest: list[dict[str, str]] = []
        for f in files:
            entry = dict(given.get(f.name, {}))
            if not {"region", "source", "type"} <= set(entry):
                _, meta = read_sections(f, verify=False)
                md = meta.get("metadata", {}) or {}
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

    @property
    def cached(self) -> int:
        """Maps currently held open."""
        return len(self._cache)
