"""Engine configuration: frozen dataclasses whose defaults are the TerraZero paper's values.

Every number the engine uses lives here with its unit and source (a paper table or appendix, or
"ours" where the paper gives no value), and every field is checked on construction for type, range,
finiteness and enum membership (:mod:`terrazero_env.foundation.checks`), so that a bad value fails with a
message naming the field, never inside the compiled step. ``EngineConfig.tables()`` flattens a config into the dense arrays the engine reads.

The enums here (and ``REWARD_PARAMS``, ``CLASS_PARAM_COLUMNS``) are the configuration's side of the
engine's vocabulary. They stay plain Python because config must load, validate and round-trip
without the compiled engine (it sits below it in the import order); the engine declares the same
names as C enums (``cyext/common.pxd``, exported by ``vocabulary.pxi``). ``tests/test_vocabulary.py``
fails when either side changes alone, and ``tables()`` takes its column orders by name from the
caller (the env layer passes the engine's), so a reorder on one side cannot silently mis-feed it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

from ..foundation.checks import check_bool, check_enum, check_float, check_int, check_pair, check_tuple
from ..foundation.checks import set_field as _set
from ..maps.schema import AgentType
from .classes import (
    _CYC,
    _PED,
    _VEH,
    CLASS_PARAM_COLUMNS,
    REWARD_PARAMS,
    ClassSpec,
    DynamicsModel,
    RewardRange,
    default_classes,
    default_rewards,
)
from .log_roles import LogRoles, check_log_roles, log_role_table
from .observation import ObsConfig
from .reward_forms import GoalProgressForm, ProgressShaping, RewardForms, SpeedLimitSource, VelAlignForm
from .road_users import (
    CrossingGroup,
    PedestrianConfig,
    RoadUsersConfig,
    StaticGenerator,
    StaticKind,
)

__all__ = [
    "AgentType", "ClassSpec", "Consequence", "CrossingGroup", "DynamicsModel", "EngineConfig", "GoalBehavior",
    "GoalProgressForm", "InitConfig", "ProgressShaping", "LogRoles", "PedestrianConfig", "RewardForms", "RoadUsersConfig", "SpeedLimitSource", "StaticGenerator", "StaticKind", "VIOLATIONS", "kinematic_ranges_table15",
    "CLASS_PARAM_COLUMNS", "InitMode", "NEIGHBOUR_SEARCH", "ObsConfig", "REWARD_PARAMS", "IdmConfig", "SignalConfig", "SignalController", "RewardRange", "VelAlignForm", "default_classes", "default_rewards",
]


class Consequence(IntEnum):
    """What a rule violation does to the offending agent (TerraZero section 3.3)."""

    NONE = 0
    STOP = 1
    """Speed and accelerations set to zero; the agent stays in the scene."""
    REMOVE = 2
    """The agent leaves the scene; its slot reports ``terminated``."""


#: Upper bound of ``InitConfig.placement_tries`` (see there).
MAX_PLACEMENT_TRIES = 10_000
#: Upper bound (m) of ``EngineConfig.offroad_tolerance``: about a car's half width, beyond which a
#: box may sit mostly off the road without an off-road event (ours; nuPlan tolerates 0.3 m).
MAX_OFFROAD_TOLERANCE = 2.0
#: Upper bound (m) of ``EngineConfig.lane_max_distance``: the lane search visits every road-index
#: cell within that distance each step, so the bound bounds the work (a lane 100 m away is no
#: agent's current lane).
MAX_LANE_DISTANCE = 100.0


class InitMode(IntEnum):
    """Scene initialization (appendix D)."""

    RANDOM = 0
    LOG = 1
    HYBRID = 2


class GoalBehavior(IntEnum):
    """What happens when an agent reaches its goal (section 4.2)."""

    NEW_GOAL = 0
    HALT = 1
    """The agent stops and its slot terminates."""


@dataclass(frozen=True)
class InitConfig:
    """Scene initialization (appendix D)."""

    mode: InitMode = InitMode.RANDOM
    """RANDOM placement, LOG (the map's logged tracks at their first step) or HYBRID (appendix D, D.3;
    the paper's default composition is random)."""
    p_random: float = 1.0
    """HYBRID: probability in [0, 1] that a world is initialized randomly rather than from its log
    (appendix D.3)."""
    num_agents: tuple[int, int] = (8, 32)
    """(min, max) agents per world, drawn uniformly (inclusive) at each reset; may exceed any log
    (appendix D.1 makes the range configurable; the values are ours)."""
    class_weights: tuple[float, float, float, float, float] = (1.0, 0.0, 0.0, 0.0, 0.0)
    """Relative frequency (non-negative, not all zero) of car, truck, bus, pedestrian, cyclist among
    randomly placed agents (ours; table 15 lists which classes each policy sees)."""
    controlled: tuple[bool, bool, bool, bool, bool] = (True, True, True, False, False)
    """Which classes the policy controls (appendix D.2, table 15: the planner controls vehicles only);
    others are background agents."""
    initial_speed: tuple[float, float] = (0.0, 2.0)
    """(min, max) initial speed for random placement (m/s): "low speed", appendix D.1 (range ours)."""
    goal_distance: tuple[float, float] = (20.0, 120.0)
    """(min, max) goal arc length along the lane graph (m) (appendix D.5 omits the bounds; ours)."""
    goal_min_forward: float = 5.0
    """A goal must lie at least this far ahead of the agent along its heading (m) (appendix D.5's
    alignment filter; the value is ours)."""
    goal_lane_change: float = 0.0
    """Share in [0, 1] of the controlled vehicles whose first goal is moved one lane width sideways onto
    a same-direction neighbour of the lane it lies on (outside junctions), so reaching it takes a lane
    change (ours: the long-tail training worlds, as InterPlan's lane-change families route the ego into
    another lane). 0 draws nothing."""
    goal_turnable: bool = True
    """The goal walk enters only lanes the agent's box can follow on the road (ours; appendix D.5's
    forward walk says nothing of turning circles): the lane's tightest bend no tighter than the
    smallest circle the box centre drives at the steering limit, and the band the box sweeps there
    between the road edges with the box at most the lane's spare half width off the centreline
    (``terrazero_env.maps.bends``, ``scene.pxd``'s ``lane_turnable``). On ``carla_town01`` a 12 m truck
    cannot follow 34 of the 56 turning lanes at all, and sweeps onto the curb on most others
    (``benchmarks/turn_radii.py``): a goal through one asks what no driver can do. A controlled vehicle
    is also not placed on such a lane, and a new goal is walked from the lane it is on where the lane
    nearest it is one. False: the paper's walk over every successor, placement on any spawn lane."""
    goal_dropout: tuple[float, float, float, float, float] = (0.3, 0.3, 0.3, 0.0, 0.0)
    """Per-class probability in [0, 1] that a controlled agent's goal is hidden (table 15: 0.3)."""
    goal_behavior: GoalBehavior = GoalBehavior.NEW_GOAL
    """What reaching the goal does: a new goal, or halt and terminate (section 4.2, appendix D.5)."""
    placement_tries: int = 50
    """Rejection-sampling attempts per agent, in [1, 10_000], before the world is filled with fewer
    agents (appendix D.1 samples by rejection; the count is ours). Bounded because a reset runs every
    try inside the compiled engine without returning to Python, so a huge count hangs it."""
    spawn_clearance: float = 1.0
    """Extra gap (m) around a new agent's box that must be free of other agents (ours)."""
    kinematic_range: tuple[float, float] = (0.5, 1.5)
    """(min, max) of the four kinematic coefficients, dimensionless (appendix D.4, table 13: [0.5, 1.5]);
    also the scale on which the ego observation normalizes them."""
    class_kinematic_ranges: tuple[tuple[float, float], ...] | None = None
    """Per class (car, truck, bus, pedestrian, cyclist), the (min, max) of its kinematic coefficients,
    each inside ``kinematic_range``; None: ``kinematic_range`` for every class. Table 15's sim agent:
    vehicles [0.5, 1.5], cyclists narrower, pedestrians fixed (``kinematic_ranges_table15``)."""
    randomize_kinematics: bool = True
    """Draw the kinematic coefficients per agent at reset (appendix D.4); False holds them at 1."""
    log_roles: tuple[LogRoles | None, LogRoles | None, LogRoles | None, LogRoles | None, LogRoles | None] | None = None
    """Per class (car, truck, bus, pedestrian, cyclist), the mix of roles logged agents take in log and
    hybrid scenes (algorithm 1 step 9, appendix D.2): :class:`LogRoles` weights over replay, the IDM
    driver, the policy and the planner, drawn per agent and episode (a mapping of its fields stands for one). None,
    for the field or a class: the policy for the classes ``controlled`` names, replay for the others
    (cyclists are replayed, as the paper populates them, section 4.4). See :mod:`terrazero_env.config.log_roles`."""

    def __post_init__(self) -> None:
        _set(self, "mode", check_enum("InitConfig.mode", self.mode, InitMode))
        _set(self, "goal_behavior", check_enum("InitConfig.goal_behavior", self.goal_behavior, GoalBehavior))
        check_float("InitConfig.p_random", self.p_random, 0.0, 1.0)
        _set(self, "num_agents", check_pair("InitConfig.num_agents", self.num_agents, 1, ints=True))
        w = check_tuple("InitConfig.class_weights", self.class_weights, 5)
        for i, x in enumerate(w):
            check_float(f"InitConfig.class_weights[{i}]", x, 0.0)
        if sum(w) <= 0:
            raise ValueError(f"InitConfig.class_weights: five non-negative weights, not all zero, got {w}")
        _set(self, "class_weights", w)
        ctrl = check_tuple("InitConfig.controlled", self.controlled, 5)
        for i, x in enumerate(ctrl):
            check_bool(f"InitConfig.controlled[{i}]", x)
        _set(self, "controlled", ctrl)
        drop = check_tuple("InitConfig.goal_dropout", self.goal_dropout, 5)
        for i, x in enumerate(drop):
            check_float(f"InitConfig.goal_dropout[{i}]", x, 0.0, 1.0)
        _set(self, "goal_dropout", drop)
        for name in ("initial_speed", "goal_distance", "kinematic_range"):
            _set(self, name, check_pair(f"InitConfig.{name}", getattr(self, name), 0.0))
        for name in ("goal_min_forward", "spawn_clearance"):
            check_float(f"InitConfig.{name}", getattr(self, name), 0.0, unit=" of metres")
        check_float("InitConfig.goal_lane_change", self.goal_lane_change, 0.0, 1.0)
        check_int("InitConfig.placement_tries", self.placement_tries, 1, MAX_PLACEMENT_TRIES,
                  " (a reset cannot be interrupted while it tries)")
        check_bool("InitConfig.randomize_kinematics", self.randomize_kinematics)
        check_bool("InitConfig.goal_turnable", self.goal_turnable)
        _set(self, "log_roles", check_log_roles("InitConfig.log_roles", self.log_roles, ctrl))
        if self.class_kinematic_ranges is not None:
            rs = check_tuple("InitConfig.class_kinematic_ranges", self.class_kinematic_ranges, 5)
            lo, hi = self.kinematic_range
            rs = tuple(check_pair(f"InitConfig.class_kinematic_ranges[{i}]", r, lo, hi) for i, r in enumerate(rs))
            _set(self, "class_kinematic_ranges", rs)

    def log_role_table(self) -> np.ndarray:
        """float64 ``[5, 4]``: each class's weights of replay, IDM, policy and planner (``log_roles``
        resolved)."""
        return log_role_table(self.log_roles, self.controlled)


#: Per-class kinematic ranges of table 15's sim agent: vehicles [0.5, 1.5], cyclists narrower
#: ([0.8, 1.2] is ours: the table gives no bounds), pedestrians fixed at 1.
kinematic_ranges_table15: tuple[tuple[float, float], ...] = ((0.5, 1.5), (0.5, 1.5), (0.5, 1.5), (1.0, 1.0),
                                                             (0.8, 1.2))


class SignalController(IntEnum):
    """Traffic-light controllers (TerraZero section 4.5)."""

    CHRISTMAS = 0
    """Every stop line cycles red -> green -> yellow on its own, LogNormal dwell times (default)."""
    NEMA = 1
    """Dual-ring eight-phase plan: protected lefts, then throughs, per road pair, barrier between."""
    ROUND_ROBIN = 2
    """One approach leg green at a time, rotating around the intersection."""


@dataclass(frozen=True)
class SignalConfig:
    """Signals and stop signs (TerraZero sections 3.3 and 4.5). Times in seconds, speeds in m/s."""

    controller: SignalController = SignalController.CHRISTMAS
    """Which traffic-light controller drives every intersection (section 4.5: Christmas by default)."""
    christmas_green: tuple[float, float] = (12.0, 0.3)
    """CHRISTMAS: LogNormal (median s, sigma) of a green dwell (section 4.5 names LogNormal; values ours)."""
    christmas_yellow: tuple[float, float] = (3.0, 0.1)
    """CHRISTMAS: LogNormal (median s, sigma) of a yellow dwell (ours)."""
    christmas_red: tuple[float, float] = (15.0, 0.4)
    """CHRISTMAS: LogNormal (median s, sigma) of a red dwell (ours)."""
    left_green: float = 8.0
    """NEMA protected-left green, median (s) (ours)."""
    through_green: float = 20.0
    """NEMA through green, median; round-robin leg green (s) (ours)."""
    nema_green_sigma: float = 0.25
    """NEMA: LogNormal sigma of each phase's green around ``left_green`` / ``through_green``, drawn
    anew each time a phase starts, so the two rings reach a barrier at different times; 0 gives
    fixed greens (ours)."""
    yellow: float = 3.0
    """NEMA and round-robin yellow (s) (ours)."""
    all_red: float = 1.0
    """NEMA and round-robin all-red clearance (s), may be 0 (ours)."""
    permissive_left_prob: float = 0.5
    """Per-intersection probability in [0, 1] that protected lefts are flipped to permissive at reset
    (section 4.5 describes the draw; the probability is ours)."""
    stop_speed: float = 0.5
    """A stop sign counts the dwell only below this speed (m/s) (ours)."""
    stop_dwell: tuple[float, float] = (1.0, 3.0)
    """(min, max) required dwell at a stop sign (s), drawn per approach (ours)."""
    stop_region: float = 8.0
    """Distance before a stop bar within which an agent is in the stop sign's region (m) (ours)."""
    replay_logged: bool = True
    """Worlds initialized from the log (LOG, and HYBRID worlds that draw the log) on a map with logged
    signal states (WOMD scenes) show the logged state of every head at each step, holding the last one
    after the log ends; randomly initialized worlds, and every world when False, run ``controller`` (ours;
the states are WOMD's TrafficSignalLaneState per step)."""

    def __post_init__(self) -> None:
        _set(self, "controller", check_enum("SignalConfig.controller", self.controller, SignalController))
        for name in ("christmas_green", "christmas_yellow", "christmas_red"):
            t = check_tuple(f"SignalConfig.{name}", getattr(self, name), 2)
            check_float(f"SignalConfig.{name} median", t[0], 0.0, lo_open=True, unit=" of seconds")
            check_float(f"SignalConfig.{name} sigma", t[1], 0.0)
            _set(self, name, t)
        for name in ("left_green", "through_green", "yellow"):
            check_float(f"SignalConfig.{name}", getattr(self, name), 0.0, lo_open=True, unit=" of seconds")
        check_float("SignalConfig.all_red", self.all_red, 0.0, unit=" of seconds")
        check_float("SignalConfig.nema_green_sigma", self.nema_green_sigma, 0.0, 2.0)
        check_float("SignalConfig.stop_region", self.stop_region, 0.0, lo_open=True, unit=" of metres")
        check_float("SignalConfig.stop_speed", self.stop_speed, 0.0, lo_open=True, unit=" (m/s)")
        check_float("SignalConfig.permissive_left_prob", self.permissive_left_prob, 0.0, 1.0)
        _set(self, "stop_dwell", check_pair("SignalConfig.stop_dwell", self.stop_dwell, 0.0, unit=" of seconds"))
        _set(self, "replay_logged", check_bool("SignalConfig.replay_logged", self.replay_logged))


@dataclass(frozen=True)
class IdmConfig:
    """Reactive IDM vehicles (TerraZero section 4.4; Treiber et al. 2000). Per-mode values are
    (default, assertive, cautious): section 4.4 names the three modes; their values are ours."""

    v0_scale: tuple[float, float, float] = (1.0, 1.15, 0.85)
    """Desired speed as a fraction of the lane's speed limit, dimensionless (ours)."""
    time_headway: tuple[float, float, float] = (1.5, 1.0, 2.0)
    """T (s) (Treiber et al. 2000 use 1.5 s; the mode spread is ours)."""
    max_accel: tuple[float, float, float] = (1.5, 2.0, 1.0)
    """a (m/s^2) (ours, near Treiber et al.'s urban values)."""
    comfort_decel: tuple[float, float, float] = (2.0, 3.0, 1.5)
    """b (m/s^2) (ours, near Treiber et al.'s values)."""
    min_gap: tuple[float, float, float] = (2.0, 1.5, 3.0)
    """s0 (m) (Treiber et al. 2000 use 2 m; the mode spread is ours)."""
    delta: float = 4.0
    """Acceleration exponent, dimensionless (Treiber et al. 2000: 4)."""
    lookahead: float = 50.0
    """How far ahead a leader is searched for (m) (ours)."""
    reroll_prob: float = 0.001
    """Per-step probability in [0, 1] that a vehicle redraws its behaviour mode (section 4.4 allows
    rerolls; the probability is ours)."""
    max_decel: float = 8.0
    """Braking clip (m/s^2) (ours)."""
    curve_lat_accel: float = 2.0
    """Lateral acceleration (m/s^2) the desired speed allows in curves; the vehicle brakes
    comfortably ahead of them (ours)."""
    side_margin: float = 0.3
    """Lateral clearance (m) the swept body keeps from other agents when finding the leader (ours)."""

    def __post_init__(self) -> None:
        for name in ("v0_scale", "time_headway", "max_accel", "comfort_decel", "min_gap"):
            t = check_tuple(f"IdmConfig.{name}", getattr(self, name), 3)
            for i, mode in enumerate(("default", "assertive", "cautious")):
                check_float(f"IdmConfig.{name}[{i}] ({mode})", t[i], 0.0, lo_open=True)
            _set(self, name, t)
        for name in ("delta", "lookahead", "max_decel", "curve_lat_accel"):
            check_float(f"IdmConfig.{name}", getattr(self, name), 0.0, lo_open=True)
        check_float("IdmConfig.side_margin", self.side_margin, 0.0, unit=" of metres")
        check_float("IdmConfig.reroll_prob", self.reroll_prob, 0.0, 1.0)


#: The violations a consequence can be configured for (``EngineConfig.consequences``).
VIOLATIONS: tuple[str, ...] = ("collision", "offroad", "wrong_way", "red_light")
#: ``EngineConfig.neighbour_search`` values, in the order of the engine's ``NEIGHBOURS_*`` codes.
NEIGHBOUR_SEARCH: tuple[str, ...] = ("auto", "grid", "scan")


def _default_consequences() -> dict[str, Consequence]:
    return {"collision": Consequence.REMOVE, "offroad": Consequence.REMOVE, "wrong_way": Consequence.NONE,
            "red_light": Consequence.NONE}


@dataclass(frozen=True)
class EngineConfig:
    """Everything the engine needs besides the map."""

    maps: tuple[str, ...] = ("grid_town",)
    """Map sources (bundled names or ``.tzb``/``.json``/``.yaml`` paths); worlds take them round-robin
    (ours: the bundled procedural towns)."""
    num_worlds: int = 1
    """W: worlds stepped together, a count in [1, 65_536] (table 14 runs 32 per GPU; the default is ours).
    ``num_worlds * slots_per_world`` is at most 2**20: every slot's observation buffer is allocated at
    construction."""
    slots_per_world: int = 32
    """K: policy-controlled slots per world, a count in [1, 4096] (table 14: 512 agents over 32
    environments is 16; the default is ours)."""
    max_agents_per_world: int = 64
    """All agents (controlled and background) a world can hold, a count in [slots_per_world, 4096] (ours)."""
    dt: float = 0.1
    """Simulation step (s), in (0, 1] (table 7: 0.1 s)."""
    episode_length: int = 256
    """Steps until truncation, in [1, 2**31 - 1] (table 7: 256 steps, 25.6 s)."""
    consequences: Mapping[str, Consequence] = field(default_factory=_default_consequences)
    """Per violation (``VIOLATIONS``: "collision", "offroad", "wrong_way", "red_light"): NONE, STOP or
    REMOVE (section 3.3 describes the choices; the defaults are ours). "red_light" is crossing a stop bar
    on red (the event the red-light reward term reads)."""
    wrong_way_angle: float = math.radians(120.0)
    """Heading residual (rad), in [0, pi], beyond which moving travel counts as reversed (wrong way)
    (section 3.3 penalizes reversed travel; the angle is ours)."""
    offroad_tolerance: float = 0.0
    """How far (m, in [0, 2]) a corner of a vehicle's box may reach beyond the drivable area before the
    off-road event fires (its reward, counter and consequence). 0: any touch of a road edge or a
    sidewalk is off-road (TerraZero section 3.3). Above 0: only an excursion beyond the tolerance,
    the excursion being the largest distance from a box corner outside the drivable area to its
    boundary (the ``max_offroad_excursion`` episode metric; nuPlan's drivable-area compliance
    allows 0.3 m, nuplan-devkit ``drivable_area_compliance.max_violation_threshold``)."""
    lane_max_distance: float = 8.0
    """An agent further than this from every lane centerline has no current lane (m, in (0, 100]; ours)."""
    lane_align_angle: float = math.pi
    """Where lanes overlap, the current lane is the one the agent drives along (rad, in [0, pi]; ours):
    when the nearest centerline heads more than this away from the agent's heading, the nearest lane
    heading within this angle of it that has the agent within half its width is taken instead (if
    any). The current lane gives the lane-state observations, wrong-way driving, the stop line a car
    crosses and route progress. pi: always the nearest centerline (appendix B's "nearest lane"), which
    at intersections and turning loops can be a crossing or opposing lane."""
    lane_tracking: bool = False
    """Keep each vehicle's current lane by continuity rather than re-guessing it every step (ours):
    the lane it was on (or placed on) while the car stays within half its width and heads within 60
    degrees of it; past that lane's end its successors, the one on the goal's shortest lane-graph
    route first; then its same-direction neighbours; only then the nearest centerline as
    ``lane_align_angle`` chooses it (with at most 60 degrees). Inside an intersection the lane state,
    the lane rewards, the curvature ahead and the stop line then follow the connector the car drives,
    not whichever overlapping connector is nearest; a car over the centre line is outside its lane and
    still reads the opposing lane (wrong way). False: the nearest centerline every step (appendix B's
    "nearest lane"). Pedestrians always take the nearest centerline."""
    neighbour_search: str = "auto"
    """How the engine finds an agent's neighbours (ours) for the partner observation, the IDM leader
    search and stop-sign gap acceptance, lane changes, the planner's neighbours and the judged episode
    metrics: "grid" through a per-world grid of 12 m cells (``cyext/neighbours.pxd``), "scan" over
    every agent of the world, "auto" the grid where a query's box covers at most an eighth of the map
    and at most a quarter as many cells as the world has agents (dense worlds on town-sized maps and
    larger; on a small map the scan's cheap rejections are faster). The answer is the same either way,
    bit for bit; only the cost differs."""
    classes: Mapping[AgentType, ClassSpec] = field(default_factory=default_classes)
    """One :class:`ClassSpec` per agent type (section 3.2, appendix D.1; see ``default_classes``)."""
    rewards: Mapping[str, tuple[RewardRange, RewardRange, RewardRange]] = field(default_factory=default_rewards)
    """Per reward parameter, its (vehicle, pedestrian, cyclist) settings (appendix B, table 8)."""
    reward_forms: RewardForms = field(default_factory=RewardForms)
    """Forms of the velocity-alignment and speed-limit terms (appendix B; see :class:`RewardForms`)."""
    obs: ObsConfig = field(default_factory=ObsConfig)
    """Observation features (appendix C, tables 9-12)."""
    init: InitConfig = field(default_factory=InitConfig)
    """Scene initialization (appendix D)."""
    signals: SignalConfig = field(default_factory=SignalConfig)
    """Signals and stop signs (sections 3.3, 4.5)."""
    idm: IdmConfig = field(default_factory=IdmConfig)
    """Reactive IDM vehicles (section 4.4)."""
    road_users: RoadUsersConfig = field(default_factory=RoadUsersConfig)
    """Composition of the rule-based road users: IDM share and modes, static generators and pedestrian
    generators (section 4.4)."""

    def __post_init__(self) -> None:
        maps = check_tuple("EngineConfig.maps", self.maps, min_len=1)
        for i, m in enumerate(maps):
            if not isinstance(m, (str, os.PathLike)) or not str(m):
                raise ValueError(f"EngineConfig.maps[{i}]: a bundled map name or a file path, got {m!r}")
        _set(self, "maps", maps)
        check_int("EngineConfig.num_worlds", self.num_worlds, 1, 65_536)
        check_int("EngineConfig.slots_per_world", self.slots_per_world, 1, 4096)
        check_int("EngineConfig.max_agents_per_world", self.max_agents_per_world, 1, 4096)
        check_int("EngineConfig.episode_length", self.episode_length, 1, 2**31 - 1)
        if self.num_worlds * self.slots_per_world > 2**20:
            raise ValueError(f"EngineConfig.num_worlds x slots_per_world: at most {2**20} slots (buffers are "
                             f"allocated per slot), got {self.num_worlds} x {self.slots_per_world}")
        for name, kind in (("obs", ObsConfig), ("init", InitConfig), ("signals", SignalConfig), ("idm", IdmConfig),
                           ("road_users", RoadUsersConfig), ("reward_forms", RewardForms)):
            if not isinstance(getattr(self, name), kind):
                raise ValueError(f"EngineConfig.{name}: a {kind.__name__}, got {type(getattr(self, name)).__name__}")
        if self.max_agents_per_world < self.slots_per_world:
            raise ValueError("EngineConfig.max_agents_per_world must be >= slots_per_world "
                             f"({self.max_agents_per_world} < {self.slots_per_world})")
        if self.init.num_agents[1] > self.max_agents_per_world:
            raise ValueError(f"InitConfig.num_agents max {self.init.num_agents[1]} exceeds "
                             f"EngineConfig.max_agents_per_world {self.max_agents_per_world}")
        check_float("EngineConfig.dt", self.dt, 0.0, 1.0, lo_open=True, unit=" of seconds")
        check_float("EngineConfig.wrong_way_angle", self.wrong_way_angle, 0.0, math.pi, unit=" of radians")
        check_float("EngineConfig.offroad_tolerance", self.offroad_tolerance, 0.0, MAX_OFFROAD_TOLERANCE,
                    unit=" of metres")
        # bounded: the lane search visits every road-index cell within this distance (1e9 m never ends)
        check_float("EngineConfig.lane_max_distance", self.lane_max_distance, 0.0, MAX_LANE_DISTANCE, lo_open=True,
                    unit=" of metres")
        check_float("EngineConfig.lane_align_angle", self.lane_align_angle, 0.0, math.pi, unit=" of radians")
        check_bool("EngineConfig.lane_tracking", self.lane_tracking)
        if self.neighbour_search not in NEIGHBOUR_SEARCH:
            raise ValueError(f"EngineConfig.neighbour_search: one of {', '.join(NEIGHBOUR_SEARCH)}, "
                             f"got {self.neighbour_search!r}")
        if not isinstance(self.consequences, Mapping):
            raise ValueError(f"EngineConfig.consequences: a mapping of violation to consequence, got {self.consequences!r}")
        unknown = set(self.consequences) - set(VIOLATIONS)
        if unknown:
            raise ValueError(f"EngineConfig.consequences: unknown violations {sorted(unknown)}")
        for k, v in self.consequences.items():
            check_enum(f"EngineConfig.consequences[{k!r}]", v, Consequence)
        if not isinstance(self.classes, Mapping):
            raise ValueError(f"EngineConfig.classes: a mapping of agent type to ClassSpec, got {self.classes!r}")
        missing = set(AgentType) - set(self.classes)
        if missing:
            raise ValueError(f"EngineConfig.classes: missing {sorted(m.name for m in missing)}")
        for k, spec in self.classes.items():
            if not isinstance(spec, ClassSpec):
                raise ValueError(f"EngineConfig.classes[{k!r}]: a ClassSpec, got {type(spec).__name__}")
        if not isinstance(self.rewards, Mapping):
            raise ValueError(f"EngineConfig.rewards: a mapping of reward parameter to settings, got {self.rewards!r}")
        if set(self.rewards) != set(REWARD_PARAMS):
            raise ValueError(f"EngineConfig.rewards: need exactly the parameters {REWARD_PARAMS}; "
                             f"unknown {sorted(set(self.rewards) - set(REWARD_PARAMS))}, "
                             f"missing {sorted(set(REWARD_PARAMS) - set(self.rewards))}")
        for k, cols in self.rewards.items():
            where = f"EngineConfig.rewards[{k!r}]"
            cols = check_tuple(where, cols)
            if len(cols) != 3:
                raise ValueError(f"{where}: (vehicle, pedestrian, cyclist) settings, got {cols!r}")
            for col, c in zip(("vehicle", "pedestrian", "cyclist"), cols):
                if c is not None:
                    check_pair(f"{where} {col}", c, None)

    def with_overrides(self, **kw: Any) -> EngineConfig:
        """A copy with top-level fields replaced, merged by ``config.io.config_from_dict`` (the one
        merge of settings into a config): sub-configs (``obs``, ``init``, ...) accept dicts of their
        fields or whole dataclasses; an unknown field raises ``ValueError`` naming it."""
        from .io import config_from_dict  # io builds on this module

        return config_from_dict(kw, self)

    # -- dense tables for the engine -------------------------------------------------------------

    def reward_column(self, cls: AgentType) -> int:
        return {AgentType.PEDESTRIAN: _PED, AgentType.CYCLIST: _CYC}.get(AgentType(cls), _VEH)

    def active_reward_params(self) -> list[int]:
        """Indices into REWARD_PARAMS that are non-null for at least one class the scene can hold."""
        present = [c for c, w in zip(AgentType, self.init.class_weights) if w > 0]
        cols = {self.reward_column(c) for c in present}
        return [i for i, k in enumerate(REWARD_PARAMS) if any(self.rewards[k][c] is not None for c in cols)]

    def tables(self, reward_params: tuple[str, ...] = REWARD_PARAMS,
               class_param_columns: tuple[str, ...] = CLASS_PARAM_COLUMNS) -> dict[str, np.ndarray]:
        """Flatten per-class settings into the arrays the engine reads (class-major).

        ``reward_params`` and ``class_param_columns``: the column orders of the reward and class
        tables, by name (the env layer passes the engine's own; the defaults are this module's).
        """
        unknown = [k for k in reward_params if k not in self.rewards]
        if unknown or len(reward_params) != len(REWARD_PARAMS):
            raise ValueError(f"tables: reward columns {tuple(reward_params)} do not match the configured "
                             f"parameters {REWARD_PARAMS} (unknown {unknown})")
        if sorted(class_param_columns) != sorted(CLASS_PARAM_COLUMNS):
            raise ValueError(f"tables: class-parameter columns {tuple(class_param_columns)} do not match "
                             f"{CLASS_PARAM_COLUMNS}")
        n_cls = len(AgentType)
        max_long = max(len(self.classes[c].action_long) for c in AgentType)
        max_lat = max(len(self.classes[c].action_lat) for c in AgentType)
        grid_long = np.zeros((n_cls, max_long))
        grid_lat = np.zeros((n_cls, max_lat))
        n_long = np.zeros(n_cls, np.int32)
        n_lat = np.zeros(n_cls, np.int32)
        cls_params = np.zeros((n_cls, len(class_param_columns)))
        for c in AgentType:
            s = self.classes[c]
            grid_long[c, : len(s.action_long)] = s.action_long
            grid_lat[c, : len(s.action_lat)] = s.action_lat
            n_long[c], n_lat[c] = len(s.action_long), len(s.action_lat)
            row = dict(zip(CLASS_PARAM_COLUMNS, (
                int(s.dynamics), *s.length, *s.width, *s.height, s.max_speed, s.max_reverse_speed, s.max_accel,
                s.max_decel, s.max_lat_accel, s.max_steer, s.wheelbase_ratio, *s.comfort, s.cornering_stiffness,
                s.mass, self.init.class_weights[c],
                -1.0 if s.max_steer_rate is None else s.max_steer_rate, s.rear_axle), strict=True))
            cls_params[c] = [row[k] for k in class_param_columns]
        lo = np.zeros((n_cls, len(reward_params)))
        hi = np.zeros((n_cls, len(reward_params)))
        on = np.zeros((n_cls, len(reward_params)), np.uint8)
        for c in AgentType:
            col = self.reward_column(c)
            for i, k in enumerate(reward_params):
                setting = self.rewards[k][col]
                if setting is not None:
                    lo[c, i], hi[c, i] = setting
                    on[c, i] = 1
        return {"grid_long": grid_long, "grid_lat": grid_lat, "n_long": n_long, "n_lat": n_lat,
                "class_params": cls_params, "reward_lo": lo, "reward_hi": hi, "reward_on": on}
