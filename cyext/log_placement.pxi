# Log and hybrid scene placement (TerraZero algorithm 1, steps 7-9; appendix D.2, D.3, D.5): every
# track valid at step 0 starts at its logged state in a role drawn from its class's weights, and a
# policy-controlled one gets its logged goal or one walked along the lane graph. Included by
# _engine.pyx after placement.pxi, whose helpers (_init_agent, _assign_goal, _settle_steering) it uses.


cdef double _track_curvature(const MapC* m, Py_ssize_t j) noexcept nogil:
    """Curvature (1/m) of logged track ``j`` between its first two steps: heading change over the
    distance travelled; 0 when the second step is invalid or the agent barely moves."""
    cdef Py_ssize_t T = m.track_steps
    cdef const double* s0 = &m.track_state[(j * T) * 6]
    cdef const double* s1
    cdef double ds
    if T < 2 or not m.track_valid[j * T + 1]:
        return 0.0
    s1 = &m.track_state[(j * T + 1) * 6]
    ds = sqrt((s1[0] - s0[0]) ** 2 + (s1[1] - s0[1]) ** 2)
    if ds < 0.05:
        return 0.0
    return wrap_angle(s1[3] - s0[3]) / ds

cdef void _init_from_log(Engine e, Py_ssize_t w) noexcept nogil:
    """Agents at their logged state at step 0 (algorithm 1, step 7), each with a role drawn from its
    class's mix (step 9, appendix D.2; ``InitConfig.log_roles``): replay of its track, the IDM driver
    from its logged state, the policy towards its last logged position (appendix D.5), or the planner
    (planner.pxd) from its logged state. An agent whose role cannot be had (no free slot or no usable
    goal; no lane for IDM or the planner) replays its track."""
    cdef const MapC* m = e.wmap[w]
    cdef Py_ssize_t base = w * e.max_agents, n = 0, j, T = m.track_steps, last, tt
    cdef const double* st
    cdef Agent* a
    cdef int c, role, slots = 0
    for j in range(m.n_tracks):
        if n >= e.max_agents:
            break
        if not m.track_valid[j * T]:
            continue
        c = m.track_type[j]
        a = &e.agents[base + n]
        memset(a, 0, sizeof(Agent))
        _init_agent(e, w, a, c, ROLE_LOG)
        st = &m.track_state[(j * T) * 6]
        a.x, a.y, a.z, a.heading = st[0], st[1], st[2], st[3]
        a.speed = st[4] * cos(st[3]) + st[5] * sin(st[3])
        a.length = m.track_size[3 * j]
        a.width = m.track_size[3 * j + 1]
        a.height = m.track_size[3 * j + 2]
        a.wheelbase = a.length * e.cp[c * N_CP + CP_WHEELBASE]
        a.log_index = <int>j
        a.alive = 1
        last = 0
        for tt in range(T):
            if m.track_valid[j * T + tt]:
                last = tt
        a.goal_x = m.track_state[(j * T + last) * 6]
        a.goal_y = m.track_state[(j * T + last) * 6 + 1]
        a.goal_z = m.track_state[(j * T + last) * 6 + 2]
        role = _draw_log_role(e, w, c)
        if role == LOGROLE_POLICY and slots < e.slots_per_world and _logged_goal(e, w, a, j):
            a.role = ROLE_CONTROLLED
            a.slot = slots
            a.goal_hidden = 1 if rng_uniform(&e.rngs[w]) < e.goal_dropout[c] else 0
            _settle_steering(e, a, _track_curvature(m, j))
            slots += 1
        elif role == LOGROLE_IDM and c <= CLS_BUS:
            _become_idm(e, w, a, idm_draw_mode(&e.rngs[w], &e.idmp), True)
        elif role == LOGROLE_PLANNER and c <= CLS_BUS:
            # The IDM hand-over (with a driver mode: the planner tracks its plans with that mode's
            # IDM law), then planner-driven as a random-placed planner vehicle is: it plans on its
            # first step. Off every lane, or facing against it, it replays, as for the IDM role.
            if _become_idm(e, w, a, idm_draw_mode(&e.rngs[w], &e.idmp), True):
                _make_planner(e, w, n)
        n += 1
    e.n_agents[w] = <int>n

cdef int _draw_log_role(Engine e, Py_ssize_t w, int c) noexcept nogil:
    """A role of ``LOGROLE_*`` drawn by the class's weights; none is drawn when only one is possible."""
    cdef const double* wt = &e.log_role_w[c * N_LOG_ROLES]
    cdef double total = 0.0, u
    cdef int k, last = 0
    if e.log_role_only[c] >= 0:
        return e.log_role_only[c]
    for k in range(N_LOG_ROLES):
        total += wt[k]
    u = rng_uniform(&e.rngs[w]) * total
    for k in range(N_LOG_ROLES):
        if wt[k] > 0:
            if u < wt[k]:
                return k
            last = k
        u -= wt[k]
    return last  # rounding left u at the total: the last role with weight

cdef bint _logged_goal(Engine e, Py_ssize_t w, Agent* a, Py_ssize_t j) noexcept nogil:
    """Whether ``a``, starting track ``j``, has a goal worth policy control (appendix D.2): its last
    logged position (already in ``goal_*``) when at least ``goal_min_forward`` away and reachable
    along the lane graph (D.5, ``RoadMap.track_goal_reachable``); when far but unreachable, a goal
    sampled ahead along the lane graph as random placement does. False (``goal_*`` left logged): no
    such goal."""
    cdef double gx = a.goal_x, gy = a.goal_y, gz = a.goal_z
    if (a.goal_x - a.x) ** 2 + (a.goal_y - a.y) ** 2 < e.goal_fwd * e.goal_fwd:
        return False
    if e.wreach[w][j]:
        return True
    if _assign_goal(e, w, a):
        return True
    a.goal_x, a.goal_y, a.goal_z = gx, gy, gz
    return False
