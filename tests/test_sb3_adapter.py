"""SB3VecEnv: Gymnasium vector envs in every autoreset mode seen through Stable-Baselines3's VecEnv API,
checked on hand-scripted episodes, against SB3's own DummyVecEnv, and by a short PPO run."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv, VectorEnv
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers import TimeLimit

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecCheckNan, VecMonitor  # noqa: E402
from terrazero_env.wrappers import SB3VecEnv  # noqa: E402

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]


class Scripted(gym.Env):
    """Observation ``[env_id, episode, t]``; reward ``10 * episode + t + action / 2``.

    Episode ``k`` lasts ``lengths[k % len(lengths)]`` steps, or, without ``lengths``, a length drawn
    from ``np_random`` in 1..5 at reset (so the seed decides). Step info ``{"ep", "t"}``, reset info
    ``{"reset_ep"}``; ``n_steps`` and ``n_resets`` count calls.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env_id: int = 0, lengths: list[int] | None = None) -> None:
        self.observation_space = spaces.Box(-1.0, 1e6, (3,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.env_id, self.lengths = env_id, lengths
        self.episode, self.t, self.length = -1, 0, 0
        self.n_steps = self.n_resets = 0
        self.last_options: dict[str, Any] | None = None

    def _obs(self) -> np.ndarray:
        return np.array([self.env_id, self.episode, self.t], np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self.episode += 1
        self.n_resets += 1
        self.t = 0
        self.last_options = options
        if self.lengths:
            self.length = self.lengths[self.episode % len(self.lengths)]
        else:
            self.length = int(self.np_random.integers(1, 6))
        return self._obs(), {"reset_ep": self.episode}

    def step(self, action):
        assert self.t < self.length, "stepped past the end of an episode"
        self.t += 1
        self.n_steps += 1
        reward = 10.0 * self.episode + self.t + 0.5 * int(action)
        return self._obs(), reward, self.t >= self.length, False, {"ep": self.episode, "t": self.t}


def scripted_fns(
    n: int, lengths: list[list[int]] | None = None, limit: int = 4
) -> list[Callable[[], gym.Env]]:
    return [
        (lambda i=i: TimeLimit(Scripted(i, lengths[i] if lengths else None), max_episode_steps=limit))
        for i in range(n)
    ]


def make_vector(kind: str, mode: AutoresetMode, fns: list[Callable[[], gym.Env]]) -> VectorEnv:
    """``sync``, ``sync_shared`` (returns its own observation buffer, rewritten by every call) or ``async``."""
    if kind.startswith("sync"):
        return SyncVectorEnv(fns, copy=kind == "sync", autoreset_mode=mode)
    return AsyncVectorEnv(fns, autoreset_mode=mode, context="fork")


def assert_same(a: Any, b: Any, where: str) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: {a} != {b}"
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
        assert np.asarray(a).dtype == np.asarray(b).dtype, where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


# Two sub-envs under TimeLimit(3). Env 0: episodes of 2 (terminated), 4 (truncated at 3), 2, ...
# Env 1: 1, 3 (terminated and truncated at once: not a time-limit truncation), 1, 3, ...
# Step k takes actions [k % 2, 1 - k % 2]. Rows: obs, rewards, dones, TimeLimit.truncated, terminal obs.
SCRIPT = [
    ([[0, 0, 1], [1, 1, 0]], [1.0, 1.5], [False, True], [False, False], [None, [1, 0, 1]]),
    ([[0, 1, 0], [1, 1, 1]], [2.5, 11.0], [True, False], [False, False], [[0, 0, 2], None]),
    ([[0, 1, 1], [1, 1, 2]], [11.0, 12.5], [False, False], [False, False], [None, None]),
    ([[0, 1, 2], [1, 2, 0]], [12.5, 13.0], [False, True], [False, False], [None, [1, 1, 3]]),
    ([[0, 2, 0], [1, 3, 0]], [13.0, 21.5], [True, True], [True, False], [[0, 1, 3], [1, 2, 1]]),
    ([[0, 2, 1], [1, 3, 1]], [21.5, 31.0], [False, False], [False, False], [None, None]),
]


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_scripted_episodes_exact(mode: AutoresetMode) -> None:
    """Hand-computed obs, rewards, dones, TimeLimit.truncated, terminal observations and infos."""
    venv = SyncVectorEnv(scripted_fns(2, [[2, 4], [1, 3]], limit=3), autoreset_mode=mode)
    env = SB3VecEnv(venv)
    assert env.autoreset_mode is mode
    np.testing.assert_array_equal(env.reset(), [[0, 0, 0], [1, 0, 0]])
    assert env.reset_infos == [{"reset_ep": 0}, {"reset_ep": 0}]
    for k, (obs, rewards, dones, time_limit, terminal) in enumerate(SCRIPT):
        got_obs, got_rewards, got_dones, infos = env.step(np.array([k % 2, 1 - k % 2]))
        assert got_obs.dtype == np.float32 and got_rewards.dtype == np.float32 and got_dones.dtype == np.bool_
        np.testing.assert_array_equal(got_obs, obs, err_msg=f"step {k}")
        np.testing.assert_array_equal(got_rewards, rewards, err_msg=f"step {k}")
        np.testing.assert_array_equal(got_dones, dones, err_msg=f"step {k}")
        for i in range(2):
            assert infos[i]["TimeLimit.truncated"] is time_limit[i], f"step {k} env {i}"
            if terminal[i] is None:
                assert "terminal_observation" not in infos[i]
                assert infos[i]["t"] == obs[i][2]
            else:
                np.testing.assert_array_equal(infos[i]["terminal_observation"], terminal[i])
                # the info is the finished episode's last step info; its reset info is in reset_infos
                assert (infos[i]["ep"], infos[i]["t"]) == (terminal[i][1], terminal[i][2])
                assert env.reset_infos[i] == {"reset_ep": obs[i][1]}
        if mode is AutoresetMode.NEXT_STEP:
            # the masked reset cleared the vector env's pending autoreset of the finished sub-envs
            assert not venv._autoreset_envs.any()
    env.close()


@pytest.mark.parametrize(
    "kind,mode",
    [("sync", m) for m in MODES]
    + [
        ("sync_shared", AutoresetMode.NEXT_STEP),
        ("async", AutoresetMode.NEXT_STEP),
        ("async", AutoresetMode.SAME_STEP),
    ],
    ids=lambda p: p if isinstance(p, str) else p.name,
)
def test_no_step_skipped_or_duplicated(kind: str, mode: AutoresetMode) -> None:
    """Random episode lengths: every transition continues its episode by one step or ends it and
    starts the next episode at t = 0, and the sub-envs were stepped exactly once per adapter step."""
    n, steps = 3, 120
    env = SB3VecEnv(make_vector(kind, mode, scripted_fns(n)))
    env.seed(11)
    obs = env.reset()
    rng = np.random.default_rng(0)
    episodes = np.zeros(n, int)
    for _ in range(steps):
        new_obs, _, dones, infos = env.step(rng.integers(0, 2, n))
        for i in range(n):
            _, ep, t = obs[i]
            if dones[i]:
                np.testing.assert_array_equal(infos[i]["terminal_observation"], [i, ep, t + 1])
                np.testing.assert_array_equal(new_obs[i], [i, ep + 1, 0])
                episodes[i] += 1
            else:
                np.testing.assert_array_equal(new_obs[i], [i, ep, t + 1])
        obs = new_obs
    assert env.get_attr("n_steps") == [steps] * n
    assert env.get_attr("n_resets") == list(episodes + 1)
    assert episodes.min() > 10
    env.close()


@pytest.mark.parametrize(
    "kind,mode",
    [("sync", m) for m in MODES] + [("async", AutoresetMode.DISABLED)],
    ids=lambda p: p if isinstance(p, str) else p.name,
)
def test_matches_dummy_vec_env(kind: str, mode: AutoresetMode) -> None:
    """Oracle: with the same seeds and actions the adapter's stream (obs, rewards, dones, infos with
    terminal_observation, reset_infos) equals SB3's DummyVecEnv over the same envs, in every mode."""
    n, steps = 3, 150
    fns = scripted_fns(n, limit=3)
    oracle, env = DummyVecEnv(fns), SB3VecEnv(make_vector(kind, mode, fns))
    for e in (oracle, env):
        e.seed(123)
    assert_same(env.reset(), oracle.reset(), "reset obs")
    assert_same(env.reset_infos, oracle.reset_infos, "reset infos")
    rng = np.random.default_rng(5)
    for k in range(steps):
        actions = rng.integers(0, 2, n)
        for got, want, name in zip(
            env.step(actions), oracle.step(actions), ("obs", "rewards", "dones", "infos"), strict=True
        ):
            if name == "infos":
                assert len(got) == n
                for i in range(n):
                    assert_same(got[i], want[i], f"step {k} infos[{i}]")
            else:
                assert_same(got, want, f"step {k} {name}")
        assert_same(env.reset_infos, oracle.reset_infos, f"step {k} reset_infos")
    env.close()
    oracle.close()


class BatchedToy(VectorEnv):
    """A native batched vector env (no sub-env objects), autoreset DISABLED, partial resets through
    ``reset_mask``. Sub-env ``i``'s episodes last ``i + 2`` steps; obs ``[t]``. Infos: ``valid``
    (with a ``_valid`` mask that is true for sub-env 0 only) and ``score`` for even sub-envs only."""

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(self, num_envs: int = 3) -> None:
        self.num_envs = num_envs
        self.single_observation_space = spaces.Box(0.0, 100.0, (1,), np.float32)
        self.single_action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.t = np.zeros(num_envs, int)
        self.step_count = 0
        self.bumps = 0
        self.last_actions: np.ndarray | None = None

    def reset(self, *, seed=None, options=None):
        mask = (options or {}).get("reset_mask", np.ones(self.num_envs, bool))
        self.t[mask] = 0
        return self.t[:, None].astype(np.float32), {}

    def step(self, actions):
        assert (self.t < np.arange(self.num_envs) + 2).all(), "stepped a finished sub-env"
        self.last_actions = actions
        self.step_count += 1
        self.t += 1
        terminated = self.t >= np.arange(self.num_envs) + 2
        valid = (np.arange(self.num_envs) + self.step_count) % 2 == 0
        infos = {
            "valid": valid,
            "_valid": np.arange(self.num_envs) == 0,
            "score": np.full(self.num_envs, float(self.step_count)),
            "_score": np.arange(self.num_envs) % 2 == 0,
        }
        return (
            self.t[:, None].astype(np.float32),
            np.ones(self.num_envs),
            terminated,
            np.zeros(self.num_envs, bool),
            infos,
        )

    def bump(self, k: int) -> int:
        self.bumps += k
        return self.bumps

    def render(self) -> np.ndarray:
        return np.zeros((4, 5, 3), np.uint8)  # one frame for the whole batch


def test_native_batched_env_valid_infos_and_access() -> None:
    """``valid`` reaches every sub-env's info on every step; masked keys only where their mask is set;
    a native env's attribute and method access, its single render frame, and Box action conversion."""
    native = BatchedToy(3)
    env = SB3VecEnv(native)
    np.testing.assert_array_equal(env.reset(), [[0], [0], [0]])
    for k in range(1, 8):
        obs, rewards, dones, infos = env.step(np.zeros((3, 2)))  # float64 in, float32 to the env
        assert native.last_actions.dtype == np.float32 and native.last_actions.shape == (3, 2)
        for i in range(3):
            assert infos[i]["valid"] is bool((i + k) % 2 == 0)
            assert ("score" in infos[i]) is (i % 2 == 0)
            assert dones[i] == (k % (i + 2) == 0)
            np.testing.assert_array_equal(obs[i], [0 if dones[i] else k % (i + 2)])
    assert env.get_attr("step_count") == [7, 7, 7]
    assert env.get_attr("step_count", indices=[1]) == [7]
    assert env.env_method("bump", 2) == [2, 2, 2] and native.bumps == 2  # called once
    env.set_attr("bumps", 10)
    assert native.bumps == 10
    with pytest.raises(ValueError, match="can only address all 3 sub-envs"):
        env.env_method("bump", 1, indices=[0])
    with pytest.raises(ValueError, match="can only address all 3 sub-envs"):
        env.set_attr("bumps", 0, indices=1)
    assert env.env_is_wrapped(TimeLimit) == [False, False, False]
    assert [frame.shape for frame in env.get_images()] == [(4, 5, 3)]
    with pytest.raises(
        ValueError, match=r"expected actions of shape \(3, 2\) and dtype float32.*got shape \(2, 2\)"
    ):
        env.step(np.zeros((2, 2)))


def test_discrete_actions_sub_env_access_and_options() -> None:
    """Discrete actions: (n,) or (n, 1), integral floats accepted; wrong count or fractions rejected
    with the expected shape and dtype. Seeds and options reach the sub-envs at the next reset."""
    env = SB3VecEnv(SyncVectorEnv(scripted_fns(2, [[5], [5]])))
    env.seed(40)
    env.set_options({"level": 3})
    env.reset()
    assert env.get_attr("np_random_seed") == [40, 41]
    assert env.get_attr("last_options") == [{"level": 3}, {"level": 3}]
    env.reset()  # seeds and options are used once
    assert env.get_attr("last_options") == [None, None]
    env.step(np.array([[1], [0]]))
    _, rewards, _, _ = env.step(np.array([1.0, 0.0]))
    np.testing.assert_array_equal(rewards, [12.5, 12.0])
    with pytest.raises(
        ValueError, match=r"expected actions of shape \(2,\) and dtype int64.*got shape \(3,\)"
    ):
        env.step(np.array([0, 1, 1]))
    with pytest.raises(TypeError, match=r"expected integer actions of shape \(2,\) and dtype int64"):
        env.step(np.array([0.5, 1.0]))
    env.set_options([{"level": 1}, {"level": 2}])
    with pytest.raises(ValueError, match="one reset options dict for all sub-envs"):
        env.reset()
    env.set_attr("env_id", 7, indices=[1])
    assert env.get_attr("env_id") == [0, 7]
    assert env.env_method("get_wrapper_attr", "length", indices=0) == [5]
    assert env.env_is_wrapped(TimeLimit) == [True, True]
    env.close()


def test_async_sub_env_access_and_shared_memory_guard() -> None:
    """AsyncVectorEnv: attributes per sub-env through its call API; with shared_memory=False its
    NEXT_STEP autoreset survives reset(), which the adapter refuses."""
    env = SB3VecEnv(AsyncVectorEnv(scripted_fns(2), context="fork"))
    env.reset()
    env.set_attr("env_id", 9, indices=[0])
    assert env.get_attr("env_id") == [9, 1] and env.get_attr("env_id", indices=[1]) == [1]
    assert env.env_method("get_wrapper_attr", "n_resets") == [1, 1]
    assert env.env_is_wrapped(TimeLimit) == [False, False]
    env.close()
    unsafe = AsyncVectorEnv(scripted_fns(2), shared_memory=False, context="fork")
    with pytest.raises(ValueError, match="shared_memory=False"):
        SB3VecEnv(unsafe)
    unsafe.close()


def test_vec_check_nan_and_ppo_smoke() -> None:
    """SB3's VecCheckNan finds nothing over a few steps, and PPO trains with VecMonitor recording episodes."""
    checked = VecCheckNan(SB3VecEnv(SyncVectorEnv(scripted_fns(2))), raise_exception=True)
    checked.reset()
    for _ in range(20):
        checked.step(np.array([checked.action_space.sample() for _ in range(2)]))
    checked.close()

    env = VecMonitor(SB3VecEnv(SyncVectorEnv(scripted_fns(2), autoreset_mode=AutoresetMode.NEXT_STEP)))
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.learn(256)
    assert len(model.ep_info_buffer) > 0
    assert all(info["l"] <= 4 for info in model.ep_info_buffer)
    env.close()


def test_wrappers_package_imports_without_torch() -> None:
    """``terrazero_env.wrappers`` loads neither torch nor stable-baselines3 until SB3VecEnv is used."""
    code = (
        "import sys, terrazero_env.wrappers; "
        "assert 'torch' not in sys.modules and 'stable_baselines3' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert SB3VecEnv.__module__ == "terrazero_env.wrappers.sb3"
