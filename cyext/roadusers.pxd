# cython: language_level=3
"""Rule-based road users (TerraZero section 4.4): reactive IDM vehicles.

An IDM vehicle follows a route over the lane graph (a random successor is chosen as it nears each
lane's end): the Intelligent Driver Model sets its acceleration, pure pursuit its steering. Its
leader is the nearest agent or static obstacle ahead in its path, or a virtual stopped vehicle at
the stop bar ahead when that line shows red or yellow (unless too close to stop on yellow) or has a
stop sign the vehicle has not cleared. Behaviour modes rescale the IDM gains and may be redrawn
with a small probability each step.
"""

from libc.math cimport sqrt, cos, sin, atan, atan2, fabs, pow
from common cimport (Agent, MapC, SIG_RED, SIG_YELLOW, STOP_CLEARED, CP_WHEELBASE, CP_STEERMAX,
                     CP_DMAX)
from scene cimport lane_length, lane_point
from geometry cimport wrap_angle
from rng cimport Rng, rng_uniform, rng_int
from dynamics cimport clip, _bicycle_pose


cdef enum:
    PATH_POINTS = 40           # route samples for the leader search, one every PATH_STEP_DM / 10 metres
    PATH_STEP_DM = 15


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


cdef inline int _route_next(const MapC* m, Rng* rng, int lane) noexcept nogil:
    cdef long long n = m.succ_off[lane + 1] - m.succ_off[lane]
    if n <= 0:
        return -1
    return m.succ[m.succ_off[lane] + rng_int(rng, n)]


cdef inline void _point_ahead(const MapC* m, Agent* a, double dist, double* x, double* y) noexcept nogil:
    """The route point ``dist`` metres ahead of the vehicle's lane position (through its chosen next
    lane, then that lane's first successor)."""
    cdef double s = a.lane_s + dist, z, h, L
    cdef int lane = a.lane, nxt = a.route_lane, hops
    for hops in range(3):
        L = lane_length(m, lane)
        if s <= L or nxt < 0:
            break
        s -= L
        lane = nxt
        nxt = m.succ[m.succ_off[lane]] if m.succ_off[lane + 1] > m.succ_off[lane] else -1
    lane_point(m, lane, s, x, y, &z, &h)


cdef inline bint _conflicts(const MapC* m, int lane, int other) noexcept nogil:
    cdef long long k
    if lane < 0 or other < 0:
        return False
    for k in range(m.conf_off[lane], m.conf_off[lane + 1]):
        if m.conf[k] == other:
            return True
    return False


cdef inline double _entry_distance(const MapC* m, Agent* b) noexcept nogil:
    """Distance from b's front to the end of its current lane."""
    return lane_length(m, b.lane) - b.lane_s - 0.5 * b.length


cdef inline bint _must_yield(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """About to enter an intersection lane: yield to a vehicle already on a conflicting one, or to one
    nearer its own conflicting entry (ties by index), so that one of two never both go."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j
    cdef int nxt = a.route_lane
    cdef double mine = _entry_distance(m, a), theirs
    for j in range(n):
        if j == i:
            continue
        b = &agents[j]
        if not b.alive or b.lane < 0:
            continue
        if _conflicts(m, nxt, b.lane):
            return True  # b is inside the junction on a crossing or merging lane
        if b.role == 3 and b.route_lane >= 0 and _conflicts(m, nxt, b.route_lane):
            theirs = _entry_distance(m, b)
            if theirs < 12.0 and (theirs < mine or (theirs == mine and j < i)) and b.speed > 0.1 or \
                    (theirs < 1.0 and theirs < mine):
                return True
    return False


cdef inline void idm_step(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp,
                          const IdmParams* p, const unsigned char* sl_state, Rng* rng, double dt) noexcept nogil:
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j
    cdef int mode, sl
    cdef double v = a.speed if a.speed > 0 else 0.0, dx, dy, lon, lat, gap = 1e9, lead_v = 0.0, g
    cdef double v0, T, amax, bcomf, s0, s_star, acc, L, dist_bar, tx, ty, alpha, ld, steer, v1
    if rng_uniform(rng) < p.reroll_prob:
        a.idm_mode = rng_int(rng, 3)
    mode = a.idm_mode
    # Leader: the nearest agent whose centre comes within half the two widths (+ margin) of the
    # route ahead, sampled every PATH_STEP metres up to the lookahead; the gap is measured along it.
    cdef double px[PATH_POINTS]
    cdef double py[PATH_POINTS]
    cdef int k, n_path = 0
    cdef double reach, d2, r
    cdef double path_step = PATH_STEP_DM * 0.1
    if a.route_lane < 0:
        a.route_lane = _route_next(m, rng, a.lane)
    for k in range(PATH_POINTS):
        reach = (k + 1) * path_step
        if reach > p.lookahead:
            break
        _point_ahead(m, a, reach, &px[k], &py[k])
        n_path += 1
    for j in range(n):
        if j == i:
            continue
        b = &agents[j]
        if not b.alive:
            continue
        dx = b.x - a.x
        dy = b.y - a.y
        if dx * dx + dy * dy > (p.lookahead + b.length) * (p.lookahead + b.length):
            continue
        # A vehicle travelling alongside reaches half its width from its centre; a crossing or
        # turning one reaches up to its half-diagonal.
        if fabs(b.cos_h * a.cos_h + b.sin_h * a.sin_h) > 0.95:
            r = 0.5 * (a.width + b.width) + 0.3
        else:
            r = 0.5 * a.width + 0.5 * sqrt(b.length * b.length + b.width * b.width) + 0.3
        lon = dx * a.cos_h + dy * a.sin_h
        lat = -dx * a.sin_h + dy * a.cos_h
        if lon > 0 and lon < 0.5 * (a.length + b.length) + path_step and fabs(lat) < 0.5 * (a.width + b.width) + 0.3:
            g = lon - 0.5 * (a.length + b.length)  # already alongside the nose
        else:
            g = 1e9
            for k in range(n_path):
                d2 = (b.x - px[k]) * (b.x - px[k]) + (b.y - py[k]) * (b.y - py[k])
                if d2 < r * r:
                    g = (k + 1) * path_step - 0.5 * (a.length + b.length)
                    break
        if g < gap:
            gap = g
            lead_v = b.speed * (b.cos_h * a.cos_h + b.sin_h * a.sin_h)
    # A stop bar ahead on red, on yellow when there is room to stop, or with an uncleared stop sign.
    L = lane_length(m, a.lane)
    sl = m.lane_stop_line[a.lane]
    if sl >= 0:
        dist_bar = L - a.lane_s - 0.5 * a.length
        if dist_bar > -0.5 and (
                (m.sl_control[sl] == 1 and (sl_state[sl] == SIG_RED or
                                            (sl_state[sl] == SIG_YELLOW and dist_bar > v * v / (2 * p.comfort_decel[mode])))) or
                (m.sl_control[sl] == 2 and a.stop_state != STOP_CLEARED)):
            if dist_bar < gap:
                gap = dist_bar if dist_bar > 0.05 else 0.05
                lead_v = 0.0
    # Gap acceptance at a cleared stop sign: wait at the bar while another vehicle approaches within
    # 30 m with us in front of it (the major road has priority).
    if sl >= 0 and m.sl_control[sl] == 2 and a.stop_state == STOP_CLEARED and L - a.lane_s - 0.5 * a.length < 3.0:
        for j in range(n):
            b = &agents[j]
            if j == i or not b.alive or b.speed < 0.5:
                continue
            dx = a.x - b.x
            dy = a.y - b.y
            lon = dx * b.cos_h + dy * b.sin_h
            if 0 < lon < 30.0 and fabs(-dx * b.sin_h + dy * b.cos_h) < 8.0 and b.cos_h * a.cos_h + b.sin_h * a.sin_h < 0.7:
                dist_bar = L - a.lane_s - 0.5 * a.length
                if dist_bar < gap:
                    gap = dist_bar if dist_bar > 0.05 else 0.05
                    lead_v = 0.0
                break
    # Right of way at intersections: wait at the lane end before entering a conflicting junction lane.
    if a.route_lane >= 0 and m.lane_inter[a.lane] < 0 and m.lane_inter[a.route_lane] >= 0:
        dist_bar = L - a.lane_s - 0.5 * a.length
        if dist_bar < 12.0 and _must_yield(m, agents, n, i):
            if dist_bar < gap:
                gap = dist_bar if dist_bar > 0.05 else 0.05
                lead_v = 0.0
    v0 = p.v0_scale[mode] * m.lane_speed[a.lane]
    T = p.time_headway[mode]
    amax = p.max_accel[mode]
    bcomf = p.comfort_decel[mode]
    s0 = p.min_gap[mode]
    acc = amax * (1.0 - pow(v / v0, p.delta)) if v0 > 0 else -bcomf
    if gap < 1e8:
        s_star = s0 + v * T + v * (v - lead_v) / (2.0 * sqrt(amax * bcomf))
        if s_star < s0:
            s_star = s0
        acc -= amax * (s_star / (gap if gap > 0.05 else 0.05)) ** 2
    acc = clip(acc, -p.max_decel, amax)
    v1 = v + acc * dt
    if v1 < 0:
        v1 = 0.0
    # Pure pursuit towards a point on the route ahead.
    ld = 2.0 + 0.8 * v
    _point_ahead(m, a, ld + 0.5 * a.wheelbase, &tx, &ty)
    alpha = wrap_angle(atan2(ty - a.y, tx - a.x) - a.heading)
    steer = atan(2.0 * a.wheelbase * sin(alpha) / ld)
    _bicycle_pose(a, cp, v, v1, steer, dt)
    # Advance along the route.
    a.lane_s += 0.5 * (v + v1) * dt
    if a.lane_s >= L:
        if a.route_lane < 0:
            a.route_lane = _route_next(m, rng, a.lane)
        if a.route_lane >= 0:
            a.lane_s -= L
            a.lane = a.route_lane
            a.route_lane = -1
        else:
            a.lane_s = L
