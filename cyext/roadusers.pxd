# cython: language_level=3
"""Rule-based road users (TerraZero section 4.4): reactive IDM vehicles, the IDM law and its step.

An IDM vehicle follows a route over the lane graph (a random successor is chosen as it enters each
lane; ``route.pxd``): the Intelligent Driver Model sets its acceleration, pure pursuit its steering.
``idm_step`` is a fixed sequence of named steps:

1. ``_leader_gap``: the vehicle sweeps its body box along its predicted poses; its leader is the
   first agent or static obstacle whose box the sweep touches, the gap the travel until contact. A
   long vehicle about to turn also checks its sweep against where moving neighbours will be over
   the next three seconds (``_future_contact``).
2. ``_stop_constraints``: the stop bar ahead acts as a stopped leader when its line shows red or
   yellow (unless too close to stop on yellow) or has a stop sign the vehicle has not cleared, and
   at a cleared stop sign while cross traffic approaches (gap acceptance).
3. ``_yield_constraint``: the entry of a zone (an intersection lane, or a curve) acts as a stopped
   leader while another vehicle has the right of way over a conflicting movement, while an agent at
   rest inside would stop the vehicle there, or while the intersection's exit has no room for it
   (``yielding.pxd``).
   ``pedestrian_yield``: the point where a walking pedestrian's path meets the vehicle's acts as a
   stopped leader (pedestrians have the right of way, on a crosswalk or not).
4. ``_curve_limit``: the desired speed is lowered ahead of curves so the lateral acceleration stays
   comfortable.
5. ``idm_accel`` (``idm_law.pxd``): the IDM law on the nearest constraint; then ``_integrate``: a
   kinematic bicycle about the rear axle along the first predicted arc, and ``_advance_route`` along
   the lane graph.
6. ``lane_change`` (``lanechange.pxd``, when enabled): when that nearest constraint was a static
   actor close ahead, outside intersections, the vehicle moves to a free adjacent same-direction
   lane (nothing alongside or at rest ahead there; MOBIL's safety criterion on the new follower),
   its route redrawn from there; pure pursuit, with a longer lookahead, carries it across, and a
   cooldown keeps it from changing back at once. Without a free lane it stays behind the obstacle.

Behaviour modes rescale the IDM gains and may be redrawn with a small probability each step.
"""

from libc.math cimport sqrt, cos, sin, atan, fabs
from common cimport Agent, MapC, SIG_RED, SIG_YELLOW, STOP_CLEARED, ROLE_IDM, SLC_SIGNAL, SLC_STOP_SIGN
from scene cimport lane_length
from geometry cimport wrap_angle, obb_overlap_cs
from rng cimport Rng, rng_uniform, rng_int
from dynamics cimport clip
from route cimport (Route, Sweep, Cursor, _route_next, _route_build, _cursor_start, _route_xy, _kappa_max,
                    _predict, _project)
from idm_law cimport idm_accel
from neighbours cimport AgentGrid, nbr_box
from lanechange cimport LaneChangeParams, lane_change
from yielding cimport (LONG_VEHICLE, YIELD_HORIZON_D, _curve, _committed, _must_yield, _exit_blocked,
                       pedestrian_yield)


cdef enum:
    FUTURE_STEPS = 6           # half-second steps of a long vehicle's look at where others will be
    FUTURE_DECEL = 3           # ... assuming they brake this hard (m/s^2)


ctypedef struct IdmParams:
    double v0_scale[3]         # desired speed as a fraction of the lane's limit, per mode
    double time_headway[3]     # T (s)
    double max_accel[3]        # a (m/s^2)
    double comfort_decel[3]    # b (m/s^2)
    double min_gap[3]          # s0 (m)
    double delta               # acceleration exponent
    double lookahead           # leader search distance (m)
    double reroll_prob         # per-step probability of redrawing the behaviour mode
    double max_decel           # braking clip (m/s^2)
    double curve_accel         # lateral acceleration the desired speed allows in curves (m/s^2)
    double side_margin         # lateral clearance the body sweep keeps from other agents (m)
    double ped_horizon         # seconds of a walking pedestrian's path the vehicle keeps clear of (0: off)
    double mode_cdf[3]         # cumulative weights of the behaviour modes (RoadUsersConfig.idm_modes)
    bint mode_uniform          # equal weights: one uniform integer draw
    LaneChangeParams lc        # changing lane around an obstacle at rest (lanechange.pxd)


ctypedef struct Leader:
    # The nearest constraint ahead: an agent, or a stopping point acting as a stopped leader.
    double gap                 # travel until it (m); 1e9 when there is none
    double speed               # its speed along the vehicle's path (m/s)
    bint slow                  # the nearest agent leader is (nearly) at rest
    Py_ssize_t who             # index of the agent that is the nearest constraint; -1 for a stopping point


cdef inline int idm_draw_mode(Rng* rng, const IdmParams* p) noexcept nogil:
    """A behaviour mode drawn from the configured mix."""
    cdef double u
    if p.mode_uniform:
        return <int>rng_int(rng, 3)
    u = rng_uniform(rng)
    return 0 if u < p.mode_cdf[0] else (1 if u < p.mode_cdf[1] else 2)


cdef inline int _sweep_hit(const Sweep* sw, double ahl, double ahw, Agent* b, double reach) noexcept nogil:
    """The first predicted pose (1...) at which the body (half extents ahl, ahw) overlaps b's box, or -1;
    ``reach``: the sum of the two half diagonals (a cheap reject)."""
    cdef int k
    cdef double dx, dy
    for k in range(1, sw.n + 1):
        dx = b.x - sw.x[k]
        dy = b.y - sw.y[k]
        if dx * dx + dy * dy > reach * reach:
            continue
        if obb_overlap_cs(sw.x[k], sw.y[k], sw.c[k], sw.s[k], ahl, ahw, b.x, b.y, b.cos_h, b.sin_h,
                          0.5 * b.length, 0.5 * b.width):
            return k
    return -1


cdef inline void _pose_ahead(const MapC* m, const Route* rb, Cursor* cur, Agent* b, double dist, double* bx,
                             double* by, double* bc, double* bs) noexcept nogil:
    """Where b's box will be after ``dist`` more metres (not decreasing between calls with one
    cursor): along its route for a rule-based vehicle, straight on for other agents."""
    cdef double n
    if b.role == ROLE_IDM:
        _route_xy(m, rb, cur, b.lane_s + dist, bx, by)
        bc[0] = m.lane_pts[3 * cur.q + 3] - m.lane_pts[3 * cur.q]
        bs[0] = m.lane_pts[3 * cur.q + 4] - m.lane_pts[3 * cur.q + 1]
        n = sqrt(bc[0] * bc[0] + bs[0] * bs[0])
        if n < 1e-9:
            bc[0], bs[0] = b.cos_h, b.sin_h
        else:
            bc[0] /= n
            bs[0] /= n
    else:
        bx[0] = b.x + dist * b.cos_h
        by[0] = b.y + dist * b.sin_h
        bc[0], bs[0] = b.cos_h, b.sin_h


cdef inline double _future_contact(const MapC* m, Agent* a, const Sweep* sw, Agent* b, double ahw,
                                   double* lead_v) noexcept nogil:
    """Travel of a long vehicle a, at its present speed, until its predicted body meets moving b
    where b will be by then, within FUTURE_STEPS half-second steps; 1e9 if they do not meet. b is
    taken both to keep its speed and to brake at FUTURE_DECEL (for a curve or its own leader). A
    vehicle that cannot keep its body in its lane through a curve so holds back rather than swing
    into a neighbour it is catching up with, or that is closing in on its path."""
    cdef Route rb
    cdef Cursor cur[2]
    cdef int j, k = 0, variant
    cdef double va = a.speed, vb = b.speed, tau, d, db, bx, by, bc, bs
    if b.role == ROLE_IDM:
        _route_build(m, b, &rb)
        _cursor_start(m, &rb, &cur[0])
        _cursor_start(m, &rb, &cur[1])
    for j in range(1, FUTURE_STEPS + 1):
        tau = 0.5 * j
        d = va * tau
        while k < sw.n and sw.d[k] < d:
            k += 1
        if sw.d[k] < d:
            break  # past the prediction
        for variant in range(2):
            if variant == 0:
                db = vb * tau
            elif tau < vb / FUTURE_DECEL:
                db = vb * tau - 0.5 * FUTURE_DECEL * tau * tau
            else:
                db = 0.5 * vb * vb / FUTURE_DECEL
            _pose_ahead(m, &rb, &cur[variant], b, db, &bx, &by, &bc, &bs)
            if obb_overlap_cs(sw.x[k], sw.y[k], sw.c[k], sw.s[k], 0.5 * a.length, ahw, bx, by, bc, bs,
                              0.5 * b.length, 0.5 * b.width):
                lead_v[0] = vb * (bc * sw.c[k] + bs * sw.s[k])
                return sw.d[k - 1] if k > 0 else 0.0
    return 1e9


cdef inline void _stop_at(Leader* ld, double dist) noexcept nogil:
    """A stopping point ``dist`` metres ahead becomes the leader when it is nearer."""
    if dist < ld.gap:
        ld.gap = dist if dist > 0.05 else 0.05
        ld.speed = 0.0
        ld.who = -1


cdef inline void _leader_gap(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const Sweep* sw,
                             const IdmParams* p, double v, Leader* ld, AgentGrid* grid) noexcept nogil:
    """Leader: the first agent the body, swept along the predicted poses, would touch (of two at
    the same distance, the lower index). The sweep keeps a lateral margin except from an agent
    already within it (so two vehicles side by side in adjacent lanes do not hold each other). The
    candidates come from ``grid`` (``neighbours.nbr_box`` over the sweep's box grown by the largest
    reach) where it answers, else from every agent of the world."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j, q, cnt = -1
    cdef int k, hit
    cdef double dx, dy, g, w, ahl = 0.5 * a.length, ahw, bhl, bhw, ra, rb, near
    cdef double xmin = sw.xmin, xmax = sw.xmax, ymin = sw.ymin, ymax = sw.ymax
    cdef bint turning
    ra = sqrt(ahl * ahl + (0.5 * a.width + p.side_margin) * (0.5 * a.width + p.side_margin))
    # A long vehicle turning within the next FUTURE_STEPS / 2 seconds may sweep over its neighbours'
    # lanes: it also looks at where the others will be.
    turning = False
    if a.length > LONG_VEHICLE and v > 0.5:
        for k in range(1, sw.n + 1):
            if sw.d[k] > v * 0.5 * FUTURE_STEPS + a.length:
                break
            if fabs(sw.k[k]) > 0.01:
                turning = True
                break
    if not turning and grid != NULL:
        # what the box test below keeps lies within the largest reach of the sweep's box
        cnt = nbr_box(grid, agents, n, xmin - ra - grid.reach, ymin - ra - grid.reach, xmax + ra + grid.reach,
                      ymax + ra + grid.reach)
    for q in range(n if cnt < 0 else cnt):
        j = q if cnt < 0 else grid.cand[q]
        if j == i:
            continue
        b = &agents[j]
        if not b.alive:
            continue
        bhl = 0.5 * b.length
        bhw = 0.5 * b.width
        if not turning:
            # The box test below with bhl + bhw (never less than b's half diagonal) in place of rb:
            # what it rejects the exact test would reject too, without the square root.
            rb = bhl + bhw
            if b.x < xmin - ra - rb or b.x > xmax + ra + rb or b.y < ymin - ra - rb or b.y > ymax + ra + rb:
                continue
        rb = sqrt(bhl * bhl + bhw * bhw)
        if turning and b.speed > 0.5:
            dx = b.x - a.x
            dy = b.y - a.y
            g = (v + b.speed) * 0.5 * FUTURE_STEPS + ra + rb
            if dx * dx + dy * dy < g * g and (dx * a.cos_h + dy * a.sin_h > 0 or
                                              fabs(-dx * a.sin_h + dy * a.cos_h) > 0.5 * (a.width + b.width)):
                g = _future_contact(m, a, sw, b, 0.5 * a.width + p.side_margin, &w)  # not a follower in our lane
                if g < ld.gap:
                    ld.gap = g
                    ld.speed = w
                    ld.slow = False
                    ld.who = j
        if b.x < xmin - ra - rb or b.x > xmax + ra + rb or b.y < ymin - ra - rb or b.y > ymax + ra + rb:
            continue
        ahw = 0.5 * a.width + p.side_margin
        dx = b.x - a.x
        dy = b.y - a.y
        if dx * dx + dy * dy <= (ra + rb) * (ra + rb) and \
                obb_overlap_cs(sw.x[0], sw.y[0], sw.c[0], sw.s[0], ahl, ahw, b.x, b.y, b.cos_h, b.sin_h, bhl, bhw):
            ahw = 0.5 * a.width
            if obb_overlap_cs(sw.x[0], sw.y[0], sw.c[0], sw.s[0], ahl, ahw, b.x, b.y, b.cos_h, b.sin_h, bhl, bhw):
                continue  # already in contact: do not hold on to it
        hit = _sweep_hit(sw, ahl, ahw, b, ra + rb)
        if hit > 0 and v < 0.5 and b.speed < 0.5 and ahw > 0.5 * a.width:
            # Both at rest: edge past with no margin rather than wait for each other for ever.
            hit = _sweep_hit(sw, ahl, 0.5 * a.width, b, ra + rb)
        if hit < 0:
            continue
        # Travel until contact: to the last free pose, plus the free distance ahead of the front
        # there along its heading (at most the next pose).
        k = hit - 1
        near = (b.x - sw.x[k]) * sw.c[k] + (b.y - sw.y[k]) * sw.s[k] - ahl \
            - bhl * fabs(b.cos_h * sw.c[k] + b.sin_h * sw.s[k]) - bhw * fabs(b.cos_h * sw.s[k] - b.sin_h * sw.c[k])
        g = sw.d[k] + clip(near, 0.0, sw.d[hit] - sw.d[k])
        if g < ld.gap or (g == ld.gap and j < ld.who):
            ld.gap = g
            ld.speed = b.speed * (b.cos_h * sw.c[hit] + b.sin_h * sw.s[hit])
            ld.slow = fabs(b.speed) < 1.0
            ld.who = j


cdef inline void _stop_constraints(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i,
                                   const unsigned char* sl_state, double v, double bcomf, double dist_bar,
                                   Leader* ld, AgentGrid* grid) noexcept nogil:
    """The stop bar ending the lane (``dist_bar`` metres from the front) on red, on yellow when there
    is room to stop, or with an uncleared stop sign; and gap acceptance at a cleared stop sign: wait
    at the bar while another vehicle approaches within 30 m with us in front of it (the major road
    has priority)."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j, q, cnt = -1
    cdef int sl = m.lane_stop_line[a.lane]
    cdef double dx, dy, g
    if sl < 0:
        return
    if dist_bar > -0.5 and (
            (m.sl_control[sl] == SLC_SIGNAL and (sl_state[sl] == SIG_RED or
                                        (sl_state[sl] == SIG_YELLOW and dist_bar > v * v / (2 * bcomf)))) or
            (m.sl_control[sl] == SLC_STOP_SIGN and a.stop_state != STOP_CLEARED)):
        _stop_at(ld, dist_bar)
    if m.sl_control[sl] == SLC_STOP_SIGN and a.stop_state == STOP_CLEARED and dist_bar < 3.0:
        if grid != NULL:  # what the test below keeps lies within hypot(30, 8) < 31.1 m
            cnt = nbr_box(grid, agents, n, a.x - 31.1, a.y - 31.1, a.x + 31.1, a.y + 31.1)
        for q in range(n if cnt < 0 else cnt):
            j = q if cnt < 0 else grid.cand[q]
            b = &agents[j]
            if j == i or not b.alive or b.speed < 0.5:
                continue
            dx = a.x - b.x
            dy = a.y - b.y
            g = dx * b.cos_h + dy * b.sin_h
            if (0 < g < 30.0 and fabs(-dx * b.sin_h + dy * b.cos_h) < 8.0
                    and b.cos_h * a.cos_h + b.sin_h * a.sin_h < 0.7):
                _stop_at(ld, dist_bar)
                break


cdef inline void _yield_constraint(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i,
                                   const unsigned char* sl_state, const IdmParams* p, const double* cp_all,
                                   const Sweep* sw, double v, double bcomf, double s0, double dist_bar,
                                   Leader* ld) noexcept nogil:
    """Entry of an intersection lane or of a curve: wait at the lane end while another vehicle has
    the right of way, or while the intersection's exit has no room (do not block the box). Checked
    while the vehicle can still stop."""
    cdef Agent* a = &agents[i]
    cdef double g
    if a.route_lane >= 0 and m.lane_inter[a.lane] < 0 and dist_bar > -0.5 and \
            dist_bar < v * v / (2.0 * bcomf) + YIELD_HORIZON_D and \
            (m.lane_inter[a.route_lane] >= 0 or (not _curve(m, a.lane) and _curve(m, a.route_lane))):
        g = _must_yield(m, agents, n, i, sl_state, p.comfort_decel, p.side_margin, cp_all, sw)
        if g < 0 and not _committed(dist_bar, v) and (
                (ld.slow and dist_bar < ld.gap < dist_bar + lane_length(m, a.route_lane) + a.length) or
                (m.lane_inter[a.route_lane] >= 0 and _exit_blocked(m, agents, n, i, a.length + s0))):
            g = dist_bar  # an agent at rest in the zone would stop us inside, or the exit has no room
        if g >= 0:
            _stop_at(ld, g)


cdef inline double _curve_limit(const Sweep* sw, double curve_accel, double v, double* v0) noexcept nogil:
    """Curves: the desired speed ``v0`` is at most the curve speed (lateral acceleration
    ``curve_accel``) in the curve, and the vehicle brakes uniformly for each curve ahead to reach its
    speed there. Returns that braking (m/s^2, negative), 1e9 when no curve ahead needs it."""
    cdef double a_curve = 1e9, v_curve, g
    cdef int k
    for k in range(1, sw.n + 1):
        if sw.k[k] * sw.k[k] * 1e4 > 1.0:  # radius under 100 m
            v_curve = sqrt(curve_accel / fabs(sw.k[k]))
            if sw.d[k - 1] < 1.5:
                if v_curve < v0[0]:
                    v0[0] = v_curve
            elif v > v_curve:
                g = (v_curve * v_curve - v * v) / (2.0 * sw.d[k - 1])
                if g < a_curve:
                    a_curve = g
    return a_curve


cdef inline double _integrate(Agent* a, double v, double v1, double kappa, double dt) noexcept nogil:
    """Kinematic bicycle about the rear axle from speed ``v`` to ``v1`` along an arc of curvature
    ``kappa`` for ``dt`` seconds: new pose, steering, yaw rate, accelerations. Returns the mean speed."""
    cdef double lr = 0.5 * a.wheelbase, v_mid = 0.5 * (v + v1), w = v_mid * kappa, h0, h1, xr, yr
    h0 = a.heading
    h1 = h0 + w * dt
    xr = a.x - lr * a.cos_h
    yr = a.y - lr * a.sin_h
    if fabs(w * dt) > 1e-9:
        xr += v_mid / w * (sin(h1) - sin(h0))
        yr += v_mid / w * (cos(h0) - cos(h1))
    else:
        xr += v_mid * dt * a.cos_h
        yr += v_mid * dt * a.sin_h
    a.heading = wrap_angle(h1)
    a.cos_h = cos(a.heading)
    a.sin_h = sin(a.heading)
    a.x = xr + lr * a.cos_h
    a.y = yr + lr * a.sin_h
    a.steer = atan(a.wheelbase * kappa)
    a.yaw_rate = w
    a.v_lat = w * lr
    a.a_long = (v1 - v) / dt
    a.a_lat = v_mid * w
    a.speed = v1
    return v_mid


cdef inline void _advance_route(const MapC* m, Agent* a, Rng* rng, double L, double travel) noexcept nogil:
    """Advance along the route by about ``travel`` metres: the lane position nearest the new centre,
    entering the chosen next lane (and choosing the one after it) past the end of a lane of length L."""
    a.lane_s = _project(m, a.lane, a.lane_s + travel, a.x, a.y)
    if a.lane_s >= L:
        if a.route_lane < 0:
            a.route_lane = _route_next(m, rng, a.lane)
        if a.route_lane >= 0:
            a.lane_s = _project(m, a.route_lane, a.lane_s - L, a.x, a.y)
            if a.lane_s < 0:
                a.lane_s = 0.0
            a.lane = a.route_lane
            a.route_lane = _route_next(m, rng, a.lane)
        else:
            a.lane_s = L
    elif a.lane_s < 0:
        a.lane_s = 0.0


cdef inline double idm_desired_accel(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i,
                                     const double* cp_all, const IdmParams* p, const unsigned char* sl_state,
                                     double v0_factor, double lat_off, double v0_cap, Sweep* sw, Leader* ld,
                                     double* v0_out, AgentGrid* grid=NULL) noexcept nogil:
    """Steps 1-5 of ``idm_step`` up to the law: the predicted sweep along the decided route (``a.lane``,
    ``a.lane_s``, ``a.route_lane``), the nearest constraint ahead (leader, stop bar, yielding,
    pedestrians) in ``ld``, the curve limit, and the IDM acceleration on them within the braking clip
    (m/s^2). ``v0_cap`` caps the desired speed (m/s; the reference driver's arrival at its goal, 1e9
    for none); the desired speed used is left in ``v0_out``. Reads the agents, changes none."""
    cdef Agent* a = &agents[i]
    cdef int mode = a.idm_mode
    cdef double v = a.speed if a.speed > 0 else 0.0, v0, T, amax, bcomf, s0, acc, L, dist_bar, a_curve
    ld.gap = 1e9
    ld.speed = 0.0
    ld.slow = False
    ld.who = -1
    v0 = (p.v0_scale[mode] if v0_factor < 0 else v0_factor) * m.lane_speed[a.lane]
    if v0_cap < v0:
        v0 = v0_cap
    T = p.time_headway[mode]
    amax = p.max_accel[mode]
    bcomf = p.comfort_decel[mode]
    s0 = p.min_gap[mode]
    _predict(m, a, _kappa_max(a, cp_all), p.lookahead, sw, lat_off)
    _leader_gap(m, agents, n, i, sw, p, v, ld, grid)
    L = lane_length(m, a.lane)
    dist_bar = L - a.lane_s - 0.5 * a.length
    _stop_constraints(m, agents, n, i, sl_state, v, bcomf, dist_bar, ld, grid)
    _yield_constraint(m, agents, n, i, sl_state, p, cp_all, sw, v, bcomf, s0, dist_bar, ld)
    _stop_at(ld, pedestrian_yield(agents, n, i, sw, p.ped_horizon, p.side_margin, grid))
    a_curve = _curve_limit(sw, p.curve_accel, v, &v0)
    acc = idm_accel(v, v0, ld.gap, ld.speed, T, amax, bcomf, s0, p.delta)
    if a_curve < acc:
        acc = a_curve
    v0_out[0] = v0
    return clip(acc, -p.max_decel, amax)


cdef inline void idm_step(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp_all,
                          const IdmParams* p, const unsigned char* sl_state, Rng* rng, double dt,
                          double v0_factor=-1.0, double lat_off=0.0, AgentGrid* grid=NULL) noexcept nogil:
    """One step of IDM vehicle ``agents[i]`` (the named steps of this module's header, in order). A
    planner vehicle (``planner.pxd``) passes the target speed it tracks as ``v0_factor`` (a fraction
    of the lane's limit, replacing its mode's ``v0_scale``; negative for an IDM vehicle) and its
    lateral offset from the lane centre ``lat_off`` (m, left positive); its lane changes are the
    planner's, so the rule-based change is not considered for it."""
    cdef Agent* a = &agents[i]
    cdef double v = a.speed if a.speed > 0 else 0.0, v0, acc, v1
    cdef int mode
    cdef Leader ld
    cdef Sweep sw
    if rng_uniform(rng) < p.reroll_prob:
        a.idm_mode = idm_draw_mode(rng, p)
    mode = a.idm_mode
    if a.route_lane < 0:
        a.route_lane = _route_next(m, rng, a.lane)
    acc = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, v0_factor, lat_off, 1e9, &sw, &ld, &v0, grid)
    v1 = v + acc * dt
    if v1 < 0:
        v1 = 0.0
    _advance_route(m, a, rng, lane_length(m, a.lane), _integrate(a, v, v1, sw.k[1] if sw.n >= 1 else 0.0, dt) * dt)
    if p.lc.enabled or v0_factor >= 0:  # a planner vehicle's crossing ends as a lane change's does
        lane_change(m, agents, n, i, &p.lc, ld.who if v0_factor < 0 else -1, ld.gap, v0, p.time_headway[mode],
                    p.max_accel[mode], p.comfort_decel[mode], p.min_gap[mode], p.delta, rng, dt, lat_off, grid)
