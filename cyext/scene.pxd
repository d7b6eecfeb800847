# cython: language_level=3
"""Scene composition helpers (TerraZero appendix D): points along lanes and goal sampling by a
forward walk over the lane graph."""

from libc.math cimport atan2, sqrt, tan
from common cimport MapC, Agent, CLS_PEDESTRIAN, CP_STEERMAX, CP_REARAXLE
from rng cimport Rng, rng_range, rng_int


cdef inline double lane_length(const MapC* m, Py_ssize_t lane) noexcept nogil:
    return m.lane_s0[m.lane_off[lane + 1] - 1]


cdef inline Py_ssize_t lane_segment_at(const MapC* m, Py_ssize_t lane, double s) noexcept nogil:
    """Index of the first point of the lane segment that holds arc length ``s`` (clamped to the lane;
    binary search over the points)."""
    cdef Py_ssize_t lo = m.lane_off[lane], hi = m.lane_off[lane + 1] - 1, mid
    if s <= m.lane_s0[lo]:
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if m.lane_s0[mid] <= s:
            lo = mid
        else:
            hi = mid
    return lo


cdef inline void lane_point(const MapC* m, Py_ssize_t lane, double s, double* x, double* y, double* z,
                            double* heading) noexcept nogil:
    """Point and direction at arc length ``s`` (clamped) along a lane."""
    cdef Py_ssize_t lo = lane_segment_at(m, lane, s), last = m.lane_off[lane + 1] - 1
    cdef Py_ssize_t hi = lo + 1 if lo < last else lo
    cdef double t, seg
    if s <= 0:
        s = 0
    seg = m.lane_s0[hi] - m.lane_s0[lo]
    t = (s - m.lane_s0[lo]) / seg if seg > 0 else 0.0
    if t > 1:
        t = 1
    x[0] = m.lane_pts[3 * lo] + t * (m.lane_pts[3 * hi] - m.lane_pts[3 * lo])
    y[0] = m.lane_pts[3 * lo + 1] + t * (m.lane_pts[3 * hi + 1] - m.lane_pts[3 * lo + 1])
    z[0] = m.lane_pts[3 * lo + 2] + t * (m.lane_pts[3 * hi + 2] - m.lane_pts[3 * lo + 2])
    heading[0] = atan2(m.lane_pts[3 * hi + 1] - m.lane_pts[3 * lo + 1], m.lane_pts[3 * hi] - m.lane_pts[3 * lo])


ctypedef struct TurnBox:
    # An agent's box and steering, for ``lane_turnable``: the radius of the smallest circle its box
    # centre drives (m), the centre's distance ahead of the point it turns about (m), its length and width.
    double r_min, ahead, length, width


cdef inline bint turn_box(const Agent* a, const double* cp, TurnBox* tb) noexcept nogil:
    """Fill ``tb`` with the agent's box and smallest circle (``cp``: its class's parameter row): its
    turning point on wheelbase / tan(steering limit) (the kinematic steering coefficient scales the
    command, not the limit, dynamics.pxd), the box centre ``CP_REARAXLE`` of the length ahead of it.
    False for a class without a steering limit (pedestrians)."""
    cdef double r
    if a.cls == CLS_PEDESTRIAN or cp[CP_STEERMAX] <= 0.0 or a.wheelbase <= 0.0:
        return False
    r = a.wheelbase / tan(cp[CP_STEERMAX])
    tb.ahead = cp[CP_REARAXLE] * a.length
    tb.r_min = sqrt(r * r + tb.ahead * tb.ahead)
    tb.length = a.length
    tb.width = a.width
    return True


cdef inline bint lane_turnable(const MapC* m, Py_ssize_t lane, const TurnBox* tb) noexcept nogil:
    """Whether a box ``tb`` can follow ``lane`` through its tightest bend (``MapC.lane_bend``) without
    leaving the road: the bend no tighter than its smallest circle, and the band it sweeps there
    (its front outer corner outside the centreline, its inner side at the turning point inside it)
    between the road edges with the box shifted at most the lane's spare half width
    ((lane width - box width) / 2) off the centreline. Straight lanes always."""
    cdef const float* b = &m.lane_bend[4 * lane]
    cdef double r = b[0], rr, outward, inward, inner, outer, spare, lo, hi
    if not (r < 1e30):
        return True
    if r < tb.r_min:
        return False
    rr = r * r - tb.ahead * tb.ahead
    rr = sqrt(rr) if rr > 0.0 else 0.0
    outward = sqrt((rr + 0.5 * tb.width) ** 2 + (tb.ahead + 0.5 * tb.length) ** 2) - r
    inward = r - (rr - 0.5 * tb.width)
    if b[1] > 0:
        inner, outer = b[2], b[3]
    elif b[1] < 0:
        inner, outer = b[3], b[2]
    else:
        inner = outer = b[2] if b[2] < b[3] else b[3]
    spare = 0.5 * (m.lane_width[lane] - tb.width)
    if spare < 0.0:
        spare = 0.0
    lo = outward - outer
    hi = inner - inward
    if lo < -spare:
        lo = -spare
    if hi > spare:
        hi = spare
    return lo <= hi


cdef inline Py_ssize_t _turnable_successor(const MapC* m, Rng* rng, Py_ssize_t lane, const TurnBox* tb) noexcept nogil:
    """A successor of ``lane`` drawn uniformly among those ``tb`` can follow (``lane_turnable``;
    every successor when ``tb`` is NULL: then the draw is the plain one); -1 when there is none."""
    cdef Py_ssize_t k, k0 = m.succ_off[lane], n = m.succ_off[lane + 1] - m.succ_off[lane], n_ok = 0, pick
    if n <= 0:
        return -1
    if tb != NULL:
        for k in range(k0, k0 + n):
            if lane_turnable(m, m.succ[k], tb):
                n_ok += 1
        if n_ok == 0:
            return -1
        if n_ok < n:
            pick = rng_int(rng, n_ok)
            for k in range(k0, k0 + n):
                if lane_turnable(m, m.succ[k], tb):
                    if pick == 0:
                        return m.succ[k]
                    pick -= 1
    return m.succ[k0 + rng_int(rng, n)]


cdef inline bint sample_goal(const MapC* m, Rng* rng, Py_ssize_t lane, double s, double x, double y,
                             double cos_h, double sin_h, double dmin, double dmax, double min_forward,
                             int tries, const TurnBox* tb, double* gx, double* gy, double* gz) noexcept nogil:
    """Walk forward from (lane, s) along random successors to an arc length drawn from
    [dmin, dmax]; accept the point if it lies at least ``min_forward`` metres ahead of the agent
    along its heading. With a ``tb`` the walk enters only successors that box can follow
    (``lane_turnable``) and ends where there is none. Returns False when no try succeeds."""
    cdef int attempt, hops
    cdef Py_ssize_t cur, nxt
    cdef double remaining, avail, h
    for attempt in range(tries):
        cur = lane
        remaining = rng_range(rng, dmin, dmax) + s
        hops = 0
        while True:
            avail = lane_length(m, cur)
            if remaining <= avail:
                break
            nxt = _turnable_successor(m, rng, cur, tb) if hops <= 256 else -1
            if nxt < 0:
                remaining = avail
                break
            remaining -= avail
            cur = nxt
            hops += 1
        lane_point(m, cur, remaining, gx, gy, gz, &h)
        if (gx[0] - x) * cos_h + (gy[0] - y) * sin_h >= min_forward:
            return True
    return False
