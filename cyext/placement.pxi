# Scene composition of the Engine (TerraZero appendix D), as module-level functions of _engine.pyx
# taking the engine: clearing and resetting a world, scripted scenes (``Engine.set_scene``),
# per-agent initialization (class, dimensions, kinematic coefficients, reward parameters), random
# placement by rejection sampling on lanes and sidewalks, and goal assignment by a walk over the lane
# graph (placement from logged tracks: log_placement.pxi). The geometric helpers it uses (points
# along lanes, goal sampling) live in ``scene.pxd``.

cdef _set_scene(Engine e, int world, agents, unsigned long long seed):
    agents = _checked_scene(e, world, agents)  # scene_checks.pxi: raises before the world is cleared
    cdef Agent* a
    cdef Py_ssize_t i, k, base = world * e.max_agents, slot = 0, r
    cdef int c
    _clear_world(e, world, seed)
    for i, spec in enumerate(agents):
        c = int(spec["cls"])
        if not 0 <= c < N_CLASSES:
            raise ValueError(f"agents[{i}]: unknown agent type {spec['cls']!r}")
        a = &e.agents[base + i]
        memset(a, 0, sizeof(Agent))
        _init_agent(e, world, a, c, ROLE_STATIC)
        a.x, a.y, a.heading = float(spec["x"]), float(spec["y"]), float(spec["heading"])
        a.z = float(spec.get("z", 0.0))
        a.cos_h, a.sin_h = np.cos(a.heading), np.sin(a.heading)
        a.speed = float(spec.get("speed", 0.0))
        a.steer = float(spec.get("steer", 0.0))
        a.length = float(spec.get("length", a.length))
        a.width = float(spec.get("width", a.width))
        a.height = float(spec.get("height", a.height))
        a.wheelbase = a.length * e.cp[c * N_CP + CP_WHEELBASE]
        if a.steer != 0.0:  # the yaw rate and lateral acceleration the given angle gives at its speed
            a.yaw_rate = a.speed * tan(a.steer) / a.wheelbase
            a.a_lat = a.speed * a.yaw_rate
        if "kin" in spec:
            for k in range(4):
                a.kin[k] = float(spec["kin"][k])
        for name, v in spec.get("rw", {}).items():
            k = REWARD_PARAMS.index(name)
            a.rw[k] = float(v)
            a.rw_norm[k] = _normalize_rw(e, c, k, a.rw[k])
        controlled = spec.get("controlled", bool(e.controlled_cls[c])) and not spec.get("idm", False)
        if spec.get("idm", False):
            # A rule-based IDM vehicle on the lane under it (nearest centerline in its direction).
            q = (<RoadMap>e.road_maps[e.world_map[world]]).lanes.query(np.array([[a.x, a.y, a.z]]))
            if q["row"][0] < 0:
                raise ValueError(f"agents[{i}]: an IDM vehicle must start on a lane")
            a.role = ROLE_IDM
            a.lane = int(q["row"][0])
            a.lane_s = float(q["s"][0])
            a.route_lane = -1
            a.idm_mode = int(spec.get("idm_mode", 0))
            if spec.get("planner", False):
                _make_planner(e, world, i)
        elif controlled and slot < e.slots_per_world:
            a.role = ROLE_CONTROLLED
            a.slot = slot
            slot += 1
        a.goal_x, a.goal_y = spec.get("goal", (a.x, a.y))
        a.goal_hidden = 1 if spec.get("goal_hidden", False) else 0
        a.kind = int(spec.get("kind", KIND_NONE))
        if not 0 <= a.kind < N_KINDS:
            raise ValueError(f"agents[{i}]: unknown static kind {spec['kind']!r}")
        a.alive = 1
        if "crossing" in spec:
            _scripted_crossing(e, world, i, a, spec["crossing"])
        e.n_agents[world] = i + 1
    with nogil:
        _finish_reset(e, world)

cdef _scripted_crossing(Engine e, int world, Py_ssize_t i, Agent* a, dict c):
    """Row i becomes a pending scripted crossing (pedestrians.pxd): unseen until its trigger agent is
    within ``distance``, then straight to ``goal`` at ``speed``, reacting to nothing."""
    cdef PedState* ps = &e.ped[world * e.max_agents + i]
    cdef double dx = c["goal"][0] - a.x, dy = c["goal"][1] - a.y, d = sqrt(dx * dx + dy * dy)
    a.role = ROLE_JAYWALKER
    a.alive = 0
    a.heading = atan2(dy, dx)
    a.cos_h, a.sin_h = dx / d, dy / d
    a.speed = 0.0
    a.goal_x, a.goal_y = c["goal"]
    memset(ps, 0, sizeof(PedState))
    ps.dir_x, ps.dir_y = dx / d, dy / d
    ps.pref = c["speed"]
    ps.state = PS_PENDING
    ps.scripted = 1
    ps.trigger = c["trigger"]
    ps.trigger_dist = c["distance"]

cdef void _make_planner(Engine e, Py_ssize_t w, Py_ssize_t i) noexcept nogil:
    """Row i of world w (an IDM vehicle) becomes planner-driven; it plans on its first step."""
    cdef PlanState* ps = &e.plan[w * e.max_agents + i]
    memset(ps, 0, sizeof(PlanState))
    ps.on = 1
    ps.choice = -1
    ps.speed_factor = e.planp.speeds[0]

cdef double _normalize_rw(Engine e, int c, int k, double v) noexcept nogil:
    cdef double lo = e.rlo[c * N_REWARD + k], hi = e.rhi[c * N_REWARD + k]
    if not e.ron[c * N_REWARD + k] or hi <= lo:
        return 0.0
    return 2.0 * (v - lo) / (hi - lo) - 1.0

cdef void _init_agent(Engine e, Py_ssize_t w, Agent* a, int c, int role) noexcept nogil:
    """Class, sampled dimensions, kinematic coefficients and reward parameters."""
    cdef Rng* rng = &e.rngs[w]
    cdef const double* cp = &e.cp[c * N_CP]
    cdef int k
    cdef double lo, hi
    a.cls = c
    a.dyn = <int>cp[CP_DYN]
    a.role = role
    a.slot = -1
    a.lane = -1
    a.log_index = -1
    a.length = rng_range(rng, cp[CP_LEN_LO], cp[CP_LEN_HI])
    a.width = rng_range(rng, cp[CP_WID_LO], cp[CP_WID_HI])
    a.height = rng_range(rng, cp[CP_HGT_LO], cp[CP_HGT_HI])
    a.wheelbase = a.length * cp[CP_WHEELBASE]
    for k in range(4):
        a.kin[k] = rng_range(rng, e.ckin_lo[c], e.ckin_hi[c]) if e.randomize_kin else 1.0
    for k in range(N_REWARD):
        if e.ron[c * N_REWARD + k]:
            lo = e.rlo[c * N_REWARD + k]
            hi = e.rhi[c * N_REWARD + k]
            a.rw[k] = rng_range(rng, lo, hi) if hi > lo else lo
        else:
            a.rw[k] = 0.0
        a.rw_norm[k] = <float>_normalize_rw(e, c, k, a.rw[k])

cdef void _clear_world(Engine e, Py_ssize_t w, unsigned long long seed) noexcept nogil:
    cdef Py_ssize_t k, r, K = e.slots_per_world
    rng_seed(&e.rngs[w], seed)
    e.t[w] = 0
    # This episode's pedestrian rates: drawn only from a range, so a fixed rate draws nothing.
    e.ped_rates[2 * w] = rng_episode_value(&e.rngs[w], e.pedp.rate, e.pedp.rate_hi)
    e.ped_rates[2 * w + 1] = rng_episode_value(&e.rngs[w], e.pedp.jaywalk_rate, e.pedp.jaywalk_rate_hi)
    e.mix_draws[3 * w] = rng_episode_value(&e.rngs[w], e.idm_fraction, e.idm_fraction_hi)
    e.mix_draws[3 * w + 1] = rng_episode_value(&e.rngs[w], e.statp.worker_prob, e.worker_prob_hi)
    # Drawn only from a range (a fixed share, 0 by default, draws nothing).
    e.mix_draws[3 * w + 2] = rng_episode_value(&e.rngs[w], e.planner_fraction, e.planner_fraction_hi)
    memset(&e.plan[w * e.max_agents], 0, e.max_agents * sizeof(PlanState))
    e.n_agents[w] = 0
    memset(&e.agents[w * e.max_agents], 0, e.max_agents * sizeof(Agent))
    pedestrians_reset(&e.ped[w * e.max_agents], e.max_agents, &e.ped_stats[w * N_PED_STATS])
    for k in range(K):
        r = w * K + k
        e.slot_of[r] = -1
        e.nact[r] = 0
        e.atype[r] = -1
        e.rew[r] = 0
        memset(&e.rterms[r * N_REWARD_TERMS], 0, N_REWARD_TERMS * sizeof(double))
        e.sevt[r] = 0
        e.term[r] = 0
        e.trunc[r] = 0
        e.valid_p[r] = 0
        e.prev_np[r] = 0
        e.prev_nr[r] = 0
        e.prev_nt[r] = 0
        memset(&e.cnt[r * N_COUNTERS], 0, N_COUNTERS * sizeof(int))
        memset(&e.em[r * N_EPISODE_METRICS], 0, N_EPISODE_METRICS * sizeof(float))
    if e.obs_f != NULL:
        memset(&e.obs_f[w * K * e.obs_dim], 0, K * e.obs_dim * sizeof(float))
    else:
        memset(&e.obs_h[w * K * e.obs_dim], 0, K * e.obs_dim * sizeof(uint16_t))

cdef void _reset_world(Engine e, Py_ssize_t w, unsigned long long seed) noexcept nogil:
    _clear_world(e, w, seed)
    cdef const MapC* m = e.wmap[w]
    cdef bint use_log = e.init_mode == 1 or (e.init_mode == 2 and rng_uniform(&e.rngs[w]) >= e.p_random)
    e.sig_log[w] = 1 if (use_log and m.n_tracks > 0 and e.sigp.replay_log and m.head_log_steps > 0) else 0
    if use_log and m.n_tracks > 0:
        _init_from_log(e, w)
    else:
        _init_random(e, w)
    _finish_reset(e, w)

cdef void _finish_reset(Engine e, Py_ssize_t w) noexcept nogil:
    """Slot tables, lane state, goal distances and first observations after placement."""
    cdef Py_ssize_t i, r, K = e.slots_per_world, base = w * e.max_agents
    cdef const MapC* m = e.wmap[w]
    cdef Agent* a
    cdef SigState st
    cdef AgentGrid grid
    _sig_state(e, w, &st)
    signals_reset(m, &e.sigp, &st, &e.rngs[w])
    if e.sig_log[w]:
        signals_replay(m, &st, e.t[w])
    for i in range(e.n_agents[w]):
        a = &e.agents[base + i]
        a.cos_h = cos(a.heading)
        a.sin_h = sin(a.heading)
        if a.role != ROLE_IDM:  # IDM vehicles keep the lane of their route
            # an agent placed on a lane (random placement) is tracked from there; one placed off the
            # lane graph's bookkeeping (a scripted scene, a logged track) has lane -1 and is searched for
            if e.lane_tracking:
                a.lane_arc = a.lane_s
            _agent_lane_state(e, w, a)
        _progress_start(e, w, a)
        if a.role == ROLE_CONTROLLED and a.slot >= 0:
            r = w * K + a.slot
            e.slot_of[r] = <int>i
            e.atype[r] = a.cls
            e.nact[r] = e.n_long[a.cls] * e.n_lat[a.cls]
            e.valid_p[r] = 1
    grid_build(&e.agents[base], e.n_agents[w], &e.grid_head[w * AGENT_BUCKETS],
               &e.grid_next[base], e.agent_cell)
    for i in range(e.n_agents[w]):
        a = &e.agents[base + i]
        if a.alive and a.role == ROLE_CONTROLLED:
            a.collided = collides(&e.agents[base], i, &e.grid_head[w * AGENT_BUCKETS],
                                  &e.grid_next[base], e.agent_cell, e.z_gate, 0.0)
    _nbr_grid(e, w, &grid)
    _observe_world(e, w, &grid)

cdef bint _place_on_lane(Engine e, Py_ssize_t w, Agent* a) noexcept nogil:
    cdef const MapC* m = e.wmap[w]
    cdef Rng* rng = &e.rngs[w]
    cdef Py_ssize_t lane
    cdef double s, jitter
    cdef TurnBox box
    if m.n_spawn_lanes == 0:
        return False
    lane = m.spawn_lanes[rng_int(rng, m.n_spawn_lanes)]
    # a lane a controlled agent's box cannot follow is no place for it to start (InitConfig.goal_turnable):
    # a try lost
    if e.goal_turnable and a.role == ROLE_CONTROLLED and turn_box(a, &e.cp[a.cls * N_CP], &box) \
            and not lane_turnable(m, lane, &box):
        return False
    s = rng_range(rng, 0.0, lane_length(m, lane))
    lane_point(m, lane, s, &a.x, &a.y, &a.z, &a.heading)
    a.lane = <int>lane
    a.lane_s = s
    a.route_lane = -1
    jitter = rng_range(rng, -0.2, 0.2)
    a.x -= jitter * sin(a.heading)
    a.y += jitter * cos(a.heading)
    a.heading += rng_range(rng, -0.05, 0.05)
    return True

cdef void _settle_steering(Engine e, Agent* a, double kappa) noexcept nogil:
    """A controlled bicycle-model agent placed on a path of curvature ``kappa`` (1/m, + left) starts
    with the steering angle that path needs (atan(kappa * L), within the class's steering range) and
    the yaw rate and lateral acceleration that angle gives at its speed, so the first steps of a car
    placed inside a curve follow the curve instead of unwinding from straight wheels. Only for
    classes with a steering-rate limit (``ClassSpec.max_steer_rate``); without one the angle is not
    state and the agent starts with none, as before."""
    cdef const double* cp = &e.cp[a.cls * N_CP]
    if cp[CP_STEERRATE] < 0 or a.dyn == DYN_UNICYCLE or a.wheelbase <= 0 or fabs(kappa) < 1e-4:
        return  # (a radius beyond 10 km is a straight: no rounding residue in the wheels)
    a.steer = atan(kappa * a.wheelbase)
    if a.steer > cp[CP_STEERMAX]:
        a.steer = cp[CP_STEERMAX]
    elif a.steer < -cp[CP_STEERMAX]:
        a.steer = -cp[CP_STEERMAX]
    a.yaw_rate = a.speed * tan(a.steer) / a.wheelbase
    a.a_lat = a.speed * a.yaw_rate

cdef double _lane_curvature_at(const MapC* m, Py_ssize_t lane, double s) noexcept nogil:
    """Mean curvature (1/m) of ``lane`` over the 4 m around arc length ``s`` (onto an only successor)."""
    cdef double s0 = s - 2.0
    if s0 < 0:
        s0 = 0
    return lane_curvature_ahead(m, <int>lane, s0, 4.0, -1)

cdef bint _place_on_sidewalk(Engine e, Py_ssize_t w, Agent* a) noexcept nogil:
    cdef const MapC* m = e.wmap[w]
    cdef Rng* rng = &e.rngs[w]
    cdef Py_ssize_t ring
    cdef const double* bb
    cdef int k
    if m.n_walks == 0:
        return _place_on_lane(e, w, a)
    for k in range(20):
        ring = rng_int(rng, m.n_walks)
        bb = &m.walk_bbox[4 * ring]
        a.x = rng_range(rng, bb[0], bb[2])
        a.y = rng_range(rng, bb[1], bb[3])
        if point_in_rings(a.x, a.y, m.walk_pts, m.walk_off, m.walk_bbox, m.n_walks):
            a.z = m.walk_pts[3 * m.walk_off[ring] + 2]
            a.heading = rng_range(rng, -3.141592653589793, 3.141592653589793)
            return True
    return False

cdef bint _assign_goal(Engine e, Py_ssize_t w, Agent* a, bint from_lane=False) noexcept nogil:
    """A goal ahead along the lane graph (pedestrians: straight ahead along their heading). The walk
    starts on the lane nearest the agent, or with ``from_lane`` on the lane it was just placed on
    (``a.lane``, ``a.lane_s``): where lanes overlap (a real junction's connectors leave a lane end
    together and run side by side for metres) the nearest one may lead elsewhere than the agent's
    own, and a goal walked from it may lie where the agent's lane cannot reach. With
    ``InitConfig.goal_turnable`` the walk keeps to lanes the agent's box can follow on the road
    (``scene.lane_turnable``): a 12 m truck has no goal through a junction turn whose bend its box
    cannot sweep inside the road edges, where no driver could keep it on the road."""
    cdef const MapC* m = e.wmap[w]
    cdef Rng* rng = &e.rngs[w]
    cdef double d, s, dt2, t
    cdef Py_ssize_t seg
    cdef TurnBox box
    cdef const TurnBox* tb = NULL
    if e.goal_turnable and turn_box(a, &e.cp[a.cls * N_CP], &box):
        tb = &box
    if a.cls == CLS_PEDESTRIAN:
        d = rng_range(rng, 0.25 * e.goal_lo, 0.25 * e.goal_hi)
        a.goal_x = a.x + d * cos(a.heading)
        a.goal_y = a.y + d * sin(a.heading)
        a.goal_z = a.z
        return True
    if from_lane and a.lane >= 0:
        return sample_goal(m, rng, a.lane, a.lane_s, a.x, a.y, cos(a.heading), sin(a.heading),
                           e.goal_lo, e.goal_hi, e.goal_fwd, 8, tb, &a.goal_x, &a.goal_y, &a.goal_z)
    seg = seggrid_nearest(&m.lanes, a.x, a.y, a.z, e.lane_max_dist, e.z_gate, &dt2, &t)
    if seg < 0:
        return False
    if tb != NULL and a.lane >= 0 and not lane_turnable(m, m.lanes.seg_row[seg], tb):
        # at a lane's end the nearest lane may be the bend ahead that the agent cannot follow: walk
        # from the lane it is on (lane state: ``a.lane`` and its arc ``a.lane_arc``) instead
        return sample_goal(m, rng, a.lane, a.lane_arc, a.x, a.y, cos(a.heading), sin(a.heading),
                           e.goal_lo, e.goal_hi, e.goal_fwd, 8, tb, &a.goal_x, &a.goal_y, &a.goal_z)
    s = m.lanes.seg_s0[seg] + t * sqrt((m.lanes.seg[6 * seg + 3] - m.lanes.seg[6 * seg]) ** 2
                                       + (m.lanes.seg[6 * seg + 4] - m.lanes.seg[6 * seg + 1]) ** 2)
    return sample_goal(m, rng, m.lanes.seg_row[seg], s, a.x, a.y, cos(a.heading), sin(a.heading),
                       e.goal_lo, e.goal_hi, e.goal_fwd, 8, tb, &a.goal_x, &a.goal_y, &a.goal_z)

cdef int _sample_class(Engine e, Py_ssize_t w) noexcept nogil:
    cdef double total = 0.0, u
    cdef int c
    for c in range(N_CLASSES):
        total += e.class_weight[c]
    u = rng_uniform(&e.rngs[w]) * total
    for c in range(N_CLASSES):
        if u < e.class_weight[c]:
            return c
        u -= e.class_weight[c]
    return CLS_CAR

cdef void _init_random(Engine e, Py_ssize_t w) noexcept nogil:
    """Random placement under rejection sampling (appendix D.1): collision-free with a
    clearance, on the road, aligned with the lane, at low speed, outside signalized
    intersections; controlled agents also need a goal ahead."""
    cdef Rng* rng = &e.rngs[w]
    cdef const MapC* m = e.wmap[w]
    cdef Py_ssize_t base = w * e.max_agents, n = 0, target, k, j
    cdef int attempt, c, slots = 0, role
    cdef Agent* a
    cdef bint ok
    cdef StaticParams sp
    target = e.n_min + rng_int(rng, e.n_max - e.n_min + 1)
    # Static actors first, so the agents below are placed clear of them; they leave room
    # for the most agents a world may draw.
    sp = e.statp
    sp.worker_prob = e.mix_draws[3 * w + 1]
    n = place_static_actors(m, rng, &e.agents[base], 0, e.max_agents - e.n_max, &sp, e.cp, e.z_gate)
    for k in range(target):
        if n >= e.max_agents:
            break
        for attempt in range(e.tries):
            c = _sample_class(e, w)
            role = ROLE_CONTROLLED if (e.controlled_cls[c] and slots < e.slots_per_world) else ROLE_STATIC
            a = &e.agents[base + n]
            memset(a, 0, sizeof(Agent))
            _init_agent(e, w, a, c, role)
            ok = _place_on_sidewalk(e, w, a) if c == CLS_PEDESTRIAN else _place_on_lane(e, w, a)
            if not ok:
                continue
            a.cos_h = cos(a.heading)
            a.sin_h = sin(a.heading)
            a.alive = 1
            for j in range(n):
                if obb_overlap(a.x, a.y, a.heading, a.length + 2 * e.clearance, a.width + 2 * e.clearance,
                               e.agents[base + j].x, e.agents[base + j].y, e.agents[base + j].heading,
                               e.agents[base + j].length, e.agents[base + j].width) and \
                        fabs(e.agents[base + j].z - a.z) <= e.z_gate:
                    ok = False
                    break
            if not ok:
                continue
            if c != CLS_PEDESTRIAN and offroad(m, a, e.z_gate):
                continue
            if role == ROLE_CONTROLLED:
                if not _assign_goal(e, w, a, True):
                    continue
                if e.goal_lane_change > 0 and c <= CLS_BUS and rng_uniform(rng) < e.goal_lane_change:
                    _goal_to_neighbour(e, w, a)
                a.speed = rng_range(rng, e.v0_lo, e.v0_hi)
                _settle_steering(e, a, _lane_curvature_at(m, a.lane, a.lane_s))
                a.slot = slots
                a.goal_hidden = 1 if rng_uniform(rng) < e.goal_dropout[c] else 0
                slots += 1
            else:
                a.goal_x = a.x
                a.goal_y = a.y
                if c <= CLS_BUS and e.mix_draws[3 * w] > 0 and rng_uniform(rng) < e.mix_draws[3 * w]:
                    a.role = ROLE_IDM
                    a.idm_mode = idm_draw_mode(rng, &e.idmp)
                    a.speed = rng_range(rng, e.v0_lo, e.v0_hi)
                    # A share of the IDM vehicles is planner-driven (planner.pxd): a draw only when
                    # the share is above 0, so IDM-only worlds draw what they always drew.
                    if e.mix_draws[3 * w + 2] > 0 and rng_uniform(rng) < e.mix_draws[3 * w + 2]:
                        _make_planner(e, w, n)
            n += 1
            break
    if e.route_blocks > 0:
        n = _route_blocks(e, w, n)
    e.n_agents[w] = <int>n

cdef void _goal_to_neighbour(Engine e, Py_ssize_t w, Agent* a) noexcept nogil:
    """Move the agent's goal one lane width sideways onto a same-direction neighbour of the lane it
    lies on (``InitConfig.goal_lane_change``), the side drawn where there are two; unchanged where
    the goal's lane is in a junction or has no neighbour."""
    cdef const MapC* m = e.wmap[w]
    cdef double gs = 0.0, x, y, z, h, side
    cdef int gl = nearest_lane(m, a.goal_x, a.goal_y, a.goal_z, e.lane_max_dist, e.z_gate, &gs)
    cdef int left, right
    if gl < 0 or m.lane_inter[gl] >= 0:
        return
    left = m.lane_left[gl]
    right = m.lane_right[gl]
    if left < 0 and right < 0:
        return
    if left >= 0 and right >= 0:
        side = 1.0 if rng_uniform(&e.rngs[w]) < 0.5 else -1.0
    else:
        side = 1.0 if left >= 0 else -1.0
    lane_point(m, gl, gs, &x, &y, &z, &h)
    a.goal_x = x - side * m.lane_width[gl] * sin(h)
    a.goal_y = y + side * m.lane_width[gl] * cos(h)
    a.goal_z = z

cdef Py_ssize_t _route_blocks(Engine e, Py_ssize_t w, Py_ssize_t n) noexcept nogil:
    """Obstacles in the controlled vehicles' way (``RoadUsersConfig.route_blocks``): for each
    controlled car, truck or bus, with that probability, an obstacle on its lane-graph route to its
    goal (``lanegraph.route_successor``), ``route_block_distance`` ahead, outside junctions, clear of
    every agent placed and on the road; where none fits, none. What stands there follows
    ``route_block_kinds``: a stopped car shifted up to ``route_block_offset`` towards the curb (the
    goal at least 10 m past it), a construction zone (``static_actors.place_route_group``: a cone
    taper or lane-block line with the world's workers; the goal 34 m past its start) or a crash
    cluster (a rear-end chain or a T-bone; the goal 25 m past its start). Returns the new agent count."""
    cdef Rng* rng = &e.rngs[w]
    cdef const MapC* m = e.wmap[w]
    cdef Py_ssize_t base = w * e.max_agents, i, j, n0 = n
    cdef Agent* a
    cdef Agent* b
    cdef int lane, kind
    cdef double d, s, goal_d, off, u, curb = 1.0 if m.handedness == 1 else -1.0
    cdef double w0 = e.route_block_w[0], w1 = e.route_block_w[1], w2 = e.route_block_w[2]
    cdef bint ok
    cdef StaticParams sp = e.statp
    sp.worker_prob = e.mix_draws[3 * w + 1]
    for i in range(n0):
        a = &e.agents[base + i]
        if n >= e.max_agents:
            break
        if a.role != ROLE_CONTROLLED or a.cls > CLS_BUS or a.lane < 0:
            continue
        if rng_uniform(rng) >= e.route_blocks:
            continue
        d = rng_range(rng, e.route_block_lo, e.route_block_hi)
        off = rng_range(rng, 0.0, e.route_block_offset)
        kind = 0
        if w1 > 0 or w2 > 0:  # drawn only when something besides a stopped vehicle may stand there
            u = rng_uniform(rng) * (w0 + w1 + w2)
            kind = 0 if u < w0 else (1 if u < w0 + w1 else 2)
        a.lane_arc = a.lane_s
        goal_d = goal_route_distance(m, a, e.lane_max_dist, e.z_gate, e.rform.route_cap, &e.lg[w])
        # the goal lies 10 m past the obstacle: past a vehicle, a zone's cones and workers (up to 24 m
        # long) or a cluster's vehicles (up to about 15 m)
        if goal_d < d + (10.0 if kind == 0 else (34.0 if kind == 1 else 25.0)):
            continue
        lane = a.lane
        s = a.lane_s + d
        while lane >= 0 and s > lane_length(m, lane):
            s -= lane_length(m, lane)
            lane = route_successor(m, a, lane, e.lane_max_dist, e.z_gate, e.rform.route_cap, &e.lg[w])
        if lane < 0 or m.lane_inter[lane] >= 0:
            continue
        if kind != 0:
            n = place_route_group(m, rng, &e.agents[base], <int>n, <int>e.max_agents, &sp, e.cp, e.z_gate, kind,
                                  lane, s)
            continue
        b = &e.agents[base + n]
        memset(b, 0, sizeof(Agent))
        _init_agent(e, w, b, CLS_CAR, ROLE_STATIC)
        lane_point(m, lane, s, &b.x, &b.y, &b.z, &b.heading)
        b.x -= curb * off * sin(b.heading)
        b.y += curb * off * cos(b.heading)
        b.cos_h = cos(b.heading)
        b.sin_h = sin(b.heading)
        b.goal_x, b.goal_y = b.x, b.y
        b.alive = 1
        ok = not offroad(m, b, e.z_gate)
        for j in range(n):
            if not ok:
                break
            if obb_overlap(b.x, b.y, b.heading, b.length + 2 * e.clearance, b.width + 2 * e.clearance,
                           e.agents[base + j].x, e.agents[base + j].y, e.agents[base + j].heading,
                           e.agents[base + j].length, e.agents[base + j].width) and \
                    fabs(e.agents[base + j].z - b.z) <= e.z_gate:
                ok = False
        if ok:
            n += 1
        else:
            memset(b, 0, sizeof(Agent))
    return n
