# cython: language_level=3
"""Right of way of rule-based vehicles (TerraZero section 4.4): whether a vehicle about to enter a
zone lane (an intersection lane, or a curve) must wait at its entry.

It waits while another vehicle has the right of way over a conflicting movement (``_must_yield``),
or while the intersection's exit has no room for it (``_exit_blocked``: do not block the box).
Movements conflict when their intersection lanes cross or merge, or when a long vehicle's predicted
body (``route.pxd``'s sweep) leaves its lane over the other's path (``_swept_stop``, ``_line_hit``).
Stop lines a contender faces (red, yellow with room to stop, an uncleared stop sign) take it out of
contention (``_faces_stop``). Pedestrians always have the right of way: a vehicle stops short of
where a walking pedestrian's straight path enters its own, on a crosswalk or not
(``pedestrian_yield``).
"""

from libc.math cimport sqrt, cos, sin, fabs
from common cimport Agent, MapC, SIG_RED, SIG_YELLOW, STOP_CLEARED, ROLE_IDM, SLC_SIGNAL, SLC_STOP_SIGN, CLS_PEDESTRIAN
from scene cimport lane_length, lane_point, lane_segment_at
from geometry cimport wrap_angle
from route cimport Sweep, PATH_POINTS, _only_successor, _predict, _kappa_max
from neighbours cimport AgentGrid


cdef enum:
    COMMIT_DECEL = 4           # a vehicle that would need more to stop before an entry goes on (m/s^2)
    YIELD_HORIZON_T = 4        # contenders arriving within this many seconds are considered (s)
    YIELD_HORIZON_D = 12       # ... or within this many metres of their entry (m)
    MIN_ARRIVAL_SPEED = 2      # speed floor of the arrival-time estimate (m/s)
    LONG_VEHICLE = 6           # longer vehicles (m) may sweep across neighbouring lanes in a turn
    EXIT_CHECK = 8             # how far past an intersection a movement's space is checked (m)
    CURVE_RANGE = 50           # vehicles this near (m) may contend for a curve


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
    if m.sl_control[sl] == SLC_STOP_SIGN:
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
    if b.length > LONG_VEHICLE and b.role == ROLE_IDM:
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
    if b.length <= LONG_VEHICLE or b.role != ROLE_IDM or b.lane_s > b.length + EXIT_CHECK:
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
                               const double* comfort_decel, double side_margin, const double* cp_all,
                               const Sweep* sa) noexcept nogil:
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
    cdef bint minor_a = sl >= 0 and m.sl_control[sl] == SLC_STOP_SIGN
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
        swept = (long_a or b.length > LONG_VEHICLE) and b.role == ROLE_IDM
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
            if b.role != ROLE_IDM or b.route_lane < 0 or not _in_zone(m, b.route_lane, inter) or \
                    (inter < 0 and m.lane_inter[b.lane] >= 0):
                continue
            zone_b = b.route_lane
            vb = b.speed if b.speed > 0 else 0.0
            db = _entry_distance(m, b)
            if db > YIELD_HORIZON_D and db > YIELD_HORIZON_T * vb:
                continue
            if _faces_stop(m, b, sl_state, comfort_decel[b.idm_mode]):
                continue
            cb = _committed(db, vb)
            if cb != ca:
                if not cb:
                    continue
            else:
                sl = m.lane_stop_line[b.lane]
                minor_b = sl >= 0 and m.sl_control[sl] == SLC_STOP_SIGN
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
            dx = _swept_stop(m, a, sa, nxt, b, zone_b, cp_all, side_margin)
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
            if b.role == ROLE_IDM:
                rear = b.lane_s - 0.5 * b.length
            else:
                rear = (b.x - x0) * c0 + (b.y - y0) * s0 - 0.5 * b.length
            rear += 2.0 * (b.speed if b.speed > 0 else 0.0)
            if rear < room:
                room = rear
        elif m.lane_inter[b.lane] >= 0 and _only_successor(m, b.lane) == exit_lane:
            used += b.length + 1.0
    return room - used < need



cdef inline double pedestrian_yield(Agent* agents, Py_ssize_t n, Py_ssize_t i, const Sweep* sw, double horizon,
                                    double margin, const AgentGrid* grid=NULL) noexcept nogil:
    """How far vehicle i may travel before its body, swept along its predicted poses (grown by
    ``margin`` metres on each side), would meet a walking pedestrian's disc anywhere on the
    pedestrian's straight walk over the next ``horizon`` seconds (sampled every 0.25 s); 1e9 when
    no pedestrian's walk enters the path. Pedestrians at rest are left to the leader search (they
    only block where they stand). Conservative on purpose: it does not ask whether the vehicle
    would in fact arrive first. With ``grid``, only its list of the world's pedestrians is looked at."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j, t
    cdef int k, q, nq
    cdef double stop = 1e9, ahl = 0.5 * a.length, ahw = 0.5 * a.width + margin, rb, vx, vy, px, py
    cdef double lon, lat, reach, dx, dy, xmin = sw.xmin, xmax = sw.xmax, ymin = sw.ymin, ymax = sw.ymax
    if horizon <= 0 or sw.n < 1:
        return stop
    nq = <int>(horizon / 0.25)
    for t in range(n if grid == NULL else grid.n_peds):
        j = t if grid == NULL else grid.peds[t]
        b = &agents[j]
        if j == i or not b.alive or b.cls != CLS_PEDESTRIAN or b.speed < 0.1:
            continue
        vx = b.speed * b.cos_h
        vy = b.speed * b.sin_h
        rb = 0.5 * sqrt(b.length * b.length + b.width * b.width)
        reach = sqrt(ahl * ahl + ahw * ahw) + rb
        # cheap reject: the walk's box against the sweep's box
        px = b.x + horizon * vx
        py = b.y + horizon * vy
        if (b.x if b.x > px else px) < xmin - reach or (b.x if b.x < px else px) > xmax + reach or \
                (b.y if b.y > py else py) < ymin - reach or (b.y if b.y < py else py) > ymax + reach:
            continue
        for k in range(sw.n + 1):
            if k > 0 and sw.d[k - 1] >= stop:
                break
            for q in range(nq + 1):
                px = b.x + 0.25 * q * vx
                py = b.y + 0.25 * q * vy
                dx = px - sw.x[k]
                dy = py - sw.y[k]
                lon = dx * sw.c[k] + dy * sw.s[k]
                lat = -dx * sw.s[k] + dy * sw.c[k]
                if fabs(lon) <= ahl + rb and fabs(lat) <= ahw + rb:
                    stop = sw.d[k - 1] if k > 0 else 0.0
                    break
            if stop < 1e9:
                break
    return stop
