"""Observation settings (``ObsConfig``): which features of appendix C's tables 9-12 an agent sees,
how far, how many entities of each kind, and at which scales; re-exported by
:mod:`terrazero_env.config`."""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..foundation.checks import check_bool, check_float, check_int

__all__ = ["MAX_OBS_RADIUS", "MAX_TOPOLOGY_DISTANCE", "MIN_SEGMENT_LENGTH", "ObsConfig"]

#: Upper bound (m) of the observation radii, the z gate and the curvature lookahead: the candidate
#: lists of an observation and the road index's per-cell candidates grow with a radius squared.
MAX_OBS_RADIUS = 1000.0
#: Lower bound (m) of ``ObsConfig.road_segment_length``: lanes are cut into segments of this length.
MIN_SEGMENT_LENGTH = 0.1
#: Upper bound (m) of ``ObsConfig.topology_max_distance`` (the Dijkstra search's horizon).
MAX_TOPOLOGY_DISTANCE = 100_000.0


@dataclass(frozen=True)
class ObsConfig:
    """Observation groups and features (appendix C, tables 9-12). Each flag turns one feature on or off;
    the layout (``terrazero_env.obs.ObsLayout``) resizes to the enabled set."""

    # ego (table 9)
    agent_type: bool = True
    """Ego type code, 1 value: vehicle 1, pedestrian 2, cyclist 3 (table 9)."""
    rel_goal_pos: bool = True
    """Ego-frame goal position, 2 values scaled by ``goal_scale`` (table 9)."""
    goal_dropout_flag: bool = True
    """1 value: 1 while the goal is hidden (table 9)."""
    state_dropout_flag: bool = True
    """1 value: 1 while the ego state features are dropped (table 9)."""
    speed: bool = True
    """Signed ego speed, 1 value scaled by ``speed_scale`` (table 9)."""
    vehicle_dims: bool = True
    """(width / 15, length / 30), 2 values (table 9)."""
    collision_state: bool = True
    """1 value: 1 while in collision (table 9)."""
    steering_angle: bool = True
    """Steering angle / pi, 1 value (table 9)."""
    acceleration: bool = True
    """(a_long / 5, a_lat / 4), 2 values (table 9)."""
    stop_sign_state: bool = True
    """One-hot (not in region, must stop, cleared), 3 values, from the traffic-rules layer (table 9)."""
    alpha_params: bool = True
    """The active reward parameters normalized to [-1, 1] (table 9, appendix B)."""
    kinematic_params: bool = True
    """The four kinematic coefficients normalized to [-1, 1] (table 9, appendix D.4)."""
    lane_state: bool = False
    """Optional, off by default: (heading residual / pi, lateral offset / 2.5), 2 values (appendix C,
    below table 9: the paper's "lane state" feature, off in its default configuration)."""
    lateral_velocity: bool = False
    """Optional, off by default: the ego velocity across the current lane (m/s, + toward the lane's
    left, the rate of change of the lateral offset) / 5, 1 value; 0 off every lane (appendix C names
    lateral velocity among the optional ego features without a formula; the lane frame and the
    normaliser are ours: under the kinematic bicycle of cars the body-frame lateral velocity is 0)."""
    yaw_rate: bool = False
    """Optional, off by default: the ego yaw rate (rad/s, + counter-clockwise) / 1, 1 value (appendix C
    names yaw rate among the optional ego features; the normaliser is ours)."""
    road_curvature: bool = False
    """Optional, off by default: the mean curvature of the current lane over the next
    ``curvature_lookahead`` metres (1/m, + turning left, continuing onto the lane's successor when it has
    exactly one) / 0.1, so a 10 m radius reads as 1; 1 value, 0 off every lane (appendix C names local
    road curvature among the optional ego features; lookahead and normaliser are ours)."""
    curvature_lookahead: float = 10.0
    """Arc length ahead over which ``road_curvature`` averages the lane's heading change (m) (ours)."""
    road_curvature_route: bool = False
    """With ``road_curvature``, where the lane ends within the lookahead in several successors (the
    approach to an intersection), continue onto the one on the shortest lane-graph route to the goal
    instead of stopping at the lane's end (ours, off by default; the goal hidden, off every lane or
    out of ``topology_max_distance``: stop at the end as before). Appendix C's curvature is of the
    local road; past a fork the road the car will drive is its route's."""
    topology_goal_distance: bool = False
    """Optional, off by default: the shortest forward driving distance to the goal along the lane graph
    (successor lanes and lane changes, from the current lane to the lane nearest the goal) x
    ``goal_scale``, 1 value; 0 while the goal is hidden, ``topology_max_distance`` x ``goal_scale`` off
    every lane or when the goal cannot be reached within it (appendix C names topology distance to goal
    among the optional ego features; the search and the sentinel are ours)."""
    topology_max_distance: float = 200.0
    """The lane-graph search for ``topology_goal_distance`` stops this far out (m) (ours: the paper's goals
    lie at most about 120 m ahead)."""
    stop_line_ahead: bool = False
    """Optional, off by default (ours): the stop line at the downstream end of the agent's current lane,
    5 values: its distance along the lane from the agent's reference point (m, 0 once past it) x 0.02
    (table 12's position scale), then its signal state one-hot as table 12's (red, yellow, green,
    off/unknown; a stop sign's line reads off/unknown). A lane ending in no line, or a line further than
    ``traffic_radius``, reads ``traffic_radius`` x 0.02 and off/unknown. Table 12's stop-line entities
    carry the same state (the paper calls the ego's own approaching line its only channel to the
    signal), but a policy must first work out which of the nearest lines is its own; this names it, as
    ``stop_sign_state`` does for stop signs."""
    stop_line_route: bool = False
    """With ``stop_line_ahead``, where the current lane ends in no line, follow it onto its successor
    (the only one; at a fork the one on the shortest lane-graph route to the goal, as
    ``road_curvature_route``) and on, until a lane that ends in a line or ``traffic_radius``; the
    distance is the sum along those lanes (ours, off by default; with the goal hidden or off the lane
    graph the walk stops at a fork). Where a map splits the approach to a junction into several lanes
    (CARLA Town10HD: 6 of its 35 signal approaches are shorter than 10 m, against none on the
    procedural towns and Town01), the lane that ends in the line may be a few metres long, and without
    this a car sees its red only once it is on it."""
    goal_scale: float = 0.005
    """rel_goal_pos = ego-frame goal position (m) x this, 1/m (table 9: 0.005, so 200 m reads as 1). Raise
    it when goals are near: a task with goals 10-30 m away otherwise feeds the policy values below 0.15."""
    speed_scale: float = 0.01
    """Ego and partner speed features = speed (m/s) x this, s/m (tables 9, 10: 1/100); one scale for both."""
    # partners (table 10)
    partners: bool = True
    """The partner group: up to ``max_partners`` nearest agents, 8 values each (table 10)."""
    max_partners: int = 20
    """Partner slots per agent, a count in [0, 4096] (table 7: 20)."""
    partner_radius: float = 50.0
    """Partners further than this are not observed (m) (table 7: 50 m)."""
    partner_acceleration: bool = False
    """Optional partner (a_long / 5, a_lat / 4), off by default (table 10)."""
    # road (table 11)
    road: bool = True
    """The road group: up to ``max_road_segments`` nearest segments, 7 values each (table 11)."""
    max_road_segments: int = 200
    """Road-segment slots per agent, a count in [0, 4096] (table 7: 200)."""
    road_radius: float = 50.0
    """Road segments further than this are not observed (m) (ours; the paper gives no road radius)."""
    road_segment_length: float = 10.0
    """Lane, line and edge polylines are cut into observation segments at most this long (m) (ours)."""
    # traffic entities (table 12): stop lines and their signals
    traffic: bool = True
    """The traffic group: up to ``max_traffic`` nearest stop lines, 12 values each (table 12), then
    up to ``max_traffic_lights`` signal heads when ``traffic_lights`` is on."""
    max_traffic: int = 16
    """Traffic-entity slots per agent, a count in [0, 4096] (table 7: 16)."""
    traffic_lights: bool = False
    """Optional, off by default: besides the stop lines, up to ``max_traffic_lights`` signal heads as
    traffic-light entities of table 12 (entity type 1: the head's 3D position, its own signal state
    and its stop line's endpoints), nearest first, in slots after the stop lines' so they never crowd a
    stop line out. The paper's table 12 defines the entity type; its default observes stop lines."""
    max_traffic_lights: int = 8
    """Traffic-light slots per agent when ``traffic_lights`` is on, a count in [0, 4096] (ours)."""
    traffic_radius: float = 100.0
    """Traffic entities further than this are not observed (m) (table 7: 100 m)."""
    z_gate: float = 2.5
    """Entities more than this far away in z are not observed (m) (table 7: 2.5 m)."""
    dtype: str = "float32"
    """"float32" or "float16" (16-bit observations halve bandwidth, section 3.1)."""
    noise_std: float = 0.0
    """Optional Gaussian noise (std, in observation units) added to every observed value; 0 = off (ours)."""
    noise_clip: float = 0.05
    """The noise is clipped to +- this value, in observation units (ours)."""
    slot_dropout: float = 0.0
    """Optional probability of zeroing each partner and road entity slot; 0 = off (ours)."""
    state_dropout: float = 0.0
    """Optional probability per step of zeroing the ego state features (table 9 names the flag that
    says so; the probability is ours)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            if f.type == "bool":
                check_bool(f"ObsConfig.{f.name}", getattr(self, f.name))
        if self.dtype not in ("float32", "float16"):
            raise ValueError(f"ObsConfig.dtype: 'float32' or 'float16', got {self.dtype!r}")
        for name in ("max_partners", "max_road_segments", "max_traffic", "max_traffic_lights"):
            check_int(f"ObsConfig.{name}", getattr(self, name), 0, 4096)
        # Upper bounds: the observation's candidate lists and the road index's per-cell candidates
        # grow with the square of a radius; a segment length sets how many segments a lane is cut into.
        for name in ("partner_radius", "road_radius", "traffic_radius", "z_gate", "curvature_lookahead"):
            check_float(f"ObsConfig.{name}", getattr(self, name), 0.0, MAX_OBS_RADIUS, lo_open=True,
                        unit=" of metres")
        check_float("ObsConfig.road_segment_length", self.road_segment_length, MIN_SEGMENT_LENGTH, MAX_OBS_RADIUS,
                    unit=" of metres")
        check_float("ObsConfig.topology_max_distance", self.topology_max_distance, 0.0, MAX_TOPOLOGY_DISTANCE,
                    lo_open=True, unit=" of metres")
        for name in ("goal_scale", "speed_scale"):
            check_float(f"ObsConfig.{name}", getattr(self, name), 0.0, lo_open=True)
        for name in ("noise_std", "noise_clip"):
            check_float(f"ObsConfig.{name}", getattr(self, name), 0.0)
        for name in ("slot_dropout", "state_dropout"):
            check_float(f"ObsConfig.{name}", getattr(self, name), 0.0, 1.0)
