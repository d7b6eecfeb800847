"""Two vector envs stepped as one, each also steppable on a worker thread: the double buffering of
EnvPool.

:class:`DoubleBufferedEnv` joins two vector envs (in training, two native envs of half the worlds
each, each under its own DPSA or SGR wrapper) into one of ``n_0 + n_1`` sub-envs. Its :meth:`step`
steps the first half, then the second, and concatenates what they return, so it is an ordinary
Gymnasium vector env for any client. A trainer that wants the overlap calls :meth:`step_async` for
one half and computes the other half's actions while that step runs on the worker thread (the engine
releases the GIL while it steps its worlds), then :meth:`step_wait`: at every moment one half's worlds
step while the policy runs on the other's observations (``terrazero_env.agents.PPO`` does not: it
steps any vector env, this one included, through :meth:`step`; overlapping the halves in its rollout
showed no reliable gain on two cores, BENCHMARKS.md, 'Overlap'). No action is stale: each half's step uses the actions computed from that
half's latest observations. What changes against one env of all the worlds: the two halves keep their
own sampling state (each DPSA resets its half when its own termination rate passes the threshold) and
the policy samples each half's actions in its own call, so runs differ from the single-env run.

``info`` of a joined step: arrays over sub-envs are concatenated (a key only one half returned is
filled for the other with zeros, False or None); dictionaries are joined the same way, key by key;
any other value (DPSA's ``rho`` and ``stats``) becomes a tuple of the two halves' values.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
from gymnasium.vector import VectorEnv
from gymnasium.vector.utils import batch_space

from .dpsa import SamplingCounter

__all__ = ["DoubleBufferedEnv", "join_infos"]


def _filler(like: np.ndarray, n: int) -> np.ndarray:
    if like.dtype == object:
        return np.full((n, *like.shape[1:]), None, dtype=object)
    return np.zeros((n, *like.shape[1:]), dtype=like.dtype)


def join_infos(infos: tuple[dict[str, Any], dict[str, Any]], sizes: tuple[int, int]) -> dict[str, Any]:
    """One info dict for the joined sub-envs (module docstring)."""
    out: dict[str, Any] = {}
    for key in dict.fromkeys([*infos[0], *infos[1]]):
        vals = [info.get(key) for info in infos]
        arrays = [v for v, n in zip(vals, sizes, strict=True)
                  if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == n]
        if arrays:
            parts = [v if isinstance(v, np.ndarray) and v.ndim >= 1 and v.shape[0] == n else _filler(arrays[0], n)
                     for v, n in zip(vals, sizes, strict=True)]
            out[key] = np.concatenate(parts)
        elif all(v is None or isinstance(v, dict) for v in vals) and any(isinstance(v, dict) for v in vals):
            out[key] = join_infos((vals[0] or {}, vals[1] or {}), sizes)
        else:
            out[key] = tuple(vals)
    return out


class DoubleBufferedEnv(VectorEnv):
    """``first`` and ``second`` (same single observation and action spaces, same autoreset mode) as
    one vector env; :meth:`step_async` / :meth:`step_wait` step one of them on a worker thread."""

    def __init__(self, first: VectorEnv, second: VectorEnv) -> None:
        if first.single_observation_space != second.single_observation_space:
            raise ValueError("the two halves must have the same single observation space, got "
                             f"{first.single_observation_space} and {second.single_observation_space}")
        if first.single_action_space != second.single_action_space:
            raise ValueError("the two halves must have the same single action space, got "
                             f"{first.single_action_space} and {second.single_action_space}")
        if first.metadata.get("autoreset_mode") != second.metadata.get("autoreset_mode"):
            raise ValueError("the two halves must have the same autoreset mode, got "
                             f"{first.metadata.get('autoreset_mode')} and {second.metadata.get('autoreset_mode')}")
        self.halves = (first, second)
        self.sizes = (int(first.num_envs), int(second.num_envs))
        #: ``(start, stop)`` of each half's sub-envs in the joined batch.
        self.bounds = ((0, self.sizes[0]), (self.sizes[0], self.sizes[0] + self.sizes[1]))
        self.num_envs = self.sizes[0] + self.sizes[1]
        self.single_observation_space = first.single_observation_space
        self.single_action_space = first.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = dict(first.metadata)
        self.render_mode = first.render_mode
        self._pool: ThreadPoolExecutor | None = None
        self._pending: list[Future | None] = [None, None]

    # What policies and trainers read from a TerraZero env, from the first half (both are alike).
    @property
    def obs_layout(self) -> Any:
        return self.halves[0].unwrapped.obs_layout

    @property
    def config(self) -> Any:
        return self.halves[0].unwrapped.config

    @property
    def total(self) -> SamplingCounter:
        """FAST's sampling counters of both halves summed (each half's sampling wrapper keeps its own)."""
        joined = SamplingCounter()
        for half in self.halves:
            for name, value in vars(half.total).items():
                setattr(joined, name, getattr(joined, name) + value)
        return joined

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._require_idle()
        seeds: list[int | None] = [None, None]
        if seed is not None:  # two independent streams from the one seed
            seeds = [int(s.generate_state(1, np.uint64)[0] >> np.uint64(1)) for s in np.random.SeedSequence(seed).spawn(2)]
        out = [half.reset(seed=s, options=options) for half, s in zip(self.halves, seeds, strict=True)]
        return np.concatenate([np.asarray(o) for o, _ in out]), join_infos((out[0][1], out[1][1]), self.sizes)

    def step(self, actions: np.ndarray):
        self._require_idle()
        a = np.asarray(actions)
        if a.shape[:1] != (self.num_envs,):
            raise ValueError(f"actions must have {self.num_envs} rows (one per sub-env), got shape {a.shape}")
        return self.join([self.halves[h].step(a[lo:hi]) for h, (lo, hi) in enumerate(self.bounds)])

    def step_async(self, half: int, actions: np.ndarray) -> None:
        """Start stepping half ``half`` (0 or 1) with its ``actions`` on the worker thread."""
        if half not in (0, 1):
            raise ValueError(f"half must be 0 or 1, got {half!r}")
        if self._pending[half] is not None:
            raise RuntimeError(f"half {half} is already stepping: call step_wait({half}) first")
        a = np.array(actions, copy=True)
        if a.shape[:1] != (self.sizes[half],):
            raise ValueError(f"half {half} takes {self.sizes[half]} actions, got shape {a.shape}")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="terrazero-half")
        self._pending[half] = self._pool.submit(self.halves[half].step, a)

    def step_wait(self, half: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """What half ``half``'s step returned (its own sub-envs only; the observations are that
        half's array, valid until its next step)."""
        future = self._pending[half]
        if future is None:
            raise RuntimeError(f"half {half} is not stepping: call step_async({half}, actions) first")
        self._pending[half] = None
        return future.result()

    def join(self, results: list[tuple], observations: bool = True) -> tuple:
        """The two halves' step results as one step's ``(obs, rewards, terminated, truncated, info)``;
        ``observations`` False leaves ``obs`` None (a caller that stores each half's rows itself)."""
        (o0, r0, t0, u0, i0), (o1, r1, t1, u1, i1) = results
        return (np.concatenate([o0, o1]) if observations else None, np.concatenate([r0, r1]),
                np.concatenate([t0, t1]), np.concatenate([u0, u1]), join_infos((i0, i1), self.sizes))

    def drain(self) -> None:
        """Wait for any step still running on the worker thread and drop its result."""
        for half, future in enumerate(self._pending):
            if future is not None:
                self._pending[half] = None
                future.result()

    def _require_idle(self) -> None:
        if any(p is not None for p in self._pending):
            raise RuntimeError("a half is still stepping: call step_wait first")

    def get_state(self) -> dict[str, Any]:
        """Both halves' ``get_state()`` (for checkpoints)."""
        self._require_idle()
        return {"halves": [half.get_state() for half in self.halves]}

    def set_state(self, state: dict[str, Any]) -> None:
        if len(state.get("halves", ())) != 2:
            raise ValueError("DoubleBufferedEnv state: expected the states of two halves")
        for half, s in zip(self.halves, state["halves"], strict=True):
            half.set_state(s)

    def close(self, **kwargs: Any) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self._pending = [None, None]
        for half in self.halves:
            half.close(**kwargs)

    def __getstate__(self) -> dict[str, Any]:
        self._require_idle()
        state = dict(self.__dict__)
        state["_pool"] = None  # threads do not pickle; a copy starts its own on first use
        return state
