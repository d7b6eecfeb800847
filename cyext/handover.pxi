# Handing a controlled agent to the rule-based IDM driver (ego progress relative to
# the IDM driver from the same start), as module-level functions of _engine.pyx taking the engine.
# ``Engine.hand_to_idm`` turns a slot's agent into an IDM vehicle (roadusers.pxd) on the lane under
# it, from its present pose and speed; the slot stops being valid for actions but keeps its agent, and
# ``_handed_progress`` (called from ``_judge_agents`` each step) accumulates that agent's steps,
# distance and progress along the lane under it into the slot's ``episode_metrics`` row, measured as
# for a controlled agent (metrics.pxd), so evaluation can compare a policy's progress with the IDM
# driver's from the same start at no per-agent Python cost. ``_become_idm`` is the hand-over itself,
# shared with log scenes, where a logged agent may start as an IDM vehicle (placement.pxi).

cdef str _handover_problem(Engine e, Py_ssize_t w, Py_ssize_t k):
    """Why slot ``k`` of world ``w`` cannot be handed to the IDM driver, or None when it can."""
    cdef Py_ssize_t r = w * e.slots_per_world + k, i = e.slot_of[r]
    cdef const Agent* a
    cdef double d2, t
    if i < 0:
        return "holds no agent"
    a = &e.agents[w * e.max_agents + i]
    if not a.alive or a.role != ROLE_CONTROLLED:
        return "holds no live controlled agent (ended, or already handed to the IDM driver)"
    if a.cls > CLS_BUS:
        return f"holds a {('pedestrian', 'cyclist')[a.cls - CLS_PEDESTRIAN]}; only cars, trucks and buses drive by IDM"
    if seggrid_nearest(&e.wmap[w].lanes, a.x, a.y, a.z, e.lane_max_dist, e.z_gate, &d2, &t) < 0:
        return f"its agent is not on a lane (no centerline within {e.lane_max_dist} m)"
    return None


def _hand_over_checked(Engine e, worlds, slots, int idm_mode):
    """``Engine.hand_to_idm``: check every (world, slot) pair, then hand them all over."""
    w = np.atleast_1d(np.asarray(worlds))
    k = np.atleast_1d(np.asarray(slots))
    if w.dtype.kind not in "iu" or k.dtype.kind not in "iu" or w.ndim != 1 or w.shape != k.shape:
        raise ValueError(f"worlds and slots must be integers or equal-length 1-D integer arrays, got "
                         f"{w.dtype} {w.shape} and {k.dtype} {k.shape}")
    if not 0 <= idm_mode < N_IDM_MODES:
        raise ValueError(f"idm_mode must be 0 (default), 1 (assertive) or 2 (cautious), got {idm_mode}")
    if w.size and (w.min() < 0 or w.max() >= e.num_worlds):
        raise ValueError(f"worlds must lie in [0, {e.num_worlds}), got {w.tolist()}")
    if k.size and (k.min() < 0 or k.max() >= e.slots_per_world):
        raise ValueError(f"slots must lie in [0, {e.slots_per_world}), got {k.tolist()}")
    if np.unique(w.astype(np.int64) * e.slots_per_world + k).size != w.size:
        raise ValueError("hand_to_idm: a (world, slot) pair is named twice")
    for j in range(w.size):
        why = _handover_problem(e, int(w[j]), int(k[j]))
        if why is not None:
            raise ValueError(f"cannot hand slot {int(k[j])} of world {int(w[j])} to the IDM driver: {why}")
    for j in range(w.size):
        _hand_to_idm(e, int(w[j]), int(k[j]), idm_mode)


cdef void _hand_to_idm(Engine e, Py_ssize_t w, Py_ssize_t k, int idm_mode) noexcept nogil:
    """Make slot ``k``'s agent an IDM vehicle on the nearest lane (as ``set_scene`` places one), keep
    its slot for the progress bookkeeping, and clear the slot's metric row: from now on the row holds
    only what the IDM driver does. Checked by ``_handover_problem`` first."""
    cdef Py_ssize_t r = w * e.slots_per_world + k
    _become_idm(e, w, &e.agents[w * e.max_agents + e.slot_of[r]], idm_mode, False)
    e.agents[w * e.max_agents + e.slot_of[r]].ego_driver = 0
    e.nact[r] = 0
    e.valid_p[r] = 0
    e.term[r] = 0
    e.trunc[r] = 0
    memset(&e.em[r * N_EPISODE_METRICS], 0, N_EPISODE_METRICS * sizeof(float))


cdef bint _become_idm(Engine e, Py_ssize_t w, Agent* a, int idm_mode, bint aligned) noexcept nogil:
    """Make ``a`` an IDM vehicle from its present pose and speed, on the lane nearest to it (the route
    starts there; ``idm_step`` picks the next lanes). False, with ``a`` unchanged, when no lane lies
    within ``lane_max_distance`` or, with ``aligned``, when that lane runs against the agent's heading
    (a logged agent handed over at reset, appendix D.2)."""
    cdef double d2, t = 0.0, dx, dy
    cdef const double* q
    cdef Py_ssize_t s = seggrid_nearest(&e.wmap[w].lanes, a.x, a.y, a.z, e.lane_max_dist, e.z_gate, &d2, &t)
    if s < 0:
        return False
    q = e.wmap[w].lanes.seg + 6 * s
    dx = q[3] - q[0]
    dy = q[4] - q[1]
    if aligned and dx * cos(a.heading) + dy * sin(a.heading) <= 0:
        return False
    a.role = ROLE_IDM
    memset(&e.plan[a - e.agents], 0, sizeof(PlanState))  # an IDM vehicle, not a planner (plan rows follow agents)
    a.lane = e.wmap[w].lanes.seg_row[s]
    a.lane_s = e.wmap[w].lanes.seg_s0[s] + t * sqrt(dx * dx + dy * dy)
    a.route_lane = -1
    a.idm_mode = idm_mode
    a.lc_wait = 0.0
    a.lc_reach = 0.0
    a.halted = 0
    return True


cdef void _handed_progress(Engine e, Py_ssize_t w, Py_ssize_t i) noexcept nogil:
    """One step of an agent handed to the IDM driver: its lane state on a copy (the IDM vehicle keeps
    the lane of its route in ``lane``) feeds ``handed_progress_step`` of its slot's metric row."""
    cdef Agent probe = e.agents[w * e.max_agents + i]
    cdef Py_ssize_t r = w * e.slots_per_world + probe.slot
    if e.slot_of[r] != i:
        return
    if e.lane_tracking:
        probe.lane_arc = probe.lane_s  # tracked from the IDM vehicle's route lane
    _agent_lane_state(e, w, &probe)
    handed_progress_step(&e.em[r * N_EPISODE_METRICS], &probe, e.dt)


# Baseline egos (``terrazero_env.drivers``): a controlled agent driven by the IDM law or the planner
# traffic's logic along the route to its goal instead of by its actions. It stays controlled, so the
# judge measures its rules, reward, counters and episode metrics as for a policy's agent.
EGO_DRIVERS = {"idm": 1, "planner": 2}


def _set_ego_driver_checked(Engine e, worlds, slots, str mode, int idm_mode):
    """``Engine.set_ego_driver``: check every (world, slot) pair, then switch them all."""
    if mode not in EGO_DRIVERS:
        raise ValueError(f"mode must be one of {', '.join(EGO_DRIVERS)}, got {mode!r}")
    w = np.atleast_1d(np.asarray(worlds))
    k = np.atleast_1d(np.asarray(slots))
    if w.dtype.kind not in "iu" or k.dtype.kind not in "iu" or w.ndim != 1 or w.shape != k.shape:
        raise ValueError(f"worlds and slots must be integers or equal-length 1-D integer arrays, got "
                         f"{w.dtype} {w.shape} and {k.dtype} {k.shape}")
    if not 0 <= idm_mode < N_IDM_MODES:
        raise ValueError(f"idm_mode must be 0 (default), 1 (assertive) or 2 (cautious), got {idm_mode}")
    if w.size and (w.min() < 0 or w.max() >= e.num_worlds):
        raise ValueError(f"worlds must lie in [0, {e.num_worlds}), got {w.tolist()}")
    if k.size and (k.min() < 0 or k.max() >= e.slots_per_world):
        raise ValueError(f"slots must lie in [0, {e.slots_per_world}), got {k.tolist()}")
    if np.unique(w.astype(np.int64) * e.slots_per_world + k).size != w.size:
        raise ValueError("set_ego_driver: a (world, slot) pair is named twice")
    for j in range(w.size):
        why = _handover_problem(e, int(w[j]), int(k[j]))
        if why is not None:
            raise ValueError(f"cannot give slot {int(k[j])} of world {int(w[j])} to the {mode} driver: {why}")
    for j in range(w.size):
        _set_ego_driver(e, int(w[j]), int(k[j]), EGO_DRIVERS[mode], idm_mode)


cdef void _set_ego_driver(Engine e, Py_ssize_t w, Py_ssize_t k, int mode, int idm_mode) noexcept nogil:
    """Slot ``k``'s agent drives by the rule-based law ``mode`` from its present pose and speed, on the
    lane nearest to it (checked by ``_handover_problem``); its actions are no longer read."""
    cdef Py_ssize_t r = w * e.slots_per_world + k, i = e.slot_of[r]
    cdef Agent* a = &e.agents[w * e.max_agents + i]
    _become_idm(e, w, a, idm_mode, False)
    a.role = ROLE_CONTROLLED
    a.ego_driver = mode
    if mode == 2:
        _make_planner(e, w, i)
    e.nact[r] = 0


cdef void _ego_drive(Engine e, Py_ssize_t w, Py_ssize_t i, const SigState* st, AgentGrid* grid) noexcept nogil:
    """One step of a controlled agent with a rule-based driver: the route turns toward its goal
    (``lanegraph.route_successor``; the law's own choice when the goal is hidden or off the graph),
    then the IDM step (or the planner's) moves it; its jerks are kept for the comfort rule."""
    cdef Py_ssize_t base = w * e.max_agents
    cdef Agent* a = &e.agents[base + i]
    cdef double a0 = a.a_long, l0 = a.a_lat, cap, d
    cdef int nxt
    a.prev_a_long = a0
    a.prev_a_lat = l0
    if not a.goal_hidden:
        nxt = route_successor(e.wmap[w], a, a.lane, e.lane_max_dist, e.z_gate, e.rform.route_cap, &e.lg[w])
        if nxt >= 0:
            a.route_lane = nxt
    # Arrival: the desired speed lets it brake to the reference driver's goal speed by its goal (the
    # goal counts as reached below 3 m/s), as a fraction of the lane's limit.
    cap = 1e9
    d = goal_route_distance(e.wmap[w], a, e.lane_max_dist, e.z_gate, e.rform.route_cap, &e.lg[w])
    if not a.goal_hidden and d >= 0 and e.wmap[w].lane_speed[a.lane] > 0:
        cap = sqrt(2.0 * 2.0 + 2.0 * 1.5 * d) / e.wmap[w].lane_speed[a.lane]
    if a.ego_driver == 2:
        _planner_drive(e, w, i, st, grid, cap)
    else:
        idm_step(e.wmap[w], &e.agents[base], e.n_agents[w], i, e.cp, &e.idmp, st.sl, &e.rngs[w], e.dt,
                 e.idmp.v0_scale[a.idm_mode] if e.idmp.v0_scale[a.idm_mode] < cap else cap, 0.0, grid)
    a.j_long = (a.a_long - a0) / e.dt
    a.j_lat = (a.a_lat - l0) / e.dt
