"""The native batched ``gymnasium.vector.VectorEnv``: one sub-environment per controlled agent slot.

    import terrazero_env
    venv = terrazero_env.make_vec(num_worlds=4, preset="quick")
    obs, info = venv.reset(seed=0)
    for _ in range(100):
        obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
        live = info["valid"]            # transitions that belong to a live agent

Sub-environment ``w * K + k`` is slot k of world w. A slot's episode is its agent's life; a world
restarts once all its slots are done (each agent terminated, or the horizon truncated them all).
Slots without a live agent are marked ``info["valid"] == False`` (reward 0, no flags).
``info["counters"]`` (int32 ``[num_envs, 7]``, columns ``core.COUNTER_NAMES``) counts each slot's
rule events so far in its episode, as they stood after this step (before any reset). Autoreset
follows ``metadata["autoreset_mode"]`` at world granularity:

* NEXT_STEP (default): the step after a world finishes resets it (that step's transitions are invalid);
* SAME_STEP: a finishing world resets within the step; ``info["final_obs"]``/``info["final_info"]``
  hold what its slots saw last;
* DISABLED: nothing resets by itself; call ``reset(options={"reset_mask": m})`` with a mask that
  covers whole worlds, or ``reset_worlds(ids)`` (the DPSA wrapper uses this).

Observations, rewards and flags are the engine's own buffers (zero copy): copy them if you keep them
across steps.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from .. import engine as core
from ..config import AgentType, EngineConfig
from .conventions import check_seed, closed_engine, require_open
from .engine_api import ClosableEngine, MapAssigningEngine, ScenarioEngine, SnapshotEngine, VectorEngine

__all__ = ["TerraZeroVectorEnv", "action_space", "observation_space", "policy_layout", "reset_until_live", "seeds_for",
           "world_state"]


#: Every observed value is scaled to order one (appendix C) and clamped by the engine to this bound;
#: 100 bounds even a goal 20 km away.
OBS_BOUND: float = core.OBS_BOUND


def policy_layout(env: Any) -> dict[str, Any]:
    """What a Deep Sets policy needs to know of a native env's observations (one with ``obs_layout``
    and, optionally, ``config``): ``layout`` (group name -> ``[start, count, width]``), ``type_column``
    (index of the ego ``agent_type`` feature) and ``agent_types`` (the type codes the env controls).
    Torch-free, so an evaluation can check a checkpoint against an env without the learner."""
    obs_layout = env.obs_layout
    layout = {name: [int(g.start), int(g.count), int(g.width)] for name, g in obs_layout.groups.items()}
    ego = obs_layout.groups["ego"]
    offsets = {f[0]: f[1] for f in ego.features}
    if "agent_type" not in offsets:
        raise ValueError("DeepSetsPolicy needs the ego feature 'agent_type' in the observation")
    types = [1]
    config = getattr(env, "config", None)
    if config is not None:
        init = config.init
        types = sorted({core.TYPE_CODES[c] for c, (w, ctl) in enumerate(zip(init.class_weights, init.controlled))
                        if w > 0 and ctl})
    return {"layout": layout, "type_column": int(ego.start) + int(offsets["agent_type"]), "agent_types": types}


def observation_space(engine: VectorEngine) -> gym.spaces.Box:
    dtype = engine.observations.dtype
    return gym.spaces.Box(-OBS_BOUND, OBS_BOUND, (engine.obs_dim,), dtype)


def action_space(engine: VectorEngine, config: EngineConfig) -> gym.spaces.Discrete:
    """One Discrete space for every slot: the controlled classes must share one grid size."""
    classes = [c for c, on in zip(AgentType, config.init.controlled)
               if on and config.init.class_weights[c] > 0] or [AgentType.CAR]
    sizes = {AgentType(c).name.lower(): engine.num_actions(c) for c in classes}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"controlled classes need action grids of one size for a shared action space, got {sizes}; "
                         "set classes.<name>.action_long/action_lat accordingly (see the sim_agent preset)")
    return gym.spaces.Discrete(next(iter(sizes.values())))


def seeds_for(seed: int, n: int) -> np.ndarray:
    """``n`` engine seeds (uint64) derived from any Python integer (negative or huge included)."""
    ss = np.random.SeedSequence(int(seed) % (1 << 128))
    return ss.generate_state(n, np.uint64)


def world_state(engine: VectorEngine, world: int = 0) -> dict[str, Any]:
    """Read-only views of one world's agents (fields documented on ``Engine.agents``), its map and
    its step count."""
    return {"agents": engine.agents[world, : int(engine.n_agents_per_world[world])],
            "map": engine.road_maps[int(engine.world_map[world])].map_data,
            "world_step": int(engine.world_steps[world])}


def reset_until_live(engine: VectorEngine, seed: int, tries: int) -> None:
    """Reset world 0 from seeds derived from ``seed`` until a controlled agent could be placed."""
    for s in seeds_for(seed, tries):
        engine.reset([0], [int(s)])
        if engine.valid.any():
            return
    raise RuntimeError(f"no controlled agent could be placed in {tries} tries on {engine.config.maps}; "
                       "lower init.num_agents or use a larger map")


class TerraZeroVectorEnv(VectorEnv):
    """Gymnasium VectorEnv over ``Engine`` slots (see the module docstring)."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, config: EngineConfig, *, autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
                 num_threads: int = 1, render_mode: str | None = None, engine: VectorEngine | None = None,
                 dataset: Any = None):
        mode = AutoresetMode(autoreset_mode) if not isinstance(autoreset_mode, AutoresetMode) else autoreset_mode
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        from .._build_info import check_num_threads

        num_threads = check_num_threads(num_threads)  # warns when a serial (no-OpenMP) build is asked for threads
        self.config = config
        self.dataset = dataset
        o = config.obs
        self._dataset_maps = (core.DatasetRoadMaps(dataset, obs_radius=o.road_radius,
                                                   obs_segment_length=o.road_segment_length)
                              if dataset is not None else None)
        if dataset is not None and engine is None:
            # Start on the dataset's first scenario; every world reset then draws one.
            engine = core.Engine(config, maps=[dataset[0]], num_threads=num_threads)
        self.engine = engine if engine is not None else core.Engine(config, num_threads=num_threads)
        e = self.engine
        #: With a dataset, the scenario (dataset index) each world was last reset on; -1 before.
        self.world_scenario = np.full(e.num_worlds, -1, np.int64)
        self.num_worlds = e.num_worlds
        self.slots_per_world = e.slots_per_world
        self.num_envs = e.num_worlds * e.slots_per_world
        self.single_observation_space = observation_space(e)
        self.single_action_space = action_space(e, config)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.metadata = {**type(self).metadata, "autoreset_mode": mode, "slots_per_world": self.slots_per_world}
        self.render_mode = render_mode
        self.obs_layout = e.obs_layout
        self._pending = np.zeros(self.num_worlds, bool)  # NEXT_STEP: worlds to reset on the next step
        #: Seconds spent resetting worlds inside the last ``step`` (autoreset), and how many.
        self.last_reset_time_s = 0.0
        self.last_worlds_reset = 0
        self._valid = np.zeros(self.num_envs, bool)

    # -------------------------------------------------------------------------------------- reset

    def reset_worlds(self, world_ids: np.ndarray, seeds: np.ndarray | None = None) -> None:
        """Reset whole worlds (each once, however many of its slots are done)."""
        ids = np.asarray(world_ids, np.int64).reshape(-1)
        if seeds is None:
            seeds = self.np_random.integers(0, 2**63 - 1, ids.shape[0], dtype=np.int64)
        seeds = core.check_seeds(seeds, ids.shape[0])  # uint64, none negative
        self._draw_maps(ids, seeds.astype(np.int64))
        self.engine.reset(ids, seeds)
        self._pending[ids] = False

    def reset(self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None):
        """Reset every world (or, with ``options={"reset_mask": m}``, the worlds whose slots ``m``
        covers). ``seed``: a non-negative integer below 2**64 (world w gets a seed derived from it),
        or one such integer per reset world. Bad arguments raise before anything changes."""
        require_open(self.engine)
        mask = None if options is None else options.get("reset_mask")
        if mask is not None:
            mask = np.asarray(mask)
            if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
                raise ValueError(f"options['reset_mask'] must be bool [{self.num_envs}], got {mask.dtype} {mask.shape}")
            per_world = mask.reshape(self.num_worlds, self.slots_per_world)
            if not (per_world.all(axis=1) | ~per_world.any(axis=1)).all():
                raise ValueError("options['reset_mask'] must cover whole worlds: a world's slots reset together")
            ids = np.nonzero(per_world[:, 0])[0]
        else:
            ids = np.arange(self.num_worlds)
        world_seeds = None
        if isinstance(seed, (list, tuple, np.ndarray)):
            arr = np.asarray(seed) if isinstance(seed, np.ndarray) else None
            if arr is not None and arr.dtype.kind not in "iu":
                raise TypeError(f"seed: one non-negative integer per reset world, got an array of dtype {arr.dtype}")
            values = [check_seed(s, f"seed[{i}]") for i, s in enumerate(seed)] if arr is None or arr.ndim == 1 else None
            if values is None or len(values) != ids.shape[0]:
                shape = np.shape(seed)
                raise ValueError(f"seed: one integer per reset world ({ids.shape[0]}), got {shape}")
            world_seeds = np.array(values, np.uint64).reshape(-1)
            seed = None
        else:
            seed = check_seed(seed, "seed (or one integer per reset world)")
        super().reset(seed=seed)  # reseeds the generator of unseeded resets only now that all is valid
        if world_seeds is None and seed is not None:
            world_seeds = seeds_for(seed, self.num_worlds)[ids]
        elif world_seeds is None:
            world_seeds = self.np_random.integers(0, 2**63 - 1, ids.shape[0], dtype=np.int64).astype(np.uint64)
        self._draw_maps(ids, world_seeds.astype(np.int64))
        self.engine.reset(ids, world_seeds)
        self._pending[ids] = False
        self._valid = self.engine.valid.copy()
        return self.engine.observations, {"valid": self._valid.copy()}

    def _draw_maps(self, ids: np.ndarray, seeds: np.ndarray) -> None:
        """With a dataset, each reset world draws its scenario from the world's own seed (so the
        draw does not depend on where the world runs: in this process or a worker)."""
        if self.dataset is None or ids.size == 0:
            return
        picks = np.array([self.dataset.sample(np.random.default_rng(int(s) % (1 << 63))) for s in seeds], np.int64)
        if isinstance(self.engine, ScenarioEngine):  # worker processes build their own road maps
            self.engine.assign_scenarios(ids, picks)
        elif isinstance(self.engine, MapAssigningEngine):
            self.engine.assign_maps(ids, [self._dataset_maps[i] for i in picks])
        else:
            raise TypeError(f"{type(self.engine).__name__} can put worlds neither on dataset scenarios "
                            "(assign_scenarios) nor on road maps (assign_maps)")
        self.world_scenario[ids] = picks

    # --------------------------------------------------------------------------------------- step

    def _world_done(self) -> np.ndarray:
        e = self.engine
        alive_after = e.valid & ~e.terminated & ~e.truncated
        return ~alive_after.reshape(self.num_worlds, self.slots_per_world).any(axis=1)

    def step(self, actions: np.ndarray):
        """Step every world (actions: int ``[num_envs]``; entries of invalid slots are ignored)."""
        require_open(self.engine)
        e = self.engine
        a = np.asarray(actions)
        if a.shape != (self.num_envs,):
            raise ValueError(f"actions must have shape ({self.num_envs},), got {a.shape}")
        if a.dtype.kind not in "iu":
            raise ValueError(f"actions must be integers, got dtype {a.dtype}")
        mode = self.metadata["autoreset_mode"]
        pending = np.nonzero(self._pending)[0] if mode == AutoresetMode.NEXT_STEP else np.zeros(0, np.int64)
        e.step(a)
        valid = e.valid.copy()
        info: dict[str, Any] = {}
        t_reset = 0.0
        if pending.size:
            # These worlds finished last step: this step restarts them instead (no valid transition).
            t0 = time.perf_counter()
            self.reset_worlds(pending)
            t_reset += time.perf_counter() - t0
            rows = (pending[:, None] * self.slots_per_world + np.arange(self.slots_per_world)).reshape(-1)
            valid[rows] = False
        done = self._world_done()
        done[pending] = False
        if mode == AutoresetMode.NEXT_STEP:
            self._pending = done
        elif mode == AutoresetMode.SAME_STEP and (e.terminated.any() or e.truncated.any()):
            # Every slot whose episode ended this step reports its last observation; worlds with no
            # live slot left restart now (a slot that ends before its world stays idle until then).
            ids = np.nonzero(done)[0]
            finished = e.terminated | e.truncated
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in np.nonzero(finished)[0]:
                final_obs[i] = e.observations[i].copy()
            info["final_obs"], info["_final_obs"] = final_obs, finished
            info["final_info"] = {"valid": finished.copy(), "_valid": finished.copy(),
                                  "counters": e.counters.copy(), "_counters": finished.copy()}
            info["_final_info"] = finished
            rewards, terms, truncs = e.rewards.copy(), e.terminated.copy(), e.truncated.copy()
            if ids.size:
                t0 = time.perf_counter()
                self.reset_worlds(ids)
                t_reset += time.perf_counter() - t0
            self.last_reset_time_s, self.last_worlds_reset = t_reset, int(ids.size)
            info["valid"] = valid
            info["counters"] = e.counters.copy()
            self._valid = valid
            return e.observations, rewards, terms, truncs, info
        self.last_reset_time_s, self.last_worlds_reset = t_reset, int(pending.size)
        info["valid"] = valid
        info["counters"] = e.counters.copy()
        self._valid = valid
        return e.observations, e.rewards, e.terminated, e.truncated, info

    # ------------------------------------------------------------------------------- snapshots

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue this env exactly (the engine's worlds, the generator that
        seeds unseeded resets, pending autoresets), as NumPy arrays and plain values."""
        if not isinstance(self.engine, SnapshotEngine):
            raise TypeError(f"{type(self.engine).__name__} cannot snapshot its state; use the in-process Engine")
        return {"engine": self.engine.get_state(), "np_random": self.np_random.bit_generator.state,
                "pending": self._pending.copy(), "valid": self._valid.copy()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a :meth:`get_state` snapshot taken from an env with the same config."""
        for key in ("engine", "np_random", "pending", "valid"):
            if key not in state:
                raise ValueError(f"vector env state lacks {key!r}")
        if np.shape(state["pending"]) != self._pending.shape or np.shape(state["valid"]) != self._valid.shape:
            raise ValueError("vector env state: saved by an env with another number of worlds or slots")
        self.engine.set_state(state["engine"])
        self.np_random.bit_generator.state = state["np_random"]
        self._pending[:] = state["pending"]
        self._valid = np.array(state["valid"], bool)

    # ---------------------------------------------------------------------------------- extras

    @property
    def state(self) -> dict[str, Any]:
        """Read-only views of every agent in every world (``agents``: structured ``[W, max_agents]``
        with fields documented on ``Engine.agents``), agents per world, and each world's map."""
        e = self.engine
        if self.dataset is not None and (self.world_scenario >= 0).all():
            maps = [self.dataset[int(i)] for i in self.world_scenario]
        else:
            maps = [e.road_maps[i].map_data for i in e.world_map]
        return {"agents": e.agents, "n_agents": e.n_agents_per_world, "maps": maps, "world_steps": e.world_steps}

    def render(self) -> np.ndarray | None:
        if self.render_mode != "rgb_array":
            return None
        from ..render import frame_rgb

        return frame_rgb(self.engine, 0)

    def close_extras(self, **kwargs: Any) -> None:
        if isinstance(self.engine, ClosableEngine):  # an engine with worker processes stops them
            self.engine.close()
        self.engine = closed_engine(type(self).__name__)
