"""The interfaces users reach: Gymnasium single-agent and vector envs, PettingZoo, config presets."""

from __future__ import annotations

import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import terrazero_env
from terrazero_env.config.io import (
    apply_overrides,
    config_from_dict,
    config_to_dict,
    dump_config,
    load_config,
    presets,
)

# ------------------------------------------------------------------------------------ gymnasium


def test_gymnasium_check_env_passes_without_warnings():
    from gymnasium.utils.env_checker import check_env

    env = gym.make("TerraZero/Drive-v0", preset="quick")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)


def test_sb3_check_env_passes_without_warnings():
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker")
    env = terrazero_env.DriveEnv("quick")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_checker.check_env(env, warn=True)


@pytest.mark.parametrize("seed", [0, 1, 2**63, 2**64 - 1])
def test_any_non_negative_64_bit_seed_is_accepted_and_reproducible(seed):
    # Gymnasium's rule; negative or wider seeds are rejected (tests/test_conventions.py).
    env = gym.make("TerraZero/Drive-v0")
    a, _ = env.reset(seed=seed)
    b, _ = env.reset(seed=seed)
    np.testing.assert_array_equal(a, b)


def test_episode_runs_to_truncation_or_termination():
    env = gym.make("TerraZero/Drive-v0", preset="quick", episode_length=20)
    env.reset(seed=3)
    for t in range(25):
        obs, r, term, trunc, info = env.step(0)
        assert env.observation_space.contains(obs)
        if term or trunc:
            break
    assert term or trunc
    assert t <= 19
    with pytest.raises(RuntimeError, match="call reset"):
        env.unwrapped.step(0)


def test_make_in_a_fresh_process_and_async_workers_with_spawn():
    code = (
        "import gymnasium as gym, numpy as np\n"
        "env = gym.make('terrazero_env:TerraZero/Drive-v0')\n"
        "env.reset(seed=1)\n"
        "venv = gym.vector.AsyncVectorEnv([lambda: gym.make('terrazero_env:TerraZero/Drive-v0')] * 2, context='spawn')\n"
        "obs, info = venv.reset(seed=[1, 2])\n"
        "obs, r, te, tr, info = venv.step(np.zeros(2, dtype=np.int64))\n"
        "venv.close()\n"
        "print(obs.shape)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "(2, 1801)"  # the quick preset: 1,790 values, six optional ego features, the 5 of the stop line ahead


def test_make_vec_uses_the_native_vector_env():
    venv = gym.make_vec("TerraZero/Drive-v0", num_envs=3)
    assert isinstance(venv, terrazero_env.envs.TerraZeroVectorEnv)
    obs, info = venv.reset(seed=0)
    assert obs.shape == (3, venv.single_observation_space.shape[0]) and info["valid"].all()


# ------------------------------------------------------------------------------------ vector env


def _finish_world_zero(venv):
    """Step until world 0 has finished; return the infos of each step."""
    infos = []
    for _ in range(200):
        out = venv.step(np.zeros(venv.num_envs, np.int64))
        infos.append(out)
        if not (venv.engine.valid[:venv.slots_per_world] & ~venv.engine.terminated[:venv.slots_per_world]
                & ~venv.engine.truncated[:venv.slots_per_world]).any():
            return infos
    raise AssertionError("world 0 never finished")


def test_vector_env_next_step_resets_a_finished_world_on_the_following_step():
    venv = terrazero_env.make_vec(2, "quick", episode_length=8)
    venv.reset(seed=1)
    _finish_world_zero(venv)
    obs, rew, term, trunc, info = venv.step(np.zeros(venv.num_envs, np.int64))
    K = venv.slots_per_world
    assert not info["valid"][:K].any() and not rew[:K].any()  # the reset step carries no transition
    assert venv.engine.world_steps[0] == 0 and venv.engine.valid[:K].any()


def test_vector_env_same_step_returns_final_observations():
    venv = terrazero_env.make_vec(2, "quick", autoreset_mode="SameStep", episode_length=8)
    venv.reset(seed=1)
    K = venv.slots_per_world
    for _ in range(8):
        obs, rew, term, trunc, info = venv.step(np.zeros(venv.num_envs, np.int64))
    assert trunc[:K].any() or term[:K].any()
    assert "final_obs" in info and info["_final_obs"][:K].any()
    assert venv.engine.world_steps[0] == 0  # already restarted
    i = int(np.argmax(info["_final_obs"]))
    assert info["final_obs"][i].shape == (venv.single_observation_space.shape[0],)


def test_vector_env_disabled_mode_never_resets_and_reset_mask_must_cover_worlds():
    venv = terrazero_env.make_vec(2, "quick", autoreset_mode=AutoresetMode.DISABLED, episode_length=5)
    assert venv.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    venv.reset(seed=0)
    for _ in range(9):
        _, _, _, _, info = venv.step(np.zeros(venv.num_envs, np.int64))
    assert not info["valid"].any() and venv.engine.world_steps[0] == 9
    K = venv.slots_per_world
    bad = np.zeros(venv.num_envs, bool)
    bad[0] = True
    with pytest.raises(ValueError, match="cover whole worlds"):
        venv.reset(options={"reset_mask": bad})
    good = np.zeros(venv.num_envs, bool)
    good[:K] = True
    venv.reset(seed=3, options={"reset_mask": good})
    assert venv.engine.world_steps.tolist() == [0, 9]


def test_vector_env_observations_are_zero_copy_engine_buffers():
    venv = terrazero_env.make_vec(2, "quick")
    obs, _ = venv.reset(seed=0)
    assert np.shares_memory(obs, venv.engine.observations)


def test_vector_env_rejects_bad_actions():
    venv = terrazero_env.make_vec(1, "quick")
    venv.reset(seed=0)
    with pytest.raises(ValueError, match=r"actions must have shape \(4,\)"):
        venv.step(np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="actions must be integers"):
        venv.step(np.full(4, np.nan))


def test_state_exposes_read_only_views_of_every_agent():
    venv = terrazero_env.make_vec(2, "quick")
    venv.reset(seed=0)
    st = venv.state
    agents = st["agents"]
    assert agents.shape[0] == 2 and {"x", "y", "heading", "speed", "cls", "role", "slot", "collided"} <= set(agents.dtype.names)
    with pytest.raises(ValueError):
        agents["x"][0, 0] = 1.0
    n0 = int(st["n_agents"][0])
    live = agents[0, :n0]
    assert (live["alive"] == 1).all() and (live["slot"][live["role"] == 0] >= 0).all()
    venv.step(np.zeros(venv.num_envs, np.int64))
    assert venv.state["agents"]["x"][0, 0] == venv.engine.agent_states(0)["x"][0]


# ------------------------------------------------------------------------------------ pettingzoo


def test_pettingzoo_parallel_api_test():
    from pettingzoo.test import parallel_api_test

    parallel_api_test(terrazero_env.parallel_env("quick", episode_length=40), num_cycles=60)


def test_pettingzoo_aec_api_test():
    from pettingzoo.test import api_test

    api_test(terrazero_env.env("quick", episode_length=40), num_cycles=60)


def test_pettingzoo_parallel_seed_test():
    from pettingzoo.test import parallel_seed_test

    parallel_seed_test(lambda: terrazero_env.parallel_env("quick", episode_length=30))  # raises on a mismatch
    a, b = terrazero_env.parallel_env("quick"), terrazero_env.parallel_env("quick")
    oa, _ = a.reset(seed=9)
    ob, _ = b.reset(seed=9)
    assert oa.keys() == ob.keys() and all(np.array_equal(oa[k], ob[k]) for k in oa)


def test_pettingzoo_registry_and_truncation_semantics():
    import pettingzoo

    env = pettingzoo.make("parallel", "TerraZero/Drive-v0", episode_length=6)
    env.reset(seed=5)
    start = list(env.agents)
    for _ in range(6):
        obs, rew, term, trunc, info = env.step({a: 0 for a in env.agents})
    survivors = [a for a in start if a in trunc]
    assert all(trunc[a] and not term[a] for a in survivors if not term[a])
    assert env.agents == []


# ------------------------------------------------------------------------------------ config


def test_presets_load_and_round_trip_through_yaml(tmp_path):
    import yaml

    assert {"planner", "sim_agent", "quick"} <= set(presets())
    for name in presets():
        cfg = load_config(name)
        assert config_from_dict(yaml.safe_load(dump_config(cfg))) == cfg
    dump_config(load_config("planner"), tmp_path / "p.yaml")
    assert load_config(tmp_path / "p.yaml") == load_config("planner")


def test_planner_and_sim_agent_observe_19_and_23_reward_parameters():
    assert len(load_config("planner").active_reward_params()) == 19
    assert len(load_config("sim_agent").active_reward_params()) == 23


def test_dotted_overrides():
    cfg = load_config("quick", **{"rewards.collision": [0, 3], "obs.dtype": "float16",
                                  "init.class_weights.pedestrian": 0.5, "classes.car.max_speed": 25.0})
    assert cfg.rewards["collision"] == ((0.0, 3.0), (0.0, 3.0), (0.0, 3.0))
    assert cfg.obs.dtype == "float16" and cfg.init.class_weights[3] == 0.5
    assert cfg.classes[0].max_speed == 25.0
    off = apply_overrides(cfg, {"rewards.boundary.cyclist": None})
    assert off.rewards["boundary"][2] is None and off.rewards["boundary"][0] == cfg.rewards["boundary"][0]
    assert load_config("quick", obs__max_partners=5).obs.max_partners == 5


@pytest.mark.parametrize("overrides,message", [
    ({"obs.colour": 1}, r"obs: unknown keys \['colour'\]"),
    ({"rewards.speedo": 1.0}, "rewards: unknown parameter 'speedo'"),
    ({"init.mode": "dream"}, r"init.mode: 'dream' is not one of"),
    ({"obs.dtype": "int8"}, "ObsConfig.dtype"),
    ({"rewards.collision": "high"}, "rewards.collision: a number, \\[min, max\\] or null"),
    ({"consequences.collision": "explode"}, "consequences.collision"),
])
def test_bad_config_values_name_the_field(overrides, message):
    with pytest.raises(ValueError, match=message):
        load_config("quick", **overrides)


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ValueError, match="unknown preset 'fast'; presets: longtail, planner, quick, sim_agent"):
        load_config("fast")


def test_config_dict_is_plain_data():
    import json

    cfg = load_config("sim_agent")
    assert config_from_dict(json.loads(json.dumps(config_to_dict(cfg)))) == cfg


def test_sb3_adapter_over_multi_slot_worlds_reports_episode_ends_and_padding():
    pytest.importorskip("stable_baselines3")
    from terrazero_env.wrappers import SB3VecEnv

    venv = SB3VecEnv(terrazero_env.make_vec(2, "quick", episode_length=12))
    obs = venv.reset()
    ends = padding = 0
    for _ in range(40):
        obs, rew, dones, infos = venv.step(np.zeros(venv.num_envs, np.int64))
        for i, info in enumerate(infos):
            if dones[i]:
                ends += 1
                assert info["terminal_observation"].shape == obs[i].shape
            if not info["valid"]:
                padding += 1
                assert rew[i] == 0.0
    assert ends > 0 and padding > 0
    with pytest.raises(ValueError, match="cannot reset one by one"):
        SB3VecEnv(terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled"))
