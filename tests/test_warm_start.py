"""``train.init_from``: a run that starts from another run's policy (a curriculum's second stage)."""

from __future__ import annotations

import pytest
import torch
from terrazero_env.agents.settings import TrainSettings
from terrazero_env.agents.train import _warm_start
from terrazero_env.agents.train_env import build_model

from terrazero_env.config.io import load_config

SMALL = {"ego_hidden": 16, "entity_hidden": 8, "trunk": [32]}


def _model(policy: dict, seed: int):
    cfg = load_config("quick", num_worlds=2)
    return build_model(cfg, TrainSettings(policy=policy, ppo={"n_steps": 8}), seed, "cpu")


def test_the_new_run_starts_from_the_donors_weights_and_popart_moments(tmp_path) -> None:
    donor = _model(SMALL, 1)
    donor.popart_mean, donor.popart_sq_mean = 0.25, 2.5
    donor.save(tmp_path / "checkpoint.zip")
    model = _model(SMALL, 2)
    before = {k: v.clone() for k, v in model.policy.state_dict().items()}
    assert any(not torch.equal(before[k], v) for k, v in donor.policy.state_dict().items())
    _warm_start(model, str(tmp_path), "cpu")  # a run folder: its checkpoint.zip
    for k, v in donor.policy.state_dict().items():
        assert torch.equal(model.policy.state_dict()[k], v), k
    assert (model.popart_mean, model.popart_sq_mean) == (0.25, 2.5)


def test_a_policy_of_another_shape_is_refused_naming_the_parameter(tmp_path) -> None:
    _model(SMALL, 1).save(tmp_path / "small.zip")
    model = _model({**SMALL, "trunk": [48]}, 2)
    with pytest.raises(ValueError, match="does not fit this run's policy: parameter"):
        _warm_start(model, str(tmp_path / "small.zip"), "cpu")
    with pytest.raises(ValueError, match="no checkpoint"):
        _warm_start(model, str(tmp_path / "missing.zip"), "cpu")


def test_the_setting_is_checked() -> None:
    with pytest.raises(ValueError, match="train.init_from"):
        TrainSettings(init_from="")
    assert TrainSettings.from_mapping({"init_from": "runs/quick"}).init_from == "runs/quick"
