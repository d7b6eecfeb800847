"""``TerraZero/Drive-v0``: a single-agent Gymnasium environment.

One policy-controlled ego vehicle drives among the scene's background agents (static until the
rule-based traffic layer lands, or log-replayed in log mode).

    import gymnasium as gym, terrazero_env
    env = gym.make("TerraZero/Drive-v0", preset="quick")
    obs, info = env.reset(seed=123)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

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

__all__ = ["DriveEnv"]


class DriveEnv(gym.Env):
    """One world, one controlled slot (the ego); ``preset`` and dotted ``overrides`` configure it."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, preset: str | EngineConfig | None = "quick", render_mode: str | None = None,
                 max_reset_tries: int = 16, **overrides: Any):
        check_overrides(type(self).__name__, overrides)
        max_reset_tries = check_reset_tries(max_reset_tries)
        cfg = load_config(preset, **overrides)
        # One world with one controlled slot: the first controlled-class agent placed is the ego.
        self.config = cfg.with_overrides(num_worlds=1, slots_per_world=1,
                                         max_agents_per_world=max(cfg.max_agents_per_world, 1))
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.render_mode = render_mode
        self.engine = core.Engine(self.config)
        self.observation_space = observation_space(self.engine)
        self.action_space = action_space(self.engine, self.config)
        self.obs_layout = self.engine.obs_layout
        self.max_reset_tries = max_reset_tries
        self._done = True

    def _info(self) -> dict[str, Any]:
        e = self.engine
        names = core.COUNTER_NAMES
        return {"valid": bool(e.valid[0]), "agent_type": int(e.agent_type[0]),
                **{f"count_{n}": int(v) for n, v in zip(names, e.counters[0])}}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        require_open(self.engine)
        seed = check_seed(seed)  # before anything changes: a rejected seed leaves the env as it was
        super().reset(seed=seed)
        base = int(self.np_random.integers(0, 2**63 - 1)) if seed is None else seed
        # A scene where no ego could be placed is redrawn from the next derived seed.
        reset_until_live(self.engine, base, self.max_reset_tries)
        self._done = False
        return self.engine.observations[0].copy(), self._info()

    def step(self, action: Any):
        require_open(self.engine)
        if self._done:
            raise RuntimeError("step() called before reset() or after the episode ended: call reset() first")
        a = check_action(action, int(self.action_space.n))
        self.engine.step(np.array([a], np.int32))
        e = self.engine
        terminated, truncated = bool(e.terminated[0]), bool(e.truncated[0])
        self._done = terminated or truncated
        return e.observations[0].copy(), float(e.rewards[0]), terminated, truncated, self._info()

    def close(self) -> None:
        """Release the engine (its buffers and map references); the env is unusable afterwards."""
        self.engine = closed_engine(type(self).__name__)

    @property
    def state(self) -> dict[str, Any]:
        """Read-only views of the scene's agents (see ``Engine.agents``) and its map."""
        return world_state(self.engine, 0)

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        from ..render import frame_rgb

        return frame_rgb(self.engine, 0, zoom=40.0)
