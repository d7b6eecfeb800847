"""Per-class configuration: the dynamics models (TerraZero section 3.2), each class's dimensions,
limits, comfort thresholds and action grid (``ClassSpec``, appendix D.1 and B), and the reward table
(appendix B, table 8: ``REWARD_PARAMS``, ``default_rewards``). ``terrazero_env.config`` re-exports
every name here; ``EngineConfig.classes`` and ``EngineConfig.rewards`` hold them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from ..foundation.checks import check_enum, check_float, check_pair, check_tuple
from ..foundation.checks import set_field as _set
from ..maps.schema import AgentType

__all__ = ["CLASS_PARAM_COLUMNS", "REWARD_PARAMS", "ClassSpec", "DynamicsModel", "RewardRange", "default_classes",
           "default_rewards"]


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
    "mass", "class_weight", "max_steer_rate", "rear_axle",
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
    """Dynamics model of the class (section 3.2; which class uses which: ours, see ``default_classes``)."""
    length: tuple[float, float]
    """(min, max) box length in metres, sampled uniformly per agent at reset (appendix D.1 samples per
    type; the ranges are ours)."""
    width: tuple[float, float]
    """(min, max) box width in metres (appendix D.1; ranges ours)."""
    height: tuple[float, float]
    """(min, max) box height in metres (appendix D.1; ranges ours)."""
    action_long: tuple[float, ...]
    """Longitudinal action values: jerk (m/s^3) for BICYCLE_JERK, acceleration (m/s^2) otherwise (the
    paper omits the grid values; ours)."""
    action_lat: tuple[float, ...]
    """Lateral action values: lateral jerk (m/s^3) for BICYCLE_JERK, steering angle (rad) for the
    other bicycles, yaw rate (rad/s) for UNICYCLE (ours)."""
    max_speed: float = 20.0
    """Base forward speed clip (m/s), times the agent's c_vel (appendix B and table 13: v_max = 20 * c_vel)."""
    max_reverse_speed: float = 2.0
    """Reverse speed clip (m/s) (ours)."""
    max_accel: float = 4.0
    """Acceleration clip (m/s^2), times c_acc (table 13 scales it; the base value is ours)."""
    max_decel: float = 8.0
    """Braking clip (m/s^2), times c_acc (ours)."""
    max_lat_accel: float = 4.0
    """Lateral acceleration clip (m/s^2) for the jerk model (ours)."""
    max_steer: float = 0.6
    """Steering angle clip (rad) (ours)."""
    wheelbase_ratio: float = 0.6
    """Wheelbase as a fraction of length, in (0, 1] (ours)."""
    comfort: tuple[float, float, float, float] = (3.0, 3.0, 5.0, 5.0)
    """Comfort thresholds |a_long|, |a_lat| (m/s^2), |j_long|, |j_lat| (m/s^3) (appendix B, per type)."""
    cornering_stiffness: float = 1.2e5
    """BICYCLE_TIRE: cornering stiffness per axle (N/rad) (ours)."""
    mass: float = 1.5e4
    """BICYCLE_TIRE: mass (kg); yaw inertia is taken as mass * (length/2)^2 / 3 (ours)."""
    max_steer_rate: float | None = 0.6
    """Steering-rate limit (rad/s) of the three bicycle models: the steering angle is state and moves
    toward the angle the action asks for by at most this much per second (0.6 rad/s as PufferDrive's
    jerk model, ``pufferlib/ocean/drive``). With a limit the models also snap a speed (and, for the jerk
    model, a longitudinal or lateral acceleration) that a step would carry across zero to exactly zero,
    and an agent placed on a curve starts with the steering the curve needs. ``None``: the earlier
    models, where the angle follows the command at once and nothing snaps (to reproduce runs made
    before the limit). Ignored by the unicycle (pedestrians), which has no steering."""

    rear_axle: float = 0.0
    """How far the rear axle sits behind the box centre, as a fraction of the length, in [0, 0.45]
    (ours). The kinematic bicycle turns about its rear axle, and the tire model's centre of mass lies
    half a wheelbase ahead of it, so a long vehicle's tail follows its rear wheels instead of swinging
    out as far as its nose: a 12 m bus turning about its centre swings its rear corner 0.6 m out at a
    0.1 rad heading change, about its rear axle (2.7 m behind the centre) 0.3 m. 0: every model turns
    about the box centre (cars, and every run made before the option)."""

    def __post_init__(self) -> None:
        _set(self, "dynamics", check_enum("ClassSpec.dynamics", self.dynamics, DynamicsModel))
        for name in ("length", "width", "height"):
            _set(self, name, check_pair(f"ClassSpec.{name}", getattr(self, name), 0.0, lo_open=True, unit=" of metres"))
        for name in ("action_long", "action_lat"):
            v = check_tuple(f"ClassSpec.{name}", getattr(self, name), min_len=1)
            for i, x in enumerate(v):
                check_float(f"ClassSpec.{name}[{i}]", x)
            _set(self, name, v)
        for name in ("max_speed", "max_reverse_speed", "max_accel", "max_decel", "max_lat_accel", "max_steer",
                     "cornering_stiffness", "mass"):
            check_float(f"ClassSpec.{name}", getattr(self, name), 0.0)
        check_float("ClassSpec.wheelbase_ratio", self.wheelbase_ratio, 0.0, 1.0, lo_open=True)
        if self.max_steer_rate is not None:
            check_float("ClassSpec.max_steer_rate", self.max_steer_rate, 0.0, 100.0, lo_open=True)
        check_float("ClassSpec.rear_axle", self.rear_axle, 0.0, 0.45)
        comfort = check_tuple("ClassSpec.comfort", self.comfort, 4)
        for i, x in enumerate(comfort):
            check_float(f"ClassSpec.comfort[{i}]", x, 0.0)
        _set(self, "comfort", comfort)

    @property
    def num_actions(self) -> int:
        return len(self.action_long) * len(self.action_lat)


def default_classes() -> dict[AgentType, ClassSpec]:
    """Per-class defaults: dimension ranges (appendix D.1), comfort thresholds (appendix B), and the
    discrete action grids (the paper omits their values; these are documented in docs/status.md). The
    three vehicle classes share a 4 x 3 grid size, so a vehicles-only policy has one action space. The
    truck steers up to 0.7 rad (a rigid truck's 40 degrees): at 0.3 rad, times a kinematic coefficient
    down to 0.5, its 5-8 m wheelbase turned on a 35-50 m radius and no town corner could be taken. Trucks
    and buses turn about their rear axle (``rear_axle``: 0.25 and 0.27 of the length from the tail, a rigid
    truck's and a city bus's rear overhang), the truck's wheelbase is 0.55 of its length (a 10 m rigid
    truck's 5.5 m; at 0.65 an 11 m truck's nose swept 13.4 m from the turn's centre on a one-lane-each-way
    town's corner, beyond the outer curb), the truck's tires corner at 3e5 N/rad per axle (two to four
    truck tires of about 1e5 N/rad each; at 1.2e5 its understeer on a 15 m town corner at 5 m/s needed
    0.1 rad of slip), and the bus steers up to 0.75 rad (a city bus's 43 degrees)."""
    steer = (-0.5, -0.25, -0.1, 0.0, 0.1, 0.25, 0.5)
    return {
        AgentType.CAR: ClassSpec(DynamicsModel.BICYCLE_JERK, (3.8, 5.2), (1.7, 2.1), (1.4, 1.8),
                                 action_long=(-15.0, -4.0, 0.0, 4.0), action_lat=(-4.0, 0.0, 4.0)),
        AgentType.TRUCK: ClassSpec(DynamicsModel.BICYCLE_TIRE, (7.0, 12.0), (2.3, 2.6), (3.0, 4.0),
                                   action_long=(-6.0, -3.0, 0.0, 1.5), action_lat=(-0.7, 0.0, 0.7), max_accel=2.0,
                                   max_decel=6.0, max_steer=0.7, wheelbase_ratio=0.55, rear_axle=0.25,
                                   cornering_stiffness=3.0e5),
        AgentType.BUS: ClassSpec(DynamicsModel.BICYCLE_JERK, (10.0, 13.0), (2.5, 2.6), (3.0, 3.4),
                                 action_long=(-15.0, -4.0, 0.0, 4.0), action_lat=(-4.0, 0.0, 4.0),
                                 max_accel=2.5, max_decel=6.0, max_steer=0.75, wheelbase_ratio=0.55, rear_axle=0.23),
        AgentType.PEDESTRIAN: ClassSpec(DynamicsModel.UNICYCLE, (0.4, 0.7), (0.4, 0.7), (1.5, 1.9),
                                        action_long=(-1.5, -0.5, 0.0, 0.5, 1.5), action_lat=(-1.0, -0.5, 0.0, 0.5, 1.0),
                                        max_speed=3.0, max_reverse_speed=0.0, max_accel=1.5, max_decel=3.0,
                                        comfort=(1.5, 1.0, 12.0, 5.0), max_steer_rate=None),
        AgentType.CYCLIST: ClassSpec(DynamicsModel.BICYCLE_ACCEL, (1.6, 2.0), (0.5, 0.8), (1.5, 1.9),
                                     action_long=(-3.0, -1.5, 0.0, 1.0, 2.0), action_lat=steer, max_speed=10.0,
                                     max_reverse_speed=0.0, max_accel=2.0, max_decel=4.0,
                                     comfort=(3.0, 1.5, 40.0, 18.0), max_steer_rate=1.0),
    }
