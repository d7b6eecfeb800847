"""FAST's sampling strategies as vector-env wrappers: DPSA, SGR, and sampling statistics.

DPSA (Dynamic Parallel Sampling Alignment, FAST section III) keeps a finished sub-environment in
"virtual continuation": it is not stepped again (or whatever it returns is discarded), its slot
returns a dummy observation, reward 0 and ``info["valid"][i] = False``, until the share of finished
sub-environments ``rho_t`` reaches ``threshold`` or the rollout clock reaches ``horizon``; then every
sub-environment is reset at once and the survivors are reported **truncated** (never terminated)
with their last observation in ``info["final_obs"]``, so a learner bootstraps V(s_final). The reset
happens inside that step call (Gymnasium's SAME_STEP convention).

SGR (Synchronous Global Reset) resets everything as soon as any sub-environment finishes: the
baseline FAST compares against. ``SamplingStats`` measures a vector env that resets by itself
(per-environment autoreset) with the same statistics.

    import terrazero_env
    from terrazero_env.wrappers import DPSA
    venv = DPSA(terrazero_env.make_vec(8, "quick", autoreset_mode="Disabled"), threshold=0.5, horizon=256)
    obs, info = venv.reset(seed=0)
    obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
    print(info["valid"].mean(), info["stats"]["total"]["mu"])
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

from terrazero_env.foundation.checks import check_float, check_int

__all__ = ["DPSA", "SGR", "SamplingStats", "SamplingCounter"]


class SamplingCounter:
    """FAST's sampling statistics (section II): N_total, N_valid, mu, T_step, T_reset, eta, Phi_raw,
    Phi_eff, mean length of finished valid episodes, resets. Times are wall-clock seconds."""

    def __init__(self) -> None:
        self.n_total = 0
        self.n_valid = 0
        self.t_step = 0.0
        self.t_reset = 0.0
        self.resets = 0
        self.episodes = 0
        self.episode_steps = 0

    def as_dict(self) -> dict[str, float]:
        t = self.t_step + self.t_reset
        return {
            "N_total": self.n_total, "N_valid": self.n_valid,
            "mu": self.n_valid / self.n_total if self.n_total else 0.0,
            "T_step": self.t_step, "T_reset": self.t_reset,
            "eta": self.t_step / t if t > 0 else 0.0,
            "Phi_raw": self.n_total / t if t > 0 else 0.0,
            "Phi_eff": self.n_valid / t if t > 0 else 0.0,
            "mean_episode_length": self.episode_steps / self.episodes if self.episodes else 0.0,
            "episodes": self.episodes, "resets": self.resets,
        }


def _require_disabled(env: VectorEnv, who: str) -> None:
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if AutoresetMode(mode) != AutoresetMode.DISABLED:
        raise ValueError(f"{who} manages resets itself and needs a vector env whose metadata['autoreset_mode'] "
                         f"is AutoresetMode.DISABLED, got {AutoresetMode(mode).name}; build it with "
                         "autoreset_mode='Disabled' (or use terrazero_env.wrappers.make_dpsa_vec for your own envs)")


class DPSA(VectorWrapper):
    """Virtual continuation with a termination-rate-triggered global reset (module docstring).

    ``threshold``: rho in (0, 1]; ``horizon``: the rollout clock limit T_max (steps since the last
    global reset); ``dummy``: what a finished sub-env returns, its ``"last"`` observation or ``"zeros"``;
    ``copy``: as Gymnasium's ``SyncVectorEnv(copy=...)``, True returns a fresh observation array per
    step, False the wrapper's own buffer, filled in place (finished rows included) and valid until the
    next ``step`` or ``reset`` (one pass over the observations instead of two; the trainer uses it).
    ``info`` carries ``valid``, ``rho`` and ``stats`` (``total`` and ``rollout``: since the last
    global reset), plus ``final_obs``/``final_info``/``_final_obs`` on a global reset.
    """

    def __init__(self, env: VectorEnv, threshold: float = 0.5, horizon: int = 256, dummy: str = "last",
                 copy: bool = True):
        super().__init__(env)
        _require_disabled(env, type(self).__name__)
        # types first: True is not a rate and 2.5 is not a number of steps (float() and int() would take them)
        check_float("DPSA threshold", threshold, 0.0, 1.0, lo_open=True)
        check_int("DPSA horizon", horizon, 1)
        if dummy not in ("last", "zeros"):
            raise ValueError(f"dummy must be 'last' or 'zeros', got {dummy!r}")
        self.threshold = float(threshold)
        self.horizon = int(horizon)
        self.dummy = dummy
        if not isinstance(copy, (bool, np.bool_)):
            raise TypeError(f"copy must be a bool, got {copy!r}")
        self.copy = bool(copy)
        self._out: np.ndarray | None = None  # the returned buffer of copy=False, dummy="zeros"
        self.metadata = {**env.metadata, "autoreset_mode": AutoresetMode.SAME_STEP}
        n = env.num_envs
        self._finished = np.zeros(n, bool)  # in virtual continuation (or holds no agent)
        self._real = np.ones(n, bool)  # holds an agent this rollout (native env: slot occupied)
        self._episode_len = np.zeros(n, np.int64)
        self._last_obs: np.ndarray | None = None
        self.clock = 0
        self.total = SamplingCounter()
        self.rollout = SamplingCounter()

    def _global_reset(self, seed: Any = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict, float]:
        """Reset every sub-env; returns observations, info and the seconds it took."""
        t0 = time.perf_counter()
        obs, info = self.env.reset(seed=seed, options=options)
        dt = time.perf_counter() - t0
        self._real = np.asarray(info.get("valid", np.ones(self.num_envs, bool)), bool).copy()
        self._finished = ~self._real
        self._episode_len[:] = 0
        if self._last_obs is not None and self._last_obs.shape == np.shape(obs) and self._last_obs.dtype == obs.dtype:
            np.copyto(self._last_obs, obs)  # the buffer copy=False returns stays the same array
        else:
            self._last_obs = np.array(obs, copy=True)
        self.clock = 0
        return obs, info, dt

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        obs, info, dt = self._global_reset(seed, options)
        self.total.t_reset += dt
        self.total.resets += 1
        self.rollout = SamplingCounter()
        self.rollout.t_reset = dt
        self.rollout.resets = 1
        info = dict(info)
        info["valid"] = self._real.copy()
        return obs, info

    def _dummy_rows(self, obs: np.ndarray, rows: np.ndarray) -> None:
        if rows.any():
            obs[rows] = self._last_obs[rows] if self.dummy == "last" else 0

    def _observations(self, obs: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """This step's observations with the finished rows' dummies; updates the last observations."""
        if not self.copy and self.dummy == "last":  # one masked pass into the buffer this wrapper owns
            np.copyto(self._last_obs, obs, where=valid.reshape(-1, *([1] * (np.ndim(obs) - 1))))
            return self._last_obs
        if self.copy:
            out = np.array(obs, copy=True)
        else:
            if self._out is None or self._out.shape != np.shape(obs):
                self._out = np.empty_like(obs)
            out = self._out
            np.copyto(out, obs)
        self._dummy_rows(out, ~valid)
        if self.dummy == "last":  # invalid rows now hold their last observation: out is the new last
            np.copyto(self._last_obs, out)  # one contiguous copy instead of a masked gather and scatter
        else:
            self._last_obs[valid] = out[valid]
        return out

    def step(self, actions: np.ndarray):
        t0 = time.perf_counter()
        obs, rew, term, trunc, info = self.env.step(actions)
        dt = time.perf_counter() - t0
        rew = np.array(rew, dtype=np.float32, copy=True)
        term = np.array(term, dtype=bool, copy=True)
        trunc = np.array(trunc, dtype=bool, copy=True)
        valid = ~self._finished  # the transition is real iff the sub-env was live before this step
        if "valid" in info:  # a native env also knows which slots held an agent
            valid &= np.asarray(info["valid"], bool)
        rew[~valid] = 0.0
        term &= valid
        trunc &= valid
        obs = self._observations(obs, valid)
        self._episode_len[valid] += 1
        ended = term | trunc
        for c in (self.total, self.rollout):
            c.n_total += int(self._real.sum())
            c.n_valid += int(valid.sum())
            c.t_step += dt
            c.episodes += int(ended.sum())
            c.episode_steps += int(self._episode_len[ended].sum())
        self._finished |= ended
        self.clock += 1
        n_real = int(self._real.sum())
        rho = float((self._finished & self._real).sum()) / n_real if n_real else 1.0
        out_info = {"valid": valid, "rho": rho}
        if "counters" in info:  # the native env's per-slot rule counters, as they stood at this step
            out_info["counters"] = info["counters"]
        if rho >= self.threshold or self.clock >= self.horizon:
            survivors = valid & ~ended
            trunc |= survivors  # cut off by the global reset: bootstrap, do not treat as terminal
            self.total.episodes += int(survivors.sum())
            self.total.episode_steps += int(self._episode_len[survivors].sum())
            self.rollout.episodes += int(survivors.sum())
            self.rollout.episode_steps += int(self._episode_len[survivors].sum())
            live = valid.copy()
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(live):
                final_obs[i] = obs[i].copy()
            final_info = {"valid": live.copy(), "_valid": live.copy()}
            if "counters" in info:
                final_info.update(counters=info["counters"], _counters=live.copy())
            out_info.update(final_obs=final_obs, _final_obs=live, final_info=final_info, _final_info=live)
            out_info["stats"] = {"total": self.total.as_dict(), "rollout": self.rollout.as_dict()}
            obs, _, dt_reset = self._global_reset()
            obs = self._observations(obs, np.ones(self.num_envs, bool))
            self.total.t_reset += dt_reset
            self.total.resets += 1
            self.rollout = SamplingCounter()
            self.rollout.t_reset = dt_reset
            self.rollout.resets = 1
        else:
            out_info["stats"] = {"total": self.total.as_dict(), "rollout": self.rollout.as_dict()}
        return obs, rew, term, trunc, out_info


    def get_state(self) -> dict[str, Any]:
        """This wrapper's continuation state and counters, and (if it has one) the wrapped env's
        ``get_state()``, so a run can be checkpointed and continued exactly."""
        inner = self.env.get_state() if hasattr(self.env, "get_state") else None
        return {"finished": self._finished.copy(), "real": self._real.copy(), "episode_len": self._episode_len.copy(),
                "last_obs": None if self._last_obs is None else self._last_obs.copy(), "clock": self.clock,
                "total": dict(vars(self.total)), "rollout": dict(vars(self.rollout)), "env": inner}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` (same number of sub-environments)."""
        if np.shape(state["finished"]) != self._finished.shape:
            raise ValueError(f"{type(self).__name__} state: saved with {np.shape(state['finished'])} "
                             f"sub-environments, this wrapper has {self._finished.shape}")
        if state["env"] is not None:
            self.env.set_state(state["env"])
        self._finished = np.array(state["finished"], bool)
        self._real = np.array(state["real"], bool)
        self._episode_len = np.array(state["episode_len"], np.int64)
        self._last_obs = None if state["last_obs"] is None else np.array(state["last_obs"])
        self.clock = int(state["clock"])
        for name in ("total", "rollout"):
            counter = SamplingCounter()
            vars(counter).update(state[name])
            setattr(self, name, counter)


class SGR(DPSA):
    """Synchronous Global Reset: every sub-env restarts as soon as any one finishes (FAST's baseline)."""

    def __init__(self, env: VectorEnv, horizon: int = 256, dummy: str = "last", copy: bool = True):
        super().__init__(env, threshold=1.0, horizon=horizon, dummy=dummy, copy=copy)

    def step(self, actions: np.ndarray):
        # Any finished real sub-env triggers the reset: the threshold is one real sub-env's share.
        n_real = max(int(self._real.sum()), 1)
        self.threshold = 1.0 / n_real
        return super().step(actions)


class SamplingStats(VectorWrapper):
    """FAST's statistics for a vector env that resets its sub-envs itself (NEXT_STEP autoreset).

    A transition is valid unless it is the autoreset step that follows an episode end (or the env's
    ``info["valid"]`` says otherwise). Reset time is the time spent in ``reset`` plus, for resets
    done inside ``step``, what the env reports in its ``last_reset_time_s`` attribute (the native env
    does; others count as step time).
    """

    def __init__(self, env: VectorEnv):
        super().__init__(env)
        self.total = SamplingCounter()
        self._pending = np.zeros(env.num_envs, bool)
        self._episode_len = np.zeros(env.num_envs, np.int64)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        t0 = time.perf_counter()
        obs, info = self.env.reset(seed=seed, options=options)
        self.total.t_reset += time.perf_counter() - t0
        self.total.resets += 1
        self._pending[:] = False
        self._episode_len[:] = 0
        return obs, info

    def get_state(self) -> dict[str, Any]:
        """Counters and pending flags, and (if it has one) the wrapped env's ``get_state()``."""
        inner = self.env.get_state() if hasattr(self.env, "get_state") else None
        return {"pending": self._pending.copy(), "episode_len": self._episode_len.copy(),
                "total": dict(vars(self.total)), "env": inner}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`get_state` (same number of sub-environments)."""
        if np.shape(state["pending"]) != self._pending.shape:
            raise ValueError(f"SamplingStats state: saved with {np.shape(state['pending'])} sub-environments, "
                             f"this wrapper has {self._pending.shape}")
        if state["env"] is not None:
            self.env.set_state(state["env"])
        self._pending = np.array(state["pending"], bool)
        self._episode_len = np.array(state["episode_len"], np.int64)
        self.total = SamplingCounter()
        vars(self.total).update(state["total"])

    def step(self, actions: np.ndarray):
        t0 = time.perf_counter()
        obs, rew, term, trunc, info = self.env.step(actions)
        dt = time.perf_counter() - t0
        base = self.env.unwrapped
        inner_reset = float(getattr(base, "last_reset_time_s", 0.0))
        valid = ~self._pending
        if "valid" in info:
            valid &= np.asarray(info["valid"], bool)
        ended = (np.asarray(term, bool) | np.asarray(trunc, bool)) & valid
        self._episode_len[valid] += 1
        c = self.total
        c.n_total += self.num_envs
        c.n_valid += int(valid.sum())
        c.t_step += dt - inner_reset
        c.t_reset += inner_reset
        c.resets += int(getattr(base, "last_worlds_reset", self._pending.sum()))
        c.episodes += int(ended.sum())
        c.episode_steps += int(self._episode_len[ended].sum())
        self._episode_len[ended] = 0
        self._pending = ended
        info = dict(info)
        info["valid"] = valid
        info["stats"] = {"total": c.as_dict()}
        return obs, rew, term, trunc, info
