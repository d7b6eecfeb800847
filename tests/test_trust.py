"""The trust boundary: no file this package reads runs code from it unless the user
opts in. For each entry point that used to unpickle (``--resume`` checkpoints, ``terrazero eval`` on
an SB3 zip, the ScenarioNet importer), a crafted pickle whose ``__reduce__`` would create a marker
file is refused with an error that says why, and the marker never appears; our own files still load."""

from __future__ import annotations

import base64
import json
import pickle
import zipfile
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from terrazero_env.agents import PPO
from terrazero_env.agents.checkpoint import load_rank_state
from terrazero_env.agents.evaluate import load_checkpoint
from terrazero_env.agents.modelzip import SAFE_ENTRY, PickleRefusedError

import terrazero_env
from terrazero_env.cli import main
from terrazero_env.config.io import dump_config, load_config
from terrazero_env.maps import MapValidationError, load_source

SMALL = {"ego_hidden": 16, "entity_hidden": 16, "trunk": (32, 32)}


class Payload:
    """Unpickling this creates ``marker`` (what a crafted file would do, harmlessly)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A run folder with config.yaml and a checkpoint.zip written by our PPO.save."""
    out = tmp_path_factory.mktemp("trust")
    cfg = load_config("quick")
    dump_config(cfg, out / "config.yaml")
    model = PPO("DeepSetsPolicy", terrazero_env.envs.TerraZeroVectorEnv(cfg), n_steps=16, seed=0, policy_kwargs=SMALL)
    model.save(out / "checkpoint.zip")
    return out


def _poison_zip(src: Path, dst: Path, marker: Path, keep_safe_entry: bool) -> None:
    """A copy of ``src`` whose pickled ``observation_space`` is replaced by the payload (and, unless
    ``keep_safe_entry``, without our plain-data entry: a foreign SB3 zip)."""
    with zipfile.ZipFile(src) as z:
        entries = {n: z.read(n) for n in z.namelist()}
    data = json.loads(entries["data"])
    data["observation_space"][":serialized:"] = base64.b64encode(pickle.dumps(Payload(marker))).decode()
    entries["data"] = json.dumps(data).encode()
    if not keep_safe_entry:
        entries.pop(SAFE_ENTRY)
    with zipfile.ZipFile(dst, "w") as z:
        for n, b in entries.items():
            z.writestr(n, b)


# ------------------------------------------------------------------------------ eval / model zips

def test_eval_refuses_a_foreign_sb3_zip_and_runs_none_of_its_code(run_dir, tmp_path, capsys):
    marker = tmp_path / "pwned"
    bad = tmp_path / "foreign.zip"
    _poison_zip(run_dir / "checkpoint.zip", bad, marker, keep_safe_entry=False)
    with pytest.raises(PickleRefusedError, match="pickled Python objects.*--trust-pickle"):
        load_checkpoint(bad)
    assert main(["eval", str(bad), "--preset", "quick", "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert "unpickling a file runs any code" in err and "--trust-pickle" in err and len(err.strip().splitlines()) == 1
    assert not marker.exists()
    # The opt-in really does unpickle (so the refusal above is what kept the marker away).
    with pytest.raises(ValueError):
        load_checkpoint(bad, trust_pickle=True)
    assert marker.exists()


def test_our_own_zip_never_unpickles_its_data_entry(run_dir, tmp_path):
    marker = tmp_path / "pwned"
    ours = tmp_path / "ours.zip"
    _poison_zip(run_dir / "checkpoint.zip", ours, marker, keep_safe_entry=True)
    model = load_checkpoint(ours)  # every pickled attribute is rebuilt from the plain-data entry
    assert not marker.exists()
    assert model.observation_space.shape == load_checkpoint(run_dir / "checkpoint.zip").observation_space.shape


def test_our_zip_loads_without_the_flag_with_the_same_policy_and_sb3_load_still_reads_it(run_dir, capsys):
    safe = load_checkpoint(run_dir / "checkpoint.zip")
    sb3 = PPO.load(run_dir / "checkpoint.zip")  # SB3's own loader (unpickles) keeps working
    for k, v in sb3.policy.state_dict().items():
        assert torch.equal(v, safe.policy.state_dict()[k]), k
    assert safe.action_space == sb3.action_space and safe.observation_space == sb3.observation_space
    assert str(safe.lr_schedule) == str(sb3.lr_schedule) and str(safe.clip_range) == str(sb3.clip_range)
    assert safe.policy_kwargs["layout"] == sb3.policy_kwargs["layout"]
    obs = np.random.default_rng(0).standard_normal((4, safe.observation_space.shape[0])).astype(np.float32)
    np.testing.assert_array_equal(safe.predict(obs, deterministic=True)[0], sb3.predict(obs, deterministic=True)[0])
    assert main(["eval", str(run_dir), "--episodes", "2"]) == 0
    assert "goal reach" in capsys.readouterr().out


# -------------------------------------------------------------------------------- --resume files

def test_resume_refuses_a_checkpoint_that_needs_unpickling(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "rank0.pt"
    torch.save({"format": 2, "world_size": 1, "policy": Payload(marker)}, path)
    with pytest.raises(ValueError, match="tensors and plain data.*never loaded"):
        load_rank_state(SimpleNamespace(device=torch.device("cpu")), path, 0, 1)
    assert not marker.exists()
    torch.load(path, weights_only=False)  # what the old loader did
    assert marker.exists()


# ----------------------------------------------------------------------------- ScenarioNet .pkl

def test_scenarionet_importer_refuses_a_pickle_unless_trusted(tmp_path, capsys):
    marker = tmp_path / "pwned"
    p = tmp_path / "scene.pkl"
    p.write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(MapValidationError, match="unpickling runs any code.*--trust-pickle"):
        load_source(p)
    assert main(["maps", "build", str(p), "-o", str(tmp_path / "out.tzb")]) == 2
    err = capsys.readouterr().err
    assert "--trust-pickle" in err and len(err.strip().splitlines()) == 1
    assert main(["maps", "inspect", str(p)]) == 2
    assert not marker.exists()
    with pytest.raises(MapValidationError):  # trusted: unpickled (the payload is no scenario)
        load_source(p, trust_pickle=True)
    assert marker.exists()


def test_a_model_saved_after_training_loads_without_the_flag(tmp_path):
    """Training leaves runtime state on the model (last observations, episode buffers); a saved zip
    holds the policy and its settings only, so the main job's `terrazero eval` needs no opt-in."""
    cfg = load_config("quick", num_worlds=2)
    model = PPO("DeepSetsPolicy", terrazero_env.envs.TerraZeroVectorEnv(cfg), n_steps=8, n_epochs=1, batch_size=16,
                seed=0, policy_kwargs=SMALL)
    model.learn(16)
    assert model._last_obs is not None
    model.save(tmp_path / "checkpoint.zip")
    loaded = load_checkpoint(tmp_path / "checkpoint.zip")  # raises PickleRefusedError if anything needs unpickling
    obs = torch.as_tensor(np.zeros((1, *model.observation_space.shape), np.float32))
    with torch.no_grad():
        assert torch.equal(loaded.policy.get_distribution(obs).distribution.logits,
                           model.policy.get_distribution(obs).distribution.logits)
