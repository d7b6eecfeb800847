"""Every config field is checked at construction: a bad value of the wrong type, out of range, NaN,
a float where a count belongs or an integer outside its enum raises ``ValueError`` whose message
names the field, and the same values from a YAML config or ``--set`` give the
same message. Valid values are stored in canonical form (enum members, tuples)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from terrazero_env.config import (
    MAX_PLACEMENT_TRIES,
    AgentType,
    ClassSpec,
    Consequence,
    DynamicsModel,
    EngineConfig,
    GoalBehavior,
    IdmConfig,
    InitConfig,
    InitMode,
    ObsConfig,
    PedestrianConfig,
    RewardForms,
    RoadUsersConfig,
    SignalConfig,
    SignalController,
    default_classes,
)
from terrazero_env.config.io import load_config

NAN, INF = math.nan, math.inf
CAR = dict(dynamics=DynamicsModel.BICYCLE_JERK, length=(3.8, 5.2), width=(1.7, 2.1), height=(1.4, 1.8),
           action_long=(-4.0, 0.0, 4.0), action_lat=(-4.0, 0.0, 4.0))

#: (dataclass, field, bad value, the message must contain). One row per way a field can be wrong.
BAD: list[tuple[type, str, object, str]] = [
    # ClassSpec
    (ClassSpec, "dynamics", 9, "ClassSpec.dynamics"),
    (ClassSpec, "dynamics", "warp", "ClassSpec.dynamics"),
    (ClassSpec, "length", (5.0, 3.0), "ClassSpec.length"),
    (ClassSpec, "length", (0.0, 3.0), "ClassSpec.length"),
    (ClassSpec, "width", (1.0, NAN), "ClassSpec.width"),
    (ClassSpec, "height", 1.5, "ClassSpec.height"),
    (ClassSpec, "action_long", (), "ClassSpec.action_long"),
    (ClassSpec, "action_lat", (0.0, INF), "ClassSpec.action_lat[1]"),
    (ClassSpec, "action_lat", "left", "ClassSpec.action_lat"),
    (ClassSpec, "max_speed", -1.0, "ClassSpec.max_speed"),
    (ClassSpec, "max_speed", NAN, "ClassSpec.max_speed"),
    (ClassSpec, "max_reverse_speed", "2", "ClassSpec.max_reverse_speed"),
    (ClassSpec, "max_accel", INF, "ClassSpec.max_accel"),
    (ClassSpec, "max_decel", -8.0, "ClassSpec.max_decel"),
    (ClassSpec, "max_lat_accel", True, "ClassSpec.max_lat_accel"),
    (ClassSpec, "max_steer", NAN, "ClassSpec.max_steer"),
    (ClassSpec, "max_steer_rate", 0.0, "ClassSpec.max_steer_rate"),
    (ClassSpec, "max_steer_rate", INF, "ClassSpec.max_steer_rate"),
    (ClassSpec, "max_steer_rate", "0.6", "ClassSpec.max_steer_rate"),
    (ClassSpec, "wheelbase_ratio", 0.0, "ClassSpec.wheelbase_ratio"),
    (ClassSpec, "rear_axle", -0.1, "ClassSpec.rear_axle"),
    (ClassSpec, "rear_axle", 0.5, "ClassSpec.rear_axle"),
    (ClassSpec, "rear_axle", NAN, "ClassSpec.rear_axle"),
    (ClassSpec, "wheelbase_ratio", 1.5, "ClassSpec.wheelbase_ratio"),
    (ClassSpec, "comfort", (3.0, 3.0, 5.0), "ClassSpec.comfort"),
    (ClassSpec, "comfort", (3.0, 3.0, 5.0, NAN), "ClassSpec.comfort[3]"),
    (ClassSpec, "cornering_stiffness", -1.0, "ClassSpec.cornering_stiffness"),
    (ClassSpec, "mass", NAN, "ClassSpec.mass"),
    # ObsConfig
    (ObsConfig, "agent_type", 1, "ObsConfig.agent_type"),
    (ObsConfig, "lane_state", "yes", "ObsConfig.lane_state"),
    (ObsConfig, "partners", None, "ObsConfig.partners"),
    (ObsConfig, "goal_scale", 0.0, "ObsConfig.goal_scale"),
    (ObsConfig, "goal_scale", NAN, "ObsConfig.goal_scale"),
    (ObsConfig, "speed_scale", -0.1, "ObsConfig.speed_scale"),
    (ObsConfig, "max_partners", 20.0, "ObsConfig.max_partners"),
    (ObsConfig, "max_partners", 5000, "ObsConfig.max_partners"),
    (ObsConfig, "max_road_segments", -1, "ObsConfig.max_road_segments"),
    (ObsConfig, "max_traffic", True, "ObsConfig.max_traffic"),
    (ObsConfig, "partner_radius", NAN, "ObsConfig.partner_radius"),
    (ObsConfig, "road_radius", 0.0, "ObsConfig.road_radius"),
    (ObsConfig, "traffic_radius", INF, "ObsConfig.traffic_radius"),
    (ObsConfig, "road_segment_length", -10.0, "ObsConfig.road_segment_length"),
    (ObsConfig, "z_gate", "2.5", "ObsConfig.z_gate"),
    (ObsConfig, "dtype", "float64", "ObsConfig.dtype"),
    (ObsConfig, "noise_std", NAN, "ObsConfig.noise_std"),
    (ObsConfig, "noise_clip", -0.05, "ObsConfig.noise_clip"),
    (ObsConfig, "slot_dropout", 1.5, "ObsConfig.slot_dropout"),
    (ObsConfig, "state_dropout", NAN, "ObsConfig.state_dropout"),
    (ObsConfig, "curvature_lookahead", 0.0, "ObsConfig.curvature_lookahead"),
    (ObsConfig, "curvature_lookahead", NAN, "ObsConfig.curvature_lookahead"),
    (ObsConfig, "topology_max_distance", -5.0, "ObsConfig.topology_max_distance"),
    (ObsConfig, "topology_max_distance", INF, "ObsConfig.topology_max_distance"),
    (ObsConfig, "max_traffic_lights", 8.0, "ObsConfig.max_traffic_lights"),
    (ObsConfig, "max_traffic_lights", -1, "ObsConfig.max_traffic_lights"),
    # RewardForms
    (RewardForms, "vel_align", 2, "RewardForms.vel_align"),
    (RewardForms, "vel_align", "gigaflow", "RewardForms.vel_align"),
    (RewardForms, "speed_limit", 1.0, "RewardForms.speed_limit"),
    (RewardForms, "speed_limit", "posted", "RewardForms.speed_limit"),
    (RewardForms, "goal_progress", 5, "RewardForms.goal_progress"),
    (RewardForms, "goal_progress", "manhattan", "RewardForms.goal_progress"),
    (RewardForms, "route_max_distance", -1.0, "RewardForms.route_max_distance"),
    (RewardForms, "route_max_distance", float("nan"), "RewardForms.route_max_distance"),
    (RewardForms, "goal_progress_shaping", "discounted", "RewardForms.goal_progress_shaping"),
    (RewardForms, "goal_progress_shaping", 1.5, "RewardForms.goal_progress_shaping"),
    (RewardForms, "goal_progress_gamma", 1.01, "RewardForms.goal_progress_gamma"),
    (RewardForms, "goal_progress_gamma", float("nan"), "RewardForms.goal_progress_gamma"),
    (EngineConfig, "reward_forms", {"vel_align": 1}, "EngineConfig.reward_forms"),
    # InitConfig
    (InitConfig, "mode", 7, "InitConfig.mode"),
    (InitConfig, "mode", 1.0, "InitConfig.mode"),
    (InitConfig, "p_random", NAN, "InitConfig.p_random"),
    (InitConfig, "p_random", 1.5, "InitConfig.p_random"),
    (InitConfig, "num_agents", (2.0, 4), "InitConfig.num_agents"),
    (InitConfig, "num_agents", (0, 4), "InitConfig.num_agents"),
    (InitConfig, "num_agents", (5, 2), "InitConfig.num_agents"),
    (InitConfig, "num_agents", 4, "InitConfig.num_agents"),
    (InitConfig, "class_weights", (1.0, NAN, 0.0, 0.0, 0.0), "InitConfig.class_weights[1]"),
    (InitConfig, "class_weights", (1.0, -1.0, 0.0, 0.0, 0.0), "InitConfig.class_weights[1]"),
    (InitConfig, "class_weights", (0.0,) * 5, "InitConfig.class_weights"),
    (InitConfig, "class_weights", (1.0,) * 4, "InitConfig.class_weights"),
    (InitConfig, "controlled", (1, 1, 1, 0, 0), "InitConfig.controlled[0]"),
    (InitConfig, "controlled", (True,) * 6, "InitConfig.controlled"),
    (InitConfig, "initial_speed", (2.0, 1.0), "InitConfig.initial_speed"),
    (InitConfig, "initial_speed", (-1.0, 1.0), "InitConfig.initial_speed"),
    (InitConfig, "goal_distance", (20.0, INF), "InitConfig.goal_distance"),
    (InitConfig, "goal_min_forward", NAN, "InitConfig.goal_min_forward"),
    (InitConfig, "goal_lane_change", 1.5, "InitConfig.goal_lane_change"),
    (InitConfig, "goal_dropout", (0.3, 0.3, 0.3, 0.0, 1.5), "InitConfig.goal_dropout[4]"),
    (InitConfig, "goal_dropout", (0.3, 0.3, 0.3, 0.0, NAN), "InitConfig.goal_dropout[4]"),
    (InitConfig, "goal_behavior", 2, "InitConfig.goal_behavior"),
    (InitConfig, "placement_tries", 50.0, "InitConfig.placement_tries"),
    (InitConfig, "placement_tries", 50.7, "InitConfig.placement_tries"),
    (InitConfig, "placement_tries", 0, "InitConfig.placement_tries"),
    (InitConfig, "placement_tries", MAX_PLACEMENT_TRIES + 1, "InitConfig.placement_tries"),
    (InitConfig, "placement_tries", 10**9, "InitConfig.placement_tries"),
    (InitConfig, "spawn_clearance", -1.0, "InitConfig.spawn_clearance"),
    (InitConfig, "class_kinematic_ranges", ((0.5, 1.5),) * 4, "InitConfig.class_kinematic_ranges"),
    (InitConfig, "class_kinematic_ranges", ((0.5, 1.5),) * 4 + ((0.2, 1.0),), "InitConfig.class_kinematic_ranges[4]"),
    (InitConfig, "kinematic_range", (1.5, 0.5), "InitConfig.kinematic_range"),
    (InitConfig, "randomize_kinematics", 0, "InitConfig.randomize_kinematics"),
    (InitConfig, "goal_turnable", "yes", "InitConfig.goal_turnable"),
    (InitConfig, "log_roles", ({"replay": 1.0},) * 4, "InitConfig.log_roles"),
    (InitConfig, "log_roles", ("replay",) + (None,) * 4, "InitConfig.log_roles[0] (car)"),
    (InitConfig, "log_roles", ({"replay": NAN},) + (None,) * 4, "InitConfig.log_roles[0] (car).replay"),
    (InitConfig, "log_roles", ({"replay": 0.0},) + (None,) * 4, "InitConfig.log_roles[0] (car)"),
    (InitConfig, "log_roles", ({"pilot": 1.0},) + (None,) * 4, "InitConfig.log_roles[0] (car)"),
    (InitConfig, "log_roles", ({"planner": -1.0},) + (None,) * 4, "InitConfig.log_roles[0] (car).planner"),
    (InitConfig, "log_roles", (None,) * 3 + ({"planner": 1.0}, None), "InitConfig.log_roles[3] (pedestrian).planner"),
    (InitConfig, "log_roles", (None,) * 4 + ({"idm": 1.0},), "InitConfig.log_roles[4] (cyclist).idm"),
    (InitConfig, "log_roles", (None,) * 3 + ({"policy": 1.0}, None), "InitConfig.log_roles[3] (pedestrian).policy"),
    # SignalConfig
    (SignalConfig, "controller", 3, "SignalConfig.controller"),
    (SignalConfig, "controller", "traffic_cop", "SignalConfig.controller"),
    (SignalConfig, "christmas_green", (0.0, 0.3), "SignalConfig.christmas_green"),
    (SignalConfig, "replay_logged", 1, "SignalConfig.replay_logged"),
    (SignalConfig, "replay_logged", "yes", "SignalConfig.replay_logged"),
    (SignalConfig, "christmas_yellow", (3.0, NAN), "SignalConfig.christmas_yellow"),
    (SignalConfig, "christmas_red", (15.0,), "SignalConfig.christmas_red"),
    (SignalConfig, "left_green", 0.0, "SignalConfig.left_green"),
    (SignalConfig, "through_green", NAN, "SignalConfig.through_green"),
    (SignalConfig, "yellow", -3.0, "SignalConfig.yellow"),
    (SignalConfig, "all_red", INF, "SignalConfig.all_red"),
    (SignalConfig, "nema_green_sigma", -0.1, "SignalConfig.nema_green_sigma"),
    (SignalConfig, "permissive_left_prob", 1.5, "SignalConfig.permissive_left_prob"),
    (SignalConfig, "stop_speed", 0.0, "SignalConfig.stop_speed"),
    (SignalConfig, "stop_dwell", (3.0, 1.0), "SignalConfig.stop_dwell"),
    (SignalConfig, "stop_region", NAN, "SignalConfig.stop_region"),
    # RoadUsersConfig
    (RoadUsersConfig, "idm_fraction", NAN, "RoadUsersConfig.idm_fraction"),
    (RoadUsersConfig, "idm_fraction", 2.0, "RoadUsersConfig.idm_fraction"),
    (RoadUsersConfig, "idm_modes", (0.0, 0.0, 0.0), "RoadUsersConfig.idm_modes"),
    (RoadUsersConfig, "idm_modes", (1.0, -1.0, 1.0), "RoadUsersConfig.idm_modes[1]"),
    (RoadUsersConfig, "lane_change", 1, "RoadUsersConfig.lane_change"),
    (RoadUsersConfig, "planner_fraction", -0.1, "RoadUsersConfig.planner_fraction"),
    (RoadUsersConfig, "planner_interval", 0.0, "RoadUsersConfig.planner_interval"),
    (RoadUsersConfig, "planner_horizon", NAN, "RoadUsersConfig.planner_horizon"),
    (RoadUsersConfig, "planner_resolution", 2.0, "RoadUsersConfig.planner_resolution"),
    (RoadUsersConfig, "planner_offsets", (0.0, 3.0), "RoadUsersConfig.planner_offsets[1]"),
    (RoadUsersConfig, "planner_speeds", "fast", "RoadUsersConfig.planner_speeds"),
    (RoadUsersConfig, "planner_weights", (1.0, 1.0, NAN, 1.0), "RoadUsersConfig.planner_weights[2]"),
    (RoadUsersConfig, "planner_ttc", -1.0, "RoadUsersConfig.planner_ttc"),
    (RoadUsersConfig, "planner_min_progress", 1000.0, "RoadUsersConfig.planner_min_progress"),
    (RoadUsersConfig, "planner_margin", 5.0, "RoadUsersConfig.planner_margin"),
    (RoadUsersConfig, "planner_lateral_time", 0.0, "RoadUsersConfig.planner_lateral_time"),
    (RoadUsersConfig, "lane_change_distance", 0.0, "RoadUsersConfig.lane_change_distance"),
    (RoadUsersConfig, "lane_change_clear_ahead", -1.0, "RoadUsersConfig.lane_change_clear_ahead"),
    (RoadUsersConfig, "lane_change_safe_decel", -1.0, "RoadUsersConfig.lane_change_safe_decel"),
    (RoadUsersConfig, "lane_change_cooldown", NAN, "RoadUsersConfig.lane_change_cooldown"),
    (RoadUsersConfig, "lane_change_lookahead", 9.0, "RoadUsersConfig.lane_change_lookahead"),
    (RoadUsersConfig, "lane_change_margin", "wide", "RoadUsersConfig.lane_change_margin"),
    (RoadUsersConfig, "parked", (3, 1), "RoadUsersConfig.parked"),
    (RoadUsersConfig, "parked", 1.5, "RoadUsersConfig.parked"),
    (RoadUsersConfig, "parked_row", (0, 2), "RoadUsersConfig.parked_row"),
    (RoadUsersConfig, "crash_disc", (0, 65), "RoadUsersConfig.crash_disc"),
    (RoadUsersConfig, "crash_chain", -1, "RoadUsersConfig.crash_chain"),
    (RoadUsersConfig, "crash_tbone", "2", "RoadUsersConfig.crash_tbone"),
    (RoadUsersConfig, "crash_fan", (1, NAN), "RoadUsersConfig.crash_fan"),
    (RoadUsersConfig, "crash_vehicles", (1, 9), "RoadUsersConfig.crash_vehicles"),
    (RoadUsersConfig, "cone_grid", (2, 1), "RoadUsersConfig.cone_grid"),
    (RoadUsersConfig, "cone_taper", 100, "RoadUsersConfig.cone_taper"),
    (RoadUsersConfig, "lane_block", True, "RoadUsersConfig.lane_block"),
    (RoadUsersConfig, "debris", (0, 1, 2), "RoadUsersConfig.debris"),
    (RoadUsersConfig, "static_sizes", (0.0, 0.0, 0.0), "RoadUsersConfig.static_sizes"),
    (RoadUsersConfig, "worker_prob", 1.5, "RoadUsersConfig.worker_prob"),
    (RoadUsersConfig, "workers", (0, 1), "RoadUsersConfig.workers"),
    (RoadUsersConfig, "debris_size", (1.0, 0.5), "RoadUsersConfig.debris_size"),
    (RoadUsersConfig, "static_clearance", -0.1, "RoadUsersConfig.static_clearance"),
    (RoadUsersConfig, "static_tries", 0, "RoadUsersConfig.static_tries"),
    (RoadUsersConfig, "route_blocks", -0.1, "RoadUsersConfig.route_blocks"),
    (RoadUsersConfig, "route_block_distance", (40.0, 15.0), "RoadUsersConfig.route_block_distance"),
    (RoadUsersConfig, "route_block_offset", float("nan"), "RoadUsersConfig.route_block_offset"),
    (RoadUsersConfig, "route_block_kinds", (0.0, 0.0, 0.0), "RoadUsersConfig.route_block_kinds"),
    # IdmConfig
    (IdmConfig, "v0_scale", (1.0, 1.15), "IdmConfig.v0_scale"),
    (IdmConfig, "time_headway", (1.5, 0.0, 2.0), "IdmConfig.time_headway[1]"),
    (IdmConfig, "max_accel", (1.5, NAN, 1.0), "IdmConfig.max_accel[1]"),
    (IdmConfig, "comfort_decel", (2.0, 3.0, -1.5), "IdmConfig.comfort_decel[2]"),
    (IdmConfig, "min_gap", "2", "IdmConfig.min_gap"),
    (IdmConfig, "delta", 0.0, "IdmConfig.delta"),
    (IdmConfig, "lookahead", NAN, "IdmConfig.lookahead"),
    (IdmConfig, "reroll_prob", 1.5, "IdmConfig.reroll_prob"),
    (IdmConfig, "max_decel", INF, "IdmConfig.max_decel"),
    (IdmConfig, "curve_lat_accel", -2.0, "IdmConfig.curve_lat_accel"),
    (IdmConfig, "side_margin", NAN, "IdmConfig.side_margin"),
    # PedestrianConfig, RoadUsersConfig
    (PedestrianConfig, "crossing_rate", -0.1, "PedestrianConfig.crossing_rate"),
    (PedestrianConfig, "crossing_rate", NAN, "PedestrianConfig.crossing_rate"),
    (PedestrianConfig, "group_probs", (0.5, 0.5, 0.5, -0.5), "PedestrianConfig.group_probs[3]"),
    (PedestrianConfig, "group_probs", (0.5, 0.2, 0.2, 0.2), "PedestrianConfig.group_probs"),
    (PedestrianConfig, "group_probs", (0.5, 0.5), "PedestrianConfig.group_probs"),
    (PedestrianConfig, "group_size", (0, 3), "PedestrianConfig.group_size"),
    (PedestrianConfig, "group_size", (2, 9), "PedestrianConfig.group_size"),
    (PedestrianConfig, "group_size", (2.5, 3), "PedestrianConfig.group_size"),
    (PedestrianConfig, "stagger_interval", 0.0, "PedestrianConfig.stagger_interval"),
    (PedestrianConfig, "walking_speed", (1.6, 1.0), "PedestrianConfig.walking_speed"),
    (PedestrianConfig, "walking_speed", (0.0, 1.0), "PedestrianConfig.walking_speed"),
    (PedestrianConfig, "max_speed", 1.0, "PedestrianConfig.max_speed"),
    (PedestrianConfig, "max_speed", INF, "PedestrianConfig.max_speed"),
    (PedestrianConfig, "radius", 0.0, "PedestrianConfig.radius"),
    (PedestrianConfig, "neighbor_distance", -1.0, "PedestrianConfig.neighbor_distance"),
    (PedestrianConfig, "time_horizon", NAN, "PedestrianConfig.time_horizon"),
    (PedestrianConfig, "jaywalk_rate", "0.1", "PedestrianConfig.jaywalk_rate"),
    (PedestrianConfig, "jaywalk_reach", 0.0, "PedestrianConfig.jaywalk_reach"),
    (PedestrianConfig, "vehicle_yield_horizon", -1.0, "PedestrianConfig.vehicle_yield_horizon"),
    (RoadUsersConfig, "pedestrians", {"crossing_rate": 0.1}, "RoadUsersConfig.pedestrians"),
    # EngineConfig
    (EngineConfig, "maps", (), "EngineConfig.maps"),
    (EngineConfig, "maps", "grid_town", "EngineConfig.maps"),
    (EngineConfig, "maps", ("grid_town", 3), "EngineConfig.maps[1]"),
    (EngineConfig, "num_worlds", 0, "EngineConfig.num_worlds"),
    (EngineConfig, "num_worlds", 2.0, "EngineConfig.num_worlds"),
    (EngineConfig, "num_worlds", 10**9, "EngineConfig.num_worlds"),
    (EngineConfig, "slots_per_world", 4.5, "EngineConfig.slots_per_world"),
    (EngineConfig, "slots_per_world", 0, "EngineConfig.slots_per_world"),
    (EngineConfig, "max_agents_per_world", 10**6, "EngineConfig.max_agents_per_world"),
    (EngineConfig, "episode_length", 256.0, "EngineConfig.episode_length"),
    (EngineConfig, "episode_length", 2**40, "EngineConfig.episode_length"),
    (EngineConfig, "dt", NAN, "EngineConfig.dt"),
    (EngineConfig, "dt", 0.0, "EngineConfig.dt"),
    (EngineConfig, "dt", 2.0, "EngineConfig.dt"),
    (EngineConfig, "consequences", {"collision": 7}, "EngineConfig.consequences['collision']"),
    (EngineConfig, "consequences", {"red_light": "explode"}, "EngineConfig.consequences['red_light']"),
    (EngineConfig, "consequences", {"speeding": Consequence.STOP}, "EngineConfig.consequences"),
    (EngineConfig, "wrong_way_angle", NAN, "EngineConfig.wrong_way_angle"),
    (EngineConfig, "wrong_way_angle", 4.0, "EngineConfig.wrong_way_angle"),
    (EngineConfig, "lane_max_distance", 0.0, "EngineConfig.lane_max_distance"),
    (EngineConfig, "lane_align_angle", NAN, "EngineConfig.lane_align_angle"),
    (EngineConfig, "lane_align_angle", 3.5, "EngineConfig.lane_align_angle"),
    (EngineConfig, "offroad_tolerance", NAN, "EngineConfig.offroad_tolerance"),
    (EngineConfig, "offroad_tolerance", -0.1, "EngineConfig.offroad_tolerance"),
    (EngineConfig, "offroad_tolerance", 2.5, "EngineConfig.offroad_tolerance"),
    (EngineConfig, "offroad_tolerance", "0.3", "EngineConfig.offroad_tolerance"),
    (EngineConfig, "lane_tracking", 1, "EngineConfig.lane_tracking"),
    (EngineConfig, "lane_tracking", "on", "EngineConfig.lane_tracking"),
    (EngineConfig, "neighbour_search", "kdtree", "EngineConfig.neighbour_search"),
    (EngineConfig, "neighbour_search", 1, "EngineConfig.neighbour_search"),
    (EngineConfig, "classes", {AgentType.CAR: default_classes()[AgentType.CAR]}, "EngineConfig.classes"),
    (EngineConfig, "classes", {**default_classes(), AgentType.BUS: "bus"}, "EngineConfig.classes"),
    (EngineConfig, "obs", {"dtype": "float16"}, "EngineConfig.obs"),
    (EngineConfig, "init", None, "EngineConfig.init"),
    (EngineConfig, "signals", 0, "EngineConfig.signals"),
    (EngineConfig, "idm", "idm", "EngineConfig.idm"),
    (EngineConfig, "road_users", {"pedestrians": {}}, "EngineConfig.road_users"),
    (EngineConfig, "road_users", {"parked": 1}, "EngineConfig.road_users"),
]

# Every on/off feature flag of the observation takes a bool only (1 or "yes" is rejected).
BAD += [(ObsConfig, f.name, 1, f"ObsConfig.{f.name}") for f in dataclasses.fields(ObsConfig)
        if f.type == "bool" and (ObsConfig, f.name) not in {(c, n) for c, n, _, _ in BAD}]


def _build(cls: type, field: str, value: object) -> object:
    if cls is ClassSpec:
        return ClassSpec(**{**CAR, field: value})
    return cls(**{field: value})


@pytest.mark.parametrize("cls,field,value,where", BAD,
                         ids=[f"{c.__name__}.{f}={v!r}" for c, f, v, _ in BAD])
def test_a_bad_value_is_rejected_at_construction_naming_the_field(cls, field, value, where):
    with pytest.raises(ValueError) as info:
        _build(cls, field, value)
    message = str(info.value)
    assert message.startswith(where), message
    assert "\n" not in message


def test_every_field_has_a_row_in_the_table():
    covered = {(c, f) for c, f, _, _ in BAD}
    for cls in (ClassSpec, ObsConfig, InitConfig, SignalConfig, IdmConfig, PedestrianConfig, RoadUsersConfig,
                RewardForms, EngineConfig):
        missing = [f.name for f in dataclasses.fields(cls) if (cls, f.name) not in covered and f.name != "rewards"]
        assert not missing, f"{cls.__name__} fields without a bad-value row: {missing}"


@pytest.mark.parametrize("setting,where", [
    ((NAN, 1.0), "EngineConfig.rewards['collision'] vehicle min"),
    ((3.0, 1.0), "EngineConfig.rewards['collision'] vehicle"),
    (("a", 1.0), "EngineConfig.rewards['collision'] vehicle min"),
    ((0.0, INF), "EngineConfig.rewards['collision'] vehicle max"),
])
def test_a_bad_reward_setting_names_the_parameter_and_column(setting, where):
    base = EngineConfig()
    with pytest.raises(ValueError) as info:
        base.with_overrides(rewards={**base.rewards, "collision": (setting, None, None)})
    assert str(info.value).startswith(where), str(info.value)


def test_counts_are_not_truncated_and_num_agents_must_fit_the_world():
    with pytest.raises(ValueError, match="InitConfig.num_agents max 40 exceeds"):
        EngineConfig(max_agents_per_world=32, init=InitConfig(num_agents=(8, 40)))
    with pytest.raises(ValueError, match="EngineConfig.num_worlds x slots_per_world"):
        EngineConfig(num_worlds=65_536, slots_per_world=32, max_agents_per_world=32,
                     init=InitConfig(num_agents=(1, 32)))


def test_valid_values_are_stored_in_canonical_form():
    init = InitConfig(mode=1, goal_behavior="halt", num_agents=[2, 4], controlled=[True] * 5)
    assert init.mode is InitMode.LOG and init.goal_behavior is GoalBehavior.HALT
    assert init.num_agents == (2, 4) and isinstance(init.controlled, tuple)
    assert SignalConfig(controller=1).controller is SignalController.NEMA
    assert ClassSpec(**{**CAR, "dynamics": 0}).dynamics is DynamicsModel.UNICYCLE
    assert EngineConfig(maps=["grid_town"]).maps == ("grid_town",)
    assert InitConfig(placement_tries=MAX_PLACEMENT_TRIES).placement_tries == MAX_PLACEMENT_TRIES


@pytest.mark.parametrize("overrides,where", [
    ({"init.placement_tries": 12.5}, "InitConfig.placement_tries"),
    ({"init.p_random": ".nan"}, "InitConfig.p_random"),
    ({"obs.lane_state": 1}, "ObsConfig.lane_state"),
    ({"num_worlds": 1.0}, "EngineConfig.num_worlds"),
    ({"idm.delta": "four"}, "IdmConfig.delta"),
    ({"road_users.pedestrians.crossing_rate": -1}, "PedestrianConfig.crossing_rate"),
    ({"road_users.pedestrians.rate": 1}, "road_users.pedestrians: unknown keys"),
])
def test_the_same_checks_apply_to_config_overrides(overrides, where):
    import yaml

    parsed = {k: yaml.safe_load(v) if isinstance(v, str) else v for k, v in overrides.items()}
    with pytest.raises(ValueError) as info:
        load_config("quick", **parsed)
    assert where in str(info.value), str(info.value)


def test_every_config_field_has_a_docstring_naming_its_source():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    sources = ("table", "appendix", "section", "ours", "treiber", "fast")
    undocumented, seen = [], set()
    for path, only in ((root / "terrazero_env" / "config" / "__init__.py", None),
                       (root / "terrazero_env" / "config" / "observation.py", None),
                       (root / "agents" / "settings.py", {"TrainSettings"})):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.ClassDef) or (only is not None and node.name not in only):
                continue
            seen.add(node.name)
            for st, nxt in zip(node.body, [*node.body[1:], None]):
                if not isinstance(st, ast.AnnAssign):
                    continue
                doc = nxt.value.value if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) else ""
                if not any(w in str(doc).lower() for w in sources):
                    undocumented.append(f"{node.name}.{st.target.id}")
    assert {"EngineConfig", "ObsConfig", "InitConfig", "TrainSettings"} <= seen
    assert not undocumented, f"fields without a docstring naming a paper source or 'ours': {undocumented}"


@pytest.mark.parametrize("value", [[0, ""], [0, True], ["1", 2], [0, None]])
def test_a_reward_override_with_a_non_number_names_the_parameter(value):
    """Property: a dotted reward override whose range holds a string, bool or null is refused naming
    ``rewards.<name>`` (found by the slow fuzz tier: it was numpy's "could not convert string")."""
    from terrazero_env.config.io import load_config

    with pytest.raises(ValueError, match=r"rewards\.collision: a number, \[min, max\] or null"):
        load_config("quick", **{"rewards.collision": value})
