# Engine construction, as module-level functions of _engine.pyx taking the engine: the settings
# checked against ENGINE_SETTINGS, the resolved tables (action grids, class parameters, reward ranges)
# and the scalar settings copied into the engine's C arrays and fields, the observation layout loaded
# into the writers' C layouts, and the buffers allocated. Called once from ``Engine.__init__``.

#: The engine's one named input besides its tables and maps: every scalar setting it reads, by the
#: configuration's dotted name (``terrazero_env.engine.engine_settings`` builds it from an
#: ``EngineConfig``). A few are resolved before they come here: ``init.log_role_table`` (float64
#: ``[N_CLASSES, N_LOG_ROLES]``), ``init.class_kinematic_ranges`` (one pair per class),
#: ``classes.longest_extent`` (the longest side of any class's largest box, metres), the ``*_range``
#: pairs of the sampled shares and rates and ``road_users.static_counts``; enums come as their codes.
ENGINE_SETTINGS = (
    "num_worlds", "slots_per_world", "max_agents_per_world", "dt", "episode_length", "wrong_way_angle",
    "offroad_tolerance", "lane_max_distance", "lane_align_angle", "lane_tracking", "neighbour_search",
    "consequences.collision", "consequences.offroad", "consequences.wrong_way", "consequences.red_light",
    "classes.longest_extent",
    # observations (ObsLayout, the writers' layout, noise)
    "obs.agent_type", "obs.rel_goal_pos", "obs.goal_dropout_flag", "obs.state_dropout_flag", "obs.speed",
    "obs.vehicle_dims", "obs.collision_state", "obs.steering_angle", "obs.acceleration", "obs.stop_sign_state",
    "obs.alpha_params", "obs.kinematic_params", "obs.lane_state", "obs.lateral_velocity", "obs.yaw_rate",
    "obs.road_curvature", "obs.curvature_lookahead", "obs.road_curvature_route", "obs.topology_goal_distance",
    "obs.topology_max_distance", "obs.stop_line_ahead", "obs.stop_line_route", "obs.goal_scale", "obs.speed_scale",
    "obs.partners", "obs.max_partners", "obs.partner_radius", "obs.partner_acceleration", "obs.road",
    "obs.max_road_segments", "obs.road_radius", "obs.traffic", "obs.max_traffic", "obs.traffic_lights", "obs.max_traffic_lights",
    "obs.traffic_radius", "obs.z_gate", "obs.dtype", "obs.noise_std", "obs.noise_clip", "obs.slot_dropout",
    "obs.state_dropout",
    # scene initialization
    "init.class_weights", "init.controlled", "init.goal_dropout", "init.log_role_table", "init.spawn_clearance",
    "init.mode", "init.goal_behavior", "init.num_agents", "init.placement_tries", "init.randomize_kinematics",
    "init.p_random", "init.initial_speed", "init.goal_distance", "init.goal_min_forward", "init.kinematic_range",
    "init.class_kinematic_ranges", "init.goal_lane_change", "init.goal_turnable",
    # reward forms
    "reward_forms.vel_align", "reward_forms.speed_limit", "reward_forms.goal_progress",
    "reward_forms.route_max_distance", "reward_forms.goal_progress_shaping", "reward_forms.goal_progress_gamma",
    # IDM law
    "idm.v0_scale", "idm.time_headway", "idm.max_accel", "idm.comfort_decel", "idm.min_gap", "idm.delta",
    "idm.lookahead", "idm.reroll_prob", "idm.max_decel", "idm.curve_lat_accel", "idm.side_margin",
    # signals and stop signs
    "signals.controller", "signals.replay_logged", "signals.christmas_green", "signals.christmas_yellow",
    "signals.christmas_red", "signals.left_green", "signals.through_green", "signals.yellow", "signals.all_red",
    "signals.permissive_left_prob", "signals.nema_green_sigma", "signals.stop_speed", "signals.stop_dwell",
    "signals.stop_region",
    # road users: IDM share and modes, static generators, planner traffic, lane changes
    "road_users.idm_fraction_range", "road_users.idm_modes", "road_users.static_counts", "road_users.parked_row",
    "road_users.static_sizes", "road_users.crash_vehicles", "road_users.worker_prob_range", "road_users.workers",
    "road_users.debris_size", "road_users.static_clearance", "road_users.static_tries",
    "road_users.planner_fraction_range", "road_users.planner_offsets", "road_users.planner_speeds",
    "road_users.planner_interval", "road_users.planner_horizon", "road_users.planner_resolution",
    "road_users.planner_weights", "road_users.planner_ttc", "road_users.planner_min_progress",
    "road_users.planner_margin", "road_users.planner_lateral_time", "road_users.lane_change",
    "road_users.lane_change_distance", "road_users.lane_change_clear_ahead", "road_users.lane_change_safe_decel",
    "road_users.lane_change_cooldown", "road_users.lane_change_lookahead", "road_users.lane_change_margin",
    "road_users.route_blocks", "road_users.route_block_distance", "road_users.route_block_offset",
    "road_users.route_block_kinds",
    # rule-based pedestrians
    "road_users.pedestrians.crossing_rate_range", "road_users.pedestrians.group_probs",
    "road_users.pedestrians.group_size", "road_users.pedestrians.stagger_interval",
    "road_users.pedestrians.walking_speed", "road_users.pedestrians.max_speed", "road_users.pedestrians.radius",
    "road_users.pedestrians.neighbor_distance", "road_users.pedestrians.time_horizon",
    "road_users.pedestrians.jaywalk_rate_range", "road_users.pedestrians.jaywalk_reach",
    "road_users.pedestrians.vehicle_yield_horizon",
)


def _check_settings(settings):
    """``settings`` holds exactly the keys of ``ENGINE_SETTINGS``; otherwise a ``ValueError`` naming
    the missing and the unknown ones (or a ``TypeError`` when it is not a mapping)."""
    if not isinstance(settings, Mapping):
        raise TypeError(f"settings must be a mapping of the engine's settings (ENGINE_SETTINGS), "
                        f"got {type(settings).__name__}")
    missing = [k for k in ENGINE_SETTINGS if k not in settings]
    unknown = sorted(str(k) for k in settings if k not in _SETTING_SET)
    if missing or unknown:
        raise ValueError(f"engine settings: missing {missing}, unknown {unknown} "
                         "(the keys are _engine.ENGINE_SETTINGS)")


_SETTING_SET = frozenset(ENGINE_SETTINGS)


cdef _bind_map(Engine e, Py_ssize_t w, RoadMap rm):
    """World ``w`` runs on ``rm``: its map, and which of its logged goals are reachable along the lane
    graph under this engine's lane tolerance (appendix D.5; computed once per map and kept by it)."""
    e.wmap[w] = &rm.c
    e.wreach[w] = _ptr_u8(rm.track_goal_reachable(e.lane_max_dist, e.z_gate))


cdef _load_tables(Engine e, s, tb):
    """The engine tables (action grids, class parameters, reward ranges, class weights) and the scalar
    settings (``s``, checked by ``_check_settings``), copied into the engine's C arrays."""
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
        e.class_weight[c] = s["init.class_weights"][c]
        e.controlled_cls[c] = 1 if s["init.controlled"][c] else 0
        e.goal_dropout[c] = s["init.goal_dropout"][c]
    roles = np.asarray(s["init.log_role_table"], np.float64)
    if roles.shape != (N_CLASSES, N_LOG_ROLES):
        raise ValueError(f"InitConfig.log_role_table() must be [{N_CLASSES}, {N_LOG_ROLES}], got {roles.shape}")
    for c in range(N_CLASSES):
        for i in range(N_LOG_ROLES):
            e.log_role_w[c * N_LOG_ROLES + i] = roles[c, i]
        nz = np.flatnonzero(roles[c] > 0)
        # A class with one possible role draws nothing from the generator (the default mix).
        e.log_role_only[c] = int(nz[0]) if nz.size == 1 else -1
    # Agent-grid cells must exceed the sum of two half-diagonals plus the spawn clearance.
    longest = s["classes.longest_extent"] * 1.5
    e.agent_cell = max(16.0, 2.0 * longest + 2.0 * s["init.spawn_clearance"] + 1.0)
    e.dt = s["dt"]
    e.horizon = s["episode_length"]
    e.wrong_way_angle = s["wrong_way_angle"]
    e.offroad_tol = s["offroad_tolerance"]
    e.rform.vel_align = s["reward_forms.vel_align"]
    e.rform.speed_limit = s["reward_forms.speed_limit"]
    e.rform.goal_progress = s["reward_forms.goal_progress"]
    e.rform.route_cap = s["reward_forms.route_max_distance"]
    e.rform.shaping = s["reward_forms.goal_progress_shaping"]
    e.rform.gamma = s["reward_forms.goal_progress_gamma"]
    e.lane_max_dist = s["lane_max_distance"]
    e.lane_align_cos = cos(s["lane_align_angle"])
    e.lane_tracking = s["lane_tracking"]
    if s["neighbour_search"] not in (NEIGHBOURS_AUTO, NEIGHBOURS_GRID, NEIGHBOURS_SCAN):
        raise ValueError(f"engine settings: neighbour_search must be a NEIGHBOURS_* code, got {s['neighbour_search']!r}")
    e.neighbour_mode = s["neighbour_search"]
    e.z_gate = s["obs.z_gate"]
    e.conseq_collision = s["consequences.collision"]
    e.conseq_offroad = s["consequences.offroad"]
    e.conseq_wrong_way = s["consequences.wrong_way"]
    e.conseq_red_light = s["consequences.red_light"]
    e.init_mode = s["init.mode"]
    e.goal_behavior = s["init.goal_behavior"]
    e.n_min, e.n_max = s["init.num_agents"]
    e.tries = s["init.placement_tries"]
    e.randomize_kin = 1 if s["init.randomize_kinematics"] else 0
    e.p_random = s["init.p_random"]
    e.v0_lo, e.v0_hi = s["init.initial_speed"]
    e.goal_lo, e.goal_hi = s["init.goal_distance"]
    e.goal_fwd = s["init.goal_min_forward"]
    e.goal_lane_change = s["init.goal_lane_change"]
    e.goal_turnable = bool(s["init.goal_turnable"])
    e.clearance = s["init.spawn_clearance"]
    e.kin_lo, e.kin_hi = s["init.kinematic_range"]
    for k in range(3):
        e.idmp.v0_scale[k] = s["idm.v0_scale"][k]
        e.idmp.time_headway[k] = s["idm.time_headway"][k]
        e.idmp.max_accel[k] = s["idm.max_accel"][k]
        e.idmp.comfort_decel[k] = s["idm.comfort_decel"][k]
        e.idmp.min_gap[k] = s["idm.min_gap"][k]
    e.idmp.delta = s["idm.delta"]
    e.idmp.lookahead = s["idm.lookahead"]
    e.idmp.reroll_prob = s["idm.reroll_prob"]
    e.idmp.max_decel = s["idm.max_decel"]
    e.idmp.curve_accel = s["idm.curve_lat_accel"]
    e.idmp.side_margin = s["idm.side_margin"]
    _load_road_users(e, s)
    _load_lane_change(e, s)
    _load_planner(e, s)
    _load_pedestrians(e, s)
    e.sigp.controller = s["signals.controller"]
    e.sigp.replay_log = 1 if s["signals.replay_logged"] else 0
    e.sigp.green_med, e.sigp.green_sig = s["signals.christmas_green"]
    e.sigp.yellow_med, e.sigp.yellow_sig = s["signals.christmas_yellow"]
    e.sigp.red_med, e.sigp.red_sig = s["signals.christmas_red"]
    e.sigp.left_green = s["signals.left_green"]
    e.sigp.through_green = s["signals.through_green"]
    e.sigp.yellow = s["signals.yellow"]
    e.sigp.all_red = s["signals.all_red"]
    e.sigp.perm_prob = s["signals.permissive_left_prob"]
    e.sigp.nema_sigma = s["signals.nema_green_sigma"]
    e.stop_rules.stop_speed = s["signals.stop_speed"]
    e.stop_rules.dwell_lo, e.stop_rules.dwell_hi = s["signals.stop_dwell"]
    e.stop_rules.region = s["signals.stop_region"]
    e.noise_std = s["obs.noise_std"]
    e.noise_clip = s["obs.noise_clip"]
    e.state_dropout = s["obs.state_dropout"]


cdef _load_obs_layout(Engine eng, o, alpha):
    """The observation layout (``ObsLayout``, built from the ``obs.*`` settings ``o``) copied into the
    writers' C layouts: the ego offsets and normalisers, and each entity group's slots, radius and gate."""
    cdef EgoLayout* e = &eng.ego
    L = eng.obs_layout
    eng.obs_dim = L.dim
    ego = {n: off for n, off, w in L.groups["ego"].features}
    e.agent_type = ego.get("agent_type", -1)
    e.rel_goal_pos = ego.get("rel_goal_pos", -1)
    e.goal_dropout_flag = ego.get("goal_dropout_flag", -1)
    e.state_dropout_flag = ego.get("state_dropout_flag", -1)
    e.speed = ego.get("speed", -1)
    e.vehicle_dims = ego.get("vehicle_dims", -1)
    e.collision_state = ego.get("collision_state", -1)
    e.steering_angle = ego.get("steering_angle", -1)
    e.acceleration = ego.get("acceleration", -1)
    e.stop_sign_state = ego.get("stop_sign_state", -1)
    e.alpha_params = ego.get("alpha_params", -1)
    e.kinematic_params = ego.get("kinematic_params", -1)
    e.lane_state = ego.get("lane_state", -1)
    e.lateral_velocity = ego.get("lateral_velocity", -1)
    e.yaw_rate = ego.get("yaw_rate", -1)
    e.road_curvature = ego.get("road_curvature", -1)
    e.curvature_lookahead = o["curvature_lookahead"]
    e.curvature_route = o["road_curvature_route"]
    e.topology_goal_distance = ego.get("topology_goal_distance", -1)
    e.topology_cap = o["topology_max_distance"]
    e.stop_line_ahead = ego.get("stop_line_ahead", -1)
    e.stop_line_cap = o["traffic_radius"]
    e.stop_line_route = o["stop_line_route"]
    e.lane_max_dist = eng.settings["lane_max_distance"]
    e.z_gate = o["z_gate"]
    e.n_alpha = len(alpha)
    for k, i in enumerate(alpha):
        e.alpha_idx[k] = i
    e.kin_lo, e.kin_hi = eng.settings["init.kinematic_range"]
    nm = L.normalisers
    e.n.position_scale = nm["position_scale"]
    e.n.height_scale = nm["height_scale"]
    e.n.goal_scale = nm["goal_scale"]
    e.n.speed_scale = nm["speed_scale"]
    e.n.width_range = nm["width_range"]
    e.n.length_range = nm["length_range"]
    e.n.steer_range = nm["steer_range"]
    e.n.accel_long_range = nm["accel_long_range"]
    e.n.accel_lat_range = nm["accel_lat_range"]
    e.n.lane_heading_range = nm["lane_heading_range"]
    e.n.lane_lateral_range = nm["lane_lateral_range"]
    e.n.segment_range = nm["segment_range"]
    e.n.lateral_velocity_range = nm["lateral_velocity_range"]
    e.n.yaw_rate_range = nm["yaw_rate_range"]
    e.n.curvature_range = nm["curvature_range"]
    _entity_layout(eng, &eng.partners, L.groups.get("partners"), o["partner_radius"], o)
    _entity_layout(eng, &eng.road, L.groups.get("road"), o["road_radius"], o)
    _entity_layout(eng, &eng.traffic, L.groups.get("traffic"), o["traffic_radius"], o)
    if L.groups.get("traffic") is not None and o["traffic_lights"]:
        # The group holds the stop lines' slots, then the traffic lights' (observe.write_traffic).
        eng.traffic.max_n = o["max_traffic"]
        eng.traffic.lights_n = o["max_traffic_lights"]
    g = L.groups.get("partners")
    if g is not None and o["partner_acceleration"]:
        eng.partners.accel = g.feature("acceleration").start

cdef _entity_layout(Engine eng, EntityLayout* ent, g, double radius, o):
    ent.start = g.start if g is not None else 0
    ent.max_n = g.count if g is not None else 0
    ent.width = g.width if g is not None else 0
    ent.radius = radius
    ent.radius2 = radius * radius
    ent.z_gate = o["z_gate"]
    ent.dropout = o["slot_dropout"]
    ent.accel = -1
    ent.lights_n = 0
    ent.n = eng.ego.n


cdef _alloc_buffers(Engine e, Py_ssize_t W, Py_ssize_t K, Py_ssize_t A, dtype):
    """The engine's numpy-owned buffers (observations of ``dtype``, actions, rewards, flags, counters,
    metrics, the slot map, the agent grid, the scratch of the neighbour queries, pedestrian and planner
    state), allocated once, and the C pointers the step writes through."""
    b = {
        "observations": np.zeros((W * K, e.obs_dim), dtype),
        "actions": np.zeros(W * K, np.int32),
        "rewards": np.zeros(W * K, np.float32),
        "reward_terms": np.zeros((W * K, N_REWARD_TERMS), np.float64),
        "step_events": np.zeros(W * K, np.int32),
        "terminated": np.zeros(W * K, np.bool_),
        "truncated": np.zeros(W * K, np.bool_),
        "valid": np.zeros(W * K, np.bool_),
        "agent_type": np.full(W * K, -1, np.int32),
        "counters": np.zeros((W * K, N_COUNTERS), np.int32),
        "episode_metrics": np.zeros((W * K, N_EPISODE_METRICS), np.float32),
        "slot_agent": np.full(W * K, -1, np.int32),
        "slot_nact": np.zeros(W * K, np.int32),
        "t": np.zeros(W, np.int32),
        "sig_log": np.zeros(W, np.uint8),
        "n_agents": np.zeros(W, np.int32),
        "grid_head": np.zeros(W * AGENT_BUCKETS, np.int32),
        "grid_next": np.zeros(W * A, np.int32),
        "d2buf": np.zeros(W * A, np.float64),
        "idxbuf": np.zeros(W * A, np.int32),
        "prev_np": np.zeros(W * K, np.int32),
        "prev_nr": np.zeros(W * K, np.int32),
    }
    e._buffers = b
    e.observations, e.actions, e.rewards = b["observations"], b["actions"], b["rewards"]
    e.terminated, e.truncated, e.valid = b["terminated"], b["truncated"], b["valid"]
    e.agent_type, e.counters, e.slot_agent = b["agent_type"], b["counters"], b["slot_agent"]
    e._slot_nact = b["slot_nact"]
    e.obs_f = <float*>_ptr_mut(b["observations"]) if dtype == np.float32 else NULL
    e.obs_h = <uint16_t*>_ptr_mut(b["observations"]) if dtype == np.float16 else NULL
    e.act = <int*>_ptr_mut(b["actions"])
    e.nact = <int*>_ptr_mut(b["slot_nact"])
    e.rew = <float*>_ptr_mut(b["rewards"])
    e.rterms = <double*>_ptr_mut(b["reward_terms"])
    e.sevt = <int*>_ptr_mut(b["step_events"])
    e.term = <unsigned char*>_ptr_mut(b["terminated"])
    e.trunc = <unsigned char*>_ptr_mut(b["truncated"])
    e.valid_p = <unsigned char*>_ptr_mut(b["valid"])
    e.atype = <int*>_ptr_mut(b["agent_type"])
    e.cnt = <int*>_ptr_mut(b["counters"])
    e.episode_metrics = b["episode_metrics"]
    e.em = <float*>_ptr_mut(b["episode_metrics"])
    metric_params_default(&e.metp)
    e.slot_of = <int*>_ptr_mut(b["slot_agent"])
    e.t = <int*>_ptr_mut(b["t"])
    e.sig_log = <unsigned char*>_ptr_mut(b["sig_log"])
    e.n_agents = <int*>_ptr_mut(b["n_agents"])
    e.grid_head = <int*>_ptr_mut(b["grid_head"])
    e.grid_next = <int*>_ptr_mut(b["grid_next"])
    e.d2buf = <double*>_ptr_mut(b["d2buf"])
    e.idxbuf = <int*>_ptr_mut(b["idxbuf"])
    # the neighbour grid is rebuilt before every use, so it is scratch, not state (engine_state.pxi)
    e._scratch = {"nbr_head": np.zeros(W * NBR_BUCKETS, np.int32), "nbr_next": np.zeros(W * A, np.int32),
                  "nbr_cx": np.zeros(W * A, np.int32), "nbr_cy": np.zeros(W * A, np.int32),
                  "nbr_cand": np.zeros(W * A, np.int32), "nbr_peds": np.zeros(W * A, np.int32)}
    e.nbr_head = <int*>_ptr_mut(e._scratch["nbr_head"])
    e.nbr_next = <int*>_ptr_mut(e._scratch["nbr_next"])
    e.nbr_cx = <int*>_ptr_mut(e._scratch["nbr_cx"])
    e.nbr_cy = <int*>_ptr_mut(e._scratch["nbr_cy"])
    e.nbr_cand = <int*>_ptr_mut(e._scratch["nbr_cand"])
    e.nbr_peds = <int*>_ptr_mut(e._scratch["nbr_peds"])
    e.prev_np = <int*>_ptr_mut(b["prev_np"])
    e.prev_nr = <int*>_ptr_mut(b["prev_nr"])
    b["prev_nt"] = np.zeros(W * K, np.int32)
    e.prev_nt = <int*>_ptr_mut(b["prev_nt"])
    b["ped_state"] = np.zeros(W * A * sizeof(PedState), np.uint8)
    b["ped_stats"] = np.zeros((W, N_PED_STATS), np.int64)
    e.ped = <PedState*>_ptr_mut(b["ped_state"])
    e.ped_stats = <long long*>_ptr_mut(b["ped_stats"])
    b["ped_rates"] = np.zeros((W, 2), np.float64)
    b["mix_draws"] = np.zeros((W, 3), np.float64)
    b["plan_state"] = np.zeros(W * A * sizeof(PlanState), np.uint8)
    e.plan = <PlanState*>_ptr_mut(b["plan_state"])
    e.mix_draws = <double*>_ptr_mut(b["mix_draws"])
    e.ped_rates = <double*>_ptr_mut(b["ped_rates"])
