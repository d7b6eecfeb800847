# cython: language_level=3
"""Route following of rule-based vehicles (TerraZero section 4.4): the decided route over the lane
graph (the current lane, the chosen next one, then single-successor lanes), points along it walked
by a cursor, pure-pursuit steering from the rear axle, the prediction of the vehicle's poses along
its route under that law (the sweep its body covers), and projection back onto a lane.

The vehicle is a kinematic bicycle referenced at its rear axle (half a wheelbase behind the box
centre), the textbook setting of pure pursuit: the rear wheels track the lane centre and the front
swings out in a turn, as a real truck's does. The prediction uses the same law, steering limits
included, so a long vehicle that cannot follow a tight curve is predicted to swing wide as it will.
"""

from libc.math cimport tan, sqrt
from common cimport Agent, MapC, CP_STEERMAX, N_CP
from scene cimport lane_length, lane_segment_at
from rng cimport Rng, rng_int
from dynamics cimport clip


cdef enum:
    PATH_POINTS = 30           # predicted poses: FINE_POINTS every PATH_STEP_DM / 50 metres (a turning
    FINE_POINTS = 5            # body sweeps sideways within a short travel), then up to NEAR_POINTS
    NEAR_POINTS = 15           # one every PATH_STEP_DM / 10 metres, then one every PATH_STEP_DM / 5
    PATH_STEP_DM = 15          # metres (shorter than any vehicle, so the swept boxes still overlap)
    ROUTE_LANES = 4            # the current lane, the chosen next lane, then single-successor lanes


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
    double xmin, xmax, ymin, ymax  # bounding box of the predicted centres (``sweep_bounds``)


cdef inline void sweep_bounds(const Sweep* sw, double* xmin, double* xmax, double* ymin,
                              double* ymax) noexcept nogil:
    """Bounding box of a sweep's predicted centres (poses 0..n)."""
    cdef int k
    xmin[0] = xmax[0] = sw.x[0]
    ymin[0] = ymax[0] = sw.y[0]
    for k in range(1, sw.n + 1):
        xmin[0] = sw.x[k] if sw.x[k] < xmin[0] else xmin[0]
        xmax[0] = sw.x[k] if sw.x[k] > xmax[0] else xmax[0]
        ymin[0] = sw.y[k] if sw.y[k] < ymin[0] else ymin[0]
        ymax[0] = sw.y[k] if sw.y[k] > ymax[0] else ymax[0]


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
    turns; longer with the wheelbase and with speed, which keeps the loop smooth; longer still by
    ``lc_reach`` seconds of travel while it crosses to a new lane (a gradual change, ``lanechange.pxd``)."""
    return 1.5 + 0.3 * a.wheelbase + 0.3 * v + a.lc_reach * v


cdef inline double _kappa_max(Agent* a, const double* cp_all) noexcept nogil:
    return tan(cp_all[a.cls * N_CP + CP_STEERMAX]) / a.wheelbase


cdef inline double _arc_through(double dx, double dy, double c, double sn) noexcept nogil:
    """Curvature of the arc from a point heading (c, sn) through the point (dx, dy) away from it:
    2 sin(alpha) / d; 0 when the two points coincide."""
    cdef double d2 = dx * dx + dy * dy
    if d2 < 1e-6:
        return 0.0
    return 2.0 * (c * dy - sn * dx) / d2


cdef inline double _pursuit(const MapC* m, const Route* r, Cursor* cur, double s_target, double x, double y,
                            double c, double sn) noexcept nogil:
    """Curvature of the arc from the rear axle at (x, y), heading (c, sn), through the route point
    at arc length ``s_target``: 2 sin(alpha) / d."""
    cdef double tx, ty
    _route_xy(m, r, cur, s_target, &tx, &ty)
    return _arc_through(tx - x, ty - y, c, sn)


cdef inline double _pursuit_offset(const MapC* m, const Route* r, Cursor* cur, double s_target, double lat_off,
                                   double x, double y, double c, double sn) noexcept nogil:
    """``_pursuit`` towards the route point ``lat_off`` metres left of the route (a planner vehicle's
    lateral offset, ``planner.pxd``)."""
    cdef double tx, ty, ex, ey, n
    _route_xy(m, r, cur, s_target, &tx, &ty)
    ex = m.lane_pts[3 * cur.q + 3] - m.lane_pts[3 * cur.q]
    ey = m.lane_pts[3 * cur.q + 4] - m.lane_pts[3 * cur.q + 1]
    n = sqrt(ex * ex + ey * ey)
    if n > 1e-9:
        tx -= lat_off * ey / n
        ty += lat_off * ex / n
    return _arc_through(tx - x, ty - y, c, sn)


cdef inline void _predict(const MapC* m, Agent* a, double kmax, double reach, Sweep* sw,
                          double lat_off=0.0) noexcept nogil:
    """Poses of the vehicle over the next ``reach`` metres of its decided route under pure pursuit
    at the lookahead of its present speed, towards the route's centre or ``lat_off`` metres left of
    it (a planner vehicle's offset)."""
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
        ds = PATH_STEP_DM * (0.02 if k <= FINE_POINTS else (0.1 if k <= NEAR_POINTS else 0.2))
        if lat_off != 0.0:
            kappa = clip(_pursuit_offset(m, &route, &cur, s_rear + sw.d[k - 1] + ld, lat_off, xr, yr, c, sn),
                         -kmax, kmax)
        else:
            kappa = clip(_pursuit(m, &route, &cur, s_rear + sw.d[k - 1] + ld, xr, yr, c, sn), -kmax, kmax)
        # The rear axle advances ds along the arc of curvature kappa: half the turn h is at most
        # ~0.4 rad, where these series are exact to 1e-5 (products with the reciprocals, which the
        # compiler folds: a division is several times slower).
        h = 0.5 * kappa * ds
        h2 = h * h
        hs = h * (1.0 - h2 * (1.0 / 6.0) * (1.0 - h2 * (1.0 / 20.0)))
        hc = 1.0 - 0.5 * h2 * (1.0 - h2 * (1.0 / 12.0))
        ch = ds * (1.0 - h2 * (1.0 / 6.0))  # chord of the arc
        xr += ch * (c * hc - sn * hs)
        yr += ch * (sn * hc + c * hs)
        c2 = c * (1.0 - 2.0 * hs * hs) - sn * (2.0 * hs * hc)
        s2 = sn * (1.0 - 2.0 * hs * hs) + c * (2.0 * hs * hc)
        c, sn = c2, s2
        sw.d[k], sw.x[k], sw.y[k], sw.c[k], sw.s[k], sw.k[k] = sw.d[k - 1] + ds, xr + lr * c, yr + lr * sn, c, sn, kappa
        sw.n = k
    sweep_bounds(sw, &sw.xmin, &sw.xmax, &sw.ymin, &sw.ymax)


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

