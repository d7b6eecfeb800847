# Road-user settings of the Engine, as module-level functions of _engine.pyx taking the engine: the
# configuration's ``road_users`` section (IDM share and behaviour modes, per-class kinematic ranges,
# static generators, pedestrian generators) flattened into the C parameter structs the step reads
# (``IdmParams`` with its ``LaneChangeParams``, ``StaticParams``, ``PedParams``). Called once from
# ``Engine.__init__``.

cdef _load_road_users(Engine e, cfg):
    """IDM share and mode mix, per-class kinematic ranges and the static generators' table."""
    ru = cfg.road_users
    e.idm_fraction, e.idm_fraction_hi = ru.prob_range("idm_fraction")
    w = [float(x) for x in ru.idm_modes]
    e.idmp.mode_uniform = 1 if w[0] == w[1] == w[2] else 0
    for k in range(3):
        e.idmp.mode_cdf[k] = sum(w[:k + 1]) / sum(w)
    ranges = cfg.init.class_kinematic_ranges or (cfg.init.kinematic_range,) * N_CLASSES
    for c in range(N_CLASSES):
        e.ckin_lo[c], e.ckin_hi[c] = ranges[c]
    cdef StaticParams* p = &e.statp
    p.any = 0
    for g, (lo, hi) in enumerate(ru.static_counts()):
        p.count_lo[g], p.count_hi[g] = lo, hi
        p.any = p.any or hi > 0
    p.row_lo, p.row_hi = ru.parked_row
    for k in range(3):
        p.size_w[k] = ru.static_sizes[k]
    p.crash_lo, p.crash_hi = ru.crash_vehicles
    p.worker_prob, e.worker_prob_hi = ru.prob_range("worker_prob")
    p.workers_lo, p.workers_hi = ru.workers
    p.debris_lo, p.debris_hi = ru.debris_size
    p.clearance = ru.static_clearance
    p.tries = ru.static_tries


cdef _load_planner(Engine e, ru):
    """Planner-driven traffic (``RoadUsersConfig.planner_*``; planner.pxd). The offsets are stored
    by size, the left one of a pair first, so keeping the lane (offset 0) is evaluated first; the
    speeds fastest first."""
    cdef PlannerParams* p = &e.planp
    e.planner_fraction, e.planner_fraction_hi = ru.prob_range("planner_fraction")
    offsets = sorted((float(o) for o in ru.planner_offsets), key=lambda o: (abs(o), -o))
    speeds = sorted((float(v) for v in ru.planner_speeds), reverse=True)
    if len(offsets) > PLAN_MAX_OFFSETS or len(speeds) > PLAN_MAX_SPEEDS or offsets[0] != 0.0:
        raise ValueError(f"road_users.planner_offsets / planner_speeds: at most {PLAN_MAX_OFFSETS} offsets "
                         f"including 0 and {PLAN_MAX_SPEEDS} speeds")
    p.n_offsets = len(offsets)
    p.n_speeds = len(speeds)
    for k, o in enumerate(offsets):
        p.offsets[k] = o
    for k, v in enumerate(speeds):
        p.speeds[k] = v
    p.interval = ru.planner_interval
    p.horizon = ru.planner_horizon
    p.resolution = ru.planner_resolution
    p.n_steps = int(round(ru.planner_horizon / ru.planner_resolution))
    if not 1 <= p.n_steps <= PLAN_MAX_STEPS:
        raise ValueError(f"road_users.planner_horizon / planner_resolution: 1 to {PLAN_MAX_STEPS} steps, "
                         f"got {p.n_steps}")
    p.w_progress, p.w_ttc, p.w_comfort, p.w_lane = ru.planner_weights
    p.ttc_threshold = ru.planner_ttc
    p.min_progress = ru.planner_min_progress
    p.margin = ru.planner_margin
    p.lateral_time = ru.planner_lateral_time
    p.reach = ru.planner_horizon
    p.lc_lookahead = ru.lane_change_lookahead


cdef _load_pedestrians(Engine e, pc):
    """Pedestrian generators (``PedestrianConfig``) and the IDM vehicles' yielding to pedestrians."""
    cdef PedParams* p = &e.pedp
    cdef int k
    p.rate, p.rate_hi = pc.rate_range("crossing_rate")
    cum = np.cumsum(np.asarray(pc.group_probs, np.float64))
    for k in range(N_GROUP_KINDS):
        p.group_cdf[k] = cum[k]
    p.pack_lo, p.pack_hi = pc.group_size
    p.stagger = pc.stagger_interval
    p.speed_lo, p.speed_hi = pc.walking_speed
    p.max_speed = pc.max_speed
    p.radius = pc.radius
    p.neighbor_dist = pc.neighbor_distance
    p.time_horizon = pc.time_horizon
    p.jaywalk_rate, p.jaywalk_rate_hi = pc.rate_range("jaywalk_rate")
    p.jaywalk_reach = pc.jaywalk_reach
    e.idmp.ped_horizon = pc.vehicle_yield_horizon


cdef _load_lane_change(Engine e, ru, idm):
    """IDM vehicles' lane changes around obstacles at rest (``RoadUsersConfig.lane_change*``); the
    new follower's law is the default behaviour mode's (``IdmConfig``)."""
    cdef LaneChangeParams* p = &e.idmp.lc
    p.enabled = 1 if ru.lane_change else 0
    p.trigger_dist = ru.lane_change_distance
    p.clear_ahead = ru.lane_change_clear_ahead
    p.safe_decel = ru.lane_change_safe_decel
    p.cooldown = ru.lane_change_cooldown
    p.lookahead_time = ru.lane_change_lookahead
    p.margin = ru.lane_change_margin
    p.settle = 0.3
    p.v0_scale = idm.v0_scale[0]
    p.T = idm.time_headway[0]
    p.amax = idm.max_accel[0]
    p.bcomf = idm.comfort_decel[0]
    p.s0 = idm.min_gap[0]
