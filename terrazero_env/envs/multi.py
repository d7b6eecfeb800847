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
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pettingzoo import ParallelEnv
from pettingzoo.utils import parallel_to_aec

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
from .vector import action_space, observation_space, reset_until_live, world_state

__all__ = ["ParallelDriveEnv", "aec_env", "parallel_env"]


class ParallelDriveEnv(ParallelEnv):
    """One world of ``slots_per_world`` controlled agents (see the module docstring)."""

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

    @property
    def state(self) -> dict[str, Any]:
        """Read-only views of the world's agents (see ``Engine.agents``) and its map."""
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


def aec_env(preset: str | EngineConfig | None = "quick", **kwargs: Any):
    """The PettingZoo AEC form of :func:`parallel_env`."""
    return parallel_to_aec(ParallelDriveEnv(preset, **kwargs))
