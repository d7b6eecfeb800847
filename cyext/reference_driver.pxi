# The reference driver's entry point (``Engine.reference_actions``), as module-level functions of
# _engine.pyx taking the engine: checks its settings, then, without the GIL and world by world (worlds
# are independent, as in a step), writes the action ``reference.pxd`` chooses for every slot that
# reads one. The law itself lives in ``reference.pxd``; nothing here changes the engine's state.

_REFERENCE_SETTINGS = {
    # name: (default, lower, upper, unit)
    "preview": (0.3, 0.0, 3.0, "s"),
    "goal_speed": (2.0, 0.0, 20.0, "m/s"),
    "goal_decel": (1.0, 0.1, 10.0, "m/s^2"),
    "action_price": (0.05, 0.0, 100.0, ""),
    "comfort_price": (100.0, 0.0, 1000.0, ""),
    "walk_speed": (1.2, 0.0, 3.0, "m/s"),
    "lane_angle": (0.6, 0.05, 3.15, "rad"),
    "horizon": (2.5, 0.1, 10.0, "s"),
    "curve_accel": (2.0, 0.1, 10.0, "m/s^2"),
    "curve_full_radius": (25.0, 0.0, 200.0, "m (bends tighter than this allow curve_accel x radius / it; 0: off)"),
    "turn_in": (3.0, 0.1, 50.0, "m"),
    "accel_tau": (0.5, 0.0, 5.0, "s"),
    "steer_tolerance": (0.05, 0.0, 0.5, "rad"),
    "passing": (1.0, 0.0, 1.0, "(1: pass obstacles at rest and change to the goal's lane)"),
    "pass_distance": (30.0, 1.0, 200.0, "m"),
    "pass_time": (2.0, 0.0, 60.0, "s"),
    "pass_lookahead": (10.0, 0.0, 50.0, "m"),
    "pass_room": (6.0, 0.0, 30.0, "m"),
    "swept_path": (1.5, 0.0, 3.0, "m (largest offset a box of 7 m or more takes to keep its sweep on the road, a shorter "
                   "one in proportion; 0: off)"),
    "swept_margin": (0.2, 0.0, 1.0, "m (room the predicted boxes keep from the road edges, for tracking error)"),
}


def _reference_settings(kwargs):
    """The driver's settings with defaults, each a finite number within its bounds (else ValueError
    naming it); an unknown name raises TypeError."""
    unknown = sorted(set(kwargs) - set(_REFERENCE_SETTINGS))
    if unknown:
        raise TypeError(f"reference_actions() got unexpected keyword argument(s) {unknown} "
                        f"(known: {', '.join(_REFERENCE_SETTINGS)})")
    out = {}
    for name, (default, lo, hi, unit) in _REFERENCE_SETTINGS.items():
        v = kwargs.get(name, default)
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not _math.isfinite(float(v)) or not lo <= float(v) <= hi:
            raise ValueError(f"reference_actions: {name} must be a number in [{lo}, {hi}] {unit}, got {v!r}")
        out[name] = float(v)
    return out


cdef int _fill_reference_params(Engine e, RefParams* rp, dict settings) except -1:
    reference_params_default(rp)
    rp.preview = settings["preview"]
    rp.goal_speed = settings["goal_speed"]
    rp.goal_decel = settings["goal_decel"]
    rp.action_price = settings["action_price"]
    rp.comfort_price = settings["comfort_price"]
    rp.walk_speed = settings["walk_speed"]
    rp.lane_angle = settings["lane_angle"]
    rp.horizon = settings["horizon"]
    rp.curve_accel = settings["curve_accel"]
    rp.curve_full_radius = settings["curve_full_radius"]
    rp.turn_in = settings["turn_in"]
    rp.accel_tau = settings["accel_tau"]
    rp.steer_tolerance = settings["steer_tolerance"]
    rp.passing = settings["passing"]
    rp.pass_distance = settings["pass_distance"]
    rp.pass_time = settings["pass_time"]
    rp.pass_lookahead = settings["pass_lookahead"]
    rp.pass_room = settings["pass_room"]
    rp.swept_path = settings["swept_path"]
    rp.swept_margin = settings["swept_margin"]
    rp.lane_max_dist = e.lane_max_dist
    rp.z_gate = e.z_gate
    rp.route_cap = e.rform.route_cap
    return 0


cdef _reference_actions(Engine e, out, dict settings):
    cdef RefParams rp
    _fill_reference_params(e, &rp, settings)
    cdef Py_ssize_t W = e.num_worlds, K = e.slots_per_world
    if out is None:
        out = np.zeros(W * K, np.int32)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.int32 and out.shape == (W * K,)
              and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"out must be a writeable C-contiguous int32 array of shape ({W * K},)")
    cdef int[::1] o = out
    cdef Py_ssize_t w
    cdef int nt = e.num_threads
    if nt <= 1:
        with nogil:
            for w in range(W):
                _reference_world(e, w, &o[0], &rp)
    else:
        for w in prange(W, nogil=True, num_threads=nt, schedule="static"):
            _reference_world(e, w, &o[0], &rp)
    return out


cdef void _reference_world(Engine e, Py_ssize_t w, int* out, const RefParams* rp) noexcept nogil:
    cdef Py_ssize_t K = e.slots_per_world, k, r, i, base = w * e.max_agents
    cdef SigState st
    cdef Agent* a
    cdef int c
    _sig_state(e, w, &st)
    for k in range(K):
        r = w * K + k
        out[r] = 0
        i = e.slot_of[r]
        if i < 0 or e.nact[r] <= 0:
            continue
        a = &e.agents[base + i]
        if not a.alive or a.role != ROLE_CONTROLLED:
            continue
        c = a.cls
        out[r] = reference_action(e.wmap[w], &e.agents[base], e.n_agents[w], i, e.cp, &e.idmp, st.sl,
                                  &e.grid_long[c * MAX_GRID], &e.grid_lat[c * MAX_GRID], e.n_long[c],
                                  e.n_lat[c], &e.lg[w], rp, e.dt)


cdef _reference_plan(Engine e, int world, dict settings):
    """Per slot of ``world``: what the driver decided (``RefPlan``); -1 / NaN for slots it does not drive."""
    cdef RefParams rp
    _fill_reference_params(e, &rp, settings)
    cdef Py_ssize_t K = e.slots_per_world, k, r, i, base = world * e.max_agents
    cdef SigState st
    cdef RefPlan plan
    cdef Agent* a
    cdef int c
    names_i = ("lane", "route_lane", "sweep_points", "leader")
    names_f = ("lane_s", "accel", "steer", "v0", "gap", "lat_off")
    out = {k2: np.full(K, -1, np.int64) for k2 in names_i}
    out.update({k2: np.full(K, np.nan) for k2 in names_f})
    out["action"] = np.full(K, -1, np.int64)
    _sig_state(e, world, &st)
    for k in range(K):
        r = world * K + k
        i = e.slot_of[r]
        if i < 0 or e.nact[r] <= 0:
            continue
        a = &e.agents[base + i]
        if not a.alive or a.role != ROLE_CONTROLLED:
            continue
        c = a.cls
        plan.lane = -1
        plan.route_lane = -1
        plan.sweep_points = -1
        plan.leader = -1
        plan.lane_s = plan.accel = plan.steer = plan.v0 = plan.gap = plan.lat_off = np.nan
        out["action"][k] = reference_action(e.wmap[world], &e.agents[base], e.n_agents[world], i, e.cp, &e.idmp,
                                            st.sl, &e.grid_long[c * MAX_GRID], &e.grid_lat[c * MAX_GRID],
                                            e.n_long[c], e.n_lat[c], &e.lg[world], &rp, e.dt, &plan)
        for k2, v in zip(names_i, (plan.lane, plan.route_lane, plan.sweep_points, plan.leader)):
            out[k2][k] = v
        for k2, v in zip(names_f, (plan.lane_s, plan.accel, plan.steer, plan.v0, plan.gap, plan.lat_off)):
            out[k2][k] = v
    return out
