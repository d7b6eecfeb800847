# cython: language_level=3
"""Rule-based road users (TerraZero section 4.4): reactive IDM vehicles.

An IDM vehicle follows a route over the lane graph (a random successor is chosen as it enters each
lane): the Intelligent Driver Model sets its acceleration, pure pursuit its steering. The vehicle is
a kinematic bicycle referenced at its rear axle (half a wheelbase behind the box centre), the
textbook setting of pure pursuit: the rear wheels track the lane centre and the front swings out in
a turn, as a real truck's does.

Each step the vehicle predicts its own motion along the route (the same pure-pursuit law, steering
limits included, so a long vehicle that cannot follow a tight curve is predicted to swing wide as it
will) and sweeps its body box along that prediction. Its leader is the first agent or static
obstacle whose box the sweep touches; the gap is the travel until contact. A long vehicle about to
turn also checks its sweep against where moving neighbours will be over the next three seconds.
Stopping points act as virtual stopped leaders: the stop bar ahead when that line shows red or
yellow (unless too close to stop on yellow) or has a stop sign the vehicle has not cleared, and the
entry of a zone (an intersection lane, or a curve) while another vehicle has the right of way over
a conflicting movement (``_must_yield``), while an agent at rest inside would stop the vehicle
there, or while the intersection's exit has no room for it (``_exit_blocked``: do not block the
box). The desired speed is lowered ahead of curves so the lateral acceleration stays comfortable.
Behaviour modes rescale the IDM gains and may be redrawn with a small probability each step.
"""

from libc.math cimport sqrt, cos, sin, atan, fabs, pow, tan
from common cimport Agent, MapC, SIG_RED, SIG_YELLOW, STOP_CLEARED, CP_STEERMAX, N_CP
from scene cimport lane_length, lane_point, lane_segment_at
from geometry cimport wrap_angle
from rng cimport Rng, rng_uniform, rng_int
from dynamics cimport clip


cdef enum:
    PATH_POINTS = 44           # predicted poses: FINE_POINTS every PATH_STEP_DM / 50 metres (a turning
    FINE_POINTS = 5            # body sweeps sideways within a short travel), then one every
    PATH_STEP_DM = 15          # PATH_STEP_DM / 10 metres
    ROUTE_LANES = 4            # the current lane, the chosen next lane, then single-successor lanes
    COMMIT_DECEL = 4           # a vehicle that would need more to stop before an entry goes on (m/s^2)
    YIELD_HORIZON_T = 4        # contenders arriving within this many seconds are considered (s)
    YIELD_HORIZON_D = 12       # ... or within this many metres of their entry (m)
    MIN_ARRIVAL_SPEED = 2      # speed floor of the arrival-time estimate (m/s)
    LONG_VEHICLE = 6           # longer vehicles (m) may sweep across neighbouring lanes in a turn
    EXIT_CHECK = 8             # how far past an intersection a movement's space is checked (m)
    FUTURE_STEPS = 6           # half-second steps of a long vehicle's look at where others will be
    FUTURE_DECEL = 3           # ... assuming they brake this hard (m/s^2)
    CURVE_RANGE = 50           # vehicles this near (m) may contend for a curve


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


ctypedef struct Route:
    int lane[ROUTE_LANES]
    double start[ROUTE_LANES]  # arc length of each lane's start from the start of lane[0]
    int n
    double end                 # where the decided route ends (m from the start of lane[0])


ctypedef struct Sweep:
    # Predicted poses of the box centre: travel of the rear axle, centre, heading (cos, sin), and
    # the curvature steered to reach the pose. Pose 0 is the present one.
    int n
    double d[PATH_POINTS + 1]
    double x[PATH_POINTS + 1]
    double y[PATH_POINTS + 1]
    double c[PATH_POINTS + 1]
    double s[PATH_POINTS + 1]
    double k[PATH_POINTS + 1]


cdef inline int _route_next(const MapC* m, Rng* rng, int lane) noexcept nogil:
    cdef long long n = m.succ_off[lane + 1] - m.succ_off[lane]
    if n <= 0:
        return -1
    return m.succ[m.succ_off[lane] + rng_int(rng, n)]


cdef inline int _only_successor(const MapC* m, int lane) noexcept nogil:
    if lane >= 0 and m.succ_off[lane + 1] - m.succ_off[lane] == 1:
        return m.succ[m.succ_off[lane]]
    return -1


cdef inline void _route_build(const MapC* m, Agent* a, Route* r) noexcept nogil:
    """The decided part of the route: the current lane, the chosen next one, then as long as each
    lane has a single successor."""
    cdef int nxt
    r.lane[0] = a.lane
    r.start[0] = 0.0
    r.n = 1
    r.end = lane_length(m, a.lane)
    nxt = a.route_lane
    while nxt >= 0 and r.n < ROUTE_LANES:
        r.lane[r.n] = nxt
        r.start[r.n] = r.end
        r.end += lane_length(m, nxt)
        r.n += 1
        nxt = _only_successor(m, nxt)


ctypedef struct Cursor:
    # A walk along a route: the route lane and the lane segment reached so far.
    int k
    Py_ssize_t q


cdef inline void _cursor_start(const MapC* m, const Route* r, Cursor* cur) noexcept nogil:
    cur.k = 0
    cur.q = m.lane_off[r.lane[0]]


cdef inline void _route_xy(const MapC* m, const Route* r, Cursor* cur, double s, double* x, double* y) noexcept nogil:
    """Point at arc length ``s`` along the route (clamped to its decided part), walking on from the
    cursor: ``s`` must not decrease between calls with one cursor."""
    cdef int lane
    cdef Py_ssize_t last
    cdef double t, seg
    while cur.k < r.n - 1 and s >= r.start[cur.k + 1]:
        cur.k += 1
        cur.q = m.lane_off[r.lane[cur.k]]
    lane = r.lane[cur.k]
    s -= r.start[cur.k]
    last = m.lane_off[lane + 1] - 1
    while cur.q < last - 1 and m.lane_s0[cur.q + 1] <= s:
        cur.q += 1
    seg = m.lane_s0[cur.q + 1] - m.lane_s0[cur.q]
    t = (s - m.lane_s0[cur.q]) / seg if seg > 0 else 0.0
    t = clip(t, 0.0, 1.0)
    x[0] = m.lane_pts[3 * cur.q] + t * (m.lane_pts[3 * cur.q + 3] - m.lane_pts[3 * cur.q])
    y[0] = m.lane_pts[3 * cur.q + 1] + t * (m.lane_pts[3 * cur.q + 4] - m.lane_pts[3 * cur.q + 1])


cdef inline double _lookahead(Agent* a, double v) noexcept nogil:
    """Pure-pursuit lookahead from the rear axle: short, so the vehicle holds the lane centre in
    turns; longer with the wheelbase and with speed, which keeps the loop smooth."""
    return 1.5 + 0.3 * a.wheelbase + 0.3 * v


cdef inline double _kappa_max(Agent* a, const double* cp_all) noexcept nogil:
    return tan(cp_all[a.cls * N_CP + CP_STEERMAX]) / a.wheelbase


cdef inline double _pursuit(const MapC* m, const Route* r, Cursor* cur, double s_target, double x, double y,
                            double c, double sn) noexcept nogil:
    """Curvature of the arc from the rear axle at (x, y), heading (c, sn), through the route point
    at arc length ``s_target``: 2 sin(alpha) / d."""
    cdef double tx, ty, dx, dy, d2
    _route_xy(m, r, cur, s_target, &tx, &ty)
    dx = tx - x
    dy = ty - y
    d2 = dx * dx + dy * dy
    if d2 < 1e-6:
        return 0.0
    return 2.0 * (c * dy - sn * dx) / d2


cdef inline void _predict(const MapC* m, Agent* a, double kmax, double reach, Sweep* sw) noexcept nogil:
    """Poses of the vehicle over the next ``reach`` metres of its decided route under pure pursuit
    at the lookahead of its present speed."""
    cdef Route route
    cdef Cursor cur
    cdef int k
    cdef double lr = 0.5 * a.wheelbase, ld = _lookahead(a, a.speed if a.speed > 0 else 0.0)
    cdef double s_rear = a.lane_s - lr, ds, kappa, h, h2, hc, hs, ch, c2, s2
    cdef double c = a.cos_h, sn = a.sin_h, xr = a.x - lr * a.cos_h, yr = a.y - lr * a.sin_h
    _route_build(m, a, &route)
    _cursor_start(m, &route, &cur)
    if reach > route.end - a.lane_s:
        reach = route.end - a.lane_s
    sw.d[0], sw.x[0], sw.y[0], sw.c[0], sw.s[0], sw.k[0] = 0.0, a.x, a.y, c, sn, 0.0
    sw.n = 0
    for k in range(1, PATH_POINTS + 1):
        if sw.d[k - 1] > reach:
            break
        ds = PATH_STEP_DM * (0.02 if k <= FINE_POINTS else 0.1)
        kappa = clip(_pursuit(m, &route, &cur, s_rear + sw.d[k - 1] + ld, xr, yr, c, sn), -kmax, kmax)
        # The rear axle advances ds along the arc of curvature kappa: half the turn h is at most
        # ~0.2 rad, where these series are exact to 1e-7.
        h = 0.5 * kappa * ds
        h2 = h * h
        hs = h * (1.0 - h2 / 6.0 * (1.0 - h2 / 20.0))
        hc = 1.0 - 0.5 * h2 * (1.0 - h2 / 12.0)
        ch = ds * (1.0 - h2 / 6.0)  # chord of the arc
        xr += ch * (c * hc - sn * hs)
        yr += ch * (sn * hc + c * hs)
        c2 = c * (1.0 - 2.0 * hs * hs) - sn * (2.0 * hs * hc)
        s2 = sn * (1.0 - 2.0 * hs * hs) + c * (2.0 * hs * hc)
        c, sn = c2, s2
        sw.d[k], sw.x[k], sw.y[k], sw.c[k], sw.s[k], sw.k[k] = sw.d[k - 1] + ds, xr + lr * c, yr + lr * sn, c, sn, kappa
        sw.n = k


cdef inline double _project(const MapC* m, int lane, double s_guess, double x, double y) noexcept nogil:
    """Arc length of the lane point nearest (x, y) within a few metres of ``s_guess``; before the
    first or past the last point, extrapolated along the end segment (so it may be < 0 or > length)."""
    cdef Py_ssize_t first = m.lane_off[lane], last = m.lane_off[lane + 1] - 2
    cdef Py_ssize_t k0 = lane_segment_at(m, lane, s_guess - 4.0), k1 = lane_segment_at(m, lane, s_guess + 4.0), k
    cdef double ax, ay, ex, ey, L2, t, px, py, d2, best = 1e300, best_s = s_guess
    if last < first:
        return s_guess
    if k1 > last:
        k1 = last
    for k in range(k0, k1 + 1):
        ax = m.lane_pts[3 * k]
        ay = m.lane_pts[3 * k + 1]
        ex = m.lane_pts[3 * k + 3] - ax
        ey = m.lane_pts[3 * k + 4] - ay
        L2 = ex * ex + ey * ey
        if L2 <= 0:
            continue
        t = ((x - ax) * ex + (y - ay) * ey) / L2
        if t < 0 and k != first:
            t = 0
        if t > 1 and k != last:
            t = 1
        px = ax + t * ex - x
        py = ay + t * ey - y
        d2 = px * px + py * py
        if d2 < best:
            best = d2
            best_s = m.lane_s0[k] + t * (m.lane_s0[k + 1] - m.lane_s0[k])
    return best_s


cdef inline bint _boxes_overlap(double ax, double ay, double ac, double as_, double ahl, double ahw,
                                double bx, double by, double bc, double bs, double bhl, double bhw) noexcept nogil:
    """Separating-axis test of two boxes given by centre, heading (cos, sin) and half extents."""
    cdef double dx = bx - ax, dy = by - ay
    cdef double cc = fabs(ac * bc + as_ * bs), cs = fabs(ac * bs - as_ * bc)
    if fabs(dx * ac + dy * as_) > ahl + bhl * cc + bhw * cs:
        return False
    if fabs(-dx * as_ + dy * ac) > ahw + bhl * cs + bhw * cc:
        return False
    if fabs(dx * bc + dy * bs) > bhl + ahl * cc + ahw * cs:
        return False
    if fabs(-dx * bs + dy * bc) > bhw + ahl * cs + ahw * cc:
        return False
    return True


ctypedef struct Line:
    # The centre line of a movement: from the vehicle's rear along its lane, through the zone lane
    # (an intersection lane or a curve) it is on or about to enter, to EXIT_CHECK metres past it.
    int lane[3]
    double start[3]            # arc length along the line where each lane's part begins
    double s0                  # arc length on lane[0] where the line begins
    int n
    bint exit                  # the last part is the exit lane (checked for EXIT_CHECK metres)


cdef inline void _movement_line(const MapC* m, Agent* x, int zone_lane, Line* ln) noexcept nogil:
    cdef int exit_lane = _only_successor(m, zone_lane)
    ln.lane[0] = x.lane
    ln.s0 = x.lane_s - 0.5 * x.length
    ln.start[0] = 0.0
    ln.n = 1
    if zone_lane != x.lane:
        ln.lane[1] = zone_lane
        ln.start[1] = lane_length(m, x.lane) - ln.s0
        ln.n = 2
    ln.exit = exit_lane >= 0
    if ln.exit:
        ln.lane[ln.n] = exit_lane
        ln.start[ln.n] = ln.start[ln.n - 1] + lane_length(m, ln.lane[ln.n - 1]) - (ln.s0 if ln.n == 1 else 0.0)
        ln.n += 1


cdef inline bint _pose_covers(const Sweep* sw, int k, double hl, double hw, double qx, double qy, double radius) noexcept nogil:
    """Whether the body (half extents hl, hw) at pose k comes within ``radius`` of (qx, qy)."""
    cdef double dx = qx - sw.x[k], dy = qy - sw.y[k]
    return fabs(dx * sw.c[k] + dy * sw.s[k]) <= hl + radius and fabs(-dx * sw.s[k] + dy * sw.c[k]) <= hw + radius


cdef inline double _line_hit(const MapC* m, const Sweep* sw, double d_max, double hl, double hw, const Line* ln,
                             double radius, bint first_pose) noexcept nogil:
    """Where the body swept along ``sw`` (up to travel ``d_max``) first comes within ``radius`` of the
    line. ``first_pose``: the travel of the last pose clear of it (-1 when the present pose is not);
    otherwise the line's arc length at the first point reached. 1e9 if nowhere."""
    cdef Py_ssize_t q, q0, q1
    cdef int k, part, kmax = 0, best = PATH_POINTS + 1
    cdef double qx, qy, dx, dy, r = sqrt(hl * hl + hw * hw) + radius, arc
    cdef double xmin = sw.x[0], xmax = sw.x[0], ymin = sw.y[0], ymax = sw.y[0]
    while kmax < sw.n and sw.d[kmax + 1] <= d_max:
        kmax += 1
        xmin = sw.x[kmax] if sw.x[kmax] < xmin else xmin
        xmax = sw.x[kmax] if sw.x[kmax] > xmax else xmax
        ymin = sw.y[kmax] if sw.y[kmax] < ymin else ymin
        ymax = sw.y[kmax] if sw.y[kmax] > ymax else ymax
    xmin -= r
    xmax += r
    ymin -= r
    ymax += r
    for part in range(ln.n):
        q0 = lane_segment_at(m, ln.lane[part], ln.s0) if part == 0 else m.lane_off[ln.lane[part]]
        q1 = m.lane_off[ln.lane[part] + 1]
        for q in range(q0, q1):
            if ln.exit and part == ln.n - 1 and m.lane_s0[q] > EXIT_CHECK:
                break
            arc = ln.start[part] + m.lane_s0[q] - (ln.s0 if part == 0 else 0.0)
            qx = m.lane_pts[3 * q]
            qy = m.lane_pts[3 * q + 1]
            if qx < xmin or qx > xmax or qy < ymin or qy > ymax:
                continue
            for k in range(kmax + 1 if kmax < best else best):
                dx = qx - sw.x[k]
                dy = qy - sw.y[k]
                if dx * dx + dy * dy <= r * r and _pose_covers(sw, k, hl, hw, qx, qy, radius):
                    if not first_pose:
                        return arc if arc > 0 else 0.0
                    best = k
                    break
    if best > PATH_POINTS:
        return 1e9
    return sw.d[best - 1] if best > 0 else -1.0


cdef inline bint _from_lane(const MapC* m, int lane, int origin) noexcept nogil:
    """Whether ``lane`` is a successor of ``origin`` (two movements from one approach lane diverge
    from a common point: the later one follows the earlier)."""
    cdef long long k
    for k in range(m.succ_off[origin], m.succ_off[origin + 1]):
        if m.succ[k] == lane:
            return True
    return False


cdef inline bint _faces_stop(const MapC* m, Agent* b, const unsigned char* sl_state, double decel) noexcept nogil:
    """Whether b will stop at the bar ending its lane: red, yellow with room to stop, or a stop sign
    it has not cleared."""
    cdef int sl = m.lane_stop_line[b.lane]
    cdef double d, v
    if sl < 0:
        return False
    if m.sl_control[sl] == 2:
        return b.stop_state != STOP_CLEARED
    if m.sl_control[sl] != 1:
        return False
    if sl_state[sl] == SIG_RED:
        return True
    if sl_state[sl] == SIG_YELLOW:
        d = lane_length(m, b.lane) - b.lane_s - 0.5 * b.length
        v = b.speed if b.speed > 0 else 0.0
        return d > v * v / (2.0 * decel)
    return False


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


cdef inline bint _committed(double d, double v) noexcept nogil:
    """Too close to stop before an entry ``d`` metres ahead without braking harder than COMMIT_DECEL."""
    return v > 0.5 and d < v * v / (2.0 * COMMIT_DECEL) + 0.5


cdef inline double _arrival(double d, double v) noexcept nogil:
    return (d if d > 0 else 0.0) / (v if v > MIN_ARRIVAL_SPEED else MIN_ARRIVAL_SPEED)


cdef inline double _movement_end(const MapC* m, Agent* b, int lane) noexcept nogil:
    """Travel from b's position to EXIT_CHECK metres past the end of ``lane``: the zone lane (an
    intersection lane or a curve) b is on or about to enter."""
    cdef double d = lane_length(m, b.lane) - b.lane_s + EXIT_CHECK
    if lane != b.lane:
        d += lane_length(m, lane)
    return d


cdef inline double _swept_stop(const MapC* m, Agent* a, const Sweep* sa, int zone_a, Agent* b, int zone_b,
                               const double* cp_all, double margin) noexcept nogil:
    """Where the movements of a and b (through zone lanes ``zone_a``, ``zone_b``) meet because a long
    vehicle's predicted body leaves its lane: a's sweep against b's centre line, b's sweep against
    a's. Returns how far a may travel before that point; -1 when a is already in b's way (b cannot
    go on before a does); 1e9 when they do not meet. Whether they meet is the same from either side."""
    cdef Line ln
    cdef Sweep sb
    cdef double stop = 1e9, d, end
    if a.length > LONG_VEHICLE:
        _movement_line(m, b, zone_b, &ln)
        d = _line_hit(m, sa, _movement_end(m, a, zone_a), 0.5 * a.length, 0.5 * a.width, &ln,
                      0.5 * b.width + margin, True)
        if d < 0:
            return -1.0
        stop = d
    if b.length > LONG_VEHICLE and b.role == 3:
        _movement_line(m, a, zone_a, &ln)
        end = _movement_end(m, b, zone_b)
        _predict(m, b, _kappa_max(b, cp_all), end, &sb)
        d = _line_hit(m, &sb, end, 0.5 * b.length, 0.5 * b.width, &ln, 0.5 * a.width + margin, False)
        if d < 1e8:
            if d < a.length:
                return -1.0
            d -= a.length + margin  # keep the front short of where b's body will reach
            if d < stop:
                stop = d if d > 0 else 0.0
    return stop


cdef inline bint _curve(const MapC* m, int lane) noexcept nogil:
    """A lane outside intersections that turns by more than about 25 degrees (a corner, a loop):
    long vehicles sweep over the neighbouring lanes there. Three chords of the lane are compared."""
    cdef Py_ssize_t p0 = m.lane_off[lane], p3 = m.lane_off[lane + 1] - 1, p1, p2
    cdef double ux, uy, vx, vy, wx, wy, cr
    if lane < 0 or m.lane_inter[lane] >= 0 or p3 - p0 < 3:
        return False
    p1 = p0 + (p3 - p0) // 3
    p2 = p0 + 2 * (p3 - p0) // 3
    ux = m.lane_pts[3 * p1] - m.lane_pts[3 * p0]
    uy = m.lane_pts[3 * p1 + 1] - m.lane_pts[3 * p0 + 1]
    vx = m.lane_pts[3 * p2] - m.lane_pts[3 * p1]
    vy = m.lane_pts[3 * p2 + 1] - m.lane_pts[3 * p1 + 1]
    wx = m.lane_pts[3 * p3] - m.lane_pts[3 * p2]
    wy = m.lane_pts[3 * p3 + 1] - m.lane_pts[3 * p2 + 1]
    # sin of the angle between consecutive chords above sin(12.5 deg), or turning back
    cr = ux * vy - uy * vx
    if cr * cr > 0.0467 * (ux * ux + uy * uy) * (vx * vx + vy * vy) or ux * vx + uy * vy < 0:
        return True
    cr = vx * wy - vy * wx
    return cr * cr > 0.0467 * (vx * vx + vy * vy) * (wx * wx + wy * wy) or vx * wx + vy * wy < 0


cdef inline bint _still_turning(const MapC* m, Agent* b) noexcept nogil:
    """A long rule-based vehicle just past a curve whose body is still well off its lane's heading
    (it swung wide and is coming back)."""
    cdef double x, y, z, h
    if b.length <= LONG_VEHICLE or b.role != 3 or b.lane_s > b.length + EXIT_CHECK:
        return False
    lane_point(m, b.lane, b.lane_s, &x, &y, &z, &h)
    return fabs(wrap_angle(b.heading - h)) > 0.2


cdef inline bint _in_zone(const MapC* m, int lane, int inter) noexcept nogil:
    """Whether ``lane`` belongs to the zone: intersection ``inter``, or any curve when inter < 0."""
    if lane < 0:
        return False
    if inter >= 0:
        return m.lane_inter[lane] == inter
    return _curve(m, lane)


cdef inline double _must_yield(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const unsigned char* sl_state,
                               const IdmParams* p, const double* cp_all, const Sweep* sa) noexcept nogil:
    """About to enter a zone lane (an intersection lane, or a curve): give way to a vehicle already
    on a conflicting movement, and to a rule-based vehicle approaching one that has precedence.
    Movements conflict when their intersection lanes cross or merge, or when a long vehicle's
    predicted body sweeps over the other's lane (in a curve, only the latter). Precedence, in
    order: a vehicle too close to stop, then one without a stop sign, then the earlier arrival
    (ties by index). This order is the same seen from either vehicle, so of two contenders exactly
    one goes; vehicles that will stop at a red light or an uncleared stop sign are no contenders,
    and nor is one that cannot go on before this vehicle moves (its path runs through this
    vehicle). Returns how far the vehicle may travel (to the lane end, or short of a long
    vehicle's sweep), -1 if it need not give way."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j
    cdef int nxt = a.route_lane, inter = m.lane_inter[a.route_lane], sl, zone_b
    cdef double va = a.speed if a.speed > 0 else 0.0, vb, dx, dy
    cdef double da = _entry_distance(m, a), db, ta, tb, st, stop = -1.0
    cdef bint ca = _committed(da, va), cb, minor_b, long_a = a.length > LONG_VEHICLE, swept
    sl = m.lane_stop_line[a.lane]
    cdef bint minor_a = sl >= 0 and m.sl_control[sl] == 2
    ta = _arrival(da, va)
    if da < 0:
        da = 0.0
    for j in range(n):
        if j == i:
            continue
        b = &agents[j]
        if not b.alive or b.lane < 0:
            continue
        if b.lane == a.lane or b.lane == nxt:
            continue  # the same approach or movement: b is followed, not given way to
        swept = (long_a or b.length > LONG_VEHICLE) and b.role == 3
        if inter < 0:
            # A curve: only long vehicles conflict, and only nearby ones count.
            if not swept:
                continue
            dx = b.x - a.x
            dy = b.y - a.y
            if dx * dx + dy * dy > CURVE_RANGE * CURVE_RANGE:
                continue
        if _in_zone(m, b.lane, inter) or (inter < 0 and _still_turning(m, b)):
            zone_b = b.lane  # b is inside: keep clear of its movement
            if swept and _from_lane(m, b.lane, a.lane):
                continue
        else:
            if b.role != 3 or b.route_lane < 0 or not _in_zone(m, b.route_lane, inter) or \
                    (inter < 0 and m.lane_inter[b.lane] >= 0):
                continue
            zone_b = b.route_lane
            vb = b.speed if b.speed > 0 else 0.0
            db = _entry_distance(m, b)
            if db > YIELD_HORIZON_D and db > YIELD_HORIZON_T * vb:
                continue
            if _faces_stop(m, b, sl_state, p.comfort_decel[b.idm_mode]):
                continue
            cb = _committed(db, vb)
            if cb != ca:
                if not cb:
                    continue
            else:
                sl = m.lane_stop_line[b.lane]
                minor_b = sl >= 0 and m.sl_control[sl] == 2
                if minor_b != minor_a:
                    if not minor_a:
                        continue
                else:
                    tb = _arrival(db, vb)
                    if not (tb < ta or (tb == ta and j < i)):
                        continue
        # b goes first if the movements conflict (and b can).
        st = 1e9
        if inter >= 0 and _conflicts(m, nxt, zone_b):
            st = da
        if swept:
            dx = _swept_stop(m, a, sa, nxt, b, zone_b, cp_all, p.side_margin)
            if dx < 0:
                continue
            if dx < st:
                st = dx
        if st < 1e8:
            if st > da:
                st = da
            if stop < 0 or st < stop:
                stop = st
    return stop


cdef inline bint _exit_blocked(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, double need) noexcept nogil:
    """Whether the lane beyond the intersection lane the vehicle is about to enter lacks ``need``
    metres of room: the rear of the traffic at its start (where it will be in two seconds), less
    the length of the vehicles already in the intersection heading for it."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j
    cdef int exit_lane = _only_successor(m, a.route_lane)
    cdef double room = 1e9, used = 0.0, x0, y0, z0, h0, c0, s0, rear
    if exit_lane < 0:
        return False
    lane_point(m, exit_lane, 0.0, &x0, &y0, &z0, &h0)
    c0 = cos(h0)
    s0 = sin(h0)
    for j in range(n):
        if j == i:
            continue
        b = &agents[j]
        if not b.alive or b.lane < 0:
            continue
        if b.lane == exit_lane:
            if b.role == 3:
                rear = b.lane_s - 0.5 * b.length
            else:
                rear = (b.x - x0) * c0 + (b.y - y0) * s0 - 0.5 * b.length
            rear += 2.0 * (b.speed if b.speed > 0 else 0.0)
            if rear < room:
                room = rear
        elif m.lane_inter[b.lane] >= 0 and _only_successor(m, b.lane) == exit_lane:
            used += b.length + 1.0
    return room - used < need


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
        if _boxes_overlap(sw.x[k], sw.y[k], sw.c[k], sw.s[k], ahl, ahw, b.x, b.y, b.cos_h, b.sin_h,
                          0.5 * b.length, 0.5 * b.width):
            return k
    return -1


cdef inline void _pose_ahead(const MapC* m, const Route* rb, Cursor* cur, Agent* b, double dist, double* bx,
                             double* by, double* bc, double* bs) noexcept nogil:
    """Where b's box will be after ``dist`` more metres (not decreasing between calls with one
    cursor): along its route for a rule-based vehicle, straight on for other agents."""
    cdef double n
    if b.role == 3:
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
    if b.role == 3:
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
            if _boxes_overlap(sw.x[k], sw.y[k], sw.c[k], sw.s[k], 0.5 * a.length, ahw, bx, by, bc, bs,
                              0.5 * b.length, 0.5 * b.width):
                lead_v[0] = vb * (bc * sw.c[k] + bs * sw.s[k])
                return sw.d[k - 1] if k > 0 else 0.0
    return 1e9


cdef inline void idm_step(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp_all,
                          const IdmParams* p, const unsigned char* sl_state, Rng* rng, double dt) noexcept nogil:
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j
    cdef int mode, sl, k, hit
    cdef double v = a.speed if a.speed > 0 else 0.0, dx, dy, gap = 1e9, lead_v = 0.0, g
    cdef double v0, T, amax, bcomf, s0, s_star, acc, L, dist_bar, v1, v_mid, kappa, w, lr = 0.5 * a.wheelbase
    cdef double kmax = _kappa_max(a, cp_all), h0, h1, xr, yr
    cdef double ahl = 0.5 * a.length, ahw, bhl, bhw, ra, rb, near, v_curve, a_curve, xmin, xmax, ymin, ymax
    cdef bint turning, lead_slow = False
    cdef Sweep sw
    if rng_uniform(rng) < p.reroll_prob:
        a.idm_mode = rng_int(rng, 3)
    mode = a.idm_mode
    v0 = p.v0_scale[mode] * m.lane_speed[a.lane]
    T = p.time_headway[mode]
    amax = p.max_accel[mode]
    bcomf = p.comfort_decel[mode]
    s0 = p.min_gap[mode]
    if a.route_lane < 0:
        a.route_lane = _route_next(m, rng, a.lane)
    _predict(m, a, kmax, p.lookahead, &sw)
    # Leader: the first agent the body, swept along the predicted poses, would touch. The sweep keeps
    # a lateral margin except from an agent already within it (so two vehicles side by side in
    # adjacent lanes do not hold each other).
    ra = sqrt(ahl * ahl + (0.5 * a.width + p.side_margin) * (0.5 * a.width + p.side_margin))
    xmin = xmax = sw.x[0]
    ymin = ymax = sw.y[0]
    for k in range(1, sw.n + 1):
        xmin = sw.x[k] if sw.x[k] < xmin else xmin
        xmax = sw.x[k] if sw.x[k] > xmax else xmax
        ymin = sw.y[k] if sw.y[k] < ymin else ymin
        ymax = sw.y[k] if sw.y[k] > ymax else ymax
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
    for j in range(n):
        if j == i:
            continue
        b = &agents[j]
        if not b.alive:
            continue
        bhl = 0.5 * b.length
        bhw = 0.5 * b.width
        rb = sqrt(bhl * bhl + bhw * bhw)
        if turning and b.speed > 0.5:
            dx = b.x - a.x
            dy = b.y - a.y
            g = (v + b.speed) * 0.5 * FUTURE_STEPS + ra + rb
            if dx * dx + dy * dy < g * g and (dx * a.cos_h + dy * a.sin_h > 0 or
                                              fabs(-dx * a.sin_h + dy * a.cos_h) > 0.5 * (a.width + b.width)):
                g = _future_contact(m, a, &sw, b, 0.5 * a.width + p.side_margin, &w)  # not a follower in our lane
                if g < gap:
                    gap = g
                    lead_v = w
                    lead_slow = False
        if b.x < xmin - ra - rb or b.x > xmax + ra + rb or b.y < ymin - ra - rb or b.y > ymax + ra + rb:
            continue
        ahw = 0.5 * a.width + p.side_margin
        dx = b.x - a.x
        dy = b.y - a.y
        if dx * dx + dy * dy <= (ra + rb) * (ra + rb) and \
                _boxes_overlap(sw.x[0], sw.y[0], sw.c[0], sw.s[0], ahl, ahw, b.x, b.y, b.cos_h, b.sin_h, bhl, bhw):
            ahw = 0.5 * a.width
            if _boxes_overlap(sw.x[0], sw.y[0], sw.c[0], sw.s[0], ahl, ahw, b.x, b.y, b.cos_h, b.sin_h, bhl, bhw):
                continue  # already in contact: do not hold on to it
        hit = _sweep_hit(&sw, ahl, ahw, b, ra + rb)
        if hit > 0 and v < 0.5 and b.speed < 0.5 and ahw > 0.5 * a.width:
            # Both at rest: edge past with no margin rather than wait for each other for ever.
            hit = _sweep_hit(&sw, ahl, 0.5 * a.width, b, ra + rb)
        if hit < 0:
            continue
        # Travel until contact: to the last free pose, plus the free distance ahead of the front
        # there along its heading (at most the next pose).
        k = hit - 1
        near = (b.x - sw.x[k]) * sw.c[k] + (b.y - sw.y[k]) * sw.s[k] - ahl \
            - bhl * fabs(b.cos_h * sw.c[k] + b.sin_h * sw.s[k]) - bhw * fabs(b.cos_h * sw.s[k] - b.sin_h * sw.c[k])
        g = sw.d[k] + clip(near, 0.0, sw.d[hit] - sw.d[k])
        if g < gap:
            gap = g
            lead_v = b.speed * (b.cos_h * sw.c[hit] + b.sin_h * sw.s[hit])
            lead_slow = fabs(b.speed) < 1.0
    # A stop bar ahead on red, on yellow when there is room to stop, or with an uncleared stop sign.
    L = lane_length(m, a.lane)
    sl = m.lane_stop_line[a.lane]
    dist_bar = L - a.lane_s - 0.5 * a.length
    if sl >= 0:
        if dist_bar > -0.5 and (
                (m.sl_control[sl] == 1 and (sl_state[sl] == SIG_RED or
                                            (sl_state[sl] == SIG_YELLOW and dist_bar > v * v / (2 * bcomf)))) or
                (m.sl_control[sl] == 2 and a.stop_state != STOP_CLEARED)):
            if dist_bar < gap:
                gap = dist_bar if dist_bar > 0.05 else 0.05
                lead_v = 0.0
    # Gap acceptance at a cleared stop sign: wait at the bar while another vehicle approaches within
    # 30 m with us in front of it (the major road has priority).
    if sl >= 0 and m.sl_control[sl] == 2 and a.stop_state == STOP_CLEARED and dist_bar < 3.0:
        for j in range(n):
            b = &agents[j]
            if j == i or not b.alive or b.speed < 0.5:
                continue
            dx = a.x - b.x
            dy = a.y - b.y
            g = dx * b.cos_h + dy * b.sin_h
            if 0 < g < 30.0 and fabs(-dx * b.sin_h + dy * b.cos_h) < 8.0 and b.cos_h * a.cos_h + b.sin_h * a.sin_h < 0.7:
                if dist_bar < gap:
                    gap = dist_bar if dist_bar > 0.05 else 0.05
                    lead_v = 0.0
                break
    # Entry of an intersection lane or of a curve: wait at the lane end while another vehicle has
    # the right of way, or while the intersection's exit has no room (do not block the box). Checked
    # while the vehicle can still stop.
    if a.route_lane >= 0 and m.lane_inter[a.lane] < 0 and dist_bar > -0.5 and \
            dist_bar < v * v / (2.0 * bcomf) + YIELD_HORIZON_D and \
            (m.lane_inter[a.route_lane] >= 0 or (not _curve(m, a.lane) and _curve(m, a.route_lane))):
        g = _must_yield(m, agents, n, i, sl_state, p, cp_all, &sw)
        if g < 0 and not _committed(dist_bar, v) and (
                (lead_slow and dist_bar < gap < dist_bar + lane_length(m, a.route_lane) + a.length) or
                (m.lane_inter[a.route_lane] >= 0 and _exit_blocked(m, agents, n, i, a.length + s0))):
            g = dist_bar  # an agent at rest in the zone would stop us inside, or the exit has no room
        if g >= 0 and g < gap:
            gap = g if g > 0.05 else 0.05
            lead_v = 0.0
    # Curves: the desired speed is at most the curve speed (lateral acceleration curve_accel) in
    # the curve, and the vehicle brakes uniformly for each curve ahead to reach its speed there.
    a_curve = 1e9
    for k in range(1, sw.n + 1):
        if sw.k[k] * sw.k[k] * 1e4 > 1.0:  # radius under 100 m
            v_curve = sqrt(p.curve_accel / fabs(sw.k[k]))
            if sw.d[k - 1] < 1.5:
                if v_curve < v0:
                    v0 = v_curve
            elif v > v_curve:
                g = (v_curve * v_curve - v * v) / (2.0 * sw.d[k - 1])
                if g < a_curve:
                    a_curve = g
    acc = amax * (1.0 - pow(v / v0, p.delta)) if v0 > 0 else -bcomf
    if gap < 1e8:
        s_star = s0 + v * T + v * (v - lead_v) / (2.0 * sqrt(amax * bcomf))
        if s_star < s0:
            s_star = s0
        acc -= amax * (s_star / (gap if gap > 0.05 else 0.05)) ** 2
    if a_curve < acc:
        acc = a_curve
    acc = clip(acc, -p.max_decel, amax)
    v1 = v + acc * dt
    if v1 < 0:
        v1 = 0.0
    # Kinematic bicycle about the rear axle along the first predicted arc (pure pursuit).
    kappa = sw.k[1] if sw.n >= 1 else 0.0
    v_mid = 0.5 * (v + v1)
    w = v_mid * kappa
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
    # Advance along the route: the lane position nearest the new centre.
    a.lane_s = _project(m, a.lane, a.lane_s + v_mid * dt, a.x, a.y)
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
