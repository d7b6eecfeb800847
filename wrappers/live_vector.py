"""A vector env of ordinary single-agent Gymnasium envs that steps only live sub-envs.

Gymnasium's ``SyncVectorEnv``/``AsyncVectorEnv`` in DISABLED autoreset mode refuse to step a
finished sub-env, but DPSA passes an action for every sub-env each step. ``LiveVectorEnv`` steps
only the sub-envs still in an episode (a finished one returns its last observation, reward 0 and no
flags) and resets none by itself, so DPSA can hold finished ones in virtual continuation.
``make_dpsa_vec`` builds it (in-process, or in worker processes writing observations to shared
memory) and wraps it in DPSA:

    from terrazero_env.wrappers import make_dpsa_vec
    venv = make_dpsa_vec("CartPole-v1", num_envs=8, threshold=0.5, horizon=500)
    obs, info = venv.reset(seed=0)
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import (
    CloudpickleWrapper,
    batch_space,
    create_empty_array,
    create_shared_memory,
    read_from_shared_memory,
    write_to_shared_memory,
)

from .dpsa import DPSA

__all__ = ["LiveVectorEnv", "make_dpsa_vec"]


def _worker(index: int, env_fn: CloudpickleWrapper, pipe: Any, shm: Any, obs_space: gym.Space) -> None:
    env = env_fn()
    try:
        while True:
            cmd, data = pipe.recv()
            if cmd == "reset":
                obs, info = env.reset(seed=data[0], options=data[1])
                write_to_shared_memory(obs_space, index, obs, shm)
                pipe.send((None, info))
            elif cmd == "step":
                obs, rew, term, trunc, info = env.step(data)
                write_to_shared_memory(obs_space, index, obs, shm)
                pipe.send(((float(rew), bool(term), bool(trunc)), info))
            elif cmd == "close":
                pipe.send((None, None))
                break
    except Exception as e:  # surface the sub-env's error in the parent
        pipe.send(("error", f"{type(e).__name__}: {e}"))
    finally:
        env.close()


class LiveVectorEnv(VectorEnv):
    """Steps only live sub-envs; never resets one by itself (autoreset mode DISABLED)."""

    metadata = {"autoreset_mode": AutoresetMode.DISABLED}

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], asynchronous: bool = False,
                 context: str | None = None):
        if len(env_fns) == 0:
            raise ValueError("need at least one environment constructor")
        self.num_envs = len(env_fns)
        self.asynchronous = asynchronous
        probe = env_fns[0]()
        self.single_observation_space = probe.observation_space
        self.single_action_space = probe.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**probe.metadata, "autoreset_mode": AutoresetMode.DISABLED}
        self._obs = create_empty_array(self.single_observation_space, self.num_envs)
        self._live = np.zeros(self.num_envs, bool)
        if asynchronous:
            probe.close()
            ctx = mp.get_context(context)
            self._shm = create_shared_memory(self.single_observation_space, self.num_envs, ctx=ctx)
            self._obs = read_from_shared_memory(self.single_observation_space, self._shm, self.num_envs)
            self._pipes, self._procs = [], []
            for i, fn in enumerate(env_fns):
                parent, child = ctx.Pipe()
                p = ctx.Process(target=_worker, args=(i, CloudpickleWrapper(fn), child, self._shm,
                                                      self.single_observation_space), daemon=True)
                p.start()
                child.close()
                self._pipes.append(parent)
                self._procs.append(p)
            self.envs: list[gym.Env] = []
        else:
            self.envs = [probe] + [fn() for fn in env_fns[1:]]

    def _call(self, idx: np.ndarray, cmd: str, payloads: Sequence[Any]) -> list[tuple[Any, Any]]:
        for i, p in zip(idx, payloads):
            self._pipes[i].send((cmd, p))
        out = [self._pipes[i].recv() for i in idx]
        for i, (res, info) in zip(idx, out):
            if isinstance(res, str) and res == "error":
                raise RuntimeError(f"sub-env {i} failed: {info}")
        return out

    def reset(self, *, seed: int | Sequence[int | None] | None = None, options: dict[str, Any] | None = None):
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        idx = np.arange(self.num_envs) if mask is None else np.flatnonzero(np.asarray(mask, bool))
        if seed is None or isinstance(seed, (int, np.integer)):
            seeds = [None if seed is None else int(seed) + int(i) for i in idx]
        else:
            seeds = [seed[i] for i in idx]
        infos: dict[str, Any] = {}
        if self.asynchronous:
            results = self._call(idx, "reset", [(s, options or None) for s in seeds])
            for i, (_, info) in zip(idx, results):
                infos = self._add_info(infos, info, int(i))
        else:
            for i, s in zip(idx, seeds):
                obs, info = self.envs[i].reset(seed=s, options=options or None)
                self._obs[i] = obs
                infos = self._add_info(infos, info, int(i))
        self._live[idx] = True
        return np.array(self._obs, copy=True), infos

    def step(self, actions: Any):
        rew = np.zeros(self.num_envs, np.float64)
        term = np.zeros(self.num_envs, bool)
        trunc = np.zeros(self.num_envs, bool)
        infos: dict[str, Any] = {}
        idx = np.flatnonzero(self._live)
        acts = list(gym.vector.utils.iterate(self.action_space, actions))
        if self.asynchronous:
            for i, ((r, te, tr), info) in zip(idx, self._call(idx, "step", [acts[i] for i in idx])):
                rew[i], term[i], trunc[i] = r, te, tr
                infos = self._add_info(infos, info, int(i))
        else:
            for i in idx:
                obs, r, te, tr, info = self.envs[i].step(acts[i])
                self._obs[i] = obs
                rew[i], term[i], trunc[i] = r, te, tr
                infos = self._add_info(infos, info, int(i))
        self._live[idx] &= ~(term[idx] | trunc[idx])
        valid = np.zeros(self.num_envs, bool)
        valid[idx] = True
        infos["valid"] = valid
        return np.array(self._obs, copy=True), rew, term, trunc, infos

    def close_extras(self, **kwargs: Any) -> None:
        if self.asynchronous:
            for pipe, proc in zip(self._pipes, self._procs):
                try:
                    pipe.send(("close", None))
                    pipe.recv()
                except (BrokenPipeError, EOFError):  # the worker is already gone
                    proc.terminate()
                proc.join(timeout=5)
        else:
            for env in self.envs:
                env.close()


def make_dpsa_vec(env_fns_or_id: str | Sequence[Callable[[], gym.Env]], num_envs: int | None = None,
                  threshold: float = 0.5, horizon: int = 256, asynchronous: bool = False, dummy: str = "last",
                  **make_kwargs: Any) -> DPSA:
    """DPSA over ``num_envs`` copies of a registered env id (or over the given constructors),
    stepping only live sub-envs, in this process or (``asynchronous=True``) in worker processes."""
    if isinstance(env_fns_or_id, str):
        if num_envs is None or num_envs < 1:
            raise ValueError("num_envs must be a positive integer when an env id is given")
        env_id = env_fns_or_id
        fns = [lambda: gym.make(env_id, **make_kwargs)] * num_envs
    else:
        fns = list(env_fns_or_id)
        if num_envs is not None and num_envs != len(fns):
            raise ValueError(f"num_envs={num_envs} but {len(fns)} constructors were given")
    return DPSA(LiveVectorEnv(fns, asynchronous=asynchronous), threshold=threshold, horizon=horizon, dummy=dummy)
