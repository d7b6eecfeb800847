"""PettingZoo's conventions for centralised training with decentralised execution (CTDE): ``state()``
is a method returning the global state in ``state_space`` (https://pettingzoo.farama.org/api/parallel/),
the ``observation_spaces`` / ``action_spaces`` dicts cover ``possible_agents``, and the engine's views
that the former ``state`` property returned are ``world_state()``. PettingZoo's ``parallel_api_test``
and ``api_test`` on the default envs run in tests/test_envs.py; here they run on float16 observations,
with PettingZoo's ``state_test``."""

from __future__ import annotations

import copy
import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest

import terrazero_env
from terrazero_env.envs.conventions import EnvClosedError


def _blocks(env, state):
    """``state`` split as documented: ``[K, D]`` observations in ``possible_agents`` order, ``[K]`` live flags."""
    k, d = len(env.possible_agents), env.observation_space(env.possible_agents[0]).shape[0]
    assert state.shape == (k * d + k,)
    return state[: k * d].reshape(k, d), state[k * d:]


def _check_state(env, obs=None):
    """``env.state()`` lies in ``state_space`` and holds what its docstring says: the live agents'
    observations (``obs``, when given, as the last reset/step returned them) and flags, zeros elsewhere."""
    s = env.state()
    assert isinstance(s, np.ndarray) and s.dtype == np.float32 and s.shape == env.state_space.shape
    assert env.state_space.contains(s)
    per_slot, flags = _blocks(env, s)
    live = set(env.agents)
    for k, a in enumerate(env.possible_agents):
        if a in live:
            assert flags[k] == 1.0, a
            if obs is not None:
                assert np.array_equal(per_slot[k], obs[a].astype(np.float32)), a
        else:
            assert flags[k] == 0.0 and not per_slot[k].any(), a
    return s


# ------------------------------------------------------------------------------------ spaces


def test_state_space_is_a_float32_box_of_every_slot_and_its_live_flag():
    env = terrazero_env.parallel_env("quick")
    k, d = len(env.possible_agents), env.observation_space("agent_0").shape[0]
    assert isinstance(env.state_space, gym.spaces.Box) and env.state_space.dtype == np.float32
    assert env.state_space.shape == (k * d + k,)
    bound = env.observation_space("agent_0").high.max()
    assert (env.state_space.low[: k * d] == -bound).all() and (env.state_space.high[: k * d] == bound).all()
    assert (env.state_space.low[k * d:] == 0).all() and (env.state_space.high[k * d:] == 1).all()
    aec = terrazero_env.env("quick")
    assert aec.state_space == env.state_space


def test_observation_and_action_space_dicts_cover_possible_agents_with_the_same_objects():
    penv = terrazero_env.parallel_env("quick")
    aec = terrazero_env.env("quick")
    for env in (penv, aec):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # PettingZoo's own conversion warns at every read; ours does not
            obs_spaces, act_spaces = env.observation_spaces, env.action_spaces
        assert isinstance(obs_spaces, dict) and isinstance(act_spaces, dict)
        assert list(obs_spaces) == list(env.possible_agents) == list(act_spaces)
        for a in env.possible_agents:
            assert obs_spaces[a] is env.observation_space(a)
            assert act_spaces[a] is env.action_space(a)
            assert isinstance(act_spaces[a], gym.spaces.Discrete) and act_spaces[a].n == 12


# ------------------------------------------------------------------------------------- state()


def test_parallel_state_is_every_live_agents_observation_in_slot_order():
    env = terrazero_env.parallel_env("quick", episode_length=20, **{"init.num_agents": [3, 4]})
    assert not _check_state(env).any()  # before the first reset: no live agent, all zeros
    rng = np.random.default_rng(0)
    finished_seen = False
    for seed in (3, 4):
        obs, _ = env.reset(seed=seed)
        assert env.agents
        first = _check_state(env, obs)
        kept = first.copy()
        first[:] = 7.0  # a new array at every call: writing to one changes neither the env nor the next
        assert np.array_equal(env.state(), kept)
        assert np.array_equal(env.engine.observations[0], obs["agent_0"])
        while env.agents:
            obs, *_ = env.step({a: int(rng.integers(12)) for a in env.agents})
            live_obs = {a: o for a, o in obs.items() if a in env.agents}
            _check_state(env, live_obs)
            finished_seen |= len(env.agents) < len(obs)
        assert not env.state().any()  # every agent finished: nothing live
    assert finished_seen


def test_state_with_float16_observations_is_float32_and_passes_pettingzoos_tests():
    from pettingzoo.test import api_test, parallel_api_test, state_test

    kw = {"episode_length": 30, "obs.dtype": "float16"}
    penv = terrazero_env.parallel_env("quick", **kw)
    assert penv.observation_space("agent_0").dtype == np.float16
    obs, _ = penv.reset(seed=1)
    _check_state(penv, obs)
    parallel_api_test(terrazero_env.parallel_env("quick", **kw), num_cycles=40)
    api_test(terrazero_env.env("quick", **kw), num_cycles=40)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state_test(terrazero_env.env("quick", **kw), terrazero_env.parallel_env("quick", **kw), num_cycles=20)
    bad = [str(w.message) for w in caught if any(t in str(w.message) for t in
                                                   ("not NumPy", "infinity", "NaN", "different", "numeric"))]
    assert not bad, bad


def test_aec_state_is_the_parallel_envs_and_order_enforced():
    aec = terrazero_env.env("quick", episode_length=20)
    with pytest.raises(Exception, match="reset"):
        aec.state()  # PettingZoo's OrderEnforcingWrapper: state() before reset is an error
    aec.reset(seed=2)
    par = aec.unwrapped
    assert np.array_equal(aec.state(), par.state())
    for agent in aec.agent_iter(200):
        _, _, term, trunc, _ = aec.last()
        aec.step(None if term or trunc else aec.action_space(agent).sample())
        s = aec.state()
        assert aec.state_space.contains(s) and np.array_equal(s, par.state())
        _check_state(par)


# ---------------------------------------------------------------------- a centralised critic


def _critic_loop(env, steps):
    """TD(0) on a linear critic of ``env.state()``, random decentralised actions; returns the resets."""
    w = np.zeros(env.state_space.shape[0], np.float64)
    resets, seed = 0, 0
    env.reset(seed=seed)
    s = env.state()
    values = []
    for _ in range(steps):
        if not env.agents:
            seed += 1
            resets += 1
            env.reset(seed=seed)
            s = env.state()
        _, rewards, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
        s_next = env.state()  # called every step, as MAPPO-style trainers do
        assert env.state_space.contains(s_next)
        r = float(np.mean(list(rewards.values())))
        v, v_next = float(w @ s), float(w @ s_next) if env.agents else 0.0
        w += 1e-4 * (r + 0.99 * v_next - v) * s
        values.append(v)
        s = s_next
    assert np.isfinite(w).all() and np.isfinite(values).all() and np.abs(w).sum() > 0
    return resets


def test_a_centralised_critic_reads_state_every_step_across_resets():
    env = terrazero_env.parallel_env("quick", episode_length=10)
    for a in env.possible_agents:
        env.action_space(a).seed(0)
    assert _critic_loop(env, 48) >= 2


# --------------------------------------------------------------- world_state() and the old name


def test_world_state_holds_the_engine_views_and_the_old_dict_access_warns():
    penv = terrazero_env.parallel_env("quick")
    penv.reset(seed=0)
    ws = penv.world_state()
    assert set(ws) == {"agents", "map", "world_step"}
    assert ws["agents"]["x"][0] == penv.engine.agent_states(0)["x"][0]
    with pytest.raises(ValueError):
        ws["agents"]["x"][0] = 1.0  # read-only views
    with pytest.warns(DeprecationWarning, match=r"ParallelDriveEnv\.world_state\(\)"):
        agents = penv.state["agents"]
    assert np.array_equal(agents, ws["agents"])
    with pytest.warns(DeprecationWarning, match=r"state\(\) method"):
        assert "map" in penv.state and set(penv.state.keys()) == set(ws)
    with pytest.warns(DeprecationWarning):
        assert dict(penv.state.items())["world_step"] == ws["world_step"]
    with pytest.warns(DeprecationWarning):
        assert penv.state.get("map") is ws["map"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert callable(penv.state) and bool(penv.state)  # neither warns
        penv.state()
        penv.world_state()
        assert "world_state()" in repr(penv.state)
    aec = terrazero_env.env("quick")
    aec.reset(seed=0)
    assert aec.world_state()["world_step"] == aec.unwrapped.world_state()["world_step"]
    penv.close()
    for call in (penv.state, penv.world_state):
        with pytest.raises(EnvClosedError, match="ParallelDriveEnv is closed"):
            call()


# ----------------------------------------------------------------------------- copies


def _copies(env):
    return {"deepcopy": copy.deepcopy(env), "pickle": pickle.loads(pickle.dumps(env))}


def test_copies_keep_the_state_the_spaces_and_the_same_future():
    penv = terrazero_env.parallel_env("quick", episode_length=30)
    penv.reset(seed=6)
    copies = _copies(penv)
    rng = np.random.default_rng(1)
    for how, c in copies.items():
        assert np.array_equal(c.state(), penv.state()) and c.state_space == penv.state_space, how
        for a in c.possible_agents:
            assert c.observation_spaces[a] is c.observation_space(a), how
            assert c.action_spaces[a] is c.action_space(a), how
    while penv.agents:
        actions = {a: int(rng.integers(12)) for a in penv.agents}
        penv.step(actions)
        for how, c in copies.items():
            c.step(actions)
            assert np.array_equal(c.state(), penv.state()), how
    aec = terrazero_env.env("quick", episode_length=20)
    aec.reset(seed=7)
    aec.step(0)
    for how, c in _copies(aec).items():
        assert np.array_equal(c.state(), aec.state()), how
        assert list(c.observation_spaces) == list(aec.possible_agents), how
        assert c.action_spaces["agent_0"] is c.action_space("agent_0"), how
