# cython: language_level=3
"""Planar geometry kernels shared by every engine module.

All functions are ``inline nogil`` C; units are metres and radians. Boxes are oriented bounding
boxes given by centre (cx, cy), heading (radians, counter-clockwise from +x), full length (along the
heading) and full width.
"""

from libc.math cimport cos, sin, fabs, sqrt, fmod


cdef inline double dot2(double ax, double ay, double bx, double by) noexcept nogil:
    return ax * bx + ay * by


cdef inline double cross2(double ax, double ay, double bx, double by) noexcept nogil:
    return ax * by - ay * bx


cdef inline double point_segment_dist2(double px, double py, double ax, double ay,
                                       double bx, double by, double* t_out) noexcept nogil:
    """Squared distance from P to segment AB; writes the clamped parameter t in [0, 1]."""
    cdef double dx = bx - ax, dy = by - ay
    cdef double len2 = dx * dx + dy * dy
    cdef double t = 0.0
    if len2 > 0.0:
        t = ((px - ax) * dx + (py - ay) * dy) / len2
        if t < 0.0:
            t = 0.0
        elif t > 1.0:
            t = 1.0
    t_out[0] = t
    cdef double qx = ax + t * dx - px, qy = ay + t * dy - py
    return qx * qx + qy * qy


cdef inline bint segments_intersect(double ax, double ay, double bx, double by,
                                    double cx, double cy, double dx, double dy) noexcept nogil:
    """True when closed segments AB and CD share a point (collinear overlaps included)."""
    cdef double d1 = cross2(dx - cx, dy - cy, ax - cx, ay - cy)
    cdef double d2 = cross2(dx - cx, dy - cy, bx - cx, by - cy)
    cdef double d3 = cross2(bx - ax, by - ay, cx - ax, cy - ay)
    cdef double d4 = cross2(bx - ax, by - ay, dx - ax, dy - ay)
    if ((d1 > 0 and d2 < 0) or (d1 < 0 and d2 > 0)) and ((d3 > 0 and d4 < 0) or (d3 < 0 and d4 > 0)):
        return True
    # Touching or collinear cases: an end point lies on the other segment.
    if d1 == 0 and _on_segment(cx, cy, dx, dy, ax, ay):
        return True
    if d2 == 0 and _on_segment(cx, cy, dx, dy, bx, by):
        return True
    if d3 == 0 and _on_segment(ax, ay, bx, by, cx, cy):
        return True
    if d4 == 0 and _on_segment(ax, ay, bx, by, dx, dy):
        return True
    return False


cdef inline bint _on_segment(double ax, double ay, double bx, double by,
                             double px, double py) noexcept nogil:
    """P collinear with AB is on AB when it lies in AB's bounding box."""
    return (min(ax, bx) <= px <= max(ax, bx)) and (min(ay, by) <= py <= max(ay, by))


cdef inline void box_corners(double cx, double cy, double heading, double length, double width,
                             double* xs, double* ys) noexcept nogil:
    """Corners of an oriented box, counter-clockwise from front-left... (front-right first)."""
    cdef double c = cos(heading), s = sin(heading)
    cdef double hl = 0.5 * length, hw = 0.5 * width
    xs[0] = cx + c * hl + s * hw
    ys[0] = cy + s * hl - c * hw
    xs[1] = cx + c * hl - s * hw
    ys[1] = cy + s * hl + c * hw
    xs[2] = cx - c * hl - s * hw
    ys[2] = cy - s * hl + c * hw
    xs[3] = cx - c * hl + s * hw
    ys[3] = cy - s * hl - c * hw


cdef inline bint obb_overlap_cs(double ax, double ay, double ac, double as_, double ahl, double ahw,
                                double bx, double by, double bc, double bs, double bhl, double bhw) noexcept nogil:
    """Separating-axis test of two oriented boxes given by centre, heading as (cos, sin) and half
    extents (half length, half width); touching counts as overlap. The four candidate axes are the
    boxes' edge normals; on each, the centre distance is compared with the sum of the projected
    half extents."""
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


cdef inline bint obb_overlap(double cx1, double cy1, double h1, double l1, double w1,
                             double cx2, double cy2, double h2, double l2, double w2) noexcept nogil:
    """Separating-axis test for two oriented boxes given by heading and full extents (touching
    counts as overlap): ``obb_overlap_cs`` after a cheap reject on bounding circles, since most pairs
    from the spatial grid are far apart."""
    cdef double dx = cx2 - cx1, dy = cy2 - cy1
    cdef double r = 0.5 * (sqrt(l1 * l1 + w1 * w1) + sqrt(l2 * l2 + w2 * w2))
    if dx * dx + dy * dy > r * r:
        return False
    return obb_overlap_cs(cx1, cy1, cos(h1), sin(h1), 0.5 * l1, 0.5 * w1,
                          cx2, cy2, cos(h2), sin(h2), 0.5 * l2, 0.5 * w2)


cdef inline bint point_in_polygon(double px, double py, const double[:, ::1] pts,
                                  Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    """Even-odd rule over the ring pts[start:stop] (implicitly closed); boundary counts as inside
    only where the crossing rule puts it, which is fine for the footprint tests that use it."""
    cdef bint inside = False
    cdef Py_ssize_t i, j = stop - 1
    cdef double xi, yi, xj, yj
    for i in range(start, stop):
        xi = pts[i, 0]
        yi = pts[i, 1]
        xj = pts[j, 0]
        yj = pts[j, 1]
        if (yi > py) != (yj > py):
            if px < (xj - xi) * (py - yi) / (yj - yi) + xi:
                inside = not inside
        j = i
    return inside


cdef inline double wrap_angle(double a) noexcept nogil:
    """Wrap to (-pi, pi]. Beyond two turns either way ``fmod`` takes the whole turns off first, so an
    angle of any finite size wraps in a few steps (the loops alone would take ``a / 2 pi`` steps: a
    scripted heading of 1e16 rad hung the engine)."""
    cdef double two_pi = 6.283185307179586
    if a > 12.566370614359172 or a < -12.566370614359172:
        a = fmod(a, two_pi)
    while a > 3.141592653589793:
        a -= two_pi
    while a <= -3.141592653589793:
        a += two_pi
    return a
