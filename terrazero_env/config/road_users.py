"""Configuration of the rule-based road users (TerraZero section 4.4, figure 4, table 15): the IDM
share and behaviour modes, the static generators (parked rows, crash clusters, construction zones,
debris) and the pedestrian generators (crosswalk crossers under ORCA, jaywalkers). ``EngineConfig``
holds one :class:`RoadUsersConfig` as ``road_users``; ``terrazero_env.config`` re-exports every name
here. Like the rest of the configuration, every field is documented (unit and source) and checked at
construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from ..foundation.checks import check_bool, check_float, check_int, check_pair, check_tuple
from ..foundation.checks import set_field as _set

__all__ = ["CrossingGroup", "PedestrianConfig", "RoadUsersConfig", "StaticGenerator", "StaticKind"]


class CrossingGroup(IntEnum):
    """Kinds of crossing group arriving at a crosswalk (TerraZero section 4.4, figure 4)."""

    SINGLE = 0
    """One crosser from either end."""
    PACK = 1
    """Several crossers from one end, side by side."""
    BIDIRECTIONAL = 2
    """A pack from each end at once, walking through each other under ORCA."""
    STAGGERED = 3
    """Several crossers from one end, one after another."""


@dataclass(frozen=True)
class PedestrianConfig:
    """Rule-based pedestrians (TerraZero section 4.4, figure 4): crosswalk crossers under reciprocal
    collision avoidance (ORCA, van den Berg et al. 2011) and mid-block jaywalkers. The paper names
    the generators but gives no numbers; every value is ours. Both generators are off by default."""

    crossing_rate: float | tuple[float, float] = 0.0
    """Crossing events (groups) per crosswalk per second, a Poisson rate >= 0, or a ``(min, max)`` range
    from which each world draws its rate at reset; 0 turns crossers off (ours)."""
    group_probs: tuple[float, float, float, float] = (0.4, 0.2, 0.2, 0.2)
    """Probabilities of the group kinds (single, pack, bidirectional, staggered; ``CrossingGroup``
    order), each in [0, 1], summing to 1 (ours)."""
    group_size: tuple[int, int] = (2, 4)
    """Members of a pack (per side for a bidirectional flow) and of a staggered sequence, a count
    range within [1, 8] (ours)."""
    stagger_interval: float = 1.5
    """Seconds between the members of a staggered sequence, > 0 (ours)."""
    walking_speed: tuple[float, float] = (1.0, 1.6)
    """Preferred walking speed range (m/s), > 0 (ours; adult walking speeds are about 1.2-1.5 m/s)."""
    max_speed: float = 2.0
    """Speed limit of the ORCA velocity (m/s), > 0 and at least the fastest walking speed (ours)."""
    radius: float = 0.35
    """Least ORCA disc radius (m), > 0; a pedestrian whose box has a larger half diagonal uses that (ours)."""
    neighbor_distance: float = 5.0
    """Range (m, between disc edges) within which other pedestrians enter a walker's ORCA program, > 0 (ours;
    RVO2's examples use 10-15 m for faster agents)."""
    time_horizon: float = 2.0
    """ORCA time horizon tau (s), > 0: velocities that would touch a neighbour within it are excluded (ours)."""
    jaywalk_rate: float | tuple[float, float] = 0.0
    """Jaywalkers per world per second, a Poisson rate >= 0 or a ``(min, max)`` range drawn per world at reset,
    each crossing a random spawn lane mid-block; 0 turns them off (ours)."""
    jaywalk_reach: float = 30.0
    """How far (m) from the lane a jaywalker's road edges are searched for, > 0; a crossing point without an
    edge within it on both sides is skipped (ours)."""
    vehicle_yield_horizon: float = 3.0
    """Seconds ahead over which IDM vehicles predict a moving pedestrian's straight walk and stop short of
    where it would enter their path (crosswalk or not), >= 0; 0 turns yielding off (ours)."""

    def __post_init__(self) -> None:
        for name in ("crossing_rate", "jaywalk_rate"):
            v = getattr(self, name)
            if isinstance(v, (list, tuple)):
                _set(self, name, check_pair(f"PedestrianConfig.{name}", v, 0.0, unit=" (per second)"))
            else:
                check_float(f"PedestrianConfig.{name}", v, 0.0)
        check_float("PedestrianConfig.vehicle_yield_horizon", self.vehicle_yield_horizon, 0.0)
        probs = check_tuple("PedestrianConfig.group_probs", self.group_probs, len(CrossingGroup))
        for i, g in enumerate(CrossingGroup):
            check_float(f"PedestrianConfig.group_probs[{i}] ({g.name.lower()})", probs[i], 0.0, 1.0)
        if abs(sum(probs) - 1.0) > 1e-6:
            raise ValueError(f"PedestrianConfig.group_probs: must sum to 1, got {sum(probs)!r}")
        _set(self, "group_probs", probs)
        _set(self, "group_size", check_pair("PedestrianConfig.group_size", self.group_size, 1, 8, ints=True))
        _set(self, "walking_speed", check_pair("PedestrianConfig.walking_speed", self.walking_speed, 0.0,
                                               lo_open=True, unit=" (m/s)"))
        for name in ("stagger_interval", "max_speed", "radius", "neighbor_distance", "time_horizon", "jaywalk_reach"):
            check_float(f"PedestrianConfig.{name}", getattr(self, name), 0.0, lo_open=True)
        if self.max_speed < self.walking_speed[1]:
            raise ValueError(f"PedestrianConfig.max_speed: {self.max_speed!r} is below the fastest walking speed "
                             f"{self.walking_speed[1]!r}")

    def rate_range(self, name: str) -> tuple[float, float]:
        """``(min, max)`` of ``crossing_rate`` or ``jaywalk_rate`` (a fixed rate gives ``(r, r)``)."""
        if name not in ("crossing_rate", "jaywalk_rate"):
            raise ValueError(f"PedestrianConfig.rate_range: no rate named {name!r} (crossing_rate, jaywalk_rate)")
        v = getattr(self, name)
        return (float(v[0]), float(v[1])) if isinstance(v, tuple) else (float(v), float(v))


class StaticKind(IntEnum):
    """What a static actor is (the ``kind`` column of ``Engine.agents``)."""

    NONE = 0
    """Not a static actor of a generator."""
    PARKED = 1
    CRASHED = 2
    CONE = 3
    WORKER = 4
    DEBRIS = 5


class StaticGenerator(IntEnum):
    """Static-actor generators (TerraZero section 4.4, figure 4), in the engine's order."""

    PARKED = 0
    CRASH_DISC = 1
    CRASH_CHAIN = 2
    CRASH_TBONE = 3
    CRASH_FAN = 4
    CONE_GRID = 5
    CONE_TAPER = 6
    LANE_BLOCK = 7
    DEBRIS = 8


def _count_range(where: str, v: Any, hi: int = 64) -> tuple[int, int]:
    """A per-episode count: a fixed integer or an inclusive ``(min, max)``."""
    if isinstance(v, int) and not isinstance(v, bool):
        v = (v, v)
    return check_pair(where, v, 0, hi, ints=True)


@dataclass(frozen=True)
class RoadUsersConfig:
    """Rule-based road users of a scene (TerraZero section 4.4)."""

    # -- IDM traffic and static actors ------------------------------------------------------------
    idm_fraction: float | tuple[float, float] = 0.0
    """Share in [0, 1] of the background vehicles (cars, trucks, buses the policy does not control)
    driven by the IDM controller (section 4.4), or a ``(min, max)`` range from which each world draws
    its share at reset; the rest stay where they were placed (ours). The YAML
    key ``init.idm_fraction`` of earlier configs is read as this field."""
    idm_modes: tuple[float, float, float] = (1.0, 1.0, 1.0)
    """Relative frequency (non-negative, not all zero) of the IDM behaviour modes (default, assertive,
    cautious) at placement and reroll (section 4.4 names the modes; equal weights are ours)."""
    lane_change: bool = True
    """IDM vehicles change to a free adjacent same-direction lane around a static actor ahead of them;
    False: they stop behind it and wait."""
    lane_change_distance: float = 30.0
    """A static actor that is an IDM vehicle's nearest constraint within this travel (m) prompts a
    lane change, in (0, 200] (ours)."""
    lane_change_clear_ahead: float = 30.0
    """Nothing at rest may lie this far (m) ahead of the vehicle's front in the new lane, in [0, 200]
    (ours; the obstacle must not block that lane too)."""
    lane_change_safe_decel: float = 4.0
    """Largest braking (m/s^2) a change may impose on the new follower (MOBIL's safety criterion,
    Kesting et al. 2007, b_safe = 4 m/s^2) or on the vehicle behind its new leader, in (0, 20]."""
    lane_change_cooldown: float = 5.0
    """Seconds after a change before the vehicle may change again, in [0, 600] (ours)."""
    lane_change_lookahead: float = 1.0
    """Extra pure-pursuit lookahead (seconds of travel) while the vehicle crosses to its new lane, in
    [0, 5]: larger is a gentler change (ours)."""
    lane_change_margin: float = 0.3
    """Lateral clearance (m) the vehicle's corridor in the new lane keeps from agents beside it, in
    [0, 5] (ours)."""
    # -- planner-driven traffic (PDM-Closed style; cyext/planner.pxd) -----------------------------------
    planner_fraction: float | tuple[float, float] = 0.0
    """Share in [0, 1] of the IDM vehicles driven by the closed-loop planner in the style of PDM-Closed
    (section 4.4, "reactive vehicles"; Dauner et al. 2023), or a ``(min, max)`` range from which each
    world draws its share at reset; 0 (the default) turns planner traffic off and draws nothing (ours).
    A planner vehicle looks like an IDM vehicle to the policy."""
    planner_interval: float = 1.0
    """Seconds between two plans of a planner vehicle, in [0.1, 10]; between plans it tracks the last
    winner (ours: 1 s; PDM-Closed replans every 0.1 s)."""
    planner_horizon: float = 4.0
    """Seconds each proposal is forward-simulated, in (0, 10] (PDM-Closed: 4 s)."""
    planner_resolution: float = 0.2
    """Seconds per simulated step, in [0.05, 1]; horizon / resolution must be 1 to 60 steps (ours;
    PDM-Closed simulates at 0.1 s)."""
    planner_offsets: tuple[float, ...] = (-1.0, 0.0, 1.0)
    """Lateral offsets of the proposals in lane widths from the centre of the vehicle's lane, left
    positive, 1 to 5 distinct values in [-1.5, 1.5] including 0: beyond half a lane the vehicle moves
    to the neighbour lane on that side, so +-1 is a lane change (to overtake) and +-0.5 a nudge over
    the line (ours; PDM-Closed offsets its centreline by +-1 m, which cannot clear a blocked lane)."""
    planner_speeds: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0)
    """Target speeds of the proposals' IDM law as fractions of the lane's speed limit, 1 to 8 distinct
    values in [0, 1.5] (PDM-Closed: 20%, 40%, ..., 100%)."""
    planner_weights: tuple[float, float, float, float] = (5.0, 5.0, 2.0, 2.0)
    """Score weights (progress, time to collision, comfort, lane keeping), non-negative, not all zero
    (PDM-Closed weights progress 5, TTC 5, comfort 2; lane keeping, which PDM-Closed leaves to its
    centreline, is ours)."""
    planner_ttc: float = 0.95
    """A proposal scores on time to collision when the least TTC to its corridor's leader stays above
    this (s), in [0, 10] (nuPlan's closed-loop score: 0.95 s)."""
    planner_min_progress: float = 5.0
    """Progress scores relative to the best proposal's unless that is under this (m), when every
    proposal scores 1 on progress, in [0, 100] (PDM-Closed / nuPlan: 5 m)."""
    planner_margin: float = 0.3
    """Lateral clearance (m) of a proposal's corridor and of its collision veto, in [0, 2] (ours)."""
    planner_lateral_time: float = 3.0
    """Seconds a proposal's simulated lateral move (a smoothstep) takes, in [0.5, 10] (ours)."""
    # -- static actors -----------------------------------------------------------------------------
    parked: tuple[int, int] = (0, 0)
    """Rows of parked vehicles per world, a count or (min, max) in [0, 64] (section 4.4; ours)."""
    parked_row: tuple[int, int] = (1, 3)
    """Vehicles per parked row, (min, max) in [1, 12] (ours)."""
    crash_disc: tuple[int, int] = (0, 0)
    """Crashed-vehicle clusters per world scattered over a disc (section 4.4, figure 4), a count or (min, max)."""
    crash_chain: tuple[int, int] = (0, 0)
    """Rear-end chains per world (section 4.4, figure 4), a count or (min, max)."""
    crash_tbone: tuple[int, int] = (0, 0)
    """T-bone pairs per world (section 4.4, figure 4), a count or (min, max)."""
    crash_fan: tuple[int, int] = (0, 0)
    """Outward fans per world (section 4.4, figure 4), a count or (min, max)."""
    crash_vehicles: tuple[int, int] = (2, 4)
    """Vehicles per disc or fan cluster, (min, max) in [1, 8]; a chain takes 2 to max (ours)."""
    cone_grid: tuple[int, int] = (0, 0)
    """Cone grids per world (construction zones, section 4.4), a count or (min, max)."""
    cone_taper: tuple[int, int] = (0, 0)
    """Diagonal cone tapers per world, each within one lane (section 4.4), a count or (min, max)."""
    lane_block: tuple[int, int] = (0, 0)
    """Perpendicular cone lines closing a lane, per world (section 4.4), a count or (min, max)."""
    debris: tuple[int, int] = (0, 0)
    """Isolated pieces of debris per world (section 4.4), a count or (min, max)."""
    static_sizes: tuple[float, float, float] = (0.8, 0.1, 0.1)
    """Relative frequency (non-negative, not all zero) of car, truck and bus sizes among parked and
    crashed vehicles (dimensions from each class's ranges; the weights are ours)."""
    worker_prob: float | tuple[float, float] = 0.5
    """Probability in [0, 1] that a construction zone has stationary workers, or a ``(min, max)`` range
    from which each world draws its probability at reset (ours)."""
    workers: tuple[int, int] = (1, 2)
    """Workers per zone that has them, (min, max) in [1, 8] (ours)."""
    debris_size: tuple[float, float] = (0.3, 1.0)
    """(min, max) side of a piece of debris (m) (ours)."""
    static_clearance: float = 0.5
    """Gap (m) a static group keeps from every agent placed before it (ours)."""
    static_tries: int = 20
    """Placement attempts per static instance, in [1, 1000] (ours)."""
    route_blocks: float = 0.0
    """Share in [0, 1] of the controlled vehicles that find a stopped vehicle standing in their lane on
    their lane-graph route to their goal, ``route_block_distance`` ahead (ours: the long-tail training
    worlds, where the generators above rarely put anything in a car's way; TerraZero section 6.2
    trains among such a population). 0 draws nothing."""
    route_block_distance: tuple[float, float] = (15.0, 40.0)
    """(min, max) distance (m) along the route from the vehicle to the stopped vehicle, whose goal must
    lie at least 10 m past it (ours)."""
    route_block_offset: float = 1.0
    """Largest sideways shift (m) of the stopped vehicle from the lane centre towards the curb, drawn
    uniformly from [0, this]: a nudge past it or a full pass (ours)."""
    route_block_kinds: tuple[float, float, float] = (1.0, 0.0, 0.0)
    """Relative frequency of what stands on a route (``route_blocks``): a stopped vehicle, a
    construction zone (a cone taper or a lane-block line across the lane, with the ``worker_prob``
    workers) and a crashed-vehicle cluster (a rear-end chain or a T-bone, ``crash_vehicles``): the
    three obstacle families of InterPlan (ours; a stopped vehicle only by default)."""
    # -- pedestrians -------------------------------------------------------------------------------
    pedestrians: PedestrianConfig = field(default_factory=PedestrianConfig)
    """Crosswalk crossers and jaywalkers (section 4.4, figure 4)."""

    def __post_init__(self) -> None:
        for name in ("idm_fraction", "worker_prob", "planner_fraction"):
            v = getattr(self, name)
            if isinstance(v, (list, tuple)):
                _set(self, name, check_pair(f"RoadUsersConfig.{name}", v, 0.0, 1.0))
            else:
                check_float(f"RoadUsersConfig.{name}", v, 0.0, 1.0)
        check_float("RoadUsersConfig.route_blocks", self.route_blocks, 0.0, 1.0)
        _set(self, "route_block_distance", check_pair("RoadUsersConfig.route_block_distance",
                                                      self.route_block_distance, 0.0, 500.0))
        check_float("RoadUsersConfig.route_block_offset", self.route_block_offset, 0.0, 3.0, unit=" of metres")
        check_bool("RoadUsersConfig.lane_change", self.lane_change)
        check_float("RoadUsersConfig.lane_change_distance", self.lane_change_distance, 0.0, 200.0, lo_open=True,
                    unit=" of metres")
        for name, hi, unit in (("lane_change_clear_ahead", 200.0, " of metres"), ("lane_change_cooldown", 600.0, " s"),
                               ("lane_change_lookahead", 5.0, " s"), ("lane_change_margin", 5.0, " of metres")):
            check_float(f"RoadUsersConfig.{name}", getattr(self, name), 0.0, hi, unit=unit)
        check_float("RoadUsersConfig.lane_change_safe_decel", self.lane_change_safe_decel, 0.0, 20.0, lo_open=True,
                    unit=" of m/s^2")
        for name, n in (("idm_modes", 3), ("static_sizes", 3), ("route_block_kinds", 3)):
            w = check_tuple(f"RoadUsersConfig.{name}", getattr(self, name), n)
            for i, x in enumerate(w):
                check_float(f"RoadUsersConfig.{name}[{i}]", x, 0.0)
            if sum(w) <= 0:
                raise ValueError(f"RoadUsersConfig.{name}: {n} non-negative weights, not all zero, got {w}")
            _set(self, name, w)
        for g in StaticGenerator:
            name = g.name.lower()
            _set(self, name, _count_range(f"RoadUsersConfig.{name}", getattr(self, name)))
        for name, lo, hi in (("parked_row", 1, 12), ("crash_vehicles", 1, 8), ("workers", 1, 8)):
            _set(self, name, check_pair(f"RoadUsersConfig.{name}", getattr(self, name), lo, hi, ints=True))
        _set(self, "debris_size", check_pair("RoadUsersConfig.debris_size", self.debris_size, 0.05, 5.0,
                                             unit=" of metres"))
        check_float("RoadUsersConfig.static_clearance", self.static_clearance, 0.0, 10.0, unit=" of metres")
        check_int("RoadUsersConfig.static_tries", self.static_tries, 1, 1000)
        self._check_planner()
        if not isinstance(self.pedestrians, PedestrianConfig):
            raise ValueError(f"RoadUsersConfig.pedestrians: a PedestrianConfig, got {type(self.pedestrians).__name__}")

    def _check_planner(self) -> None:
        """The ``planner_*`` fields (see their docstrings); errors name the field."""
        for name, lo, hi, lo_open in (("planner_interval", 0.1, 10.0, False), ("planner_horizon", 0.0, 10.0, True),
                                      ("planner_resolution", 0.05, 1.0, False), ("planner_ttc", 0.0, 10.0, False),
                                      ("planner_min_progress", 0.0, 100.0, False), ("planner_margin", 0.0, 2.0, False),
                                      ("planner_lateral_time", 0.5, 10.0, False)):
            check_float(f"RoadUsersConfig.{name}", getattr(self, name), lo, hi, lo_open=lo_open)
        steps = round(self.planner_horizon / self.planner_resolution)
        if not 1 <= steps <= 60:
            raise ValueError(f"RoadUsersConfig.planner_horizon: {self.planner_horizon!r} s at planner_resolution "
                             f"{self.planner_resolution!r} s is {steps} steps; 1 to 60 allowed")
        for name, n_max, lo, hi in (("planner_offsets", 5, -1.5, 1.5), ("planner_speeds", 8, 0.0, 1.5)):
            vals = check_tuple(f"RoadUsersConfig.{name}", getattr(self, name), min_len=1)
            if len(vals) > n_max:
                raise ValueError(f"RoadUsersConfig.{name}: at most {n_max} values, got {len(vals)}")
            for i, x in enumerate(vals):
                check_float(f"RoadUsersConfig.{name}[{i}]", x, lo, hi)
            if len(set(float(x) for x in vals)) != len(vals):
                raise ValueError(f"RoadUsersConfig.{name}: values must be distinct, got {vals}")
            _set(self, name, tuple(float(x) for x in vals))
        if 0.0 not in self.planner_offsets:
            raise ValueError(f"RoadUsersConfig.planner_offsets: must include 0 (keep the lane), got "
                             f"{self.planner_offsets}")
        if max(self.planner_speeds) <= 0:
            raise ValueError(f"RoadUsersConfig.planner_speeds: at least one target speed above 0, got "
                             f"{self.planner_speeds}")
        w = check_tuple("RoadUsersConfig.planner_weights", self.planner_weights, 4)
        for i, (x, what) in enumerate(zip(w, ("progress", "ttc", "comfort", "lane keeping"))):
            check_float(f"RoadUsersConfig.planner_weights[{i}] ({what})", x, 0.0)
        if sum(w) <= 0:
            raise ValueError(f"RoadUsersConfig.planner_weights: 4 non-negative weights, not all zero, got {w}")
        _set(self, "planner_weights", tuple(float(x) for x in w))

    def prob_range(self, name: str) -> tuple[float, float]:
        """``(min, max)`` of ``idm_fraction``, ``worker_prob`` or ``planner_fraction`` (a fixed value gives
        ``(p, p)``)."""
        if name not in ("idm_fraction", "worker_prob", "planner_fraction"):
            raise ValueError(f"RoadUsersConfig.prob_range: no share named {name!r} "
                             "(idm_fraction, worker_prob, planner_fraction)")
        v = getattr(self, name)
        return (float(v[0]), float(v[1])) if isinstance(v, tuple) else (float(v), float(v))

    def static_counts(self) -> tuple[tuple[int, int], ...]:
        """(min, max) instances per world of each generator, in ``StaticGenerator`` order."""
        return tuple(getattr(self, g.name.lower()) for g in StaticGenerator)
