"""Trainer settings: ``TrainSettings`` and ``PPO`` agree on their defaults, the planner and sim-agent
presets carry table 14's values in their ``train:`` sections, bad settings name the field, a removed
setting warns or is refused, and the command's options and ``--set`` reach the settings through one
parser each."""

from __future__ import annotations

import argparse
import inspect
import warnings
from dataclasses import fields

import pytest
from terrazero_env.agents.ppo import PPO
from terrazero_env.agents.settings import OPTION_SETTINGS, PPO_KEYS, RESUME_OPTIONS, option_settings
from terrazero_env.agents.train import TrainSettings, train

from terrazero_env.config.io import load_train_section, override_name, parse_set_options
from terrazero_env.config.train_options import add_train_arguments

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


def test_overlap_is_removed_false_warns_and_anything_else_is_refused():
    """``train.overlap`` (two double-buffered halves) is gone: ``overlap: false``, which older run
    folders' ``train.yaml`` record, reads with a FutureWarning as today's settings; any other value is
    refused, naming the setting."""
    with pytest.warns(FutureWarning, match="train.overlap was removed"):
        assert TrainSettings.from_mapping({"overlap": False, "seed": 3}) == TrainSettings(seed=3)
    for value in (True, "yes", 0):
        with pytest.raises(ValueError, match="train.overlap was removed.*delete the key"):
            TrainSettings.from_mapping({"overlap": value})
    assert "overlap" not in TrainSettings().to_mapping()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrainSettings.from_mapping(TrainSettings().to_mapping())  # what a run writes reads back silently


def test_set_options_are_parsed_once_the_same_way_everywhere():
    assert parse_set_options(["a.b=[1, 2]", " train.ent_coef = 0.005", "c={x: 1}", "a.b=3"]) == {
        "a.b": 3, "train.ent_coef": 0.005, "c": {"x": 1}}
    with pytest.raises(ValueError, match="--set expects KEY=VALUE, got 'foo'"):
        parse_set_options(["foo"])
    for text in ("=1", " =1", "train.=1", ".a=1", "a..b=1", "__a=1"):
        with pytest.raises(ValueError, match=f"--set '{text}' has an empty setting name"):
            parse_set_options([text])
    assert override_name(" rewards.collision ") == "rewards.collision"
    with pytest.raises(ValueError, match="override 'train.' has an empty setting name"):
        override_name("train.")
    with pytest.raises(TypeError, match="dotted strings"):
        override_name(3)


def test_the_options_that_set_trainer_settings_are_one_list():
    """:data:`OPTION_SETTINGS` names, once, the options that set trainer settings: each is an option
    of the command (its argparse destination), a keyword of ``train`` and a setting."""
    p = argparse.ArgumentParser()
    add_train_arguments(p)
    dests = {a.dest for a in p._actions}
    settings = {f.name for f in fields(TrainSettings)} | PPO_KEYS
    params = set(inspect.signature(train).parameters)
    for name in OPTION_SETTINGS:
        assert name in dests and name in params and name in settings, name
    assert set(RESUME_OPTIONS) <= set(OPTION_SETTINGS)
    args = p.parse_args(["--total-steps", "64", "--seed", "4", "--full-policy", "--n-steps", "8"])
    assert option_settings(vars(args), args.full_policy) == {"total_steps": 64, "seed": 4, "n_steps": 8, "policy": {}}
    assert option_settings(vars(p.parse_args([]))) == {}
