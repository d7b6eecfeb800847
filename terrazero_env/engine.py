"""The engine's public face: configuration and maps resolved for the compiled core.

The compiled module (``terrazero_env._engine``) imports neither ``terrazero_env.config`` nor
``terrazero_env.maps``; this module sits above all three and owns the glue between them. It loads and
builds maps and computes their indexes (signal plan, lane conflicts) for :class:`RoadMap`, flattens an
``EngineConfig`` into the engine's one named input (``engine_settings``: its scalar settings as a flat
dict, checked by the engine against its own key list) and the tables it reads, in the engine's column
order, and re-exports the
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
from .config import NEIGHBOUR_SEARCH, REWARD_PARAMS, VIOLATIONS, Consequence, EngineConfig
from .foundation.checks import check_float, check_int
from .maps import Dataset, MapData, build, validate_built
from .maps.bends import lane_bends
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
    "box_ttc_batch", "check_num_threads", "check_seeds", "collision_type_batch", "engine_settings", "engine_tables",
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
                         head_log=logged_head_states(map_data), lane_bends=lane_bends(map_data), **index_options)

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


#: The ``ObsConfig`` fields the engine reads (``road_segment_length`` is the map index's, read here).
_OBS_SETTINGS = (
    "agent_type", "rel_goal_pos", "goal_dropout_flag", "state_dropout_flag", "speed", "vehicle_dims",
    "collision_state", "steering_angle", "acceleration", "stop_sign_state", "alpha_params",
    "kinematic_params", "lane_state", "lateral_velocity", "yaw_rate", "road_curvature", "curvature_lookahead",
    "road_curvature_route", "topology_goal_distance", "topology_max_distance", "stop_line_ahead",
    "stop_line_route", "goal_scale", "speed_scale", "partners", "max_partners", "partner_radius",
    "partner_acceleration", "road", "max_road_segments", "road_radius", "traffic", "max_traffic",
    "traffic_lights", "max_traffic_lights", "traffic_radius", "z_gate", "dtype", "noise_std", "noise_clip",
    "slot_dropout", "state_dropout",
)
_INIT_SETTINGS = ("class_weights", "controlled", "goal_dropout", "spawn_clearance", "num_agents", "placement_tries",
                  "randomize_kinematics", "p_random", "initial_speed", "goal_distance", "goal_min_forward",
                  "kinematic_range", "goal_lane_change", "goal_turnable")
_IDM_SETTINGS = ("v0_scale", "time_headway", "max_accel", "comfort_decel", "min_gap", "delta", "lookahead",
                 "reroll_prob", "max_decel", "curve_lat_accel", "side_margin")
_SIGNAL_SETTINGS = ("replay_logged", "christmas_green", "christmas_yellow", "christmas_red", "left_green",
                    "through_green", "yellow", "all_red", "permissive_left_prob", "nema_green_sigma", "stop_speed",
                    "stop_dwell", "stop_region")
_REWARD_FORM_SETTINGS = ("route_max_distance", "goal_progress_gamma")
_ROAD_USER_SETTINGS = (
    "idm_modes", "parked_row", "static_sizes", "crash_vehicles", "workers", "debris_size", "static_clearance",
    "static_tries", "planner_offsets", "planner_speeds", "planner_interval", "planner_horizon",
    "planner_resolution", "planner_weights", "planner_ttc", "planner_min_progress", "planner_margin",
    "planner_lateral_time", "lane_change", "lane_change_distance", "lane_change_clear_ahead",
    "lane_change_safe_decel", "lane_change_cooldown", "lane_change_lookahead", "lane_change_margin",
    "route_blocks", "route_block_distance", "route_block_offset", "route_block_kinds",
)
_PEDESTRIAN_SETTINGS = ("group_probs", "group_size", "stagger_interval", "walking_speed", "max_speed", "radius",
                        "neighbor_distance", "time_horizon", "jaywalk_reach", "vehicle_yield_horizon")


def engine_settings(config: EngineConfig) -> dict[str, Any]:
    """``config``'s scalar settings as the engine's one named input: a flat dict of plain values
    (numbers, bools, tuples; enums as their integer codes) keyed by the config's dotted names, with a
    few values resolved here (``init.log_role_table``, the ``*_range`` pairs of the shares and rates,
    ``road_users.static_counts``, ``init.class_kinematic_ranges`` with its default, and
    ``classes.longest_extent``). The engine checks the keys against its own list
    (``_engine.ENGINE_SETTINGS``) at construction: a missing or extra key is an error naming it."""
    c, o, ini, ru, sg, idm, rf = config, config.obs, config.init, config.road_users, config.signals, config.idm, \
        config.reward_forms
    pc = ru.pedestrians
    s: dict[str, Any] = {k: getattr(c, k) for k in (
        "num_worlds", "slots_per_world", "max_agents_per_world", "dt", "episode_length", "wrong_way_angle",
        "offroad_tolerance", "lane_max_distance", "lane_align_angle", "lane_tracking")}
    s.update({f"consequences.{k}": int(c.consequences.get(k, Consequence.NONE)) for k in VIOLATIONS})
    s["neighbour_search"] = NEIGHBOUR_SEARCH.index(c.neighbour_search)
    s["classes.longest_extent"] = max(max(spec.length[1], spec.width[1]) for spec in c.classes.values())
    s.update({f"obs.{k}": getattr(o, k) for k in _OBS_SETTINGS})
    s.update({f"init.{k}": getattr(ini, k) for k in _INIT_SETTINGS})
    s["init.mode"] = int(ini.mode)
    s["init.goal_behavior"] = int(ini.goal_behavior)
    s["init.log_role_table"] = np.asarray(ini.log_role_table(), np.float64)
    s["init.class_kinematic_ranges"] = tuple(ini.class_kinematic_ranges or (ini.kinematic_range,) * len(c.classes))
    s.update({f"idm.{k}": getattr(idm, k) for k in _IDM_SETTINGS})
    s.update({f"signals.{k}": getattr(sg, k) for k in _SIGNAL_SETTINGS})
    s["signals.controller"] = int(sg.controller)
    s.update({f"reward_forms.{k}": getattr(rf, k) for k in _REWARD_FORM_SETTINGS})
    s.update({f"reward_forms.{k}": int(getattr(rf, k))
              for k in ("vel_align", "speed_limit", "goal_progress", "goal_progress_shaping")})
    s.update({f"road_users.{k}": getattr(ru, k) for k in _ROAD_USER_SETTINGS})
    s.update({f"road_users.{k}_range": ru.prob_range(k) for k in ("idm_fraction", "worker_prob", "planner_fraction")})
    s["road_users.static_counts"] = ru.static_counts()
    s.update({f"road_users.pedestrians.{k}": getattr(pc, k) for k in _PEDESTRIAN_SETTINGS})
    s.update({f"road_users.pedestrians.{k}_range": pc.rate_range(k) for k in ("crossing_rate", "jaywalk_rate")})
    return s


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
        super().__init__(engine_settings(config), road_maps, engine_tables(config), world_map=world_map,
                         num_threads=num_threads)
        self.config = config
