"""Trainer settings: ``TrainSettings`` and ``PPO`` agree on their defaults, the planner and sim-agent
presets carry table 14's values in their ``train:`` sections, and bad settings name the field."""

from __future__ import annotations

import inspect

import pytest
from terrazero_env.agents.ppo import PPO
from terrazero_env.agents.train import TrainSettings

from terrazero_env.config.io import load_train_section

PPO_DEFAULTS = {k: p.default for k, p in inspect.signature(PPO.__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
#: TerraZero table 14 (the learning rate is annealed linearly from this value).
TABLE_14 = {"learning_rate": 5e-4, "gamma": 0.99, "gae_lambda": 0.95, "clip_range": 0.2, "ent_coef": 0.01,
            "vf_coef": 0.5, "max_grad_norm": 0.5, "n_epochs": 2, "num_minibatches": 16, "vtrace": True,
            "rho_bar": 1.0, "c_bar": 1.0, "popart_decay": 0.9997, "popart_min_sigma": 1e-4,
            "priority_alpha": 0.85, "priority_beta0": 0.85, "priority_beta_final": 0.978}


def test_train_settings_default_rollout_length_is_ppos():
    assert TrainSettings().ppo["n_steps"] == PPO_DEFAULTS["n_steps"]
    assert TrainSettings().lr_anneal is True


def test_ppo_defaults_are_table_14():
    for k, v in TABLE_14.items():
        if k == "learning_rate":
            assert PPO_DEFAULTS[k](1.0) == pytest.approx(v)  # the linear schedule's start
        else:
            assert PPO_DEFAULTS[k] == pytest.approx(v), k


@pytest.mark.parametrize("preset", ["planner", "sim_agent"])
def test_paper_presets_train_with_table_14_and_the_paper_sized_policy(preset):
    settings = TrainSettings.from_mapping(load_train_section(preset))
    assert settings.policy == {} and settings.lr_anneal
    for k, v in TABLE_14.items():
        assert settings.ppo[k] == pytest.approx(v), k
    assert settings.ppo["n_steps"] == PPO_DEFAULTS["n_steps"]


@pytest.mark.parametrize("field,value", [("total_steps", 10.5), ("total_steps", 0), ("seed", -1), ("seed", "3"),
                                         ("threshold", float("nan")), ("threshold", 0.0),
                                         ("checkpoint_every", 2.0), ("lr_anneal", 1), ("torch_threads", 0)])
def test_bad_trainer_settings_name_the_field(field, value):
    with pytest.raises(ValueError, match=f"train.{field}"):
        TrainSettings(**{field: value})
