# cython: language_level=3
"""terrazero_env._engine: the compiled core.

This module holds the geometry kernels and the map loader that turns a built ``MapData`` (read from a
``.tzb`` file by memory map) into C-side segment arrays with a uniform spatial grid. Per-agent loops
live here and run without the GIL; Python only hands in whole arrays.
"""

import numpy as np
cimport numpy as cnp
from libc.math cimport atan2, sqrt, floor, fabs, INFINITY
from libc.stdlib cimport malloc, free

from geometry cimport (point_segment_dist2, obb_overlap, segments_intersect, point_in_polygon,
                       box_corners)

cnp.import_array()

#: Default elevation gate (metres): geometry further away in z is ignored (overpasses), TerraZero App. A.
DEFAULT_Z_GATE = 2.5


def obb_overlap_batch(const double[:, ::1] boxes_a, const double[:, ::1] boxes_b):
    """Separating-axis overlap test for pairs of oriented boxes.

    ``boxes_a``, ``boxes_b``: float64 ``[N, 5]`` rows of (cx, cy, heading, length, width) in metres and
    radians. Returns bool ``[N]``: whether box ``i`` of ``a`` overlaps box ``i`` of ``b``.
    """
    if boxes_a.shape[0] != boxes_b.shape[0] or boxes_a.shape[1] != 5 or boxes_b.shape[1] != 5:
        raise ValueError(f"expected two float64 [N, 5] arrays, got {(boxes_a.shape[0], boxes_a.shape[1])} and "
                         f"{(boxes_b.shape[0], boxes_b.shape[1])}")
    cdef Py_ssize_t n = boxes_a.shape[0], i
    out = np.zeros(n, dtype=np.bool_)
    cdef cnp.uint8_t[::1] o = out.view(np.uint8)
    with nogil:
        for i in range(n):
            o[i] = obb_overlap(boxes_a[i, 0], boxes_a[i, 1], boxes_a[i, 2], boxes_a[i, 3], boxes_a[i, 4],
                               boxes_b[i, 0], boxes_b[i, 1], boxes_b[i, 2], boxes_b[i, 3], boxes_b[i, 4])
    return out


def box_corners_batch(const double[:, ::1] boxes):
    """Corners of oriented boxes: float64 ``[N, 5]`` -> ``[N, 4, 2]``, counter-clockwise from
    front-right."""
    if boxes.shape[1] != 5:
        raise ValueError(f"expected float64 [N, 5], got {(boxes.shape[0], boxes.shape[1])}")
    cdef Py_ssize_t n = boxes.shape[0], i, k
    out = np.empty((n, 4, 2), dtype=np.float64)
    cdef double[:, :, ::1] o = out
    cdef double xs[4]
    cdef double ys[4]
    with nogil:
        for i in range(n):
            box_corners(boxes[i, 0], boxes[i, 1], boxes[i, 2], boxes[i, 3], boxes[i, 4], xs, ys)
            for k in range(4):
                o[i, k, 0] = xs[k]
                o[i, k, 1] = ys[k]
    return out


def segments_intersect_batch(const double[:, ::1] a, const double[:, ::1] b):
    """Whether segment ``a[i]`` meets segment ``b[i]``; rows are (x0, y0, x1, y1). Returns bool ``[N]``."""
    if a.shape[0] != b.shape[0] or a.shape[1] != 4 or b.shape[1] != 4:
        raise ValueError(f"expected two float64 [N, 4] arrays, got {(a.shape[0], a.shape[1])} and {(b.shape[0], b.shape[1])}")
    cdef Py_ssize_t n = a.shape[0], i
    out = np.zeros(n, dtype=np.bool_)
    cdef cnp.uint8_t[::1] o = out.view(np.uint8)
    with nogil:
        for i in range(n):
            o[i] = segments_intersect(a[i, 0], a[i, 1], a[i, 2], a[i, 3], b[i, 0], b[i, 1], b[i, 2], b[i, 3])
    return out


def points_in_polygon(const double[:, ::1] points, const double[:, ::1] polygon):
    """Even-odd containment of ``points`` (float64 ``[N, >=2]``) in one ring ``polygon``
    (float64 ``[k, >=2]``, implicitly closed). Returns bool ``[N]``."""
    if polygon.shape[0] < 3:
        raise ValueError(f"a polygon needs at least 3 points, got {polygon.shape[0]}")
    if points.shape[1] < 2 or polygon.shape[1] < 2:
        raise ValueError("points and polygon need at least 2 columns (x, y)")
    cdef Py_ssize_t n = points.shape[0], i, k = polygon.shape[0]
    out = np.zeros(n, dtype=np.bool_)
    cdef cnp.uint8_t[::1] o = out.view(np.uint8)
    with nogil:
        for i in range(n):
            o[i] = point_in_polygon(points[i, 0], points[i, 1], polygon, 0, k)
    return out


cdef class SegmentGrid:
    """The segments of a set of polylines (or polygon rings) indexed by a uniform grid.

    Built once per map; queries run without the GIL. ``values``/``offsets`` are a CSR polyline set
    (float64 ``[P, 3]`` points, int64 ``[n + 1]`` row offsets); ``closed=True`` also joins each ring's
    last point to its first.
    """

    cdef readonly double cell_size
    cdef readonly double x0, y0
    cdef readonly Py_ssize_t nx, ny, n_segments
    # Segment table (one entry per segment): end points, z at both ends, owning row, arc length at A.
    cdef double[:, ::1] seg          # [S, 6]: ax, ay, az, bx, by, bz
    cdef int[::1] seg_row            # [S]
    cdef double[::1] seg_s0          # [S]
    # Grid in CSR layout: cell c holds cell_items[cell_start[c]:cell_start[c + 1]].
    cdef long long[::1] cell_start
    cdef int[::1] cell_items

    def __init__(self, const double[:, ::1] values, const long long[::1] offsets, double cell_size=10.0,
                 bint closed=False):
        if values.shape[0] > 0 and values.shape[1] != 3:
            raise ValueError(f"values must be float64 [P, 3], got {(values.shape[0], values.shape[1])}")
        if not cell_size > 0:
            raise ValueError(f"cell_size must be positive, got {cell_size}")
        self.cell_size = cell_size
        cdef Py_ssize_t n_rows = offsets.shape[0] - 1, r, i, a, b, k, n_seg = 0
        for r in range(n_rows):
            k = offsets[r + 1] - offsets[r]
            if k >= 2:
                n_seg += k - 1 + (1 if closed and k >= 3 else 0)
        self.n_segments = n_seg
        self.seg = np.zeros((n_seg, 6), dtype=np.float64)
        self.seg_row = np.zeros(n_seg, dtype=np.int32)
        self.seg_s0 = np.zeros(n_seg, dtype=np.float64)
        cdef Py_ssize_t s = 0
        cdef double acc, dx, dy
        with nogil:
            for r in range(n_rows):
                k = offsets[r + 1] - offsets[r]
                if k < 2:
                    continue
                acc = 0.0
                for i in range(k - 1 + (1 if closed and k >= 3 else 0)):
                    a = offsets[r] + i
                    b = offsets[r] + (i + 1) % k
                    self.seg[s, 0] = values[a, 0]
                    self.seg[s, 1] = values[a, 1]
                    self.seg[s, 2] = values[a, 2]
                    self.seg[s, 3] = values[b, 0]
                    self.seg[s, 4] = values[b, 1]
                    self.seg[s, 5] = values[b, 2]
                    self.seg_row[s] = <int>r
                    self.seg_s0[s] = acc
                    dx = values[b, 0] - values[a, 0]
                    dy = values[b, 1] - values[a, 1]
                    acc += sqrt(dx * dx + dy * dy)
                    s += 1
        self._build_grid()

    cdef void _build_grid(self):
        cdef Py_ssize_t n = self.n_segments, s, cx, cy, c
        cdef double xmin = INFINITY, ymin = INFINITY, xmax = -INFINITY, ymax = -INFINITY
        for s in range(n):
            xmin = min(xmin, self.seg[s, 0], self.seg[s, 3])
            ymin = min(ymin, self.seg[s, 1], self.seg[s, 4])
            xmax = max(xmax, self.seg[s, 0], self.seg[s, 3])
            ymax = max(ymax, self.seg[s, 1], self.seg[s, 4])
        if n == 0:
            xmin = ymin = 0.0
            xmax = ymax = 0.0
        self.x0 = xmin
        self.y0 = ymin
        self.nx = <Py_ssize_t>floor((xmax - xmin) / self.cell_size) + 1
        self.ny = <Py_ssize_t>floor((ymax - ymin) / self.cell_size) + 1
        counts = np.zeros(self.nx * self.ny + 1, dtype=np.int64)
        cdef long long[::1] cnt = counts
        cdef Py_ssize_t ix0, ix1, iy0, iy1
        for s in range(n):
            self._seg_cells(s, &ix0, &ix1, &iy0, &iy1)
            for cy in range(iy0, iy1 + 1):
                for cx in range(ix0, ix1 + 1):
                    cnt[cy * self.nx + cx + 1] += 1
        starts = np.cumsum(counts)
        self.cell_start = starts
        self.cell_items = np.zeros(int(starts[starts.shape[0] - 1]), dtype=np.int32)
        fill = starts[: starts.shape[0] - 1].copy()
        cdef long long[::1] f = fill
        for s in range(n):
            self._seg_cells(s, &ix0, &ix1, &iy0, &iy1)
            for cy in range(iy0, iy1 + 1):
                for cx in range(ix0, ix1 + 1):
                    c = cy * self.nx + cx
                    self.cell_items[f[c]] = <int>s
                    f[c] += 1

    cdef inline void _seg_cells(self, Py_ssize_t s, Py_ssize_t* ix0, Py_ssize_t* ix1,
                                Py_ssize_t* iy0, Py_ssize_t* iy1) noexcept nogil:
        ix0[0] = self._cell_x(min(self.seg[s, 0], self.seg[s, 3]))
        ix1[0] = self._cell_x(max(self.seg[s, 0], self.seg[s, 3]))
        iy0[0] = self._cell_y(min(self.seg[s, 1], self.seg[s, 4]))
        iy1[0] = self._cell_y(max(self.seg[s, 1], self.seg[s, 4]))

    cdef inline Py_ssize_t _cell_x(self, double x) noexcept nogil:
        cdef Py_ssize_t i = <Py_ssize_t>floor((x - self.x0) / self.cell_size)
        return 0 if i < 0 else (self.nx - 1 if i >= self.nx else i)

    cdef inline Py_ssize_t _cell_y(self, double y) noexcept nogil:
        cdef Py_ssize_t i = <Py_ssize_t>floor((y - self.y0) / self.cell_size)
        return 0 if i < 0 else (self.ny - 1 if i >= self.ny else i)

    cdef Py_ssize_t nearest_segment(self, double px, double py, double pz, double max_dist,
                                    double z_gate, double* dist2_out, double* t_out) noexcept nogil:
        """Index of the segment nearest to P within ``max_dist`` whose z at the nearest point is
        within ``z_gate`` of ``pz`` (``z_gate < 0`` disables the gate); -1 if none.

        Searches square rings of cells outwards from P's cell; stops once the ring's inner distance
        exceeds the best distance found, so the answer is exact.
        """
        cdef Py_ssize_t best = -1, ring, cx, cy, c, k, s
        cdef Py_ssize_t pcx, pcy, max_ring
        cdef double best_d2 = max_dist * max_dist, d2, t, z, ring_d
        cdef double fx = (px - self.x0) / self.cell_size, fy = (py - self.y0) / self.cell_size
        if self.n_segments == 0:
            return -1
        # Distance from P to the grid rectangle: rings closer than that hold nothing.
        pcx = <Py_ssize_t>floor(fx)
        pcy = <Py_ssize_t>floor(fy)
        max_ring = <Py_ssize_t>(max_dist / self.cell_size) + 2 + max(
            max(-pcx, pcx - self.nx + 1), max(-pcy, pcy - self.ny + 1), 0)
        for ring in range(max_ring + 1):
            # Any segment in this ring is at least (ring - 1) cells away from P.
            ring_d = (ring - 1) * self.cell_size
            if ring_d > 0 and ring_d * ring_d > best_d2:
                break
            for cy in range(pcy - ring, pcy + ring + 1):
                if cy < 0 or cy >= self.ny:
                    continue
                for cx in range(pcx - ring, pcx + ring + 1):
                    if cx < 0 or cx >= self.nx:
                        continue
                    if cy != pcy - ring and cy != pcy + ring and cx != pcx - ring and cx != pcx + ring:
                        continue
                    c = cy * self.nx + cx
                    for k in range(self.cell_start[c], self.cell_start[c + 1]):
                        s = self.cell_items[k]
                        d2 = point_segment_dist2(px, py, self.seg[s, 0], self.seg[s, 1],
                                                 self.seg[s, 3], self.seg[s, 4], &t)
                        if d2 <= best_d2:
                            if z_gate >= 0:
                                z = self.seg[s, 2] + t * (self.seg[s, 5] - self.seg[s, 2])
                                if fabs(z - pz) > z_gate:
                                    continue
                            if d2 < best_d2 or best < 0 or s < best:
                                best = s
                                best_d2 = d2
                                t_out[0] = t
        dist2_out[0] = best_d2
        return best

    def query(self, points, double max_dist=50.0, double z_gate=DEFAULT_Z_GATE):
        """Project points onto the nearest segment.

        ``points``: float64 ``[N, 2]`` or ``[N, 3]`` (z = 0 when absent). Returns a dict of arrays:
        ``row`` (int32, polyline index, -1 when nothing lies within ``max_dist`` metres),
        ``distance`` (m), ``s`` (arc length along the row at the projection, m), ``lateral`` (signed
        offset, + to the left of the direction of travel, m) and ``heading`` (segment direction, rad).
        ``z_gate``: ignore geometry more than this many metres away in z (negative disables).
        """
        pts = np.ascontiguousarray(points, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] not in (2, 3):
            raise ValueError(f"points must be [N, 2] or [N, 3], got shape {pts.shape}")
        if not np.isfinite(pts).all():
            raise ValueError("points contain non-finite values")
        if pts.shape[1] == 2:
            pts = np.concatenate([pts, np.zeros((pts.shape[0], 1))], axis=1)
        cdef double[:, ::1] p = pts
        cdef Py_ssize_t n = pts.shape[0], i, s
        row = np.full(n, -1, dtype=np.int32)
        dist = np.full(n, np.inf)
        arc = np.full(n, np.nan)
        lat = np.full(n, np.nan)
        head = np.full(n, np.nan)
        cdef int[::1] row_v = row
        cdef double[::1] dist_v = dist, arc_v = arc, lat_v = lat, head_v = head
        cdef double d2, t, dx, dy, L
        with nogil:
            for i in range(n):
                s = self.nearest_segment(p[i, 0], p[i, 1], p[i, 2], max_dist, z_gate, &d2, &t)
                if s < 0:
                    continue
                dx = self.seg[s, 3] - self.seg[s, 0]
                dy = self.seg[s, 4] - self.seg[s, 1]
                L = sqrt(dx * dx + dy * dy)
                row_v[i] = self.seg_row[s]
                dist_v[i] = sqrt(d2)
                arc_v[i] = self.seg_s0[s] + t * L
                head_v[i] = atan2(dy, dx)
                if L > 0:
                    lat_v[i] = (dx * (p[i, 1] - self.seg[s, 1]) - dy * (p[i, 0] - self.seg[s, 0])) / L
                else:
                    lat_v[i] = 0.0
        return {"row": row, "distance": dist, "s": arc, "lateral": lat, "heading": head}

    @property
    def grid_shape(self):
        """(ny, nx) cells."""
        return (self.ny, self.nx)


cdef class RoadMap:
    """A built map loaded for simulation: lane centerlines and drivable-area boundaries (road edges
    and sidewalk rings) as spatial grids. Worlds on the same map share one ``RoadMap``.

    ``map_data``: a built :class:`terrazero_env.maps.MapData` (arrays may be memory-mapped; they are
    read, never copied per element in Python).
    """

    cdef readonly object map_data
    cdef readonly SegmentGrid lanes
    cdef readonly SegmentGrid road_edges
    cdef readonly SegmentGrid sidewalks

    def __init__(self, map_data, double cell_size=10.0):
        self.map_data = map_data
        cl = map_data.lanes.centerline
        self.lanes = SegmentGrid(_f64(cl.values), _i64(cl.offsets), cell_size)
        self.road_edges = SegmentGrid(_f64(map_data.road_edges.values), _i64(map_data.road_edges.offsets),
                                      cell_size)
        self.sidewalks = SegmentGrid(_f64(map_data.sidewalks.values), _i64(map_data.sidewalks.offsets),
                                     cell_size, closed=True)

    @classmethod
    def load(cls, path, double cell_size=10.0):
        """Memory-map a ``.tzb`` file and index it."""
        from terrazero_env.maps.terrabin import load
        return cls(load(path), cell_size)

    def project_to_lanes(self, points, double max_dist=50.0, double z_gate=DEFAULT_Z_GATE):
        """Nearest lane of each point (see :meth:`SegmentGrid.query`; ``row`` is the lane id)."""
        return self.lanes.query(points, max_dist, z_gate)

    @property
    def num_lanes(self):
        return len(self.map_data.lanes)


cdef object _f64(a):
    a = np.asarray(a)
    if a.shape[0] == 0:
        return np.zeros((0, 3), dtype=np.float64)
    return np.ascontiguousarray(a, dtype=np.float64)


cdef object _i64(a):
    return np.ascontiguousarray(a, dtype=np.int64)
