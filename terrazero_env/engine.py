"""The engine's public face: configuration and maps resolved for the compiled core.

The compiled module (``terrazero_env._engine``) imports neither ``terrazero_env.config`` nor
``terrazero_env.maps``; this module sits above all three and owns the glue between them. It loads and
builds maps and computes their indexes (signal plan, lane conflicts) for :class:`RoadMap`, flattens an
``EngineConfig`` into the tables :class:`Engine` reads, in the engine's column order, and re-exports the
engine's vocabulary (enum names, counter and reward-parameter orders, observation widths and bound)
and the geometry batch kernels. Users, examples, the env layer and ``agents`` import from here::

    from terrazero_env.engine import Engine, road_map
    eng = Engine(load_config("quick"), maps=["grid_town"])
    eng.reset(); eng.step()
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import numpy as np

from . import _engine
from .config import REWARD_PARAMS, EngineConfig
from .config_checks import check_float, check_int
from .maps import Dataset, MapData, build, validate_built
from .maps.conflicts import lane_conflicts
from .maps.signal_plan import logged_head_states, signal_plan
from .maps.sources import load_built
from .maps.terrabin import load as load_tzb

__all__ = [
    "AGENT_CLASSES", "CLASS_PARAMS", "COLLISION_TYPES", "CONSEQUENCES", "CONTROL_TYPES", "COUNTER_NAMES",
    "CROSSING_GROUPS", "DYNAMICS_MODELS", "ENTITY_WIDTHS", "EPISODE_METRIC_NAMES", "GOAL_BEHAVIORS", "INIT_MODES",
    "KINEMATIC_PARAMS", "METRIC_PARAMS", "MOVERS", "OBS_BOUND", "OBS_TYPES", "PEDESTRIAN_STATS", "REWARD_PARAMS",
    "REWARD_TERMS", "STEP_EVENTS",
    "orca_solve_batch", "orca_step_batch",
    "ROAD_TYPES", "ROLES", "SIGNAL_CONTROLLERS", "SIGNAL_STAGES", "SIGNAL_STATES", "STOP_STATES", "TYPE_CODES",
    "STATIC_KINDS", "STATIC_GENERATORS", "KIND_CODES",
    "VOCABULARY", "DatasetRoadMaps", "Engine", "ObsLayout", "RoadMap", "SegmentGrid", "box_corners_batch",
    "box_ttc_batch", "check_num_threads", "check_seeds", "collision_type_batch", "engine_tables",
    "footprint_offroad", "footprint_offroad_excursion", "max_threads", "obb_overlap_batch", "points_in_polygon", "road_map", "segments_intersect_batch",
]

# The vocabulary (see cyext/vocabulary.pxi) and the kernels, under their engine names.
AGENT_CLASSES = _engine.AGENT_CLASSES
CLASS_PARAMS = _engine.CLASS_PARAMS
CONSEQUENCES = _engine.CONSEQUENCES
CONTROL_TYPES = _engine.CONTROL_TYPES
COUNTER_NAMES = _engine.COUNTER_NAMES
REWARD_TERMS = _engine.REWARD_TERMS
STEP_EVENTS = _engine.STEP_EVENTS
MOVERS = _engine.MOVERS
EPISODE_METRIC_NAMES = _engine.EPISODE_METRIC_NAMES
COLLISION_TYPES = _engine.COLLISION_TYPES
METRIC_PARAMS = _engine.METRIC_PARAMS
CROSSING_GROUPS = _engine.CROSSING_GROUPS
PEDESTRIAN_STATS = _engine.PEDESTRIAN_STATS
DYNAMICS_MODELS = _engine.DYNAMICS_MODELS
ENTITY_WIDTHS = _engine.ENTITY_WIDTHS
GOAL_BEHAVIORS = _engine.GOAL_BEHAVIORS
INIT_MODES = _engine.INIT_MODES
KINEMATIC_PARAMS = _engine.KINEMATIC_PARAMS
OBS_BOUND = _engine.OBS_BOUND
OBS_TYPES = _engine.OBS_TYPES
ROAD_TYPES = _engine.ROAD_TYPES
ROLES = _engine.ROLES
SIGNAL_CONTROLLERS = _engine.SIGNAL_CONTROLLERS
SIGNAL_STAGES = _engine.SIGNAL_STAGES
SIGNAL_STATES = _engine.SIGNAL_STATES
STOP_STATES = _engine.STOP_STATES
STATIC_KINDS = _engine.STATIC_KINDS
STATIC_GENERATORS = _engine.STATIC_GENERATORS
KIND_CODES = _engine.KIND_CODES
TYPE_CODES = _engine.TYPE_CODES
VOCABULARY = _engine.VOCABULARY
ObsLayout = _engine.ObsLayout
SegmentGrid = _engine.SegmentGrid
box_corners_batch = _engine.box_corners_batch
box_ttc_batch = _engine.box_ttc_batch
collision_type_batch = _engine.collision_type_batch
footprint_offroad = _engine.footprint_offroad
footprint_offroad_excursion = _engine.footprint_offroad_excursion
obb_overlap_batch = _engine.obb_overlap_batch
orca_solve_batch = _engine.orca_solve_batch
orca_step_batch = _engine.orca_step_batch
points_in_polygon = _engine.points_in_polygon
segments_intersect_batch = _engine.segments_intersect_batch
# Entry-point checks shared with the worker-process engine (cyext/scene_checks.pxi).
check_num_threads = _engine.check_num_threads
check_seeds = _engine.check_seeds
max_threads = _engine.max_threads

if REWARD_PARAMS != _engine.REWARD_PARAMS:  # the config may be older or newer than the compiled engine
    raise ImportError(f"terrazero_env.config.REWARD_PARAMS {REWARD_PARAMS} differ from the compiled engine's "
                      f"{_engine.REWARD_PARAMS}; rebuild the engine (python setup.py build_ext --inplace)")


class RoadMap(_engine.RoadMap):
    """A built map indexed for simulation (see ``_engine.RoadMap``), with its signal plan and lane
    conflicts computed here. ``map_data``: a built :class:`~terrazero_env.maps.MapData`, checked with
    :func:`~terrazero_env.maps.validate_built` first (the checks of ``terrazero maps build``: the
    engine's loops trust every index), so a bad map raises ``MapValidationError`` naming the field;
    ``index_options``: ``cell_size``, ``obs_radius``, ``obs_segment_length``, ``obs_cell_size``,
    ``obs_max_candidates``."""

    def __init__(self, map_data: MapData, **index_options: Any):
        if not isinstance(map_data, MapData):
            raise TypeError(f"RoadMap needs a built MapData, got {type(map_data).__name__}; "
                            f"use road_map() for a path or a bundled map name")
        check_index_options(index_options)
        validate_built(map_data)
        super().__init__(map_data, signal_plan(map_data), lane_conflicts(map_data),
                         head_log=logged_head_states(map_data), **index_options)

    @classmethod
    def load(cls, path: str | os.PathLike[str], **index_options: Any) -> RoadMap:
        """Read a ``.tzb`` file and index it."""
        return cls(load_tzb(path), **index_options)


INDEX_OPTION_RANGES = {  # name: (low, high, unit); the work and memory of an index grow as 1/cell^2
    "cell_size": (0.5, 1000.0, "m"),
    "obs_radius": (0.1, 1000.0, "m"),
    "obs_segment_length": (0.1, 1000.0, "m"),
    "obs_cell_size": (0.5, 1000.0, "m"),
    "obs_max_candidates": (1, 100_000, "segments"),
}


def check_index_options(options: Mapping[str, Any]) -> None:
    """Raise naming the option for an unknown road-index option or one outside its range
    (``INDEX_OPTION_RANGES``), before the index allocates anything."""
    unknown = sorted(set(options) - set(INDEX_OPTION_RANGES))
    if unknown:
        raise TypeError(f"RoadMap got unexpected keyword arguments {unknown} "
                        f"(index options: {', '.join(INDEX_OPTION_RANGES)})")
    for name, v in options.items():
        lo, hi, unit = INDEX_OPTION_RANGES[name]
        if name == "obs_max_candidates":
            check_int(f"RoadMap {name}", v, lo, hi)
        else:
            check_float(f"RoadMap {name}", v, lo, hi, unit=f" of {unit}")


def road_map(source: MapData | str | os.PathLike[str], **index_options: Any) -> RoadMap:
    """A :class:`RoadMap` from a MapData (built here), a ``.tzb`` path or a bundled map name."""
    m = build(source) if isinstance(source, MapData) else load_built(source)
    return RoadMap(m, **index_options)


class DatasetRoadMaps:
    """RoadMaps of a :class:`~terrazero_env.maps.Dataset`'s scenarios, built on first use and cached
    like the dataset's maps (at most ``dataset.cache_size``, least recently used dropped)."""

    def __init__(self, dataset: Dataset, **index_options: Any):
        self.dataset = dataset
        self.index_options = index_options
        self._cache: OrderedDict[int, RoadMap] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        # The compiled road indexes do not pickle; copies rebuild them on first use.
        return {**self.__dict__, "_cache": OrderedDict()}

    def __getitem__(self, i: int) -> RoadMap:
        i = int(i)
        if i in self._cache:
            self._cache.move_to_end(i)
            return self._cache[i]
        rm = RoadMap(self.dataset[i], **self.index_options)
        self._cache[i] = rm
        while len(self._cache) > self.dataset.cache_size:
            self._cache.popitem(last=False)
        return rm


def engine_tables(config: EngineConfig) -> dict[str, np.ndarray]:
    """``config`` flattened for the engine: ``EngineConfig.tables`` in the engine's column order plus
    ``alpha``, the engine indices of the observed reward parameters."""
    tables = config.tables(_engine.REWARD_PARAMS, _engine.CLASS_PARAMS)
    names = [REWARD_PARAMS[i] for i in config.active_reward_params()]
    tables["alpha"] = np.array([_engine.REWARD_PARAMS.index(n) for n in names], np.int32)
    return tables


class Engine(_engine.Engine):
    """W worlds x K controlled slots stepped without the GIL (see ``_engine.Engine`` for the buffers).

    ``config``: an :class:`~terrazero_env.config.EngineConfig` (default: the paper's). ``maps``: a
    MapData, a ``.tzb`` path, a bundled map name or a :class:`RoadMap`, or a list of them (default:
    the config's ``maps``); worlds are assigned to maps round-robin unless ``world_map`` gives each
    world's map index. ``num_threads``: OpenMP threads stepping worlds in parallel.
    """

    def __init__(self, config: EngineConfig | None = None, maps: Any = None, world_map: Any = None,
                 num_threads: int = 1):
        if config is None:
            config = EngineConfig()
        if not isinstance(config, EngineConfig):
            raise TypeError(f"config must be an EngineConfig, got {type(config).__name__}")
        o = config.obs
        if maps is None:
            maps = list(config.maps)
        road_maps = [src if isinstance(src, _engine.RoadMap) else
                     road_map(src, obs_radius=o.road_radius, obs_segment_length=o.road_segment_length)
                     for src in (maps if isinstance(maps, (list, tuple)) else [maps])]
        super().__init__(config, road_maps, engine_tables(config), world_map=world_map, num_threads=num_threads)
