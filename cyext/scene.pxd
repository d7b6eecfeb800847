# cython: language_level=3
"""Scene composition helpers (TerraZero appendix D): points along lanes and goal sampling by a
forward walk over the lane graph."""

from libc.math cimport atan2, sqrt
from common cimport MapC
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


cdef inline bint sample_goal(const MapC* m, Rng* rng, Py_ssize_t lane, double s, double x, double y,
                             double cos_h, double sin_h, double dmin, double dmax, double min_forward,
                             int tries, double* gx, double* gy, double* gz) noexcept nogil:
    """Walk forward from (lane, s) along random successors to an arc length drawn from
    [dmin, dmax]; accept the point if it lies at least ``min_forward`` metres ahead of the agent
    along its heading. Returns False when no try succeeds."""
    cdef int attempt, hops
    cdef Py_ssize_t cur, n_succ
    cdef double remaining, avail, h
    for attempt in range(tries):
        cur = lane
        remaining = rng_range(rng, dmin, dmax) + s
        hops = 0
        while True:
            avail = lane_length(m, cur)
            if remaining <= avail:
                break
            n_succ = m.succ_off[cur + 1] - m.succ_off[cur]
            if n_succ == 0 or hops > 256:
                remaining = avail
                break
            remaining -= avail
            cur = m.succ[m.succ_off[cur] + rng_int(rng, n_succ)]
            hops += 1
        lane_point(m, cur, remaining, gx, gy, gz, &h)
        if (gx[0] - x) * cos_h + (gy[0] - y) * sin_h >= min_forward:
            return True
    return False
