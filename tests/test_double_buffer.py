"""DoubleBufferedEnv (two vector envs as one, one half stepping on a worker thread), and PPO on it,
which steps it as one env through its one collection loop."""

import copy
import pickle

import numpy as np
import pytest
from terrazero_env.wrappers import DPSA, DoubleBufferedEnv
from terrazero_env.wrappers.double_buffer import join_infos

import terrazero_env
from terrazero_env.config.io import load_config


def _half(num_worlds=2):
    cfg = load_config("quick").with_overrides(num_worlds=num_worlds)
    return DPSA(terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled"), horizon=cfg.episode_length)


def _pair():
    return DoubleBufferedEnv(_half(), _half())


def _actions(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, env.single_action_space.n, size=(steps, env.num_envs))


def _assert_step_equal(a, b):
    for x, y in zip(a[:4], b[:4], strict=True):
        np.testing.assert_array_equal(x, y)
    assert a[4].keys() == b[4].keys()
    np.testing.assert_array_equal(a[4]["valid"], b[4]["valid"])
    np.testing.assert_array_equal(a[4]["counters"], b[4]["counters"])


def test_threaded_halves_give_the_joined_step_exactly():
    """step_async/step_wait per half (on the worker thread) returns what the joined step returns,
    over enough steps for DPSA's global resets (final observations joined with None for the other
    half's rows)."""
    one, two = _pair(), _pair()
    o1, _ = one.reset(seed=3)
    o2, _ = two.reset(seed=3)
    np.testing.assert_array_equal(o1, o2)
    assert o1.shape == (16, *one.single_observation_space.shape)
    resets = 0
    for a in _actions(one, 160):
        joined = one.step(a)
        two.step_async(0, a[:8])
        first = two.step_wait(0)
        two.step_async(1, a[8:])
        halves = two.join([first, two.step_wait(1)])
        _assert_step_equal(joined, halves)
        if "final_obs" in joined[4]:
            resets += 1
            final = joined[4]["final_obs"]
            assert final.shape == (16,) and final.dtype == object
            assert all((f is None) == (not m) for f, m in zip(final, joined[4]["_final_obs"], strict=True))
    assert resets >= 1
    assert one.total.n_total == one.halves[0].total.n_total + one.halves[1].total.n_total > 0
    one.close()
    two.close()


def test_the_halves_are_seeded_apart_and_reproducibly():
    env = _pair()
    obs, _ = env.reset(seed=5)
    assert not np.array_equal(obs[:8], obs[8:])  # two streams, not one seed twice
    again, _ = env.reset(seed=5)
    np.testing.assert_array_equal(obs, again)
    env.close()


def test_join_infos_fills_what_one_half_lacks():
    a = {"valid": np.array([True, False]), "rho": 0.5, "final_obs": np.array([None, np.zeros(2)], dtype=object),
         "final_info": {"counters": np.ones((2, 3), np.int32)}}
    b = {"valid": np.array([True, True, True]), "rho": 0.1}
    out = join_infos((a, b), (2, 3))
    np.testing.assert_array_equal(out["valid"], [True, False, True, True, True])
    assert out["rho"] == (0.5, 0.1)
    assert out["final_obs"].dtype == object and list(out["final_obs"][2:]) == [None, None, None]
    np.testing.assert_array_equal(out["final_info"]["counters"], np.r_[np.ones((2, 3)), np.zeros((3, 3))])
    assert out["final_info"]["counters"].dtype == np.int32


def test_misuse_is_refused_with_a_message():
    env = _pair()
    env.reset(seed=0)
    with pytest.raises(ValueError, match="half 0 takes 8 actions"):
        env.step_async(0, np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="half must be 0 or 1"):
        env.step_async(2, np.zeros(8, np.int64))
    with pytest.raises(RuntimeError, match="half 1 is not stepping"):
        env.step_wait(1)
    with pytest.raises(ValueError, match="16 rows"):
        env.step(np.zeros(8, np.int64))
    env.step_async(0, np.zeros(8, np.int64))
    with pytest.raises(RuntimeError, match="half 0 is already stepping"):
        env.step_async(0, np.zeros(8, np.int64))
    with pytest.raises(RuntimeError, match="still stepping"):
        env.step(np.zeros(16, np.int64))
    env.step_wait(0)
    env.close()
    small = _half(num_worlds=1)
    cfg = load_config("planner").with_overrides(num_worlds=1)
    other = DPSA(terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled"))
    with pytest.raises(ValueError, match="same single observation space"):
        DoubleBufferedEnv(small, other)


def test_state_pickle_and_deepcopy_continue_identically():
    env = _pair()
    env.reset(seed=1)
    acts = _actions(env, 30, seed=1)
    for a in acts[:10]:
        env.step(a)
    state = env.get_state()
    clone = pickle.loads(pickle.dumps(env))
    twin = copy.deepcopy(env)
    rest = [env.step(a) for a in acts[10:]]
    env.set_state(state)
    for other in (env, clone, twin):
        for a, expected in zip(acts[10:], rest, strict=True):
            _assert_step_equal(other.step(a), expected)
    for e in (env, clone, twin):
        e.close()


# ------------------------------------------------------------------------------ PPO on the pair


def _model_on_halves(seed=0):
    torch = pytest.importorskip("torch")
    pytest.importorskip("stable_baselines3")
    from terrazero_env.agents import PPO

    torch.set_num_threads(1)
    return PPO("DeepSetsPolicy", _pair(), seed=seed, n_steps=48, num_minibatches=2, n_epochs=1,
               policy_kwargs={"ego_hidden": 8, "entity_hidden": 8, "trunk": [16]})


def test_ppo_rollout_on_the_pair_replays_through_the_halves_exactly():
    """PPO steps the pair as one vector env (its array path, one loop). The oracle: the stored
    actions, replayed through a fresh pair built and seeded the same way, give back every stored
    observation, reward and flag; and a second run repeats the first."""
    torch = pytest.importorskip("torch")
    from terrazero_env.agents.collect import array_vector_env

    model = _model_on_halves()
    model.learn(48 * 16)
    buf = model.rollout_buffer
    assert model.episode_tally is not None  # the array path collected the rollout
    assert bool((buf.dones & buf.valid).any())  # episodes ended within the rollout

    fresh = _model_on_halves()
    obs0 = fresh.env.reset()
    vec = array_vector_env(fresh.env)
    assert isinstance(vec, DoubleBufferedEnv)
    np.testing.assert_array_equal(obs0, buf.observations[0].numpy())
    for t in range(buf.buffer_size):
        obs, rew, term, trunc, info = vec.step(buf.actions[t, :, 0].long().numpy())
        valid = np.asarray(info["valid"], bool)
        np.testing.assert_array_equal(rew, buf.rewards[t].numpy())
        np.testing.assert_array_equal(valid, buf.valid[t].numpy())
        np.testing.assert_array_equal(term, buf.terminated[t].numpy())
        assert not ((term | trunc) & ~buf.dones[t].numpy()).any()  # stored dones also end traces before padding
        if t + 1 < buf.buffer_size:
            np.testing.assert_array_equal(obs, buf.observations[t + 1].numpy())

    # Each step's actions were sampled from that step's observations: the initial
    # policy (the fresh model's, same seed) gives the stored log-probabilities and values back.
    with torch.no_grad():
        for t in range(buf.buffer_size):
            values, log_prob, _ = fresh.policy.evaluate_actions(buf.observations[t], buf.actions[t, :, 0].long())
            torch.testing.assert_close(log_prob, buf.log_probs[t], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(values.flatten(), buf.values[t], rtol=1e-5, atol=1e-6)

    again = _model_on_halves()
    again.learn(48 * 16)
    for name in ("observations", "actions", "rewards", "values", "log_probs", "advantages"):
        torch.testing.assert_close(getattr(again.rollout_buffer, name), getattr(buf, name), rtol=0, atol=0, msg=name)
    for p, q in zip(again.policy.parameters(), model.policy.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
