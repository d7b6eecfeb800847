# Engine state snapshots and inspection: ``get_state`` / ``set_state`` (everything that evolves
# between resets, for bit-exact continuation) and the copied or read-only views of the agents for
# tests, rendering and debugging (``agent_states``, ``agents``). Module-level functions of
# _engine.pyx taking the engine, behind the Engine methods of the same names; nothing here runs on
# the step path.

cdef _get_state(Engine e):
    rng = np.empty(e.num_worlds * sizeof(Rng), np.uint8)
    if e.num_worlds:
        memcpy(<void*>_ptr_mut(rng), <void*>e.rngs, e.num_worlds * sizeof(Rng))
    state = {"agents": e._agent_store.copy(), "rngs": rng, "world_map": e.world_map.copy()}
    state.update({f"buffer/{k}": v.copy() for k, v in e._buffers.items()})
    state.update({f"signal/{k}": v.copy() for k, v in e._sig.items()})
    return state

cdef _set_state(Engine e, state):
    if not isinstance(state, dict):
        raise TypeError(f"engine state must be a dict of arrays (from get_state), got {type(state).__name__}")
    expected = {"agents": e._agent_store, "world_map": e.world_map}
    expected.update({f"buffer/{k}": v for k, v in e._buffers.items()})
    expected.update({f"signal/{k}": v for k, v in e._sig.items()})
    missing = sorted((set(expected) | {"rngs"}) - set(state))
    if missing:
        raise ValueError(f"engine state lacks {', '.join(missing)}")
    got = {}
    for k, v in expected.items():
        a = np.asarray(state[k])
        if a.shape != v.shape or a.dtype != v.dtype:
            raise ValueError(f"engine state {k!r}: expected {v.dtype} {v.shape}, got {a.dtype} {a.shape} "
                             "(was it saved by an engine with another config?)")
        got[k] = np.ascontiguousarray(a).copy()
    if not np.array_equal(got["world_map"], e.world_map):
        raise ValueError("engine state 'world_map': the snapshot's worlds use other maps than this engine's")
    rng = np.ascontiguousarray(state["rngs"])
    if rng.dtype != np.uint8 or rng.shape != (e.num_worlds * sizeof(Rng),):
        raise ValueError(f"engine state 'rngs': expected uint8 ({e.num_worlds * sizeof(Rng)},), "
                         f"got {rng.dtype} {rng.shape}")
    # Every count and index the step follows is checked against this engine's capacity and maps
    # before anything is written: a snapshot is data from a file (a run folder's checkpoint).
    _check_state_contents(e, got)
    for k, v in expected.items():
        if k != "world_map":
            np.copyto(v, got[k])
    if e.num_worlds:
        memcpy(<void*>e.rngs, <void*>_ptr_mut(rng.copy()), e.num_worlds * sizeof(Rng))

cdef inline bint _bad_real(double v, double bound) noexcept:
    return not (fabs(v) <= bound)      # NaN compares false

cdef _check_state_contents(Engine e, dict got):
    """Raise ValueError naming the entry, the world and the row of the first count, index, enum or
    real in a snapshot that the step could not follow safely."""
    cdef Py_ssize_t W = e.num_worlds, K = e.slots_per_world, A = e.max_agents, w, i, k, r, n
    cdef Py_ssize_t n_lanes, n_tracks, n_units, j, ring, rings
    cdef const MapC* m
    cdef const Agent* ag = <const Agent*>_ptr_mut(got["agents"])
    cdef const PlanState* pl = <const PlanState*>_ptr_mut(got["buffer/plan_state"])
    cdef const PedState* pd = <const PedState*>_ptr_mut(got["buffer/ped_state"])
    cdef int n_prop = e.planp.n_offsets * e.planp.n_speeds
    cdef int[:] n_agents = got["buffer/n_agents"]
    cdef int[:] t = got["buffer/t"]
    cdef int[:] slot_agent = got["buffer/slot_agent"]
    cdef int[:] slot_nact = got["buffer/slot_nact"]
    cdef const Agent* a
    cdef double lim = 1e9              # metres, m/s, seconds: far beyond any map (MAX_MAP_EXTENT)
    for w in range(W):
        n = n_agents[w]
        if not 0 <= n <= A:
            raise ValueError(f"engine state 'buffer/n_agents': world {w} holds {n} agents, "
                             f"outside [0, {A}] (max_agents_per_world)")
        if not 0 <= t[w] <= 1 << 30:
            raise ValueError(f"engine state 'buffer/t': world {w} is at step {t[w]}, outside [0, 2**30]")
    for name, cap in (("prev_np", e.partners.max_n), ("prev_nr", e.road.max_n),
                      ("prev_nt", e.traffic.max_n + e.traffic.lights_n)):
        v = got[f"buffer/{name}"]
        if v.size and (v.min() < 0 or v.max() > cap):
            raise ValueError(f"engine state 'buffer/{name}': entity counts must lie in [0, {cap}], "
                             f"got [{v.min()}, {v.max()}]")
    for name in ("grid_head", "grid_next", "idxbuf"):
        v = got[f"buffer/{name}"]
        if v.size and (v.min() < -1 or v.max() >= A):
            raise ValueError(f"engine state 'buffer/{name}': agent indices must lie in [-1, {A}), "
                             f"got [{v.min()}, {v.max()}]")
    for w in range(W):
        rm = e.road_maps[e.world_map[w]]
        m = &(<RoadMap>rm).c
        n_lanes, n_tracks, n = m.n_lanes, m.n_tracks, n_agents[w]
        for k in range(K):
            r = w * K + k
            if not -1 <= slot_agent[r] < n:
                raise ValueError(f"engine state 'buffer/slot_agent': world {w} slot {k} points to agent "
                                 f"{slot_agent[r]}, outside [-1, {n}) (the world's agent count)")
            if not 0 <= slot_nact[r] <= MAX_GRID * MAX_GRID:
                raise ValueError(f"engine state 'buffer/slot_nact': world {w} slot {k} has {slot_nact[r]} "
                                 f"actions, outside [0, {MAX_GRID * MAX_GRID}]")
        for i in range(n):
            a = &ag[w * A + i]
            row = f"world {w} agent {i}"
            if not 0 <= a.cls < N_CLASSES:
                raise ValueError(f"engine state 'agents': {row} has class {a.cls}, outside [0, {N_CLASSES})")
            if not 0 <= a.dyn < N_DYNAMICS:
                raise ValueError(f"engine state 'agents': {row} has dynamics model {a.dyn}, outside [0, {N_DYNAMICS})")
            if not 0 <= a.role < N_ROLES:
                raise ValueError(f"engine state 'agents': {row} has role {a.role}, outside [0, {N_ROLES})")
            if not -1 <= a.slot < K:
                raise ValueError(f"engine state 'agents': {row} has slot {a.slot}, outside [-1, {K})")
            if a.role == ROLE_CONTROLLED and a.slot < 0 and a.alive:
                raise ValueError(f"engine state 'agents': {row} is controlled but holds no slot")
            if a.role == ROLE_CONTROLLED and a.slot >= 0 and a.ego_driver == 0 and \
                    slot_nact[w * K + a.slot] > e.n_long[a.cls] * e.n_lat[a.cls]:
                raise ValueError(f"engine state 'buffer/slot_nact': world {w} slot {a.slot} has "
                                 f"{slot_nact[w * K + a.slot]} actions, more than its class's grid "
                                 f"({e.n_long[a.cls] * e.n_lat[a.cls]})")
            if not (-1 <= a.lane < n_lanes and -1 <= a.route_lane < n_lanes):
                raise ValueError(f"engine state 'agents': {row} is on lane {a.lane} (route lane {a.route_lane}), "
                                 f"outside [-1, {n_lanes}) (the map's lanes)")
            if not -1 <= a.log_index < n_tracks or (a.role == ROLE_LOG and a.log_index < 0):
                raise ValueError(f"engine state 'agents': {row} replays track {a.log_index}, outside "
                                 f"[{0 if a.role == ROLE_LOG else -1}, {n_tracks}) (the map's tracks)")
            if not (0 <= a.idm_mode < 3 and 0 <= a.ego_driver <= 2 and 0 <= a.kind < N_KINDS
                    and 0 <= a.stop_state < N_STOP_STATES and 0 <= a.alive <= 1):
                raise ValueError(f"engine state 'agents': {row} has an IDM mode ({a.idm_mode}), ego driver "
                                 f"({a.ego_driver}), kind ({a.kind}), stop state ({a.stop_state}) or alive flag "
                                 f"({a.alive}) outside its range")
            if (_bad_real(a.x, lim) or _bad_real(a.y, lim) or _bad_real(a.z, lim) or _bad_real(a.heading, lim)
                    or _bad_real(a.speed, lim) or _bad_real(a.goal_x, lim) or _bad_real(a.goal_y, lim)
                    or _bad_real(a.length, lim) or _bad_real(a.width, lim) or _bad_real(a.lane_s, lim)):
                raise ValueError(f"engine state 'agents': {row} has a pose, speed, goal or size that is not "
                                 f"finite or beyond {lim:g}")
            # the choice is read only while the row is planner-driven (planner.pxd)
            if not 0 <= pl[w * A + i].on <= 1 or _bad_real(pl[w * A + i].timer, lim) or \
                    _bad_real(pl[w * A + i].speed_factor, lim) or _bad_real(pl[w * A + i].lat_off, lim) or \
                    (pl[w * A + i].on and not -1 <= pl[w * A + i].choice < n_prop):
                raise ValueError(f"engine state 'buffer/plan_state': {row} has planner flag {pl[w * A + i].on}, "
                                 f"choice {pl[w * A + i].choice} (of {n_prop}), a timer, speed factor or lateral "
                                 "offset outside its range")
            if not 0 <= pd[w * A + i].scripted <= 1 or (pd[w * A + i].scripted and (
                    not -1 <= pd[w * A + i].trigger < n or _bad_real(pd[w * A + i].trigger_dist, lim))):
                raise ValueError(f"engine state 'buffer/ped_state': {row} has a scripted flag "
                                 f"{pd[w * A + i].scripted}, trigger {pd[w * A + i].trigger} or trigger "
                                 "distance outside its range")
            if not 0 <= pd[w * A + i].state <= 2:
                raise ValueError(f"engine state 'buffer/ped_state': {row} has pedestrian state "
                                 f"{pd[w * A + i].state}, outside [0, 2]")
        _check_signal_state(e, got, w, m)

cdef _check_signal_state(Engine e, dict got, Py_ssize_t w, const MapC* m):
    cdef Py_ssize_t i, n_units, n_groups, r
    for name in ("head", "sl"):
        v = got[f"signal/{name}"][w]
        if v.size and v.max() > 3:
            raise ValueError(f"engine state 'signal/{name}': world {w} holds state {v.max()}, outside [0, 3]")
    for name in ("sl_timer", "timer"):
        v = got[f"signal/{name}"][w]
        if v.size and not (np.abs(v) <= 1e6).all():
            raise ValueError(f"engine state 'signal/{name}': world {w} holds a timer that is not finite "
                             "or beyond 1e6 s")
    phase, stage, barrier, perm = (got["signal/phase"][w], got["signal/stage"][w], got["signal/barrier"][w],
                                   got["signal/perm"][w])
    if (phase.size and phase.max() > 2) or (perm.size and perm.max() > 1):
        raise ValueError(f"engine state 'signal/phase' or 'signal/perm': world {w} holds a phase or a "
                         "permissive flag outside its range")
    nema = e.sigp.controller == CTRL_NEMA
    for i in range(m.n_inter):
        n_units = (m.stage_off[i + 1] - m.stage_off[i]) if nema else (m.leg_off[i + 1] - m.leg_off[i])
        for r in range(2 if nema else 1):
            if not -1 <= stage[2 * i + r] < max(n_units, 1):
                raise ValueError(f"engine state 'signal/stage': world {w} intersection {i} ring {r} is at "
                                 f"stage {stage[2 * i + r]}, outside [-1, {n_units})")
        if nema and n_units > 0:
            n_groups = m.stage_barrier[m.stage_off[i + 1] - 1] + 1
            if not 0 <= barrier[i] < n_groups:
                raise ValueError(f"engine state 'signal/barrier': world {w} intersection {i} is in barrier "
                                 f"group {barrier[i]}, outside [0, {n_groups})")

cdef _agent_states(Engine e, int world):
    if not 0 <= world < e.num_worlds:
        raise ValueError(f"world must lie in [0, {e.num_worlds})")
    cdef Py_ssize_t n = e.n_agents[world], i
    cdef Agent* a
    names = ("x", "y", "z", "heading", "speed", "v_lat", "yaw_rate", "a_long", "a_lat", "j_long", "j_lat",
             "steer", "length", "width", "height", "goal_x", "goal_y", "lane", "lane_heading_res", "lane_lat",
             "cls", "role", "slot", "alive", "goal_hidden", "collided", "offroad", "wrong_way", "log_index")
    out = {k: np.zeros(n) for k in names}
    out["kin"] = np.zeros((n, 4))
    out["rw"] = np.zeros((n, N_REWARD))
    for i in range(n):
        a = &e.agents[world * e.max_agents + i]
        vals = (a.x, a.y, a.z, a.heading, a.speed, a.v_lat, a.yaw_rate, a.a_long, a.a_lat, a.j_long, a.j_lat,
                a.steer, a.length, a.width, a.height, a.goal_x, a.goal_y, a.lane, a.lane_heading_res, a.lane_lat,
                a.cls, a.role, a.slot, a.alive, a.goal_hidden, a.collided, a.offroad, a.wrong_way, a.log_index)
        for k, v in zip(names, vals):
            out[k][i] = v
        out["kin"][i] = [a.kin[0], a.kin[1], a.kin[2], a.kin[3]]
        out["rw"][i] = [a.rw[k] for k in range(N_REWARD)]
    for k in ("lane", "cls", "role", "slot", "alive", "goal_hidden", "collided", "offroad", "wrong_way", "log_index"):
        out[k] = out[k].astype(np.int64)
    return out

cdef _agents_view(Engine e):
    cdef Agent probe
    cdef size_t b = <size_t>&probe
    fields = [("x", <size_t>&probe.x - b), ("y", <size_t>&probe.y - b), ("z", <size_t>&probe.z - b),
              ("heading", <size_t>&probe.heading - b), ("speed", <size_t>&probe.speed - b),
              ("length", <size_t>&probe.length - b), ("width", <size_t>&probe.width - b),
              ("height", <size_t>&probe.height - b), ("goal_x", <size_t>&probe.goal_x - b),
              ("goal_y", <size_t>&probe.goal_y - b)]
    ints = [("cls", <size_t>&probe.cls - b), ("role", <size_t>&probe.role - b), ("slot", <size_t>&probe.slot - b),
            ("alive", <size_t>&probe.alive - b), ("collided", <size_t>&probe.collided - b),
            ("offroad", <size_t>&probe.offroad - b), ("wrong_way", <size_t>&probe.wrong_way - b),
            ("red_light", <size_t>&probe.red_light - b), ("ran_stop_line", <size_t>&probe.ran_stop_line - b),
            ("goal_reached", <size_t>&probe.goal_reached - b), ("kind", <size_t>&probe.kind - b),
            ("idm_mode", <size_t>&probe.idm_mode - b)]
    dt = np.dtype({"names": [n for n, _ in fields] + [n for n, _ in ints],
                   "formats": ["<f8"] * len(fields) + ["<i4"] * len(ints),
                   "offsets": [o for _, o in fields] + [o for _, o in ints],
                   "itemsize": sizeof(Agent)})
    view = e._agent_store.view(dt).reshape(e.num_worlds, e.max_agents)
    view.flags.writeable = False
    return view

cdef _planner_state(Engine e, int world):
    if not 0 <= world < e.num_worlds:
        raise ValueError(f"world must lie in [0, {e.num_worlds})")
    cdef Py_ssize_t n = e.n_agents[world], i
    cdef PlanState* ps
    out = {"planner": np.zeros(n, np.bool_), "speed_factor": np.zeros(n), "lat_off": np.zeros(n),
           "choice": np.full(n, -1, np.int64), "score": np.zeros(n), "replans": np.zeros(n, np.int64),
           "lane_changes": np.zeros(n, np.int64), "all_vetoed": np.zeros(n, np.int64)}
    for i in range(n):
        ps = &e.plan[world * e.max_agents + i]
        if not ps.on:
            continue
        out["planner"][i] = True
        out["speed_factor"][i] = ps.speed_factor
        out["lat_off"][i] = ps.lat_off
        out["choice"][i] = ps.choice
        out["score"][i] = ps.score
        out["replans"][i] = ps.stats[0]
        out["lane_changes"][i] = ps.stats[1]
        out["all_vetoed"][i] = ps.stats[2]
    return out

cdef inline bint _judged(Engine e, Py_ssize_t w, const Agent* a) noexcept nogil:
    """Whether the agent's slot was judged this step (its ``step_events`` row is this step's)."""
    return a.slot >= 0 and e.valid_p[w * e.slots_per_world + a.slot] != 0

cdef inline int _mover(Engine e, Py_ssize_t row, const Agent* a) noexcept nogil:
    if a.role == ROLE_CONTROLLED:
        return MOVER_IDM_EGO if a.ego_driver == 1 else (MOVER_PLANNER_EGO if a.ego_driver == 2 else MOVER_POLICY)
    if a.role == ROLE_IDM:
        return MOVER_PLANNER if e.plan[row].on else MOVER_IDM
    if a.role == ROLE_LOG:
        return MOVER_REPLAY
    if a.role == ROLE_CROSSER or a.role == ROLE_JAYWALKER:
        return MOVER_PEDESTRIAN
    return MOVER_STATIC

cdef _replay_frame(Engine e, int world):
    if not 0 <= world < e.num_worlds:
        raise ValueError(f"world must lie in [0, {e.num_worlds})")
    cdef Py_ssize_t n = e.n_agents[world], i, j, base = world * e.max_agents
    out = {k: np.zeros(n, np.float64) for k in ("x", "y", "heading", "speed", "a_long", "a_lat", "length", "width")}
    out.update({k: np.zeros(n, np.int8) for k in ("cls", "kind", "mover", "alive")})
    out.update({"slot": np.zeros(n, np.int32), "events": np.zeros(n, np.int32), "partner": np.full(n, -1, np.int32)})
    cdef double[::1] x = out["x"], y = out["y"], hd = out["heading"], sp = out["speed"]
    cdef double[::1] al = out["a_long"], at = out["a_lat"], ln = out["length"], wd = out["width"]
    cdef signed char[::1] cl = out["cls"], kd = out["kind"], mv = out["mover"], alive = out["alive"]
    cdef int[::1] slot = out["slot"], ev = out["events"], partner = out["partner"]
    cdef Agent* a
    cdef Agent* b
    cdef double ra, rb, dx, dy
    for i in range(n):
        a = &e.agents[base + i]
        x[i], y[i], hd[i], sp[i] = a.x, a.y, a.heading, a.speed
        al[i], at[i], ln[i], wd[i] = a.a_long, a.a_lat, a.length, a.width
        cl[i], kd[i], mv[i], alive[i] = a.cls, a.kind, _mover(e, base + i, a), a.alive != 0
        slot[i] = a.slot
        if _judged(e, world, a):
            ev[i] = e.sevt[world * e.slots_per_world + a.slot]
        elif a.alive and a.role == ROLE_IDM:
            ev[i] = ((a.collided != 0) << EVT_COLLISION | (a.red_light != 0) << EVT_RED_LIGHT
                     | (a.ran_stop_line != 0) << EVT_STOP_LINE)
    # The partner of a collision: the lowest-index agent whose box overlaps (rules.collides' test, no
    # clearance, the same elevation gate), among the agents present when the step judged (alive, or
    # removed by this step's judgement).
    for i in range(n):
        if not ev[i] & (1 << EVT_COLLISION):
            continue
        a = &e.agents[base + i]
        ra = 0.5 * sqrt(a.length * a.length + a.width * a.width)
        for j in range(n):
            b = &e.agents[base + j]
            if j == i or not (b.alive or _judged(e, world, b)):
                continue
            dx = b.x - a.x
            dy = b.y - a.y
            rb = 0.5 * sqrt(b.length * b.length + b.width * b.width)
            if (dx * dx + dy * dy <= (ra + rb) * (ra + rb) and fabs(b.z - a.z) <= e.z_gate and
                    obb_overlap(a.x, a.y, a.heading, a.length, a.width, b.x, b.y, b.heading, b.length, b.width)):
                partner[i] = <int>j
                break
    return out
