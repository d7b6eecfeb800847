# Road-user settings of the Engine, as module-level functions of _engine.pyx taking the engine: the
# configuration's ``road_users`` section (IDM share and behaviour modes, per-class kinematic ranges,
# static generators, pedestrian generators) flattened into the C parameter structs the step reads
# (``IdmParams`` with its ``LaneChangeParams``, ``StaticParams``, ``PedParams``). Called once from
# ``Engine.__init__``.

cdef _load_road_users(Engine e, s):
    """IDM share and mode mix, per-class kinematic ranges and the static generators' table."""
    e.idm_fraction, e.idm_fraction_hi = s["road_users.idm_fraction_range"]
    w = [float(x) for x in s["road_users.idm_modes"]]
    e.idmp.mode_uniform = 1 if w[0] == w[1] == w[2] else 0
    for k in range(3):
        e.idmp.mode_cdf[k] = sum(w[:k + 1]) / sum(w)
    ranges = s["init.class_kinematic_ranges"]
    for c in range(N_CLASSES):
        e.ckin_lo[c], e.ckin_hi[c] = ranges[c]
    cdef StaticParams* p = &e.statp
    p.any = 0
    for g, (lo, hi) in enumerate(s["road_users.static_counts"]):
        p.count_lo[g], p.count_hi[g] = lo, hi
        p.any = p.any or hi > 0
    p.row_lo, p.row_hi = s["road_users.parked_row"]
    for k in range(3):
        p.size_w[k] = s["road_users.static_sizes"][k]
    p.crash_lo, p.crash_hi = s["road_users.crash_vehicles"]
    p.worker_prob, e.worker_prob_hi = s["road_users.worker_prob_range"]
    p.workers_lo, p.workers_hi = s["road_users.workers"]
    p.debris_lo, p.debris_hi = s["road_users.debris_size"]
    p.clearance = s["road_users.static_clearance"]
    p.tries = s["road_users.static_tries"]
    e.route_blocks = s["road_users.route_blocks"]
    e.route_block_lo, e.route_block_hi = s["road_users.route_block_distance"]
    e.route_block_offset = s["road_users.route_block_offset"]
    for k in range(3):
        e.route_block_w[k] = s["road_users.route_block_kinds"][k]


cdef _load_planner(Engine e, s):
    """Planner-driven traffic (``RoadUsersConfig.planner_*``; planner.pxd). The offsets are stored
    by size, the left one of a pair first, so keeping the lane (offset 0) is evaluated first; the
    speeds fastest first."""
    cdef PlannerParams* p = &e.planp
    e.planner_fraction, e.planner_fraction_hi = s["road_users.planner_fraction_range"]
    offsets = sorted((float(o) for o in s["road_users.planner_offsets"]), key=lambda o: (abs(o), -o))
    speeds = sorted((float(v) for v in s["road_users.planner_speeds"]), reverse=True)
    if len(offsets) > PLAN_MAX_OFFSETS or len(speeds) > PLAN_MAX_SPEEDS or offsets[0] != 0.0:
        raise ValueError(f"road_users.planner_offsets / planner_speeds: at most {PLAN_MAX_OFFSETS} offsets "
                         f"including 0 and {PLAN_MAX_SPEEDS} speeds")
    p.n_offsets = len(offsets)
    p.n_speeds = len(speeds)
    for k, o in enumerate(offsets):
        p.offsets[k] = o
    for k, v in enumerate(speeds):
        p.speeds[k] = v
    p.interval = s["road_users.planner_interval"]
    p.horizon = s["road_users.planner_horizon"]
    p.resolution = s["road_users.planner_resolution"]
    p.n_steps = int(round(s["road_users.planner_horizon"] / s["road_users.planner_resolution"]))
    if not 1 <= p.n_steps <= PLAN_MAX_STEPS:
        raise ValueError(f"road_users.planner_horizon / planner_resolution: 1 to {PLAN_MAX_STEPS} steps, "
                         f"got {p.n_steps}")
    p.w_progress, p.w_ttc, p.w_comfort, p.w_lane = s["road_users.planner_weights"]
    p.ttc_threshold = s["road_users.planner_ttc"]
    p.min_progress = s["road_users.planner_min_progress"]
    p.margin = s["road_users.planner_margin"]
    p.lateral_time = s["road_users.planner_lateral_time"]
    p.reach = s["road_users.planner_horizon"]
    p.lc_lookahead = s["road_users.lane_change_lookahead"]


cdef _load_pedestrians(Engine e, s):
    """Pedestrian generators (``PedestrianConfig``) and the IDM vehicles' yielding to pedestrians."""
    cdef PedParams* p = &e.pedp
    cdef int k
    p.rate, p.rate_hi = s["road_users.pedestrians.crossing_rate_range"]
    cum = np.cumsum(np.asarray(s["road_users.pedestrians.group_probs"], np.float64))
    for k in range(N_GROUP_KINDS):
        p.group_cdf[k] = cum[k]
    p.pack_lo, p.pack_hi = s["road_users.pedestrians.group_size"]
    p.stagger = s["road_users.pedestrians.stagger_interval"]
    p.speed_lo, p.speed_hi = s["road_users.pedestrians.walking_speed"]
    p.max_speed = s["road_users.pedestrians.max_speed"]
    p.radius = s["road_users.pedestrians.radius"]
    p.neighbor_dist = s["road_users.pedestrians.neighbor_distance"]
    p.time_horizon = s["road_users.pedestrians.time_horizon"]
    p.jaywalk_rate, p.jaywalk_rate_hi = s["road_users.pedestrians.jaywalk_rate_range"]
    p.jaywalk_reach = s["road_users.pedestrians.jaywalk_reach"]
    e.idmp.ped_horizon = s["road_users.pedestrians.vehicle_yield_horizon"]


cdef _load_lane_change(Engine e, s):
    """IDM vehicles' lane changes around obstacles at rest (``RoadUsersConfig.lane_change*``); the
    new follower's law is the default behaviour mode's (``IdmConfig``)."""
    cdef LaneChangeParams* p = &e.idmp.lc
    p.enabled = 1 if s["road_users.lane_change"] else 0
    p.trigger_dist = s["road_users.lane_change_distance"]
    p.clear_ahead = s["road_users.lane_change_clear_ahead"]
    p.safe_decel = s["road_users.lane_change_safe_decel"]
    p.cooldown = s["road_users.lane_change_cooldown"]
    p.lookahead_time = s["road_users.lane_change_lookahead"]
    p.margin = s["road_users.lane_change_margin"]
    p.settle = 0.3
    p.v0_scale = s["idm.v0_scale"][0]
    p.T = s["idm.time_headway"][0]
    p.amax = s["idm.max_accel"][0]
    p.bcomf = s["idm.comfort_decel"][0]
    p.s0 = s["idm.min_gap"][0]
