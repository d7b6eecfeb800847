"""PettingZoo interfaces: every policy-controlled agent of one world is a PettingZoo agent.

    import terrazero_env
    env = terrazero_env.parallel_env(preset="quick")
    obs, infos = env.reset(seed=0)
    while env.agents:
        actions = {a: env.action_space(a).sample() for a in env.agents}
        obs, rewards, terminations, truncations, infos = env.step(actions)

Agents are named ``agent_<slot>``. An agent leaves ``agents`` after the step on which it terminates
(removed by a rule, or halted at its goal) or is truncated at the horizon; truncation is reported
as truncation, never as termination, and no padding ("black death") is needed.

For centralised training with decentralised execution (a centralised critic, as in MAPPO or QMIX), both
envs follow PettingZoo's API (https://pettingzoo.farama.org/api/parallel/ and
https://pettingzoo.farama.org/api/aec/): ``state()`` is the global state, a float32 array in
``state_space`` (see :meth:`ParallelDriveEnv.state`), and ``observation_spaces`` / ``action_spaces``
map every name of ``possible_agents`` to its space. The read-only views of the world's agents and map
(the engine's snapshot, formerly the ``state`` property) are ``world_state()``.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from .. import engine as core
from ..config import EngineConfig
from ..config.io import load_config
from .conventions import (
    check_action,
    check_overrides,
    check_reset_tries,
    check_seed,
    closed_engine,
    require_open,
)
from .vector import OBS_BOUND, action_space, observation_space, reset_until_live, world_state

__all__ = ["AECDriveEnv", "ParallelDriveEnv", "aec_env", "parallel_env"]

_STATE_MOVED = ("{owner}.state is PettingZoo's state() method now (the global state array, see "
                "state_space); the dict of engine views that the state property returned is {owner}.world_state()")


class _BoundState:
    """``env.state()``: PettingZoo's global state (https://pettingzoo.farama.org/api/parallel/), for a
    centralised critic: float32 ``[K * D + K]`` in ``env.state_space``, K = ``len(possible_agents)``
    slots, D = the observation width. First every slot's observation in ``possible_agents`` order
    (``agent_k`` at ``[k * D, (k + 1) * D)``), then one live flag per slot (``[K * D + k]``: 1.0 while
    ``agent_k`` is in ``agents``); a slot whose agent is not in ``agents`` is all zeros.

    Until ``state`` became a method it was a property holding the dict of engine views that
    ``world_state()`` returns now; reading it as that dict (``env.state["agents"]``, ``.keys()``,
    ``.items()``, ``in``, iteration) still answers from ``world_state()``, with a
    ``DeprecationWarning`` naming the new name."""

    __slots__ = ("_env",)

    def __init__(self, env: ParallelDriveEnv) -> None:
        self._env = env

    def __call__(self) -> np.ndarray:
        return self._env._global_state()

    def _legacy(self) -> dict[str, Any]:
        warnings.warn(_STATE_MOVED.format(owner=type(self._env).__name__), DeprecationWarning, stacklevel=3)
        return self._env.world_state()

    def __getitem__(self, key: str) -> Any:
        return self._legacy()[key]

    def __contains__(self, key: object) -> bool:
        return key in self._legacy()

    def __iter__(self):
        return iter(self._legacy())

    def __len__(self) -> int:
        return len(self._legacy())

    def __bool__(self) -> bool:  # a method is truthy; without this, bool() would go through __len__
        return True

    def keys(self):
        return self._legacy().keys()

    def values(self):
        return self._legacy().values()

    def items(self):
        return self._legacy().items()

    def get(self, key: str, default: Any = None) -> Any:
        return self._legacy().get(key, default)

    def __repr__(self) -> str:
        return f"<bound method state of {type(self._env).__name__} (the dict of engine views is world_state())>"


class _StateMethod:
    # The descriptor behind ``ParallelDriveEnv.state``: each instance gets a callable (_BoundState),
    # and help(ParallelDriveEnv.state) shows what state() holds.
    __doc__ = _BoundState.__doc__

    def __get__(self, env: Any, owner: type | None = None) -> Any:
        return self if env is None else _BoundState(env)


class ParallelDriveEnv(ParallelEnv):
    """One world of ``slots_per_world`` controlled agents (see the module docstring).

    ``state()`` is the global state for a centralised critic and ``state_space`` its Box; the
    ``observation_spaces`` and ``action_spaces`` dicts cover ``possible_agents`` (each agent's entry is
    the object ``observation_space(agent)`` / ``action_space(agent)`` returns); ``world_state()`` gives
    read-only views of the world's agents and map."""

    metadata = {"name": "terrazero_drive_v0", "render_modes": ["rgb_array"], "is_parallelizable": True,
                "render_fps": 10}

    def __init__(self, preset: str | EngineConfig | None = "quick", render_mode: str | None = None,
                 max_reset_tries: int = 16, **overrides: Any):
        check_overrides(type(self).__name__, overrides)
        max_reset_tries = check_reset_tries(max_reset_tries)
        cfg = load_config(preset, **overrides)
        self.config = cfg.with_overrides(num_worlds=1)
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.engine = core.Engine(self.config)
        self._obs_space = observation_space(self.engine)
        self._act_space = action_space(self.engine, self.config)
        self.possible_agents = [f"agent_{k}" for k in range(self.engine.slots_per_world)]
        self._index = {a: k for k, a in enumerate(self.possible_agents)}
        # PettingZoo's observation_spaces / action_spaces dicts and state_space
        # (https://pettingzoo.farama.org/api/parallel/): one shared space object per kind.
        self.observation_spaces = {a: self._obs_space for a in self.possible_agents}
        self.action_spaces = {a: self._act_space for a in self.possible_agents}
        k, d = len(self.possible_agents), int(self._obs_space.shape[0])
        low = np.concatenate([np.full(k * d, -OBS_BOUND, np.float32), np.zeros(k, np.float32)])
        high = np.concatenate([np.full(k * d, OBS_BOUND, np.float32), np.ones(k, np.float32)])
        self.state_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.agents: list[str] = []
        self.max_reset_tries = max_reset_tries
        self.obs_layout = self.engine.obs_layout

    def observation_space(self, agent: str):
        return self._obs_space

    def action_space(self, agent: str):
        return self._act_space

    def _infos(self, agents: list[str]) -> dict[str, dict[str, Any]]:
        e = self.engine
        return {a: {"agent_type": int(e.agent_type[self._index[a]])} for a in agents}

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None):
        require_open(self.engine)
        seed = check_seed(seed)
        base = int(np.random.default_rng().integers(0, 2**63 - 1)) if seed is None else seed
        reset_until_live(self.engine, base, self.max_reset_tries)
        self.agents = [a for a in self.possible_agents if self.engine.valid[self._index[a]]]
        obs = self.engine.observations
        return {a: obs[self._index[a]].copy() for a in self.agents}, self._infos(self.agents)

    def step(self, actions: dict[str, Any]):
        require_open(self.engine)
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for agents that are not live: {sorted(unknown)}; live: {self.agents}")
        e = self.engine
        act = np.zeros(e.slots_per_world, np.int32)
        for a, v in actions.items():
            act[self._index[a]] = check_action(v, int(self._act_space.n), f"action of {a}")
        e.step(act)
        idx = [self._index[a] for a in self.agents]
        obs = {a: e.observations[i].copy() for a, i in zip(self.agents, idx)}
        rewards = {a: float(e.rewards[i]) for a, i in zip(self.agents, idx)}
        terms = {a: bool(e.terminated[i]) for a, i in zip(self.agents, idx)}
        truncs = {a: bool(e.truncated[i]) for a, i in zip(self.agents, idx)}
        infos = self._infos(self.agents)
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos

    #: PettingZoo's ``state()`` (see :meth:`_global_state` for what it holds). Reading ``env.state`` as
    #: the dict the former ``state`` property returned warns and answers from :meth:`world_state`.
    state = _StateMethod()

    def _global_state(self) -> np.ndarray:
        """The global state, float32 ``[K * D + K]`` in ``state_space`` (K = ``len(possible_agents)``
        slots, D = the observation width): first every slot's observation, in ``possible_agents``
        order (``agent_k`` at ``[k * D, (k + 1) * D)``, as float32), then one live flag per slot
        (``[K * D + k]``: 1.0 while ``agent_k`` is in ``agents``, else 0.0). A slot whose agent is not
        in ``agents`` (none placed, finished, or before the first reset) is all zeros, its flag included.
        It is the state after the last ``reset``/``step``, a new array at every call."""
        require_open(self.engine)
        k, d = len(self.possible_agents), int(self._obs_space.shape[0])
        out = np.zeros(k * d + k, np.float32)
        live = np.array([self._index[a] for a in self.agents], np.intp)
        if live.size:
            out[: k * d].reshape(k, d)[live] = self.engine.observations[live]
            out[k * d + live] = 1.0
        return out

    def world_state(self) -> dict[str, Any]:
        """Read-only views of the world's agents (``agents``, fields documented on ``Engine.agents``),
        its map (``map``) and its step count (``world_step``): what the ``state`` property returned
        before ``state`` became PettingZoo's ``state()`` method."""
        require_open(self.engine)
        return world_state(self.engine, 0)

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        from ..render import frame_rgb

        return frame_rgb(self.engine, 0)

    def close(self) -> None:
        """Release the engine (its buffers and map references); the env is unusable afterwards."""
        self.agents = []
        self.engine = closed_engine(type(self).__name__)


def parallel_env(preset: str | EngineConfig | None = "quick", **kwargs: Any) -> ParallelDriveEnv:
    """The PettingZoo ``ParallelEnv`` (see :class:`ParallelDriveEnv`)."""
    return ParallelDriveEnv(preset, **kwargs)


class AECDriveEnv(parallel_to_aec_wrapper):
    """PettingZoo's parallel-to-AEC conversion of a :class:`ParallelDriveEnv`, whose
    ``observation_spaces`` and ``action_spaces`` are the parallel env's dicts (PettingZoo's wrapper
    rebuilds them with a warning at every read). ``state()`` and ``state_space`` are the parallel
    env's (the wrapper forwards them), as is :meth:`world_state`."""

    @property
    def observation_spaces(self) -> dict[str, gym.Space]:
        return self.env.observation_spaces

    @property
    def action_spaces(self) -> dict[str, gym.Space]:
        return self.env.action_spaces

    def world_state(self) -> dict[str, Any]:
        """:meth:`ParallelDriveEnv.world_state` of the wrapped env."""
        return self.env.world_state()


def aec_env(preset: str | EngineConfig | None = "quick", **kwargs: Any):
    """The PettingZoo AEC form of :func:`parallel_env` (``terrazero_env.env()``): an
    :class:`AECDriveEnv` under PettingZoo's ``OrderEnforcingWrapper``, as ``parallel_to_aec`` builds it."""
    return OrderEnforcingWrapper(AECDriveEnv(ParallelDriveEnv(preset, **kwargs)))
