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
    expected = {"agents": e._agent_store, "world_map": e.world_map}
    expected.update({f"buffer/{k}": v for k, v in e._buffers.items()})
    expected.update({f"signal/{k}": v for k, v in e._sig.items()})
    missing = sorted((set(expected) | {"rngs"}) - set(state))
    if missing:
        raise ValueError(f"engine state lacks {', '.join(missing)}")
    for k, v in expected.items():
        got = np.asarray(state[k])
        if got.shape != v.shape or got.dtype != v.dtype:
            raise ValueError(f"engine state {k!r}: expected {v.dtype} {v.shape}, got {got.dtype} {got.shape} "
                             "(was it saved by an engine with another config?)")
    if not np.array_equal(state["world_map"], e.world_map):
        raise ValueError("engine state 'world_map': the snapshot's worlds use other maps than this engine's")
    rng = np.ascontiguousarray(state["rngs"], np.uint8)
    if rng.shape != (e.num_worlds * sizeof(Rng),):
        raise ValueError(f"engine state 'rngs': expected {e.num_worlds * sizeof(Rng)} bytes, got {rng.shape}")
    for k, v in expected.items():
        if k != "world_map":
            np.copyto(v, state[k])
    if e.num_worlds:
        memcpy(<void*>e.rngs, <void*>_ptr_mut(rng), e.num_worlds * sizeof(Rng))

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
