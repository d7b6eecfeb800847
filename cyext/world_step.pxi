# One step of one world, as module-level functions of _engine.pyx taking the engine (they run
# without the GIL, one world per call, possibly on several threads at once). ``_step_world`` is a
# fixed sequence of named calls: open the slots -> signals tick -> motion (class dynamics for
# controlled agents, IDM for rule-based vehicles, log replay) -> rule-based pedestrians (arrivals,
# ORCA, leaving; pedestrians.pxd) -> agent grid -> judge each controlled
# agent (rule checks from rules.pxd and traffic.pxd, its reward from rewards.pxd, counters and
# consequences) -> truncation at the horizon -> observations (observe.pxd). Each helper touches
# only world ``w``'s agents, generator, scratch and buffer rows, which is what makes worlds
# independent of the thread that steps them.

cdef void _step_world(Engine e, Py_ssize_t w) noexcept nogil:
    """Advance world ``w`` by dt, in a fixed order (see the header of this file)."""
    cdef SigState st
    cdef AgentGrid grid
    _sig_state(e, w, &st)
    # A world past its horizon has ended: its slots are no longer valid until it is reset.
    cdef bint over = e.t[w] >= e.horizon
    e.t[w] += 1
    _open_slots(e, w, over)
    signals_tick(e.wmap[w], &e.sigp, &st, &e.rngs[w], e.dt)
    if e.sig_log[w]:
        signals_replay(e.wmap[w], &st, e.t[w])
    _move_agents(e, w, over, &st)
    if not over:
        pedestrians_step(e.wmap[w], &e.agents[w * e.max_agents], &e.ped[w * e.max_agents], &e.n_agents[w],
                         e.max_agents, &e.pedp, &e.ped_rates[2 * w], &e.cp[CLS_PEDESTRIAN * N_CP], &e.rngs[w], e.dt,
                         e.z_gate, &e.ped_stats[w * N_PED_STATS])
    grid_build(&e.agents[w * e.max_agents], e.n_agents[w], &e.grid_head[w * AGENT_BUCKETS],
               &e.grid_next[w * e.max_agents], e.agent_cell)
    # one neighbour grid for judging and observing: no agent moves between the two
    _nbr_grid(e, w, &grid)
    _judge_agents(e, w, over, &st, &grid)
    _truncate_at_horizon(e, w)
    _observe_world(e, w, &grid)

cdef void _open_slots(Engine e, Py_ssize_t w, bint over) noexcept nogil:
    """Clear the slots' step outputs; a slot is valid this step when it holds a live controlled
    agent and the world has not ended."""
    cdef Py_ssize_t K = e.slots_per_world, base = w * e.max_agents, k, r, i
    for k in range(K):
        r = w * K + k
        e.rew[r] = 0
        memset(&e.rterms[r * N_REWARD_TERMS], 0, N_REWARD_TERMS * sizeof(double))
        e.sevt[r] = 0
        e.term[r] = 0
        e.trunc[r] = 0
        i = e.slot_of[r]
        e.valid_p[r] = 1 if (not over and i >= 0 and e.agents[base + i].alive and
                                e.agents[base + i].role == ROLE_CONTROLLED) else 0

cdef void _move_agents(Engine e, Py_ssize_t w, bint over, const SigState* st) noexcept nogil:
    """Controlled agents integrate their action through their class dynamics, IDM vehicles drive
    their route (and pass through the traffic rules, which track their stop signs), logged agents
    replay their track and leave when it ends."""
    cdef Py_ssize_t K = e.slots_per_world, base = w * e.max_agents, i, n = e.n_agents[w]
    cdef const MapC* m = e.wmap[w]
    cdef int T = e.t[w], c, act, nl, prev_lane
    cdef const double* trk
    cdef Agent* a
    cdef StepEvents ev
    cdef AgentGrid grid
    _nbr_grid(e, w, &grid)
    for i in range(n):
        a = &e.agents[base + i]
        if not a.alive:
            continue
        if a.role == ROLE_CONTROLLED:
            if over:
                continue
            front_centre(a, &a.front_x, &a.front_y)
            if a.ego_driver:
                _ego_drive(e, w, i, st, &grid)
            else:
                c = a.cls
                act = e.act[w * K + a.slot]
                nl = e.n_lat[c]
                step_dynamics(a, &e.cp[c * N_CP], a.dyn, e.grid_long[c * MAX_GRID + act // nl],
                              e.grid_lat[c * MAX_GRID + act % nl], e.dt)
        elif a.role == ROLE_IDM:
            front_centre(a, &a.front_x, &a.front_y)
            prev_lane = a.lane
            if e.plan[base + i].on:
                _planner_drive(e, w, i, st, &grid)
            else:
                idm_step(m, &e.agents[base], n, i, e.cp, &e.idmp, st.sl, &e.rngs[w], e.dt, -1.0, 0.0, &grid)
            memset(&ev, 0, sizeof(StepEvents))
            traffic_rules(m, a, prev_lane, st.sl, &e.stop_rules, &e.rngs[w], e.dt, &ev)
        elif a.role == ROLE_LOG:
            if T < m.track_steps and m.track_valid[a.log_index * m.track_steps + T]:
                trk = &m.track_state[(a.log_index * m.track_steps + T) * 6]
                a.x, a.y, a.z, a.heading = trk[0], trk[1], trk[2], trk[3]
                a.cos_h = cos(a.heading)
                a.sin_h = sin(a.heading)
                a.speed = trk[4] * a.cos_h + trk[5] * a.sin_h
            else:
                a.alive = 0
        # the later agents' queries see this one where it now is
        nbr_moved(&grid, &e.agents[base], i)


cdef inline void _nbr_grid(Engine e, Py_ssize_t w, AgentGrid* g) noexcept nogil:
    """World ``w``'s neighbour grid (neighbours.pxd) over its agents' present positions."""
    g.head = &e.nbr_head[w * NBR_BUCKETS]
    g.nxt = &e.nbr_next[w * e.max_agents]
    g.cx = &e.nbr_cx[w * e.max_agents]
    g.cy = &e.nbr_cy[w * e.max_agents]
    g.cand = &e.nbr_cand[w * e.max_agents]
    g.peds = &e.nbr_peds[w * e.max_agents]
    g.cell = NBR_CELL
    g.map_area = (e.wmap[w].xmax - e.wmap[w].xmin) * (e.wmap[w].ymax - e.wmap[w].ymin)
    g.mode = e.neighbour_mode
    nbr_start(g, &e.agents[w * e.max_agents], e.n_agents[w])

cdef void _planner_drive(Engine e, Py_ssize_t w, Py_ssize_t i, const SigState* st, AgentGrid* grid,
                         double max_factor=1e9) noexcept nogil:
    """A planner vehicle (planner.pxd): a new plan when its interval has run out, then the IDM step
    tracking the plan's target speed (at most ``max_factor`` of the lane's limit) and lateral offset."""
    cdef Py_ssize_t base = w * e.max_agents
    cdef Agent* a = &e.agents[base + i]
    cdef PlanState* ps = &e.plan[base + i]
    cdef int mode = a.idm_mode
    ps.timer -= e.dt
    if ps.timer <= 1e-9:
        ps.timer += e.planp.interval
        if ps.timer <= 1e-9:
            ps.timer = e.planp.interval
        plan_step(e.wmap[w], &e.agents[base], e.n_agents[w], i, ps, &e.planp, &e.cp[a.cls * N_CP],
                  e.idmp.time_headway[mode], e.idmp.max_accel[mode], e.idmp.comfort_decel[mode],
                  e.idmp.min_gap[mode], e.idmp.delta, e.idmp.max_decel, &e.rngs[w], grid)
    idm_step(e.wmap[w], &e.agents[base], e.n_agents[w], i, e.cp, &e.idmp, st.sl, &e.rngs[w], e.dt,
             ps.speed_factor if ps.speed_factor < max_factor else max_factor, ps.lat_off, grid)

cdef void _judge_agents(Engine e, Py_ssize_t w, bint over, const SigState* st, AgentGrid* grid) noexcept nogil:
    """Rules, reward, counters and consequences for every live controlled agent; IDM vehicles
    only record their collisions (and, when handed over from a slot, their progress)."""
    cdef Py_ssize_t base = w * e.max_agents, i
    cdef Agent* a
    cdef int ego_lane
    for i in range(e.n_agents[w]):
        a = &e.agents[base + i]
        if a.alive and a.role == ROLE_IDM:
            a.collided = collides(&e.agents[base], i, &e.grid_head[w * AGENT_BUCKETS], &e.grid_next[base],
                                  e.agent_cell, e.z_gate, 0.0)
            if a.slot >= 0 and not over:   # a controlled agent handed to the IDM driver (handover.pxi)
                _handed_progress(e, w, i)
        if a.alive and a.role == ROLE_CONTROLLED and not over:
            if a.ego_driver:
                # the rule-based law keeps the lane of its route in ``lane``; the judge's lane state
                # (the lane under the agent) is for the rules only
                ego_lane = a.lane
                _judge(e, w, i, st, grid)
                a.lane = ego_lane
            else:
                _judge(e, w, i, st, grid)

cdef void _judge(Engine e, Py_ssize_t w, Py_ssize_t i, const SigState* st, AgentGrid* grid) noexcept nogil:
    """One controlled agent: collision, lane state, off-road or incursion, wrong way, stop lines
    and signals, comfort, goal; then its reward, its counters and what the events do to it."""
    cdef Py_ssize_t base = w * e.max_agents, r
    cdef const MapC* m = e.wmap[w]
    cdef Agent* a = &e.agents[base + i]
    cdef const double* cp = &e.cp[a.cls * N_CP]
    cdef StepEvents ev
    cdef int prev_lane = a.lane
    cdef double d, dg
    cdef bint paid
    r = w * e.slots_per_world + a.slot
    memset(&ev, 0, sizeof(StepEvents))
    a.collided = collides(&e.agents[base], i, &e.grid_head[w * AGENT_BUCKETS], &e.grid_next[base],
                          e.agent_cell, e.z_gate, 0.0)
    ev.collided = a.collided
    _agent_lane_state(e, w, a)
    if a.cls == CLS_PEDESTRIAN:
        pedestrian_rules(m, a, &ev)
    else:
        vehicle_rules(m, a, e.z_gate, e.wrong_way_angle, e.offroad_tol, e.lane_max_dist, &ev)
        traffic_rules(m, a, prev_lane, st.sl, &e.stop_rules, &e.rngs[w], e.dt, &ev)
    a.n_comfort = comfort_violations(a, cp)
    ev.comfort_violations = a.n_comfort
    d = goal_distance(a)
    if e.rform.goal_progress == GOAL_PROGRESS_ROUTE:
        dg = goal_route_distance(m, a, e.lane_max_dist, e.z_gate, e.rform.route_cap, &e.lg[w])
        paid = dg >= 0 and a.prev_goal_dist >= 0
        ev.goal_progress = route_progress(a, dg, cp[CP_VMAX] * a.kin[KIN_VEL] * e.dt)
    else:
        dg = d
        paid = 1
        ev.goal_progress = goal_progress(a, d)
    if e.rform.shaping == PROGRESS_POTENTIAL and paid:
        ev.goal_progress += (1.0 - e.rform.gamma) * dg
    goal_check(a, d, &ev)
    e.rew[r] = <float>step_reward(a, &ev, cp, e.dt, m.handedness, &e.rform, &e.rterms[r * N_REWARD_TERMS])
    e.sevt[r] = _event_bits(&ev)
    count_events(&e.cnt[r * N_COUNTERS], &ev)
    episode_metrics_step(&e.em[r * N_EPISODE_METRICS], m, &e.agents[base], e.n_agents[w], i, prev_lane, st.sl,
                         &e.metp, e.z_gate, e.dt, ev.offroad_excursion, grid)
    _settle(e, w, a, r, consequence(&ev, e.conseq_collision, e.conseq_offroad, e.conseq_wrong_way,
                                     e.conseq_red_light),
                 ev.goal)
    if (e.rform.shaping == PROGRESS_POTENTIAL and ev.goal and a.alive and not a.halted and dg >= 0
            and a.prev_goal_dist >= 0):
        # the step drew a new goal: charge its distance back (rewards.pxd: PROGRESS_POTENTIAL), so the
        # step pays d_prev - gamma * d_new in all
        e.rterms[r * N_REWARD_TERMS + RT_NEW_GOAL_CHARGE] = a.rw[RW_GOAL_PROGRESS] * e.rform.gamma * (dg - a.prev_goal_dist)
        e.rew[r] += <float>e.rterms[r * N_REWARD_TERMS + RT_NEW_GOAL_CHARGE]

cdef inline int _event_bits(const StepEvents* ev) noexcept nogil:
    """The step's events as bits ``1 << EVT_*`` (``Engine.step_events``)."""
    return ((ev.goal != 0) << EVT_GOAL | (ev.collided != 0) << EVT_COLLISION | (ev.offroad != 0) << EVT_OFFROAD
            | (ev.wrong_way != 0) << EVT_WRONG_WAY | (ev.stop_line != 0) << EVT_STOP_LINE
            | (ev.red_light != 0) << EVT_RED_LIGHT | (ev.incursion != 0) << EVT_INCURSION
            | (ev.comfort_violations > 0) << EVT_COMFORT)

cdef void _agent_lane_state(Engine e, Py_ssize_t w, Agent* a) noexcept nogil:
    """The agent's lane state: with ``lane_tracking``, a vehicle's by continuity from the lane in
    ``a.lane`` (``rules.lane_state_tracked``); otherwise, and for pedestrians, the nearest centerline
    (``rules.lane_state``)."""
    if e.lane_tracking and a.cls != CLS_PEDESTRIAN:
        lane_state_tracked(e.wmap[w], a, e.lane_max_dist, e.z_gate, e.lane_align_cos, e.ego.topology_cap, &e.lg[w])
    else:
        lane_state(e.wmap[w], a, e.lane_max_dist, e.z_gate, e.lane_align_cos)

cdef void _settle(Engine e, Py_ssize_t w, Agent* a, Py_ssize_t r, int outcome, bint goal) noexcept nogil:
    """Apply a consequence (``rules.consequence``) or, failing one that removes the agent, the goal
    behaviour: a new goal (``goal_behavior`` 0) or a halt that ends the slot's episode."""
    if outcome == CONSEQ_STOP:
        stop_in_place(a)
    if outcome == CONSEQ_REMOVE:
        a.alive = 0
        e.term[r] = 1
        e.nact[r] = 0
    elif goal:
        if e.goal_behavior == 0 and _assign_goal(e, w, a):
            _progress_start(e, w, a)
        else:
            a.halted = 1
            a.role = ROLE_STATIC
            e.nact[r] = 0
            a.speed = 0.0
            a.a_long = 0.0
            a.a_lat = 0.0
            e.term[r] = 1

cdef void _truncate_at_horizon(Engine e, Py_ssize_t w) noexcept nogil:
    """At the horizon every slot still valid and not terminated is truncated."""
    cdef Py_ssize_t K = e.slots_per_world, k, r
    if e.t[w] >= e.horizon:
        for k in range(K):
            r = w * K + k
            if e.valid_p[r] and not e.term[r]:
                e.trunc[r] = 1
                e.nact[r] = 0

cdef void _observe_world(Engine e, Py_ssize_t w, AgentGrid* grid) noexcept nogil:
    cdef Py_ssize_t K = e.slots_per_world, base = w * e.max_agents, k, r, i
    cdef const MapC* m = e.wmap[w]
    cdef ObsOut out
    cdef Agent* a
    cdef bint drop
    cdef SigState st
    _sig_state(e, w, &st)
    cdef double* tr_d2 = e.tr_d2
    cdef int* tr_idx = e.tr_idx
    out.f = e.obs_f
    out.h = e.obs_h
    out.dim = e.obs_dim
    out.noise_std = e.noise_std
    out.noise_clip = e.noise_clip
    out.rng = &e.rngs[w]
    for k in range(K):
        r = w * K + k
        i = e.slot_of[r]
        if i < 0 or not e.valid_p[r]:
            continue
        a = &e.agents[base + i]
        drop = e.state_dropout > 0 and rng_uniform(&e.rngs[w]) < e.state_dropout
        write_ego(&out, r * e.obs_dim, &e.ego, a, drop, m, &e.lg[w], st.sl)
        if e.partners.max_n > 0:
            e.prev_np[r] = write_partners(&out, r * e.obs_dim, &e.partners, &e.agents[base],
                                             e.n_agents[w], i, &e.d2buf[base], &e.idxbuf[base],
                                             e.prev_np[r], grid)
        if e.road.max_n > 0:
            e.prev_nr[r] = write_road(&out, r * e.obs_dim, &e.road, &m.obs, a, e.prev_nr[r])
        if e.traffic.max_n > 0:
            e.prev_nt[r] = write_traffic(&out, r * e.obs_dim, &e.traffic, m, a, st.sl,
                                            tr_d2 + w * e.s_cap, tr_idx + w * e.s_cap, e.prev_nt[r],
                                            st.head, e.lt_d2 + w * e.g_cap, e.lt_idx + w * e.g_cap)


cdef void _progress_start(Engine e, Py_ssize_t w, Agent* a) noexcept nogil:
    """The goal-progress term's starting distance for a new goal (after ``lane_state``): straight-line
    (EUCLIDEAN) or along the lane graph (ROUTE, negative while unknown; ``rewards.route_progress``)."""
    if e.rform.goal_progress == GOAL_PROGRESS_ROUTE:
        a.prev_goal_dist = goal_route_distance(e.wmap[w], a, e.lane_max_dist, e.z_gate, e.rform.route_cap,
                                               &e.lg[w])
    else:
        a.prev_goal_dist = goal_distance(a)
