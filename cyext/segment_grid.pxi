# The spatial index of polylines and polygon rings: segments bucketed into a uniform grid, exact
# nearest-segment queries. Included by _engine.pyx before roadmap.pxi, whose RoadMap holds one per
# layer (lanes, road edges, sidewalks, crosswalks).


cdef class SegmentGrid:
    """The segments of a set of polylines (or polygon rings) indexed by a uniform grid.

    ``values``/``offsets``: a CSR polyline set (float64 ``[P, 3]`` points, int64 ``[n + 1]`` row
    offsets); ``closed=True`` also joins each ring's last point to its first. Built once per map;
    queries run without the GIL.
    """

    cdef SegGridC c
    cdef object _seg, _row, _s0, _start, _items  # owners of the arrays c points into

    def __init__(self, values, offsets, double cell_size=10.0, bint closed=False):
        v = np.ascontiguousarray(values, dtype=np.float64).reshape(-1, 3)
        off = np.ascontiguousarray(offsets, dtype=np.int64)
        if not cell_size > 0:
            raise ValueError(f"cell_size must be positive, got {cell_size}")
        if off.ndim != 1 or off.shape[0] < 1 or off[off.shape[0] - 1] != v.shape[0]:
            raise ValueError("offsets must be int64 [n + 1] ending at the number of points")
        lengths = np.diff(off)
        rows = np.repeat(np.arange(lengths.shape[0], dtype=np.int64), lengths)
        pos = np.arange(v.shape[0], dtype=np.int64) - np.repeat(off[:-1], lengths)
        # Segment a -> a + 1 inside each row, plus last -> first for closed rings of >= 3 points.
        a_idx = np.nonzero(pos < np.repeat(lengths, lengths) - 1)[0]
        b_idx = a_idx + 1
        if closed:
            ring = np.nonzero(lengths >= 3)[0]
            a_idx = np.concatenate([a_idx, off[ring + 1] - 1])
            b_idx = np.concatenate([b_idx, off[ring]])
            order = np.lexsort((a_idx, rows[a_idx]))
            a_idx, b_idx = a_idx[order], b_idx[order]
        seg = np.ascontiguousarray(np.concatenate([v[a_idx], v[b_idx]], axis=1))
        seg_row = rows[a_idx].astype(np.int32)
        seg_len = np.linalg.norm(seg[:, 3:5] - seg[:, 0:2], axis=1)
        s0 = np.zeros(seg.shape[0])
        if seg.shape[0]:
            cum = np.cumsum(seg_len) - seg_len
            first = np.r_[0, np.nonzero(np.diff(seg_row))[0] + 1]
            start_of_row = np.repeat(cum[first], np.diff(np.r_[first, seg.shape[0]]))
            s0 = cum - start_of_row
        self._seg, self._row, self._s0 = seg, seg_row, np.ascontiguousarray(s0)
        self._build_grid(cell_size)

    cdef void _build_grid(self, double cell_size):
        seg = self._seg
        n = seg.shape[0]
        if n:
            lo = np.minimum(seg[:, [0, 1]], seg[:, [3, 4]])
            hi = np.maximum(seg[:, [0, 1]], seg[:, [3, 4]])
            x0, y0 = float(lo[:, 0].min()), float(lo[:, 1].min())
            nx = int((hi[:, 0].max() - x0) // cell_size) + 1
            ny = int((hi[:, 1].max() - y0) // cell_size) + 1
        else:
            lo = hi = np.zeros((0, 2))
            x0 = y0 = 0.0
            nx = ny = 1
        ix0 = np.clip(((lo[:, 0] - x0) // cell_size).astype(np.int64), 0, nx - 1)
        ix1 = np.clip(((hi[:, 0] - x0) // cell_size).astype(np.int64), 0, nx - 1)
        iy0 = np.clip(((lo[:, 1] - y0) // cell_size).astype(np.int64), 0, ny - 1)
        iy1 = np.clip(((hi[:, 1] - y0) // cell_size).astype(np.int64), 0, ny - 1)
        # Expand every segment into the cells its bounding box covers.
        span_x, span_y = ix1 - ix0 + 1, iy1 - iy0 + 1
        reps = span_x * span_y
        sid = np.repeat(np.arange(n, dtype=np.int64), reps)
        k = np.arange(sid.shape[0], dtype=np.int64) - np.repeat(np.cumsum(reps) - reps, reps)
        cx = ix0[sid] + k % span_x[sid]
        cy = iy0[sid] + k // span_x[sid]
        cell = cy * nx + cx
        order = np.argsort(cell, kind="stable")
        counts = np.bincount(cell, minlength=nx * ny)
        self._start = np.ascontiguousarray(np.r_[0, np.cumsum(counts)].astype(np.int64))
        self._items = np.ascontiguousarray(sid[order].astype(np.int32))
        self.c.n_segments = n
        self.c.x0, self.c.y0, self.c.cell_size = x0, y0, cell_size
        self.c.nx, self.c.ny = nx, ny
        self.c.seg = _ptr_f64(self._seg)
        self.c.seg_row = _ptr_i32(self._row)
        self.c.seg_s0 = _ptr_f64(self._s0)
        self.c.cell_start = _ptr_i64(self._start)
        self.c.cell_items = _ptr_i32(self._items)

    @property
    def n_segments(self):
        return self.c.n_segments

    @property
    def grid_shape(self):
        """(ny, nx) cells."""
        return (self.c.ny, self.c.nx)

    @property
    def cell_size(self):
        return self.c.cell_size

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
        cdef const double* q
        with nogil:
            for i in range(n):
                s = seggrid_nearest(&self.c, p[i, 0], p[i, 1], p[i, 2], max_dist, z_gate, &d2, &t)
                if s < 0:
                    continue
                q = self.c.seg + 6 * s
                dx = q[3] - q[0]
                dy = q[4] - q[1]
                L = sqrt(dx * dx + dy * dy)
                row_v[i] = self.c.seg_row[s]
                dist_v[i] = sqrt(d2)
                arc_v[i] = self.c.seg_s0[s] + t * L
                head_v[i] = atan2(dy, dx)
                lat_v[i] = (dx * (p[i, 1] - q[1]) - dy * (p[i, 0] - q[0])) / L if L > 0 else 0.0
        return {"row": row, "distance": dist, "s": arc, "lateral": lat, "heading": head}
