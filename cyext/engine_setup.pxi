# Engine construction, as a module-level function of _engine.pyx taking the engine: the resolved
# tables (action grids, class parameters, reward ranges) and the config's scalar settings copied
# into the engine's C arrays and fields. Called once from ``Engine.__init__``.

cdef _bind_map(Engine e, Py_ssize_t w, RoadMap rm):
    """World ``w`` runs on ``rm``: its map, and which of its logged goals are reachable along the lane
    graph under this engine's lane tolerance (appendix D.5; computed once per map and kept by it)."""
    e.wmap[w] = &rm.c
    e.wreach[w] = _ptr_u8(rm.track_goal_reachable(e.lane_max_dist, e.z_gate))


cdef _load_tables(Engine e, cfg, tb):
    """The engine tables (action grids, class parameters, reward ranges, class weights) and the scalar
    settings of the config, checked and copied into the engine's C arrays."""
    for key, cols in (("class_params", N_CP), ("reward_lo", N_REWARD), ("reward_hi", N_REWARD),
                      ("reward_on", N_REWARD)):
        if np.shape(tb[key]) != (N_CLASSES, cols):
            raise ValueError(f"tables[{key!r}] must be [{N_CLASSES}, {cols}], got {np.shape(tb[key])}")
    e._tables = tb
    cdef int c, i
    if tb["grid_long"].shape[1] > MAX_GRID or tb["grid_lat"].shape[1] > MAX_GRID:
        raise ValueError(f"action grids are limited to {MAX_GRID} values per axis")
    for c in range(N_CLASSES):
        e.n_long[c] = tb["n_long"][c]
        e.n_lat[c] = tb["n_lat"][c]
        for i in range(MAX_GRID):
            e.grid_long[c * MAX_GRID + i] = tb["grid_long"][c, i] if i < tb["grid_long"].shape[1] else 0.0
            e.grid_lat[c * MAX_GRID + i] = tb["grid_lat"][c, i] if i < tb["grid_lat"].shape[1] else 0.0
        for i in range(N_CP):
            e.cp[c * N_CP + i] = tb["class_params"][c, i]
        for i in range(N_REWARD):
            e.rlo[c * N_REWARD + i] = tb["reward_lo"][c, i]
            e.rhi[c * N_REWARD + i] = tb["reward_hi"][c, i]
            e.ron[c * N_REWARD + i] = tb["reward_on"][c, i]
        e.class_weight[c] = cfg.init.class_weights[c]
        e.controlled_cls[c] = 1 if cfg.init.controlled[c] else 0
        e.goal_dropout[c] = cfg.init.goal_dropout[c]
    roles = np.asarray(cfg.init.log_role_table(), np.float64)
    if roles.shape != (N_CLASSES, N_LOG_ROLES):
        raise ValueError(f"InitConfig.log_role_table() must be [{N_CLASSES}, {N_LOG_ROLES}], got {roles.shape}")
    for c in range(N_CLASSES):
        for i in range(N_LOG_ROLES):
            e.log_role_w[c * N_LOG_ROLES + i] = roles[c, i]
        nz = np.flatnonzero(roles[c] > 0)
        # A class with one possible role draws nothing from the generator (the default mix).
        e.log_role_only[c] = int(nz[0]) if nz.size == 1 else -1
    # Agent-grid cells must exceed the sum of two half-diagonals plus the spawn clearance.
    longest = max(max(s.length[1], s.width[1]) * 1.5 for s in cfg.classes.values())
    e.agent_cell = max(16.0, 2.0 * longest + 2.0 * cfg.init.spawn_clearance + 1.0)
    e.dt = cfg.dt
    e.horizon = cfg.episode_length
    e.wrong_way_angle = cfg.wrong_way_angle
    e.offroad_tol = cfg.offroad_tolerance
    e.rform.vel_align = int(cfg.reward_forms.vel_align)
    e.rform.speed_limit = int(cfg.reward_forms.speed_limit)
    e.rform.goal_progress = int(cfg.reward_forms.goal_progress)
    e.rform.route_cap = cfg.reward_forms.route_max_distance
    e.rform.shaping = int(cfg.reward_forms.goal_progress_shaping)
    e.rform.gamma = cfg.reward_forms.goal_progress_gamma
    e.lane_max_dist = cfg.lane_max_distance
    e.lane_align_cos = cos(cfg.lane_align_angle)
    e.lane_tracking = cfg.lane_tracking
    e.z_gate = cfg.obs.z_gate
    cq = {k: int(v) for k, v in cfg.consequences.items()}
    e.conseq_collision = cq.get("collision", CONSEQ_NONE)
    e.conseq_offroad = cq.get("offroad", CONSEQ_NONE)
    e.conseq_wrong_way = cq.get("wrong_way", CONSEQ_NONE)
    e.conseq_red_light = cq.get("red_light", CONSEQ_NONE)
    ini = cfg.init
    e.init_mode = int(ini.mode)
    e.goal_behavior = int(ini.goal_behavior)
    e.n_min, e.n_max = ini.num_agents
    e.tries = ini.placement_tries
    e.randomize_kin = 1 if ini.randomize_kinematics else 0
    e.p_random = ini.p_random
    e.v0_lo, e.v0_hi = ini.initial_speed
    e.goal_lo, e.goal_hi = ini.goal_distance
    e.goal_fwd = ini.goal_min_forward
    e.clearance = ini.spawn_clearance
    e.kin_lo, e.kin_hi = ini.kinematic_range
    idm = cfg.idm
    for k in range(3):
        e.idmp.v0_scale[k] = idm.v0_scale[k]
        e.idmp.time_headway[k] = idm.time_headway[k]
        e.idmp.max_accel[k] = idm.max_accel[k]
        e.idmp.comfort_decel[k] = idm.comfort_decel[k]
        e.idmp.min_gap[k] = idm.min_gap[k]
    e.idmp.delta = idm.delta
    e.idmp.lookahead = idm.lookahead
    e.idmp.reroll_prob = idm.reroll_prob
    e.idmp.max_decel = idm.max_decel
    e.idmp.curve_accel = idm.curve_lat_accel
    e.idmp.side_margin = idm.side_margin
    _load_road_users(e, cfg)
    _load_lane_change(e, cfg.road_users, idm)
    _load_planner(e, cfg.road_users)
    _load_pedestrians(e, cfg.road_users.pedestrians)
    sg = cfg.signals
    e.sigp.controller = int(sg.controller)
    e.sigp.replay_log = 1 if sg.replay_logged else 0
    e.sigp.green_med, e.sigp.green_sig = sg.christmas_green
    e.sigp.yellow_med, e.sigp.yellow_sig = sg.christmas_yellow
    e.sigp.red_med, e.sigp.red_sig = sg.christmas_red
    e.sigp.left_green = sg.left_green
    e.sigp.through_green = sg.through_green
    e.sigp.yellow = sg.yellow
    e.sigp.all_red = sg.all_red
    e.sigp.perm_prob = sg.permissive_left_prob
    e.sigp.nema_sigma = sg.nema_green_sigma
    e.stop_rules.stop_speed = sg.stop_speed
    e.stop_rules.dwell_lo, e.stop_rules.dwell_hi = sg.stop_dwell
    e.stop_rules.region = sg.stop_region
    e.noise_std = cfg.obs.noise_std
    e.noise_clip = cfg.obs.noise_clip
    e.state_dropout = cfg.obs.state_dropout
