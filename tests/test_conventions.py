"""The conventions third-party RL code relies on: unknown keyword arguments
raise TypeError, envs survive copy.deepcopy and pickle with the same future, seeds follow Gymnasium
(no aliasing, a rejected reset changes nothing), actions never wrap, and a closed env says so."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
from terrazero_env.wrappers import DPSA, SGR

import terrazero_env
from terrazero_env.envs.conventions import EnvClosedError

CONSTRUCTORS = {
    "gym.make": lambda **kw: gym.make("TerraZero/Drive-v0", **kw),
    "gym.make_vec": lambda **kw: gym.make_vec("TerraZero/Drive-v0", 2, **kw),
    "DriveEnv": lambda **kw: terrazero_env.DriveEnv(**kw),
    "make_vec": lambda **kw: terrazero_env.make_vec(2, **kw),
    "parallel_env": lambda **kw: terrazero_env.parallel_env(**kw),
    "env": lambda **kw: terrazero_env.env(**kw),
    "DPSA": lambda **kw: DPSA(terrazero_env.make_vec(2, autoreset_mode="Disabled"), **kw),
    "SGR": lambda **kw: SGR(terrazero_env.make_vec(2, autoreset_mode="Disabled"), **kw),
}


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
def test_unknown_keyword_raises_type_error_like_any_python_callable(name):
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        CONSTRUCTORS[name](bogus=1)


def test_unknown_dotted_setting_is_an_unexpected_keyword_but_a_bad_value_stays_a_value_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'obs__colour'"):
        terrazero_env.DriveEnv(obs__colour=1)
    with pytest.raises(ValueError, match="ObsConfig.dtype"):
        terrazero_env.DriveEnv(obs__dtype="int8")
    assert terrazero_env.DriveEnv(episode_length=30, obs__max_partners=4).config.obs.max_partners == 4


# ----------------------------------------------------------------------------- copy and pickle

def _copies(env):
    return {"deepcopy": copy.deepcopy(env), "pickle": pickle.loads(pickle.dumps(env))}


def test_drive_env_copies_step_to_the_same_observations_and_rewards():
    env = terrazero_env.DriveEnv("quick")
    env.reset(seed=3)
    for _ in range(4):
        env.step(1)
    copies = _copies(env)
    rng = np.random.default_rng(0)
    for _ in range(30):
        a = int(rng.integers(env.action_space.n))
        obs, rew, term, trunc, _ = env.step(a)
        for how, c in copies.items():
            o2, r2, t2, u2, _ = c.step(a)
            assert np.array_equal(obs, o2) and rew == r2 and (term, trunc) == (t2, u2), how
        if term or trunc:
            break
    # The copies also continue the generator of unseeded resets.
    first = env.reset()[0]
    for how, c in copies.items():
        assert np.array_equal(first, c.reset()[0]), how


@pytest.mark.parametrize("wrap", [None, "DPSA"])
def test_vector_env_copies_step_to_the_same_observations_and_rewards(wrap):
    venv = terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled" if wrap else "NextStep", episode_length=20)
    if wrap:
        venv = DPSA(venv, threshold=0.5, horizon=12)
    venv.reset(seed=11)
    rng = np.random.default_rng(1)
    n = int(venv.single_action_space.n)
    for _ in range(3):
        venv.step(rng.integers(0, n, venv.num_envs))
    copies = _copies(venv)
    for _ in range(30):  # crosses world resets (autoreset or DPSA's global reset)
        a = rng.integers(0, n, venv.num_envs)
        obs, rew, term, trunc, info = venv.step(a)
        obs, rew = obs.copy(), rew.copy()
        for how, c in copies.items():
            o2, r2, t2, u2, i2 = c.step(a)
            assert np.array_equal(obs, o2) and np.array_equal(rew, r2), how
            assert np.array_equal(term, t2) and np.array_equal(trunc, u2) and np.array_equal(info["valid"], i2["valid"])


def test_parallel_and_aec_env_copies_step_to_the_same_future():
    penv = terrazero_env.parallel_env("quick", episode_length=40)
    penv.reset(seed=5)
    copies = _copies(penv)
    rng = np.random.default_rng(2)
    while penv.agents:
        actions = {a: int(rng.integers(penv.action_space(a).n)) for a in penv.agents}
        out = penv.step(actions)
        for how, c in copies.items():
            out2 = c.step(actions)
            assert out[0].keys() == out2[0].keys() and out[1] == out2[1] and out[2:4] == out2[2:4], how
            assert all(np.array_equal(out[0][a], out2[0][a]) for a in out[0]), how

    aec = terrazero_env.env(preset="quick", episode_length=20)
    aec.reset(seed=7)
    for _ in range(3):
        aec.step(0 if not (aec.terminations[aec.agent_selection] or aec.truncations[aec.agent_selection]) else None)
    copies = _copies(aec)
    for _ in range(40):
        if not aec.agents:
            break
        agent = aec.agent_selection
        done = aec.terminations[agent] or aec.truncations[agent]
        act = None if done else int(rng.integers(aec.action_space(agent).n))
        aec.step(act)
        for how, c in copies.items():
            assert c.agent_selection == agent, how
            c.step(act)
            assert c.rewards == aec.rewards and c.agents == aec.agents, how
            if aec.agents:
                a = aec.agent_selection
                assert np.array_equal(c.observe(a), aec.observe(a)), how


def test_a_copy_is_independent_of_the_original():
    env = terrazero_env.DriveEnv("quick")
    env.reset(seed=1)
    c = copy.deepcopy(env)
    assert c.engine is not env.engine and c.engine.observations is not env.engine.observations
    before = c.engine.observations.copy()
    env.step(0)
    assert np.array_equal(c.engine.observations, before)


# ---------------------------------------------------------------------------------------- seeds

BAD_SEEDS = [(5.2, TypeError), (5.0, TypeError), ("5", TypeError), (True, TypeError), (np.bool_(True), TypeError),
             (-1, ValueError), (2**64, ValueError), (2**128, ValueError)]


@pytest.mark.parametrize("seed,error", BAD_SEEDS)
def test_bad_seed_is_rejected_by_every_env(seed, error):
    for env in (terrazero_env.DriveEnv("quick"), terrazero_env.parallel_env("quick"),
                terrazero_env.make_vec(2, "quick")):
        with pytest.raises(error, match="seed"):
            env.reset(seed=seed)


def test_seeds_do_not_alias_and_numpy_integers_equal_python_ints():
    env = terrazero_env.DriveEnv("quick")
    obs = {s: env.reset(seed=s)[0].copy() for s in (0, 5, 2**64 - 1)}
    assert np.array_equal(env.reset(seed=np.uint64(5))[0], obs[5])
    assert np.array_equal(env.reset(seed=np.int32(5))[0], obs[5])
    assert not np.array_equal(obs[0], obs[2**64 - 1])


def test_rejected_vector_reset_leaves_the_env_exactly_as_it_was():
    venv = terrazero_env.make_vec(2, "quick")
    venv.reset(seed=4)
    venv.step(np.zeros(venv.num_envs, np.int64))
    before = venv.get_state()
    for bad in (-3, 5.5, "7", [1, -1], [1.5, 2.0], np.array([1.0, 2.0]), [1, 2, 3],
                {"reset_mask": np.zeros(3, bool)}):
        with pytest.raises((TypeError, ValueError)):
            if isinstance(bad, dict):
                venv.reset(seed=2**70, options=bad)
            else:
                venv.reset(seed=bad)
    after = venv.get_state()
    assert before["np_random"] == after["np_random"]
    for k, v in before["engine"].items():
        assert np.array_equal(v, after["engine"][k]), k
    # The generator of unseeded resets was not reseeded: it continues as if nothing happened.
    twin = terrazero_env.make_vec(2, "quick")
    twin.reset(seed=4)
    twin.step(np.zeros(twin.num_envs, np.int64))
    assert np.array_equal(venv.reset()[0], twin.reset()[0])


def test_rejected_single_and_parallel_resets_change_nothing():
    env = terrazero_env.DriveEnv("quick")
    env.reset(seed=2)
    obs = env.step(3)[0].copy()
    rng_state = env.np_random.bit_generator.state
    engine_state = env.engine.get_state()
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-2)
    assert env.np_random.bit_generator.state == rng_state
    assert all(np.array_equal(v, env.engine.get_state()[k]) for k, v in engine_state.items())
    assert np.array_equal(env.engine.observations[0], obs)
    penv = terrazero_env.parallel_env("quick")
    penv.reset(seed=2)
    agents, engine_state = list(penv.agents), penv.engine.get_state()
    with pytest.raises(TypeError, match="seed"):
        penv.reset(seed="2")
    assert penv.agents == agents
    assert all(np.array_equal(v, penv.engine.get_state()[k]) for k, v in engine_state.items())


def test_per_world_seeds_accept_the_full_unsigned_range():
    venv = terrazero_env.make_vec(2, "quick")
    obs = venv.reset(seed=[0, 2**64 - 1])[0].copy()
    assert np.array_equal(venv.reset(seed=np.array([0, 2**64 - 1], np.uint64))[0], obs)


# -------------------------------------------------------------------------------------- actions

@pytest.mark.parametrize("action", [2**32 + 1, -1, 12, 1.0, np.float32(2), True, "1", [1, 2], np.int64(2**40)])
def test_out_of_range_or_non_integer_action_raises_instead_of_wrapping(action):
    env = terrazero_env.DriveEnv("quick")
    env.reset(seed=0)
    assert env.action_space.n == 12
    with pytest.raises(ValueError, match="action"):
        env.step(action)
    penv = terrazero_env.parallel_env("quick")
    penv.reset(seed=0)
    with pytest.raises(ValueError, match="action of agent_0"):
        penv.step({penv.agents[0]: action})


def test_valid_numpy_integer_actions_are_taken():
    env = terrazero_env.DriveEnv("quick")
    env.reset(seed=0)
    twin = terrazero_env.DriveEnv("quick")
    twin.reset(seed=0)
    for a in (np.uint8(3), np.int64(11), np.array([5])):
        assert np.array_equal(env.step(a)[0], twin.step(int(np.asarray(a).reshape(())))[0])


# -------------------------------------------------------------------------------------- closing

def test_closed_envs_say_they_are_closed():
    env = terrazero_env.DriveEnv("quick")
    env.reset(seed=0)
    env.close()
    for call in (lambda: env.step(0), lambda: env.reset(seed=0), lambda: env.state):
        with pytest.raises(EnvClosedError, match="DriveEnv is closed"):
            call()
    venv = terrazero_env.make_vec(2, "quick")
    venv.reset(seed=0)
    venv.close()
    for call in (lambda: venv.step(np.zeros(venv.num_envs, np.int64)), lambda: venv.reset(seed=0), lambda: venv.state):
        with pytest.raises(EnvClosedError, match="TerraZeroVectorEnv is closed"):
            call()
    penv = terrazero_env.parallel_env("quick")
    penv.reset(seed=0)
    penv.close()
    for call in (lambda: penv.step({}), lambda: penv.reset(seed=0), lambda: penv.state(), lambda: penv.world_state()):
        with pytest.raises(EnvClosedError, match="ParallelDriveEnv is closed"):
            call()
    assert isinstance(EnvClosedError("x"), RuntimeError)
    copy.deepcopy(penv)  # a closed env still copies (and stays closed)


def test_dataset_vector_env_copies_step_to_the_same_future_across_scenario_draws(tmp_path):
    import shutil

    from terrazero_env.maps import Dataset, asset_path, bundled_maps

    for n in bundled_maps():
        shutil.copy(asset_path(n), tmp_path / f"{n}.tzb")
    venv = terrazero_env.make_vec(3, "quick", dataset=Dataset(tmp_path, cache_size=8), episode_length=8)
    rng = np.random.default_rng(3)
    seen = set()
    for s in range(3):  # several draws: the engine's signal arrays grow past what the maps in use need
        venv.reset(seed=s)
        seen |= {m.name for m in venv.state["maps"]}
    venv.step(rng.integers(0, 12, venv.num_envs))
    copies = _copies(venv)
    for _ in range(40):  # autoresets draw new scenarios in original and copies alike
        a = rng.integers(0, 12, venv.num_envs)
        obs, rew, *_ = venv.step(a)
        obs, rew = obs.copy(), rew.copy()
        seen |= {m.name for m in venv.state["maps"]}
        for how, c in copies.items():
            o2, r2, *_ = c.step(a)
            assert np.array_equal(obs, o2) and np.array_equal(rew, r2), how
    assert len(seen) >= 3


def test_an_env_with_worker_processes_refuses_to_be_copied_with_a_clear_error():
    venv = terrazero_env.make_vec(2, "quick", num_workers=2)
    try:
        for how in (copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError, match="worker processes .* cannot be copied or pickled"):
                how(venv)
    finally:
        venv.close()
