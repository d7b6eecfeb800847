"""The scenario dataset: manifest, lazy bounded cache, balanced sampling, and world resets drawing
scenarios from it."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

import terrazero_env
from terrazero_env.maps import Dataset, asset_path, bundled_maps


@pytest.fixture
def folder(tmp_path):
    names = bundled_maps()
    for n in names:
        shutil.copy(asset_path(n), tmp_path / f"{n}.tzb")
    # Three "regions" of very different sizes: sampling must still balance them.
    manifest = {f"{n}.tzb": {"region": "big" if i < len(names) - 2 else f"r{i}", "source": "procedural",
                             "type": "urban"} for i, n in enumerate(names)}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def test_manifest_groups_and_lazy_bounded_cache(folder):
    ds = Dataset(folder, cache_size=2)
    assert len(ds) == len(bundled_maps()) and ds.cached == 0
    n = len(bundled_maps())
    assert sorted(ds.groups) == sorted([("big", "urban"), (f"r{n - 2}", "urban"), (f"r{n - 1}", "urban")])
    for i in range(len(ds)):
        ds[i]
    assert ds.cached == 2  # least recently used maps were dropped
    assert not ds[0].lanes.centerline.values.flags.owndata  # views of the one buffer the file was read into


def test_sampling_is_balanced_across_groups(folder):
    ds = Dataset(folder)
    idx = ds.sample(np.random.default_rng(0), 6000)
    per_group = {g: np.isin(idx, members).mean() for g, members in ds.groups.items()}
    for share in per_group.values():
        assert share == pytest.approx(1 / 3, abs=0.03)


def test_metadata_fills_the_manifest_when_there_is_none(tmp_path):
    shutil.copy(asset_path("roundabout"), tmp_path / "roundabout.tzb")
    ds = Dataset(str(tmp_path / "*.tzb"))
    assert ds.manifest[0]["source"] == "roundabout" and ds.manifest[0]["region"] == "unknown"


def test_world_resets_draw_scenarios_from_the_dataset(folder):
    ds = Dataset(folder, cache_size=8)
    venv = terrazero_env.make_vec(6, "quick", dataset=ds)
    names = set()
    for seed in range(4):
        venv.reset(seed=seed)
        names |= {m.name for m in venv.state["maps"]}
        venv.step(np.zeros(venv.num_envs, np.int64))
    assert len(names) >= 3
    assert len(venv.engine.road_maps) <= 6  # only the maps in use are held by the engine


def test_missing_files_are_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="no .tzb files"):
        Dataset(tmp_path)
