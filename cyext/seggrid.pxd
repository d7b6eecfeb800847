# cython: language_level=3
"""Nearest-segment queries on a SegGridC (a polyline set indexed by a uniform grid)."""

from libc.math cimport floor, fabs, sqrt
from common cimport SegGridC
from geometry cimport point_segment_dist2


cdef inline bint heads_along(const double* q, double dir_x, double dir_y, double cos_min) noexcept nogil:
    """Whether segment ``q``'s direction makes a cosine of at least ``cos_min`` with the unit vector."""
    cdef double dx = q[3] - q[0], dy = q[4] - q[1]
    cdef double L = sqrt(dx * dx + dy * dy)
    return L > 0 and dx * dir_x + dy * dir_y >= cos_min * L


cdef inline Py_ssize_t seggrid_nearest(const SegGridC* g, double px, double py, double pz, double max_dist,
                                       double z_gate, double* dist2_out, double* t_out) noexcept nogil:
    """Index of the segment nearest to P within ``max_dist`` whose z at the nearest point is within
    ``z_gate`` of ``pz`` (``z_gate < 0`` disables the gate); -1 if none.

    Searches square rings of cells outwards from P's cell and stops once a ring's inner distance
    exceeds the best distance found, so the answer is exact. Ties go to the lowest segment index.
    """
    return seggrid_nearest_where(g, px, py, pz, max_dist, z_gate, 0.0, 0.0, -2.0, NULL, dist2_out, t_out)


cdef inline Py_ssize_t seggrid_nearest_where(const SegGridC* g, double px, double py, double pz, double max_dist,
                                             double z_gate, double dir_x, double dir_y, double cos_min,
                                             const float* row_width, double* dist2_out,
                                             double* t_out) noexcept nogil:
    """``seggrid_nearest`` over the segments that also pass two optional filters: with ``cos_min`` of
    -1 or more, the segment's direction makes a cosine of at least ``cos_min`` with the unit vector
    (``dir_x``, ``dir_y``); with ``row_width`` given (a width per polyline row), P lies within half
    its row's width of the segment."""
    cdef Py_ssize_t best = -1, ring, cx, cy, c, k, s, pcx, pcy, max_ring, lo_x, hi_x
    cdef double best_d2 = max_dist * max_dist, d2, t = 0.0, z, ring_d
    cdef const double* q
    cdef bint step_all
    dist2_out[0] = best_d2
    if g.n_segments == 0:
        return -1
    pcx = <Py_ssize_t>floor((px - g.x0) / g.cell_size)
    pcy = <Py_ssize_t>floor((py - g.y0) / g.cell_size)
    # Rings beyond the grid rectangle hold nothing; rings further than max_dist cannot match.
    max_ring = <Py_ssize_t>(max_dist / g.cell_size) + 2
    max_ring += max(max(-pcx, pcx - g.nx + 1), max(max(-pcy, pcy - g.ny + 1), 0))
    for ring in range(max_ring + 1):
        ring_d = (ring - 1) * g.cell_size
        if ring_d > 0 and ring_d * ring_d > best_d2:
            break
        for cy in range(max(pcy - ring, 0), min(pcy + ring, g.ny - 1) + 1):
            if cy == pcy - ring or cy == pcy + ring:
                lo_x = pcx - ring
                hi_x = pcx + ring
                step_all = True
            else:
                lo_x = pcx - ring
                hi_x = pcx + ring
                step_all = False
            cx = lo_x
            while cx <= hi_x:
                if 0 <= cx < g.nx:
                    c = cy * g.nx + cx
                    for k in range(g.cell_start[c], g.cell_start[c + 1]):
                        s = g.cell_items[k]
                        q = g.seg + 6 * s
                        d2 = point_segment_dist2(px, py, q[0], q[1], q[3], q[4], &t)
                        if d2 < best_d2 or (d2 == best_d2 and (best < 0 or s < best)):
                            if cos_min >= -1.0 and not heads_along(q, dir_x, dir_y, cos_min):
                                continue
                            if row_width != NULL and 4.0 * d2 > row_width[g.seg_row[s]] * row_width[g.seg_row[s]]:
                                continue
                            if z_gate >= 0:
                                z = q[2] + t * (q[5] - q[2])
                                if fabs(z - pz) > z_gate:
                                    continue
                            best = s
                            best_d2 = d2
                            t_out[0] = t
                if step_all or ring == 0:
                    cx += 1
                else:
                    cx += 2 * ring  # interior rows: only the ring's two side cells
    dist2_out[0] = best_d2
    return best
