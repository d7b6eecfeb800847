# The engine's vocabulary exported to Python, built from the enums of common.pxd, signals.pxd and
# observe.pxd: every tuple below lists names in the order of their C values, and a name's index IS
# its value. Included by _engine.pyx. Python code (the env layer, agents) reads names, column
# orders and sizes from here; config and maps, which must not import the engine, keep their own
# enums and tests/test_vocabulary.py holds them equal to these.

from signals cimport (CTRL_CHRISTMAS, CTRL_NEMA, CTRL_ROUND_ROBIN, N_CONTROLLERS, STAGE_LEFT, STAGE_THROUGH,
                      STAGE_ALL, N_STAGE_KINDS)
from pedestrians cimport (PED_STAT_CROSSWALK_EVENTS, PED_STAT_JAYWALK_EVENTS, PED_STAT_ENTERED, PED_STAT_LEFT,
                          PED_STAT_DROPPED, N_PED_STATS)
from observe cimport (OBS_TYPE_VEHICLE, OBS_TYPE_PEDESTRIAN, OBS_TYPE_CYCLIST, OBS_TYPE_STATIC_VEHICLE,
                      OBS_TYPE_CONE, OBS_TYPE_DEBRIS, kind_code, PARTNER_WIDTH, PARTNER_ACCEL_WIDTH,
                      ROAD_WIDTH, TRAFFIC_WIDTH, OBS_CLAMP, type_code)


def _ordered(what, pairs, int count):
    """Names ordered by their enum values; the values must cover 0..count-1 exactly once, so a C
    enum edited without its name here (or the reverse) fails at import."""
    names = [None] * count
    for value, name in pairs:
        if not 0 <= value < count or names[value] is not None:
            raise ImportError(f"engine vocabulary {what}: value {value} of {name!r} is out of 0..{count - 1} "
                              f"or repeated")
        names[value] = name
    if None in names:
        raise ImportError(f"engine vocabulary {what}: no name for value {names.index(None)}")
    return tuple(names)


#: Agent classes (``AgentType``), by value.
AGENT_CLASSES = _ordered("agent classes", (
    (CLS_CAR, "CAR"), (CLS_TRUCK, "TRUCK"), (CLS_BUS, "BUS"), (CLS_PEDESTRIAN, "PEDESTRIAN"),
    (CLS_CYCLIST, "CYCLIST")), N_CLASSES)
#: Dynamics models (``DynamicsModel``).
DYNAMICS_MODELS = _ordered("dynamics models", (
    (DYN_UNICYCLE, "UNICYCLE"), (DYN_BICYCLE_ACCEL, "BICYCLE_ACCEL"), (DYN_BICYCLE_JERK, "BICYCLE_JERK"),
    (DYN_BICYCLE_TIRE, "BICYCLE_TIRE")), N_DYNAMICS)
#: Consequences of a rule violation (``Consequence``).
CONSEQUENCES = _ordered("consequences", (
    (CONSEQ_NONE, "NONE"), (CONSEQ_STOP, "STOP"), (CONSEQ_REMOVE, "REMOVE")), N_CONSEQUENCES)
#: Agent roles (the ``role`` column of ``Engine.agents``).
ROLES = _ordered("roles", (
    (ROLE_CONTROLLED, "CONTROLLED"), (ROLE_STATIC, "STATIC"), (ROLE_LOG, "LOG"), (ROLE_IDM, "IDM"),
    (ROLE_CROSSER, "CROSSER"), (ROLE_JAYWALKER, "JAYWALKER")), N_ROLES)
#: Roles of a logged agent in a log or hybrid scene (``InitConfig.log_roles``; ``LogRoles`` fields).
LOG_ROLES = _ordered("log roles", (
    (LOGROLE_REPLAY, "REPLAY"), (LOGROLE_IDM, "IDM"), (LOGROLE_POLICY, "POLICY"), (LOGROLE_PLANNER, "PLANNER")),
    N_LOG_ROLES)
#: Kinds of crossing group at a crosswalk (``CrossingGroup``).
CROSSING_GROUPS = _ordered("crossing groups", (
    (GROUP_SINGLE, "SINGLE"), (GROUP_PACK, "PACK"), (GROUP_BIDIRECTIONAL, "BIDIRECTIONAL"),
    (GROUP_STAGGERED, "STAGGERED")), N_GROUP_KINDS)
#: How a stop line is controlled (``ControlType``).
CONTROL_TYPES = _ordered("control types", (
    (SLC_NONE, "NONE"), (SLC_SIGNAL, "SIGNAL"), (SLC_STOP_SIGN, "STOP_SIGN")), N_CONTROL_TYPES)
#: Scene initialization modes (``InitMode``).
INIT_MODES = _ordered("init modes", (
    (INIT_RANDOM, "RANDOM"), (INIT_LOG, "LOG"), (INIT_HYBRID, "HYBRID")), N_INIT_MODES)
#: What reaching the goal does (``GoalBehavior``).
GOAL_BEHAVIORS = _ordered("goal behaviours", (
    (GOAL_NEW_GOAL, "NEW_GOAL"), (GOAL_HALT, "HALT")), N_GOAL_BEHAVIORS)
#: Signal controllers (``SignalController``).
SIGNAL_CONTROLLERS = _ordered("signal controllers", (
    (CTRL_CHRISTMAS, "CHRISTMAS"), (CTRL_NEMA, "NEMA"), (CTRL_ROUND_ROBIN, "ROUND_ROBIN")), N_CONTROLLERS)
#: Kinds of NEMA stage in a signal plan (``signal_plan.STAGE_*``).
SIGNAL_STAGES = _ordered("signal stages", (
    (STAGE_LEFT, "LEFT"), (STAGE_THROUGH, "THROUGH"), (STAGE_ALL, "ALL")), N_STAGE_KINDS)
#: Signal states of a head or stop line (``Engine.signal_states``, ``stop_line_states``).
SIGNAL_STATES = _ordered("signal states", (
    (SIG_RED, "RED"), (SIG_YELLOW, "YELLOW"), (SIG_GREEN, "GREEN"), (SIG_OFF, "OFF")), N_SIGNAL_STATES)
#: Stop-sign states of an agent (the ego observation's one-hot, in this order).
STOP_STATES = _ordered("stop states", (
    (STOP_NOT_IN_REGION, "NOT_IN_REGION"), (STOP_MUST_STOP, "MUST_STOP"), (STOP_CLEARED, "CLEARED")), N_STOP_STATES)
#: Road types of the road observation (table 11).
ROAD_TYPES = _ordered("road types", (
    (ROAD_LANE, "LANE"), (ROAD_LINE, "LINE"), (ROAD_EDGE, "EDGE")), N_ROAD_TYPES)
#: Kinematic coefficients of an agent (appendix D.4), in the order of the ego observation.
KINEMATIC_PARAMS = _ordered("kinematic parameters", (
    (KIN_THROTTLE, "throttle"), (KIN_STEER, "steer"), (KIN_ACC, "acc"), (KIN_VEL, "vel")), N_KIN)
#: What a static actor is (``StaticKind``; the ``kind`` column of ``Engine.agents``).
STATIC_KINDS = _ordered("static kinds", (
    (KIND_NONE, "NONE"), (KIND_PARKED, "PARKED"), (KIND_CRASHED, "CRASHED"), (KIND_CONE, "CONE"),
    (KIND_WORKER, "WORKER"), (KIND_DEBRIS, "DEBRIS")), N_KINDS)
#: Static-actor generators (``StaticGenerator``; the columns of ``RoadUsersConfig`` counts).
STATIC_GENERATORS = _ordered("static generators", (
    (GEN_PARKED, "PARKED"), (GEN_CRASH_DISC, "CRASH_DISC"), (GEN_CRASH_CHAIN, "CRASH_CHAIN"),
    (GEN_CRASH_TBONE, "CRASH_TBONE"), (GEN_CRASH_FAN, "CRASH_FAN"), (GEN_CONE_GRID, "CONE_GRID"),
    (GEN_CONE_TAPER, "CONE_TAPER"), (GEN_LANE_BLOCK, "LANE_BLOCK"), (GEN_DEBRIS, "DEBRIS")), N_GENERATORS)
#: Columns of ``Engine.counters``.
COUNTER_NAMES = _ordered("counters", (
    (CNT_COLLISION, "collision"), (CNT_OFFROAD, "offroad"), (CNT_WRONG_WAY, "wrong_way"), (CNT_GOAL, "goal_reached"),
    (CNT_COMFORT, "comfort_violations"), (CNT_STOP_LINE, "stop_line"), (CNT_RED_LIGHT, "red_light")), N_COUNTERS)
#: Columns of ``Engine.episode_metrics`` (metrics.pxd; meanings in ``terrazero_env.evaluation.metrics``).
EPISODE_METRIC_NAMES = _ordered("episode metrics", (
    (EM_STEPS, "steps"), (EM_COLLISIONS, "collisions"), (EM_AT_FAULT_COLLISIONS, "at_fault_collisions"),
    (EM_MAX_IMPACT_SPEED, "max_impact_speed"), (EM_MIN_TTC, "min_ttc"), (EM_TTC_STEPS, "ttc_violation_steps"),
    (EM_MIN_GAP, "min_gap"), (EM_MIN_LEAD_HEADWAY, "min_lead_headway"), (EM_OFFROAD_STEPS, "offroad_steps"),
    (EM_WRONG_WAY_DIST, "wrong_way_distance"), (EM_OVERSPEED, "overspeed_integral"),
    (EM_SPEEDING_STEPS, "speeding_steps"), (EM_SPEED_SUM, "speed_integral"), (EM_LIMIT_SUM, "limit_integral"),
    (EM_PROGRESS, "progress"), (EM_REF_PROGRESS, "reference_progress"), (EM_DISTANCE, "distance"),
    (EM_STALL_TIME, "stall_time"), (EM_HARD_BRAKES, "hard_brakes"), (EM_HARD_ACCELS, "hard_accelerations"),
    (EM_MAX_LON_ACCEL, "max_lon_accel"), (EM_MIN_LON_ACCEL, "min_lon_accel"), (EM_MAX_LAT_ACCEL, "max_abs_lat_accel"),
    (EM_MAX_LON_JERK, "max_abs_lon_jerk"), (EM_MAX_JERK, "max_jerk"), (EM_MAX_YAW_RATE, "max_abs_yaw_rate"),
    (EM_MAX_YAW_ACCEL, "max_abs_yaw_accel"), (EM_COMFORT_STEPS, "comfort_steps"), (EM_RED_LIGHTS, "red_lights"),
    (EM_STOP_SIGNS, "stop_signs"), (EM_YELLOW_ENTRIES, "yellow_entries"),
    (EM_AT_FAULT_OBJECT_COLLISIONS, "at_fault_object_collisions"),
    (EM_MAX_OFFROAD_EXCURSION, "max_offroad_excursion"), (EM_IN_CONTACT, "in_contact"),
    (EM_PREV_HEADING, "prev_heading"), (EM_PREV_YAW_RATE, "prev_yaw_rate")), N_EPISODE_METRICS)
#: How a collision happened, seen from the agent (``collision_type_batch``).
COLLISION_TYPES = _ordered("collision types", (
    (COLL_STOPPED_EGO, "STOPPED_EGO"), (COLL_STOPPED_OTHER, "STOPPED_OTHER"), (COLL_REAR, "REAR"),
    (COLL_FRONT, "FRONT"), (COLL_LATERAL_EGO, "LATERAL_EGO"), (COLL_LATERAL_OTHER, "LATERAL_OTHER"),
    (COLL_SIDE_HIT, "SIDE_HIT")), N_COLLISION_TYPES)
#: The thresholds of the engine's episode metrics (metrics.pxd ``metric_params_default``).
cdef MetricParams _metric_params
metric_params_default(&_metric_params)
METRIC_PARAMS = _metric_params
#: Reward parameters (appendix B, table 8): the columns of the ``reward_lo``/``reward_hi``/``reward_on``
#: tables and the order of the ego observation's ``alpha_params``.
REWARD_PARAMS = _ordered("reward parameters", (
    (RW_GOAL, "goal"), (RW_COLLISION, "collision"), (RW_BOUNDARY, "boundary"), (RW_COMFORT, "comfort"),
    (RW_LANE_ALIGN, "lane_align"), (RW_LANE_CENTER, "lane_center"), (RW_VELOCITY, "velocity"),
    (RW_VEL_ALIGN, "vel_align"), (RW_REVERSE, "reverse"), (RW_TIMESTEP, "timestep"), (RW_STOP_LINE, "stop_line"),
    (RW_RED_LIGHT, "red_light"), (RW_ROAD_INCURSION, "road_incursion"), (RW_SPEED_LIMIT, "speed_limit"),
    (RW_EDGE_PREFERENCE, "edge_preference"), (RW_GOAL_PROGRESS, "goal_progress"),
    (RW_TARGET_SPEED, "target_speed"), (RW_WRONG_WAY, "wrong_way"), (RW_DELTA_GOAL, "delta_goal"),
    (RW_V_GOAL, "v_goal"), (RW_GAMMA_COL, "gamma_col"), (RW_B_CENTER, "b_center"),
    (RW_V_SPEED_LIM, "v_speed_lim")), N_REWARD)
#: Columns of ``Engine.reward_terms``: each term of a controlled slot's step reward, in the order added.
REWARD_TERMS = _ordered("reward terms", (
    (RT_GOAL, "goal"), (RT_COLLISION, "collision"), (RT_BOUNDARY, "boundary"), (RT_COMFORT, "comfort"),
    (RT_LANE_ALIGN, "lane_align"), (RT_LANE_CENTER, "lane_center"), (RT_VEL_ALIGN, "vel_align"),
    (RT_EDGE_PREFERENCE, "edge_preference"), (RT_VELOCITY, "velocity"), (RT_REVERSE, "reverse"),
    (RT_TIMESTEP, "timestep"), (RT_STOP_LINE, "stop_line"), (RT_RED_LIGHT, "red_light"),
    (RT_ROAD_INCURSION, "road_incursion"), (RT_SPEED_LIMIT, "speed_limit"), (RT_GOAL_PROGRESS, "goal_progress"),
    (RT_WRONG_WAY, "wrong_way"), (RT_NEW_GOAL_CHARGE, "new_goal_charge")), N_REWARD_TERMS)
#: Bits of ``Engine.step_events`` (bit ``1 << i`` for the i-th name).
STEP_EVENTS = _ordered("step events", (
    (EVT_GOAL, "goal"), (EVT_COLLISION, "collision"), (EVT_OFFROAD, "offroad"), (EVT_WRONG_WAY, "wrong_way"),
    (EVT_STOP_LINE, "stop_line"), (EVT_RED_LIGHT, "red_light"), (EVT_INCURSION, "incursion"),
    (EVT_COMFORT, "comfort")), N_EVENTS)
#: Values of ``Engine.replay_frame``'s ``mover`` column.
MOVERS = _ordered("movers", (
    (MOVER_POLICY, "policy"), (MOVER_IDM_EGO, "idm_ego"), (MOVER_PLANNER_EGO, "planner_ego"), (MOVER_IDM, "idm"),
    (MOVER_PLANNER, "planner"), (MOVER_REPLAY, "replay"), (MOVER_STATIC, "static"),
    (MOVER_PEDESTRIAN, "pedestrian")), N_MOVERS)
#: Columns of the per-class parameter table (``class_params``, one row per agent class).
CLASS_PARAMS = _ordered("class parameters", (
    (CP_DYN, "dynamics"), (CP_LEN_LO, "length_lo"), (CP_LEN_HI, "length_hi"), (CP_WID_LO, "width_lo"),
    (CP_WID_HI, "width_hi"), (CP_HGT_LO, "height_lo"), (CP_HGT_HI, "height_hi"), (CP_VMAX, "max_speed"),
    (CP_VREV, "max_reverse_speed"), (CP_AMAX, "max_accel"), (CP_DMAX, "max_decel"),
    (CP_ALATMAX, "max_lat_accel"), (CP_STEERMAX, "max_steer"), (CP_WHEELBASE, "wheelbase_ratio"),
    (CP_COMF_ALONG, "comfort_accel_long"), (CP_COMF_ALAT, "comfort_accel_lat"), (CP_COMF_JLONG, "comfort_jerk_long"),
    (CP_COMF_JLAT, "comfort_jerk_lat"), (CP_CORNERING, "cornering_stiffness"), (CP_MASS, "mass"),
    (CP_WEIGHT, "class_weight"), (CP_STEERRATE, "max_steer_rate"), (CP_REARAXLE, "rear_axle")), N_CP)
#: Columns of ``Engine.pedestrian_stats`` (per-world counters of the pedestrian generators).
PEDESTRIAN_STATS = _ordered("pedestrian stats", (
    (PED_STAT_CROSSWALK_EVENTS, "crosswalk_events"), (PED_STAT_JAYWALK_EVENTS, "jaywalk_events"),
    (PED_STAT_ENTERED, "entered"), (PED_STAT_LEFT, "left"), (PED_STAT_DROPPED, "dropped")), N_PED_STATS)
#: Observation type code of each agent class (tables 9, 10), from the observation writer itself.
TYPE_CODES = tuple(type_code(c) for c in range(N_CLASSES))
#: The observation's categorical type codes by name.
OBS_TYPES = {"vehicle": OBS_TYPE_VEHICLE, "pedestrian": OBS_TYPE_PEDESTRIAN, "cyclist": OBS_TYPE_CYCLIST,
             "static_vehicle": OBS_TYPE_STATIC_VEHICLE, "cone": OBS_TYPE_CONE, "debris": OBS_TYPE_DEBRIS}
#: How neighbour queries are answered (``EngineConfig.neighbour_search``, lower-case there).
NEIGHBOUR_SEARCH = _ordered("neighbour search", (
    (NEIGHBOURS_AUTO, "AUTO"), (NEIGHBOURS_GRID, "GRID"), (NEIGHBOURS_SCAN, "SCAN")), 3)
#: Partner type code of each static-actor kind (``STATIC_KINDS`` order; NONE: the class decides).
KIND_CODES = tuple(kind_code(CLS_CAR, k) for k in range(N_KINDS))
#: Values per entity of each observation group (partners without the optional acceleration pair).
ENTITY_WIDTHS = {"partners": PARTNER_WIDTH, "partner_acceleration": PARTNER_ACCEL_WIDTH, "road": ROAD_WIDTH,
                 "traffic": TRAFFIC_WIDTH}
#: Every observed value is clamped to +-OBS_BOUND: the bound of the observation space.
OBS_BOUND = float(OBS_CLAMP)

#: Every named table above, for tests and tools: {name: names ordered by value}.
VOCABULARY = {
    "agent_classes": AGENT_CLASSES, "dynamics_models": DYNAMICS_MODELS, "consequences": CONSEQUENCES,
    "roles": ROLES, "log_roles": LOG_ROLES, "control_types": CONTROL_TYPES, "init_modes": INIT_MODES, "goal_behaviors": GOAL_BEHAVIORS,
    "signal_controllers": SIGNAL_CONTROLLERS, "signal_stages": SIGNAL_STAGES, "signal_states": SIGNAL_STATES,
    "stop_states": STOP_STATES, "road_types": ROAD_TYPES, "kinematic_params": KINEMATIC_PARAMS,
    "counters": COUNTER_NAMES, "episode_metrics": EPISODE_METRIC_NAMES, "collision_types": COLLISION_TYPES,
    "reward_params": REWARD_PARAMS, "class_params": CLASS_PARAMS, "reward_terms": REWARD_TERMS,
    "step_events": STEP_EVENTS, "movers": MOVERS,
    "crossing_groups": CROSSING_GROUPS, "pedestrian_stats": PEDESTRIAN_STATS,
    "static_kinds": STATIC_KINDS, "static_generators": STATIC_GENERATORS, "neighbour_search": NEIGHBOUR_SEARCH,
}
