"""Training on many scenarios: dataset manifest files and the shipped one, balanced
scenario draws at world resets, worker processes drawing the same scenarios as one process, and
``terrazero train --dataset`` (bad manifests stop before any work)."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

import terrazero_env
from terrazero_env import cli
from terrazero_env.maps import Dataset, ManifestError, asset_path, bundled_datasets, bundled_maps

ROOT = Path(__file__).resolve().parent.parent
TINY_ARGS = ["--set", "train.policy={ego_hidden: 32, entity_hidden: 32, trunk: [64, 64]}", "--set", "train.n_steps=16"]

#: Largest gap allowed between a map's observed share of world-reset draws and the share balanced
#: sampling gives it (1/groups divided among the group's maps). Over the 1,920 draws below a share's
#: binomial standard deviation is at most 0.0085, so 0.03 is over 3.5 of them; drawing files
#: uniformly instead of groups would miss the shares of the paired maps by 0.042.
BALANCE_TOLERANCE = 0.03


def _manifest(folder: Path, scenarios: dict, **extra) -> Path:
    path = folder / "scenarios.yaml"
    path.write_text(json.dumps({"scenarios": scenarios, **extra}))  # JSON is YAML
    return path


# ------------------------------------------------------------------------------- manifests


def test_shipped_manifest_names_every_bundled_map_in_groups():
    ds = Dataset("bundled")
    assert "bundled" in bundled_datasets()
    assert sorted(f.stem for f in ds.files) == bundled_maps()
    assert len(ds.groups) == 6 and ds.expected_shares().sum() == pytest.approx(1.0)
    ds.check()  # every shipped file passes its checksums


def test_shipped_manifest_is_package_data():
    """The wheel carries the manifest: its folder is a package with YAML package data."""
    tomllib = pytest.importorskip("tomllib")
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "terrazero_env.assets.datasets" in py["packages"]
    assert "*.yaml" in py["package-data"]["terrazero_env.assets.datasets"]


def test_manifest_root_and_entries_are_read_relative_to_the_manifest(tmp_path):
    (tmp_path / "maps").mkdir()
    for n in ("roundabout", "highway"):
        shutil.copy(asset_path(n), tmp_path / "maps" / f"{n}.tzb")
    path = _manifest(tmp_path, {"roundabout.tzb": {"region": "a", "source": "s", "type": "t"},
                                "highway.tzb": {"region": "b", "source": "s", "type": "t"}}, root="maps", cache_size=1)
    ds = Dataset(path)
    assert ds.cache_size == 1 and ds.manifest_path == path
    assert sorted(ds.groups) == [("a", "t"), ("b", "t")]


def test_a_manifest_naming_a_missing_file_is_refused_naming_both(tmp_path):
    path = _manifest(tmp_path, {"nowhere.tzb": {"region": "a", "source": "s", "type": "t"}})
    with pytest.raises(FileNotFoundError, match=r"scenarios\.yaml names 'nowhere\.tzb'"):
        Dataset(path)


@pytest.mark.parametrize("scenarios, message", [
    ({}, "non-empty 'scenarios'"),
    ({"map.png": {}}, "not a .tzb file name"),
    ({"roundabout.tzb": {"region": 3}}, "needs an entry of strings"),
])
def test_a_malformed_manifest_is_refused_naming_the_entry(tmp_path, scenarios, message):
    shutil.copy(asset_path("roundabout"), tmp_path / "roundabout.tzb")
    with pytest.raises(ManifestError, match=message):
        Dataset(_manifest(tmp_path, scenarios))


def test_an_unknown_dataset_name_lists_the_bundled_ones():
    with pytest.raises(FileNotFoundError, match="bundled"):
        Dataset("no_such_dataset")


# ------------------------------------------------------------------------- world resets


def test_dataset_run_draws_every_map_within_the_balance_tolerance():
    venv = terrazero_env.make_vec(32, "quick", dataset="bundled")
    draws = []
    for seed in range(60):
        venv.reset(seed=seed)
        draws.append(venv.world_scenario.copy())
    venv.close()
    draws = np.concatenate(draws)
    shares = np.bincount(draws, minlength=len(venv.dataset)) / draws.size
    expected = venv.dataset.expected_shares()
    assert (shares > 0).all(), shares  # every map is drawn
    assert np.abs(shares - expected).max() <= BALANCE_TOLERANCE, (shares, expected)


def _rollout(num_workers: int) -> tuple[list[np.ndarray], np.ndarray, list[str]]:
    venv = terrazero_env.make_vec(6, "quick", dataset="bundled", num_workers=num_workers)
    try:
        obs, info = venv.reset(seed=11)
        out, scenarios = [obs.copy(), info["valid"].copy()], [venv.world_scenario.copy()]
        rng = np.random.default_rng(5)
        for _ in range(300):  # quick episodes last 128 steps: every world redraws its scenario
            o, r, te, tr, info = venv.step(rng.integers(0, venv.single_action_space.n, venv.num_envs))
            out += [o.copy(), r.copy(), te.copy(), tr.copy(), info["valid"].copy(), info["counters"].copy()]
            scenarios.append(venv.world_scenario.copy())
        names = [m.name for m in venv.state["maps"]]
    finally:
        venv.close()
    return out, np.array(scenarios), names


@pytest.mark.skipif(sys.platform != "linux", reason="worker processes: exercised on Linux")
def test_worker_and_in_process_dataset_rollouts_are_bit_identical():
    one, scen_one, names_one = _rollout(1)
    two, scen_two, names_two = _rollout(2)
    assert np.array_equal(scen_one, scen_two) and names_one == names_two  # the same map for every world
    assert all(len(np.unique(col)) >= 2 for col in scen_one.T)  # every world was put on a new map
    assert len(one) == len(two)
    for a, b in zip(one, two, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)


# ---------------------------------------------------------------------------------- train


def test_train_dataset_naming_a_missing_file_stops_before_any_work(tmp_path, capsys):
    path = _manifest(tmp_path, {"gone.tzb": {"region": "a", "source": "s", "type": "t"}})
    out = tmp_path / "run"
    assert cli.main(["train", "--dataset", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "gone.tzb" in err and str(path) in err
    assert not out.exists()


def test_train_dataset_naming_a_corrupt_file_stops_before_any_work(tmp_path, capsys):
    data = bytearray(asset_path("roundabout").read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte inside a section: its checksum fails
    (tmp_path / "bad.tzb").write_bytes(bytes(data))
    path = _manifest(tmp_path, {"bad.tzb": {"region": "a", "source": "s", "type": "t"}})
    out = tmp_path / "run"
    assert cli.main(["train", "--dataset", str(path), "--out", str(out)]) == 2
    assert "bad.tzb" in capsys.readouterr().err
    assert not out.exists()


def test_a_config_train_section_names_the_dataset(tmp_path):
    pytest.importorskip("torch")
    from terrazero_env.agents.settings import resolve_run

    cfg_path = tmp_path / "run.yaml"
    cfg_path.write_text("maps: [grid_town]\ntrain:\n  dataset: bundled\n  total_steps: 64\n")
    settings = resolve_run(str(cfg_path), tmp_path / "out", False, None, {}).settings
    assert settings.dataset == "bundled" and settings.total_steps == 64
    settings = resolve_run("quick", tmp_path / "out", False, {"train.dataset": str(Dataset("bundled").manifest_path)},
                           {}).settings
    assert Path(settings.dataset).is_absolute()  # recorded so a resume finds it from anywhere


def test_terrazero_train_on_the_shipped_dataset_runs_end_to_end(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    assert cli.main(["train", "--dataset", "bundled", "--total-steps", "384", "--worlds", "6", "--out", str(out),
                     "--progress", "lines", "--no-tensorboard", *TINY_ARGS]) == 0
    printed = capsys.readouterr().out
    assert "dataset bundled (8 scenarios, 6 groups)" in printed
    assert (out / "checkpoint.zip").is_file()
    rows = [json.loads(line) for line in (out / "progress.jsonl").read_text().splitlines()]
    assert rows and rows[-1]["agent_steps"] >= 384
    assert "dataset: bundled" in (out / "train.yaml").read_text()
