"""DPSA, SGR and the sampling statistics, on a scripted env whose episode lengths are known."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from terrazero_env.wrappers import DPSA, SGR, LiveVectorEnv, SamplingStats, make_dpsa_vec

import terrazero_env


class ScriptedEnv(gym.Env):
    """Episode k of this env lasts ``lengths[k % len(lengths)]`` steps and then terminates.
    Observation: (episode counter, step in episode); reward 1 per step."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (2,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, lengths):
        self.lengths = list(lengths)
        self.episode = -1
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.episode += 1
        self.t = 0
        return np.array([self.episode, 0.0]), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.lengths[self.episode % len(self.lengths)]
        return np.array([self.episode, float(self.t)]), 1.0, done, False, {}


LENGTHS = [[3, 9], [5], [8, 2], [12]]  # four sub-envs


def live_vec():
    return LiveVectorEnv([lambda lens=lens: ScriptedEnv(lens) for lens in LENGTHS])


def run(venv, steps):
    venv.reset(seed=0)
    out = []
    for _ in range(steps):
        out.append(venv.step(np.zeros(venv.num_envs, np.int64)))
    return out


def test_global_reset_happens_exactly_when_rho_first_reaches_the_threshold():
    venv = DPSA(live_vec(), threshold=0.5, horizon=100)
    steps = run(venv, 5)
    # env 0 ends at step 3 (rho 1/4), env 1 at step 5 (rho 2/4 = threshold): reset inside step 5.
    assert [s[4]["rho"] for s in steps] == [0.0, 0.0, 0.25, 0.25, 0.5]
    assert all("final_obs" not in s[4] for s in steps[:4]) and "final_obs" in steps[4][4]
    obs = steps[4][0]
    np.testing.assert_array_equal(obs[:, 1], 0.0)  # the new episodes' first observations
    np.testing.assert_array_equal(obs[:, 0], [1, 1, 1, 1])


def test_survivors_are_truncated_with_final_obs_never_terminated():
    venv = DPSA(live_vec(), threshold=0.5, horizon=100)
    obs, rew, term, trunc, info = run(venv, 5)[-1]
    assert term.tolist() == [False, True, False, False]  # env 1 really ended at step 5
    assert trunc.tolist() == [False, False, True, True]  # envs 2 and 3 were cut off
    assert info["_final_obs"].tolist() == [False, True, True, True]  # env 0 was already padding
    np.testing.assert_array_equal(info["final_obs"][2], [0, 5])
    np.testing.assert_array_equal(info["final_obs"][3], [0, 5])


def test_invalid_slots_never_carry_reward_or_flags():
    venv = DPSA(live_vec(), threshold=1.0, horizon=30)
    for obs, rew, term, trunc, info in run(venv, 60):
        v = info["valid"]
        assert (rew[~v] == 0).all() and not term[~v].any() and not trunc[~v].any()


def test_dummy_observation_is_the_last_one_or_zeros():
    for dummy, want in (("last", [0, 3]), ("zeros", [0, 0])):
        venv = DPSA(live_vec(), threshold=1.0, horizon=100, dummy=dummy)
        steps = run(venv, 4)
        np.testing.assert_array_equal(steps[3][0][0], want)  # env 0 finished at step 3


@pytest.mark.parametrize("dummy", ["last", "zeros"])
@pytest.mark.parametrize("wrapper", ["dpsa", "sgr"])
def test_copy_false_returns_its_own_buffer_with_the_same_observations(dummy, wrapper):
    def make(copy):
        if wrapper == "sgr":
            return SGR(live_vec(), horizon=7, dummy=dummy, copy=copy)
        return DPSA(live_vec(), threshold=0.5, horizon=7, dummy=dummy, copy=copy)

    fresh, owned = make(True), make(False)
    fresh.reset(seed=0)
    owned.reset(seed=0)
    buffers = set()
    for _ in range(40):  # several global resets, by rate and by the horizon
        a = fresh.step(np.zeros(4, np.int64))
        b = owned.step(np.zeros(4, np.int64))
        np.testing.assert_array_equal(a[0], b[0])
        for x, y in zip(a[1:4], b[1:4]):
            np.testing.assert_array_equal(x, y)
        if "final_obs" in a[4]:
            for i in np.flatnonzero(a[4]["_final_obs"]):
                np.testing.assert_array_equal(a[4]["final_obs"][i], b[4]["final_obs"][i])
        buffers.add(id(b[0]))
    assert len(buffers) == 1  # copy=False: one array, filled in place
    assert a[0] is not fresh.step(np.zeros(4, np.int64))[0]


def test_copy_must_be_a_bool():
    with pytest.raises(TypeError, match="copy must be a bool"):
        DPSA(live_vec(), copy="no")


def test_statistics_equal_hand_counted_values():
    venv = DPSA(live_vec(), threshold=0.5, horizon=100)
    info = run(venv, 5)[-1][4]
    s = info["stats"]["rollout"]
    # 5 steps x 4 envs; env 0 padded for steps 4 and 5.
    assert s["N_total"] == 20 and s["N_valid"] == 18 and s["mu"] == pytest.approx(0.9)
    # Episodes: env 0 (3 steps) and env 1 (5 steps) ended; envs 2 and 3 truncated at 5 steps.
    assert s["episodes"] == 4 and s["mean_episode_length"] == pytest.approx((3 + 5 + 5 + 5) / 4)
    assert 0 < s["eta"] <= 1 and s["Phi_eff"] == pytest.approx(s["N_valid"] / (s["T_step"] + s["T_reset"]))
    assert info["stats"]["total"]["resets"] == 1  # the initial reset; the step's reset starts the next rollout


def test_horizon_forces_a_global_reset():
    venv = DPSA(live_vec(), threshold=1.0, horizon=4)
    steps = run(venv, 4)
    assert "final_obs" in steps[3][4] and steps[3][3][1:].all()  # all but env 0 truncated


def test_dpsa_with_threshold_one_over_n_is_sgr():
    a = run(DPSA(live_vec(), threshold=1 / 4, horizon=50), 40)
    b = run(SGR(live_vec(), horizon=50), 40)
    for x, y in zip(a, b):
        for u, v in zip(x[:4], y[:4]):
            np.testing.assert_array_equal(u, v)
        np.testing.assert_array_equal(x[4]["valid"], y[4]["valid"])


def test_wrong_autoreset_mode_is_refused():
    sync = SyncVectorEnv([lambda: ScriptedEnv([3])] * 2)
    with pytest.raises(ValueError, match="autoreset_mode'\\] is AutoresetMode.DISABLED, got NEXT_STEP"):
        DPSA(sync)
    with pytest.raises(ValueError, match=r"DPSA threshold: a number in \(0.0, 1.0\], got 0.0"):
        DPSA(live_vec(), threshold=0.0)


@pytest.mark.parametrize("kwargs, message", [
    ({"threshold": True}, "DPSA threshold: a number"), ({"threshold": "0.5"}, "DPSA threshold: a number"),
    ({"threshold": float("nan")}, "DPSA threshold: a finite number"), ({"horizon": 2.5}, "DPSA horizon: an integer"),
    ({"horizon": True}, "DPSA horizon: an integer"), ({"horizon": 0}, "DPSA horizon"),
])
def test_dpsa_checks_the_types_of_its_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DPSA(live_vec(), **kwargs)


def test_sampling_stats_for_per_env_autoreset():
    venv = SamplingStats(SyncVectorEnv([lambda lens=lens: ScriptedEnv(lens) for lens in LENGTHS]))
    info = run(venv, 6)[-1][4]
    s = info["stats"]["total"]
    # Autoreset steps after an episode end are invalid: env 0 ends at 3 -> step 4 invalid;
    # env 1 ends at 5 -> step 6 invalid.
    assert s["N_total"] == 24 and s["N_valid"] == 22 and s["episodes"] == 2


@pytest.mark.slow
def test_make_dpsa_vec_steps_only_live_envs_in_process_and_in_workers():
    for asynchronous in (False, True):
        venv = make_dpsa_vec([lambda lens=lens: ScriptedEnv(lens) for lens in LENGTHS], threshold=1.0,
                             horizon=100, asynchronous=asynchronous)
        steps = run(venv, 6)
        # env 0 is not stepped after its end: its observation stays (0, 3) and it is invalid.
        np.testing.assert_array_equal(steps[5][0][0], [0, 3])
        assert steps[5][4]["valid"].tolist() == [False, False, True, True]
        venv.close()


def test_native_env_resets_each_world_once_per_global_reset():
    inner = terrazero_env.make_vec(4, "quick", autoreset_mode=AutoresetMode.DISABLED, episode_length=20)
    venv = DPSA(inner, threshold=0.5, horizon=20)
    venv.reset(seed=0)
    resets = 0
    for _ in range(60):
        before = inner.engine.world_steps.copy()
        _, rew, term, trunc, info = venv.step(np.zeros(venv.num_envs, np.int64))
        if "final_obs" in info:
            resets += 1
            assert (inner.engine.world_steps == 0).all() and (before > 0).all()
        assert (rew[~info["valid"]] == 0).all()
        # Slots with no agent are never valid and do not count towards rho.
    assert resets >= 3
    assert info["stats"]["total"]["mu"] < 1.0


def test_rule_counters_reach_every_finished_episode_through_the_sb3_adapter():
    """Each finished episode's info carries its rule counters, also for the survivors DPSA truncates at
    a global reset (Gymnasium's SAME_STEP final_info): the trainer's goal and collision rates read them."""
    from stable_baselines3.common.vec_env import VecMonitor
    from terrazero_env.wrappers import SB3VecEnv

    venv = VecMonitor(SB3VecEnv(DPSA(terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled"),
                                     threshold=0.5, horizon=64)))
    venv.reset()
    engine = venv.venv.vector_env.env.engine
    coast = int(np.argmin(np.abs(np.asarray(engine.action_values(0))).sum(axis=1)))  # zero jerk
    goal = list(terrazero_env.engine.COUNTER_NAMES).index("goal_reached")
    truncated_goals = episodes = 0
    for _ in range(400):
        _, _, dones, infos = venv.step(np.full(venv.num_envs, coast))
        for i in np.flatnonzero(dones):
            if infos[i].get("valid", True):
                episodes += 1
                truncated_goals += int(infos[i]["TimeLimit.truncated"] and infos[i]["counters"][goal] > 0)
    assert episodes > 20 and truncated_goals > 0
