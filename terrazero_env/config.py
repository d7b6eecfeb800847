"""Engine configuration: frozen dataclasses whose defaults are the TerraZero paper's values.

Every number the engine uses lives here with its unit and source (paper appendix), and every value is
checked on construction so that a bad value fails with a message naming the field, never inside the
compiled step. ``EngineConfig.tables()`` flattens a config into the dense arrays the engine reads.

The enums here (and ``REWARD_PARAMS``, ``CLASS_PARAM_COLUMNS``) are the configuration's side of the
engine's vocabulary. They stay plain Python because config must load, validate and round-trip
without the compiled engine (it sits below it in the import order); the engine declares the same
names as C enums (``cyext/common.pxd``, exported by ``vocabulary.pxi``). ``tests/test_vocabulary.py``
fails when either side changes alone, and ``tables()`` takes its column orders by name from the
caller (the env layer passes the engine's), so a reorder on one side cannot silently mis-feed it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from enum import IntEnum
from typing import Any

import numpy as np

from .maps.schema import AgentType

__all__ = [
    "AgentType", "ClassSpec", "Consequence", "DynamicsModel", "EngineConfig", "GoalBehavior", "InitConfig",
    "CLASS_PARAM_COLUMNS", "InitMode", "ObsConfig", "REWARD_PARAMS", "IdmConfig", "SignalConfig", "SignalController", "RewardRange", "default_classes", "default_rewards",
]


class DynamicsModel(IntEnum):
    """Per-class dynamics (TerraZero section 3.2)."""

    UNICYCLE = 0
    """Pedestrians: acceleration and yaw-rate actions."""
    BICYCLE_ACCEL = 1
    """Kinematic bicycle actuated by acceleration and steering angle (cyclists)."""
    BICYCLE_JERK = 2
    """Kinematic bicycle actuated by longitudinal and lateral jerk (cars, buses)."""
    BICYCLE_TIRE = 3
    """Dynamic bicycle with linear tire cornering forces, acceleration and steering actions (trucks)."""


class Consequence(IntEnum):
    """What a rule violation does to the offending agent (TerraZero section 3.3)."""

    NONE = 0
    STOP = 1
    """Speed and accelerations set to zero; the agent stays in the scene."""
    REMOVE = 2
    """The agent leaves the scene; its slot reports ``terminated``."""


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


#: The 23 reward parameters (appendix B, table 8) in observation order: 15 weighted terms, the two
#: terms the paper holds at zero (goal progress, target speed), a wrong-way weight (section 3.3:
#: reversed travel is penalized), and five auxiliaries (delta_goal, v_goal, gamma_col, b_center,
#: v_speed_lim).
REWARD_PARAMS: tuple[str, ...] = (
    "goal", "collision", "boundary", "comfort", "lane_align", "lane_center", "velocity", "vel_align",
    "reverse", "timestep", "stop_line", "red_light", "road_incursion", "speed_limit", "edge_preference",
    "goal_progress", "target_speed", "wrong_way",
    "delta_goal", "v_goal", "gamma_col", "b_center", "v_speed_lim",
)

#: Columns of the per-class parameter table (``tables()["class_params"]``), in the engine's order.
CLASS_PARAM_COLUMNS: tuple[str, ...] = (
    "dynamics", "length_lo", "length_hi", "width_lo", "width_hi", "height_lo", "height_hi", "max_speed",
    "max_reverse_speed", "max_accel", "max_decel", "max_lat_accel", "max_steer", "wheelbase_ratio",
    "comfort_accel_long", "comfort_accel_lat", "comfort_jerk_long", "comfort_jerk_lat", "cornering_stiffness",
    "mass", "class_weight",
)

#: A parameter's per-type setting: a fixed value, a ``(min, max)`` range sampled uniformly per agent
#: at reset, or ``None`` (the term is off for that type).
RewardRange = tuple[float, float] | None

_VEH, _PED, _CYC = 0, 1, 2  # reward columns: vehicle (car, truck, bus), pedestrian, cyclist


def _r(v: Any) -> RewardRange:
    if v is None:
        return None
    if isinstance(v, (int, float)):
        return (float(v), float(v))
    lo, hi = v
    return (float(lo), float(hi))


def default_rewards() -> dict[str, tuple[RewardRange, RewardRange, RewardRange]]:
    """Table 8 as (vehicle, pedestrian, cyclist) settings per parameter."""
    t: dict[str, tuple[Any, Any, Any]] = {
        "goal": (1.0, 1.0, 1.0),
        "collision": ((0.0, 3.0), (0.5, 2.0), (1.0, 3.0)),
        "boundary": ((0.0, 3.0), None, (0.5, 2.0)),
        "comfort": ((0.0, 0.1), None, None),
        "lane_align": ((2.5e-4, 2.5e-2), None, (5e-3, 2e-2)),
        "lane_center": ((2.5e-4, 7.5e-3), None, None),
        "velocity": (2.5e-3, None, None),
        "vel_align": ((0.0, 1.0), None, (0.25, 0.75)),
        "reverse": ((2.5e-4, 7.5e-3), None, None),
        "timestep": (2.5e-5, None, None),
        "stop_line": (5.0, None, 5.0),
        "red_light": (3.0, None, 3.0),
        "road_incursion": (None, (0.5, 2.0), None),
        "speed_limit": (None, (0.5, 2.0), (0.25, 1.0)),
        "edge_preference": (None, None, (0.01, 0.05)),
        "goal_progress": (0.0, 0.0, 0.0),
        "target_speed": (0.0, None, 0.0),
        "wrong_way": (0.0, None, 0.0),
        "delta_goal": (2.0, 2.0, 2.0),
        "v_goal": (3.0, 3.0, 3.0),
        "gamma_col": (0.1, 0.1, 0.1),
        "b_center": (0.0, None, None),
        "v_speed_lim": (None, (1.5, 2.5), (5.0, 8.0)),
    }
    return {k: (_r(v[0]), _r(v[1]), _r(v[2])) for k, v in t.items()}


@dataclass(frozen=True)
class ClassSpec:
    """Dimensions, limits and action grid of one agent class."""

    dynamics: DynamicsModel
    length: tuple[float, float]
    """Sampled per agent at reset, metres (appendix D.1)."""
    width: tuple[float, float]
    """Metres."""
    height: tuple[float, float]
    """Metres."""
    action_long: tuple[float, ...]
    """Longitudinal action values: jerk (m/s^3) for BICYCLE_JERK, acceleration (m/s^2) otherwise."""
    action_lat: tuple[float, ...]
    """Lateral action values: lateral jerk (m/s^3) for BICYCLE_JERK, steering angle (rad) for the
    other bicycles, yaw rate (rad/s) for UNICYCLE."""
    max_speed: float = 20.0
    """Base forward speed clip (m/s), times the agent's c_vel (appendix B: v_max = 20 * c_vel)."""
    max_reverse_speed: float = 2.0
    """Reverse speed clip (m/s)."""
    max_accel: float = 4.0
    """Acceleration clip (m/s^2), times c_acc."""
    max_decel: float = 8.0
    """Braking clip (m/s^2), times c_acc."""
    max_lat_accel: float = 4.0
    """Lateral acceleration clip (m/s^2) for the jerk model."""
    max_steer: float = 0.6
    """Steering angle clip (rad)."""
    wheelbase_ratio: float = 0.6
    """Wheelbase as a fraction of length."""
    comfort: tuple[float, float, float, float] = (3.0, 3.0, 5.0, 5.0)
    """Comfort thresholds |a_long|, |a_lat| (m/s^2), |j_long|, |j_lat| (m/s^3) (appendix B)."""
    cornering_stiffness: float = 1.2e5
    """BICYCLE_TIRE: cornering stiffness per axle (N/rad)."""
    mass: float = 1.5e4
    """BICYCLE_TIRE: mass (kg); yaw inertia is taken as mass * (length/2)^2 / 3."""

    def __post_init__(self) -> None:
        for name in ("length", "width", "height"):
            lo, hi = getattr(self, name)
            if not (0 < lo <= hi and math.isfinite(hi)):
                raise ValueError(f"ClassSpec.{name}: need 0 < min <= max, got {(lo, hi)}")
        for name in ("action_long", "action_lat"):
            v = getattr(self, name)
            if len(v) == 0 or not all(math.isfinite(x) for x in v):
                raise ValueError(f"ClassSpec.{name}: need a non-empty tuple of finite values, got {v}")
        for name in ("max_speed", "max_reverse_speed", "max_accel", "max_decel", "max_lat_accel", "max_steer",
                     "wheelbase_ratio", "cornering_stiffness", "mass"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"ClassSpec.{name}: must be a finite non-negative number, got {v!r}")
        if len(self.comfort) != 4:
            raise ValueError("ClassSpec.comfort: four thresholds (a_long, a_lat, j_long, j_lat)")

    @property
    def num_actions(self) -> int:
        return len(self.action_long) * len(self.action_lat)


def default_classes() -> dict[AgentType, ClassSpec]:
    """Per-class defaults: dimension ranges (appendix D.1), comfort thresholds (appendix B), and the
    discrete action grids (the paper omits their values; these are documented in the README). The
    three vehicle classes share a 4 x 3 grid size, so a vehicles-only policy has one action space."""
    steer = (-0.5, -0.25, -0.1, 0.0, 0.1, 0.25, 0.5)
    return {
        AgentType.CAR: ClassSpec(DynamicsModel.BICYCLE_JERK, (3.8, 5.2), (1.7, 2.1), (1.4, 1.8),
                                 action_long=(-15.0, -4.0, 0.0, 4.0), action_lat=(-4.0, 0.0, 4.0)),
        AgentType.TRUCK: ClassSpec(DynamicsModel.BICYCLE_TIRE, (7.0, 12.0), (2.3, 2.6), (3.0, 4.0),
                                   action_long=(-6.0, -3.0, 0.0, 1.5), action_lat=(-0.3, 0.0, 0.3), max_accel=2.0,
                                   max_decel=6.0, max_steer=0.5, wheelbase_ratio=0.65),
        AgentType.BUS: ClassSpec(DynamicsModel.BICYCLE_JERK, (10.0, 13.0), (2.5, 2.6), (3.0, 3.4),
                                 action_long=(-15.0, -4.0, 0.0, 4.0), action_lat=(-4.0, 0.0, 4.0),
                                 max_accel=2.5, max_decel=6.0, wheelbase_ratio=0.55),
        AgentType.PEDESTRIAN: ClassSpec(DynamicsModel.UNICYCLE, (0.4, 0.7), (0.4, 0.7), (1.5, 1.9),
                                        action_long=(-1.5, -0.5, 0.0, 0.5, 1.5), action_lat=(-1.0, -0.5, 0.0, 0.5, 1.0),
                                        max_speed=3.0, max_reverse_speed=0.0, max_accel=1.5, max_decel=3.0,
                                        comfort=(1.5, 1.0, 12.0, 5.0)),
        AgentType.CYCLIST: ClassSpec(DynamicsModel.BICYCLE_ACCEL, (1.6, 2.0), (0.5, 0.8), (1.5, 1.9),
                                     action_long=(-3.0, -1.5, 0.0, 1.0, 2.0), action_lat=steer, max_speed=10.0,
                                     max_reverse_speed=0.0, max_accel=2.0, max_decel=4.0,
                                     comfort=(3.0, 1.5, 40.0, 18.0)),
    }


@dataclass(frozen=True)
class ObsConfig:
    """Observation groups and features (appendix C, tables 9-12). Each flag turns one feature on or off;
    the layout (``terrazero_env.obs.ObsLayout``) resizes to the enabled set."""

    # ego (table 9)
    agent_type: bool = True
    rel_goal_pos: bool = True
    goal_dropout_flag: bool = True
    state_dropout_flag: bool = True
    speed: bool = True
    vehicle_dims: bool = True
    collision_state: bool = True
    steering_angle: bool = True
    acceleration: bool = True
    stop_sign_state: bool = True
    """Filled by the traffic-rules layer; zeros until stop signs are simulated."""
    alpha_params: bool = True
    kinematic_params: bool = True
    lane_state: bool = False
    """Optional (off by default): (heading residual / pi, lateral offset / 2.5)."""
    goal_scale: float = 0.005
    """rel_goal_pos = ego-frame goal position (m) x this (table 9: 0.005, so 200 m reads as 1). Raise it
    when goals are near: a task with goals 10-30 m away otherwise feeds the policy values below 0.15."""
    speed_scale: float = 0.01
    """Ego and partner speed features = speed (m/s) x this (tables 9, 10: 1/100); one scale for both."""
    # partners (table 10)
    partners: bool = True
    max_partners: int = 20
    partner_radius: float = 50.0
    partner_acceleration: bool = False
    # road (table 11)
    road: bool = True
    max_road_segments: int = 200
    road_radius: float = 50.0
    road_segment_length: float = 10.0
    """Lane, line and edge polylines are cut into observation segments at most this long (m)."""
    # traffic entities (table 12): slots reserved, written by the traffic-rules layer
    traffic: bool = True
    max_traffic: int = 16
    traffic_radius: float = 100.0
    z_gate: float = 2.5
    """Entities more than this far away in z are not observed (appendix A)."""
    dtype: str = "float32"
    """"float32" or "float16" (16-bit observations halve bandwidth, section 3.1)."""
    noise_std: float = 0.0
    """Optional Gaussian noise (std, in observation units) added to every observed value; 0 = off."""
    noise_clip: float = 0.05
    """The noise is clipped to +- this value."""
    slot_dropout: float = 0.0
    """Optional probability of zeroing each partner and road entity slot; 0 = off."""
    state_dropout: float = 0.0
    """Optional probability per step of zeroing the ego state features (the state_dropout_flag says so)."""

    def __post_init__(self) -> None:
        if self.dtype not in ("float32", "float16"):
            raise ValueError(f"ObsConfig.dtype: 'float32' or 'float16', got {self.dtype!r}")
        for name in ("max_partners", "max_road_segments", "max_traffic"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and 0 <= v <= 4096):
                raise ValueError(f"ObsConfig.{name}: an integer in [0, 4096], got {v!r}")
        for name in ("partner_radius", "road_radius", "traffic_radius", "z_gate", "road_segment_length"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"ObsConfig.{name}: a positive finite number of metres, got {v!r}")
        for name in ("goal_scale", "speed_scale"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and v > 0):
                raise ValueError(f"ObsConfig.{name}: a positive finite scale, got {v!r}")
        for name in ("noise_std", "noise_clip"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"ObsConfig.{name}: must be >= 0, got {v!r}")
        for name in ("slot_dropout", "state_dropout"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"ObsConfig.{name}: a probability in [0, 1], got {v!r}")


@dataclass(frozen=True)
class InitConfig:
    """Scene initialization (appendix D)."""

    mode: InitMode = InitMode.RANDOM
    p_random: float = 1.0
    """HYBRID: probability that a world is initialized randomly rather than from its log."""
    num_agents: tuple[int, int] = (8, 32)
    """Agents per world, drawn uniformly (inclusive) at each reset; may exceed any log."""
    class_weights: tuple[float, float, float, float, float] = (1.0, 0.0, 0.0, 0.0, 0.0)
    """Relative frequency of car, truck, bus, pedestrian, cyclist among randomly placed agents."""
    controlled: tuple[bool, bool, bool, bool, bool] = (True, True, True, False, False)
    """Which classes the policy controls (planner: vehicles only); others are background agents."""
    initial_speed: tuple[float, float] = (0.0, 2.0)
    """Initial speed range for random placement (m/s): low speed, appendix D.1."""
    goal_distance: tuple[float, float] = (20.0, 120.0)
    """Goal arc length along the lane graph (m)."""
    goal_min_forward: float = 5.0
    """A goal must lie at least this far ahead of the agent along its heading (m)."""
    goal_dropout: tuple[float, float, float, float, float] = (0.3, 0.3, 0.3, 0.0, 0.0)
    """Per-class fraction of controlled agents whose goal is hidden (section 5.1)."""
    goal_behavior: GoalBehavior = GoalBehavior.NEW_GOAL
    placement_tries: int = 50
    """Rejection-sampling attempts per agent before the world is filled with fewer agents."""
    spawn_clearance: float = 1.0
    """Extra gap (m) around a new agent's box that must be free of other agents."""
    idm_fraction: float = 0.0
    """Share of the background vehicles (cars, trucks, buses the policy does not control) driven by
    the IDM controller; the rest stay parked where they were placed."""
    kinematic_range: tuple[float, float] = (0.5, 1.5)
    """Range of the four kinematic coefficients (appendix D.4)."""
    randomize_kinematics: bool = True

    def __post_init__(self) -> None:
        lo, hi = self.num_agents
        if not (1 <= lo <= hi):
            raise ValueError(f"InitConfig.num_agents: need 1 <= min <= max, got {self.num_agents}")
        if not 0.0 <= self.p_random <= 1.0:
            raise ValueError(f"InitConfig.p_random: a probability in [0, 1], got {self.p_random}")
        if len(self.class_weights) != 5 or min(self.class_weights) < 0 or sum(self.class_weights) <= 0:
            raise ValueError(f"InitConfig.class_weights: five non-negative weights, not all zero, got {self.class_weights}")
        if len(self.controlled) != 5 or len(self.goal_dropout) != 5:
            raise ValueError("InitConfig.controlled and goal_dropout: one entry per agent class (5)")
        if not all(0.0 <= p <= 1.0 for p in self.goal_dropout):
            raise ValueError(f"InitConfig.goal_dropout: probabilities in [0, 1], got {self.goal_dropout}")
        for name in ("initial_speed", "goal_distance", "kinematic_range"):
            a, b = getattr(self, name)
            if not (0 <= a <= b and math.isfinite(b)):
                raise ValueError(f"InitConfig.{name}: need 0 <= min <= max, got {(a, b)}")
        if not 0.0 <= self.idm_fraction <= 1.0:
            raise ValueError(f"InitConfig.idm_fraction: a share in [0, 1], got {self.idm_fraction!r}")
        if self.placement_tries < 1:
            raise ValueError(f"InitConfig.placement_tries: at least 1, got {self.placement_tries}")


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
    christmas_green: tuple[float, float] = (12.0, 0.3)
    """LogNormal (median, sigma) of a green dwell."""
    christmas_yellow: tuple[float, float] = (3.0, 0.1)
    christmas_red: tuple[float, float] = (15.0, 0.4)
    left_green: float = 8.0
    """NEMA protected-left green."""
    through_green: float = 20.0
    """NEMA through green; round-robin leg green."""
    yellow: float = 3.0
    all_red: float = 1.0
    permissive_left_prob: float = 0.5
    """Per-intersection probability that protected lefts are flipped to permissive at reset."""
    stop_speed: float = 0.5
    """A stop sign counts the dwell only below this speed."""
    stop_dwell: tuple[float, float] = (1.0, 3.0)
    """Required dwell at a stop sign, drawn per approach."""
    stop_region: float = 8.0
    """Distance before a stop bar within which an agent is in the stop sign's region (m)."""

    def __post_init__(self) -> None:
        for name in ("christmas_green", "christmas_yellow", "christmas_red"):
            med, sig = getattr(self, name)
            if not (med > 0 and sig >= 0 and math.isfinite(med) and math.isfinite(sig)):
                raise ValueError(f"SignalConfig.{name}: (median > 0, sigma >= 0), got {(med, sig)}")
        for name in ("left_green", "through_green", "yellow", "stop_region"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ValueError(f"SignalConfig.{name}: a positive number of seconds or metres, got {v!r}")
        if not (math.isfinite(self.all_red) and self.all_red >= 0):
            raise ValueError(f"SignalConfig.all_red: seconds >= 0, got {self.all_red!r}")
        if not 0.0 <= self.permissive_left_prob <= 1.0:
            raise ValueError(f"SignalConfig.permissive_left_prob: a probability, got {self.permissive_left_prob!r}")
        lo, hi = self.stop_dwell
        if not (0 <= lo <= hi and math.isfinite(hi)) or not self.stop_speed > 0:
            raise ValueError("SignalConfig.stop_dwell must be (min, max) with 0 <= min <= max; stop_speed > 0")


@dataclass(frozen=True)
class IdmConfig:
    """Reactive IDM vehicles (TerraZero section 4.4; Treiber et al. 2000). Per-mode values are
    (default, assertive, cautious)."""

    v0_scale: tuple[float, float, float] = (1.0, 1.15, 0.85)
    """Desired speed as a fraction of the lane's speed limit."""
    time_headway: tuple[float, float, float] = (1.5, 1.0, 2.0)
    """T (s)."""
    max_accel: tuple[float, float, float] = (1.5, 2.0, 1.0)
    """a (m/s^2)."""
    comfort_decel: tuple[float, float, float] = (2.0, 3.0, 1.5)
    """b (m/s^2)."""
    min_gap: tuple[float, float, float] = (2.0, 1.5, 3.0)
    """s0 (m)."""
    delta: float = 4.0
    lookahead: float = 50.0
    """How far ahead a leader is searched for (m)."""
    reroll_prob: float = 0.001
    """Per-step probability that a vehicle redraws its behaviour mode."""
    max_decel: float = 8.0
    """Braking clip (m/s^2)."""
    curve_lat_accel: float = 2.0
    """Lateral acceleration (m/s^2) the desired speed allows in curves; the vehicle brakes
    comfortably ahead of them."""
    side_margin: float = 0.3
    """Lateral clearance (m) the swept body keeps from other agents when finding the leader."""

    def __post_init__(self) -> None:
        for name in ("v0_scale", "time_headway", "max_accel", "comfort_decel", "min_gap"):
            v = getattr(self, name)
            if len(v) != 3 or not all(math.isfinite(x) and x > 0 for x in v):
                raise ValueError(f"IdmConfig.{name}: three positive values (default, assertive, cautious), got {v!r}")
        for name in ("delta", "lookahead", "max_decel", "curve_lat_accel"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0):
                raise ValueError(f"IdmConfig.{name}: a positive number, got {getattr(self, name)!r}")
        if not (math.isfinite(self.side_margin) and self.side_margin >= 0):
            raise ValueError(f"IdmConfig.side_margin: metres >= 0, got {self.side_margin!r}")
        if not 0.0 <= self.reroll_prob <= 1.0:
            raise ValueError(f"IdmConfig.reroll_prob: a probability, got {self.reroll_prob!r}")


def _default_consequences() -> dict[str, Consequence]:
    return {"collision": Consequence.REMOVE, "offroad": Consequence.REMOVE, "wrong_way": Consequence.NONE}


@dataclass(frozen=True)
class EngineConfig:
    """Everything the engine needs besides the map."""

    maps: tuple[str, ...] = ("grid_town",)
    """Map sources (bundled names or ``.tzb``/``.json``/``.yaml`` paths); worlds take them round-robin."""
    num_worlds: int = 1
    slots_per_world: int = 32
    """K: policy-controlled slots per world."""
    max_agents_per_world: int = 64
    """All agents (controlled and background) a world can hold."""
    dt: float = 0.1
    """Simulation step (s), appendix A."""
    episode_length: int = 256
    """Steps until truncation (25.6 s), appendix A."""
    consequences: Mapping[str, Consequence] = field(default_factory=_default_consequences)
    """Per violation ("collision", "offroad", "wrong_way"): NONE, STOP or REMOVE."""
    wrong_way_angle: float = math.radians(120.0)
    """Heading residual (rad) beyond which moving travel counts as reversed (wrong way)."""
    lane_max_distance: float = 8.0
    """An agent further than this from every lane centerline has no current lane (m)."""
    classes: Mapping[AgentType, ClassSpec] = field(default_factory=default_classes)
    rewards: Mapping[str, tuple[RewardRange, RewardRange, RewardRange]] = field(default_factory=default_rewards)
    obs: ObsConfig = field(default_factory=ObsConfig)
    init: InitConfig = field(default_factory=InitConfig)
    signals: SignalConfig = field(default_factory=SignalConfig)
    idm: IdmConfig = field(default_factory=IdmConfig)

    def __post_init__(self) -> None:
        if isinstance(self.maps, str) or len(self.maps) == 0:
            raise ValueError(f"EngineConfig.maps: a non-empty list of map sources, got {self.maps!r}")
        for name in ("num_worlds", "slots_per_world", "max_agents_per_world", "episode_length"):
            v = getattr(self, name)
            if not (isinstance(v, (int, np.integer)) and v >= 1):
                raise ValueError(f"EngineConfig.{name}: a positive integer, got {v!r}")
        if self.max_agents_per_world < self.slots_per_world:
            raise ValueError("EngineConfig.max_agents_per_world must be >= slots_per_world "
                             f"({self.max_agents_per_world} < {self.slots_per_world})")
        if self.init.num_agents[1] > self.max_agents_per_world:
            raise ValueError(f"InitConfig.num_agents max {self.init.num_agents[1]} exceeds "
                             f"EngineConfig.max_agents_per_world {self.max_agents_per_world}")
        if not (math.isfinite(self.dt) and 0 < self.dt <= 1.0):
            raise ValueError(f"EngineConfig.dt: seconds in (0, 1], got {self.dt!r}")
        unknown = set(self.consequences) - {"collision", "offroad", "wrong_way"}
        if unknown:
            raise ValueError(f"EngineConfig.consequences: unknown violations {sorted(unknown)}")
        for k, v in self.consequences.items():
            if v not in tuple(Consequence):
                raise ValueError(f"EngineConfig.consequences[{k!r}]: one of none/stop/remove, got {v!r}")
        missing = set(AgentType) - set(self.classes)
        if missing:
            raise ValueError(f"EngineConfig.classes: missing {sorted(m.name for m in missing)}")
        if set(self.rewards) != set(REWARD_PARAMS):
            raise ValueError(f"EngineConfig.rewards: need exactly the parameters {REWARD_PARAMS}; "
                             f"unknown {sorted(set(self.rewards) - set(REWARD_PARAMS))}, "
                             f"missing {sorted(set(REWARD_PARAMS) - set(self.rewards))}")
        for k, cols in self.rewards.items():
            if len(cols) != 3:
                raise ValueError(f"EngineConfig.rewards[{k!r}]: (vehicle, pedestrian, cyclist) settings")
            for c in cols:
                if c is not None and not (len(c) == 2 and all(math.isfinite(x) for x in c) and c[0] <= c[1]):
                    raise ValueError(f"EngineConfig.rewards[{k!r}]: each setting is None or (min, max) "
                                     f"with min <= max, got {c!r}")

    def with_overrides(self, **kw: Any) -> EngineConfig:
        """A copy with top-level fields replaced; ``obs`` and ``init`` accept dicts of their fields."""
        for sub in ("obs", "init", "signals", "idm"):
            if isinstance(kw.get(sub), dict):
                kw[sub] = replace(getattr(self, sub), **kw[sub])
        known = {f.name for f in fields(self)}
        bad = set(kw) - known
        if bad:
            raise ValueError(f"unknown EngineConfig fields {sorted(bad)}")
        return replace(self, **kw)

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
                s.mass, self.init.class_weights[c]), strict=True))
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
