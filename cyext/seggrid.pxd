# cython: language_level=3
"""Nearest-segment queries on a SegGridC (a polyline set indexed by a uniform grid)."""

from libc.math cimport floor, fabs
from common cimport SegGridC
from geometry cimport point_segment_dist2


cdef inline Py_ssize_t seggrid_nearest(const SegGridC* g, double px, double py, double pz, double max_dist,
                                       double z_gate, double* dist2_out, double* t_out) noexcept nogil:
    """Index of the segment nearest to P within ``max_dist`` whose z at the nearest point is within
    ``z_gate`` of ``pz`` (``z_gate < 0`` disables the gate); -1 if none.

    Searches square rings of cells outwards from P's cell and stops once a ring's inner distance
    exceeds the best distance found, so the answer is exact. Ties go to the lowest segment index.
    """
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
