# Map loading: a built MapData becomes C-side segment tables, spatial grids and observation caches.
# Included by _engine.pyx. Everything here runs once per map; worlds on the same map share it.


cdef const double* _ptr_f64(a):
    cdef const double[::1] v = a.reshape(-1)
    return &v[0] if v.shape[0] else NULL


cdef const float* _ptr_f32(a):
    cdef const float[::1] v = a.reshape(-1)
    return &v[0] if v.shape[0] else NULL


cdef const int* _ptr_i32(a):
    cdef const int[::1] v = a.reshape(-1)
    return &v[0] if v.shape[0] else NULL


cdef const long long* _ptr_i64(a):
    cdef const long long[::1] v = a.reshape(-1)
    return &v[0] if v.shape[0] else NULL


cdef const unsigned char* _ptr_u8(a):
    cdef const unsigned char[::1] v = a.reshape(-1)
    return &v[0] if v.shape[0] else NULL


def _ring_bboxes(r):
    """xmin, ymin, xmax, ymax of each ring of a CSR polygon set, float64 [n, 4]."""
    n = len(r)
    out = np.zeros((n, 4))
    if n and r.values.shape[0]:
        rid = r.row_ids()
        out[:, :2] = np.inf
        out[:, 2:] = -np.inf
        np.minimum.at(out[:, :2], rid, r.values[:, :2])
        np.maximum.at(out[:, 2:], rid, r.values[:, :2])
    return np.ascontiguousarray(out)


def _cut_polylines(values, offsets, double max_len):
    """Cut each polyline into chords no longer than about ``max_len`` metres (observation segments).

    Returns (a [n, 3], b [n, 3], row [n]).
    """
    v = np.asarray(values, np.float64).reshape(-1, 3)
    off = np.asarray(offsets, np.int64)
    lengths = np.diff(off)
    if v.shape[0] == 0:
        return np.zeros((0, 3)), np.zeros((0, 3)), np.zeros(0, np.int64)
    rows = np.repeat(np.arange(lengths.shape[0]), lengths)
    step = np.r_[0.0, np.linalg.norm(np.diff(v[:, :2], axis=0), axis=1)]
    step[off[:-1][lengths > 0]] = 0.0
    cum = np.cumsum(step)
    s = cum - np.repeat(cum[off[:-1]], lengths)
    chunk = np.floor(s / max_len).astype(np.int64)
    first_of_row = np.zeros(v.shape[0], bool)
    first_of_row[off[:-1][lengths > 0]] = True
    last_of_row = np.zeros(v.shape[0], bool)
    last_of_row[off[1:][lengths > 0] - 1] = True
    keep = first_of_row | last_of_row
    keep[1:] |= (chunk[1:] != chunk[:-1]) & (rows[1:] == rows[:-1])
    idx = np.nonzero(keep)[0]
    same = rows[idx[1:]] == rows[idx[:-1]]
    a, b = idx[:-1][same], idx[1:][same]
    return v[a], v[b], rows[a]


def _lane_neighbors(lanes):
    """The map's left and right neighbour of each lane (int32 ``[L]`` each, -1 if none), kept only
    where the neighbour is another lane of the same type running the same way beside it: at the
    middle of the lane, the neighbour's nearest point lies within the two half widths plus a lane
    width and its direction is within 30 degrees. Source maps name adjacency loosely (a converter
    may pair opposite directions or lanes that only touch at one end); the engine moves vehicles
    sideways onto these lanes, so it trusts only what the geometry confirms. Runs once per map."""
    n = len(lanes)
    cl = lanes.centerline
    pts = np.asarray(cl.values, np.float64).reshape(-1, 3)[:, :2]
    off = np.asarray(cl.offsets, np.int64)
    width = np.asarray(lanes.width, np.float64)
    kind = np.asarray(lanes.lane_type)
    out = []
    for given in (lanes.left_neighbor, lanes.right_neighbor):
        nb = np.full(n, -1, np.int32)
        for i in np.nonzero((np.asarray(given) >= 0) & (np.asarray(given) < n))[0]:
            j = int(given[i])
            if j == i or kind[j] != kind[i]:
                continue
            a = pts[off[i]:off[i + 1]]
            b = pts[off[j]:off[j + 1]]
            if a.shape[0] < 2 or b.shape[0] < 2:
                continue
            k = min(a.shape[0] // 2, a.shape[0] - 2)
            mid, da = 0.5 * (a[k] + a[k + 1]), a[k + 1] - a[k]
            e = b[1:] - b[:-1]
            t = np.clip(((mid - b[:-1]) * e).sum(axis=1) / np.maximum((e * e).sum(axis=1), 1e-12), 0.0, 1.0)
            d = np.hypot(*(b[:-1] + t[:, None] * e - mid).T)
            q = int(np.argmin(d))
            na, nb_len = np.hypot(*da), np.hypot(*e[q])
            if na <= 0 or nb_len <= 0 or float(da @ e[q]) < np.cos(np.radians(30.0)) * na * nb_len:
                continue
            if d[q] > 0.5 * (width[i] + width[j]) + max(width[i], width[j]):
                continue
            nb[i] = j
        out.append(np.ascontiguousarray(nb))
    return out[0], out[1]


#: Arrays of a signal plan (``terrazero_env.maps.signal_plan``), CSR offsets int64, indices int32.
_PLAN_KEYS = ("leg_off", "legs", "leg_head_off", "leg_heads", "stage_off", "stage_kind", "stage_ring",
              "stage_barrier", "stage_head_off", "stage_heads", "stage_perm_off", "stage_perm")


cdef class RoadMap:
    """A built map loaded for simulation, shared by every world on it.

    Holds the lane centerlines, road edges, sidewalks and crosswalks as spatial grids (exact
    nearest-segment queries), the lane graph, and the observation cache: road geometry cut into
    segments of at most ``obs_segment_length`` metres and, per grid cell, the candidate segments
    within ``obs_radius`` of the cell (lane centerlines and road edges before painted lines, then
    nearest first), so gathering an agent's road observation is a bounded copy.

    ``map_data``: a built :class:`terrazero_env.maps.MapData` (arrays may be memory-mapped);
    ``signal_plan``: its static controller plan (``terrazero_env.maps.signal_plan.signal_plan``);
    ``lane_conflicts``: its intersection lanes that cross or merge, a CSR with ``offsets``/``values``
    (``terrazero_env.maps.conflicts.lane_conflicts``); ``lane_bends``: float32 ``[L, 4]``, each lane's
    tightest radius, turn side and road-edge clearances (``terrazero_env.maps.bends.lane_bends``; None:
    every lane counts as straight). The env layer computes them (``terrazero_env.engine.RoadMap``);
    the engine does not import the map package.
    """

    cdef MapC c
    cdef readonly object map_data
    cdef readonly SegmentGrid lanes, road_edges, sidewalks, crosswalks
    cdef readonly double obs_radius, obs_segment_length
    cdef object _keep  # arrays the MapC points into
    cdef dict _goal_reach  # track_goal_reachable results by (max_dist, z_gate)

    def __init__(self, map_data, signal_plan, lane_conflicts, double cell_size=4.0, double obs_radius=50.0, double obs_segment_length=10.0,
                 double obs_cell_size=10.0, int obs_max_candidates=800, head_log=None, lane_bends=None):
        if not (obs_radius > 0 and obs_segment_length > 0 and obs_cell_size > 0):
            raise ValueError("obs_radius, obs_segment_length and obs_cell_size must be positive")
        cdef MapC* c = &self.c
        m = map_data
        self.map_data = m
        self.obs_radius = obs_radius
        self.obs_segment_length = obs_segment_length
        cl = m.lanes.centerline
        self.lanes = SegmentGrid(cl.values, cl.offsets, cell_size)
        self.road_edges = SegmentGrid(m.road_edges.values, m.road_edges.offsets, cell_size)
        self.sidewalks = SegmentGrid(m.sidewalks.values, m.sidewalks.offsets, cell_size, closed=True)
        self.crosswalks = SegmentGrid(m.crosswalks.values, m.crosswalks.offsets, cell_size, closed=True)
        keep = {}
        pts = np.ascontiguousarray(cl.values, np.float64)
        off = np.ascontiguousarray(cl.offsets, np.int64)
        lengths = np.diff(off)
        step = np.r_[0.0, np.linalg.norm(np.diff(pts[:, :2], axis=0), axis=1)]
        step[off[:-1]] = 0.0
        cum = np.cumsum(step)
        keep["lane_pts"], keep["lane_off"] = pts, off
        keep["lane_s0"] = np.ascontiguousarray(cum - np.repeat(cum[off[:-1]], lengths))
        keep["succ_off"] = np.ascontiguousarray(m.lanes.successors.offsets, np.int64)
        keep["succ"] = np.ascontiguousarray(m.lanes.successors.values, np.int32)
        keep["lane_width"] = np.ascontiguousarray(m.lanes.width, np.float32)
        if lane_bends is None:  # nothing known of the bends: every lane turnable
            keep["lane_bend"] = np.tile(np.array([np.inf, 0.0, np.inf, np.inf], np.float32), (len(m.lanes), 1))
        else:
            keep["lane_bend"] = np.ascontiguousarray(lane_bends, np.float32)
            if keep["lane_bend"].shape != (len(m.lanes), 4):
                raise ValueError(f"lane_bends: expected float32 [{len(m.lanes)}, 4], got {keep['lane_bend'].shape}")
        keep["lane_speed"] = np.ascontiguousarray(m.lanes.speed_limit, np.float32)
        keep["lane_inter"] = np.ascontiguousarray(m.lanes.intersection, np.int32)
        signalized = np.unique(m.stop_lines.intersection[m.signals.stop_line]) if len(m.signals) else np.zeros(0, np.int32)
        lane_sig = np.isin(m.lanes.intersection, signalized[signalized >= 0]).astype(np.uint8)
        keep["lane_signalized"] = np.ascontiguousarray(lane_sig)
        keep["lane_left"], keep["lane_right"] = _lane_neighbors(m.lanes)
        spawn = np.nonzero((lane_sig == 0) & (m.lanes.lane_type != 1))[0].astype(np.int32)  # no bike lanes
        keep["spawn"] = np.ascontiguousarray(spawn)
        keep["walk_pts"] = np.ascontiguousarray(m.sidewalks.values, np.float64).reshape(-1, 3)
        keep["walk_off"] = np.ascontiguousarray(m.sidewalks.offsets, np.int64)
        keep["cross_pts"] = np.ascontiguousarray(m.crosswalks.values, np.float64).reshape(-1, 3)
        keep["cross_off"] = np.ascontiguousarray(m.crosswalks.offsets, np.int64)
        keep["walk_bbox"] = _ring_bboxes(m.sidewalks)
        keep["cross_bbox"] = _ring_bboxes(m.crosswalks)
        if m.tracks is not None and len(m.tracks):
            keep["track_state"] = np.ascontiguousarray(m.tracks.state, np.float64)
            keep["track_valid"] = np.ascontiguousarray(m.tracks.valid, np.uint8)
            keep["track_type"] = np.ascontiguousarray(m.tracks.agent_type, np.uint8)
            keep["track_size"] = np.ascontiguousarray(m.tracks.size, np.float32)
            c.n_tracks, c.track_steps = m.tracks.state.shape[0], m.tracks.state.shape[1]
            c.track_state = _ptr_f64(keep["track_state"])
            c.track_valid = _ptr_u8(keep["track_valid"])
            c.track_type = _ptr_u8(keep["track_type"])
            c.track_size = _ptr_f32(keep["track_size"])
        else:
            c.n_tracks = c.track_steps = 0
        hl = np.zeros((len(m.signals), 0), np.uint8) if head_log is None else np.asarray(head_log)
        if hl.dtype != np.uint8 or hl.ndim != 2 or hl.shape[0] != len(m.signals) or (hl.size and hl.max() > 3):
            raise ValueError(f"head_log: expected uint8 [{len(m.signals)}, T] of signal states 0..3, got "
                             f"{hl.dtype} {hl.shape}")
        keep["head_log"] = np.ascontiguousarray(hl)
        c.head_log_steps = hl.shape[1] if hl.shape[0] else 0
        c.head_log = _ptr_u8(keep["head_log"]) if c.head_log_steps else NULL
        self._build_obs_cache(m, keep, obs_radius, obs_segment_length, obs_cell_size, obs_max_candidates)
        self._load_signals(m, keep, signal_plan, lane_conflicts)
        self._keep = keep
        self._goal_reach = {}
        c.handedness = int(m.handedness)
        c.walk_bbox = _ptr_f64(keep["walk_bbox"])
        c.cross_bbox = _ptr_f64(keep["cross_bbox"])

        c.n_lanes = len(m.lanes)
        c.lane_pts = _ptr_f64(keep["lane_pts"])
        c.lane_off = _ptr_i64(keep["lane_off"])
        c.lane_s0 = _ptr_f64(keep["lane_s0"])
        c.succ_off = _ptr_i64(keep["succ_off"])
        c.succ = _ptr_i32(keep["succ"])
        c.lane_width = _ptr_f32(keep["lane_width"])
        c.lane_bend = _ptr_f32(keep["lane_bend"])
        c.lane_speed = _ptr_f32(keep["lane_speed"])
        c.lane_inter = _ptr_i32(keep["lane_inter"])
        c.lane_signalized = _ptr_u8(keep["lane_signalized"])
        c.lane_left = _ptr_i32(keep["lane_left"])
        c.lane_right = _ptr_i32(keep["lane_right"])
        c.lanes = self.lanes.c
        c.edges = self.road_edges.c
        c.walks = self.sidewalks.c
        c.crosswalks = self.crosswalks.c
        c.walk_pts = _ptr_f64(keep["walk_pts"])
        c.walk_off = _ptr_i64(keep["walk_off"])
        c.n_walks = len(m.sidewalks)
        c.cross_pts = _ptr_f64(keep["cross_pts"])
        c.cross_off = _ptr_i64(keep["cross_off"])
        c.n_cross = len(m.crosswalks)
        c.spawn_lanes = _ptr_i32(keep["spawn"])
        c.n_spawn_lanes = spawn.shape[0]
        xmin, ymin, xmax, ymax = m.bounds()
        c.xmin, c.ymin, c.xmax, c.ymax = xmin, ymin, xmax, ymax
        c.cx, c.cy = 0.5 * (xmin + xmax), 0.5 * (ymin + ymax)

    cdef _load_signals(self, m, keep, plan, conf):
        cdef MapC* c = &self.c
        keep["sl_pts"] = np.ascontiguousarray(m.stop_lines.points, np.float64).reshape(-1, 2, 3)
        keep["sl_control"] = np.ascontiguousarray(m.stop_lines.control, np.uint8)
        keep["lane_stop_line"] = np.ascontiguousarray(m.lanes.stop_line, np.int32)
        keep["head_sl"] = np.ascontiguousarray(m.signals.stop_line, np.int32)
        keep["head_pos"] = np.ascontiguousarray(np.asarray(m.signals.position, np.float64).reshape(-1, 3))
        plan = {k: np.ascontiguousarray(plan[k], np.uint8 if k in ("stage_kind", "stage_ring") else
                                        (np.int64 if k.endswith("_off") else np.int32))
                for k in _PLAN_KEYS}
        for k, v in plan.items():
            keep["plan_" + k] = v
        c.n_stop_lines = len(m.stop_lines)
        c.n_heads = len(m.signals)
        c.n_inter = plan["leg_off"].shape[0] - 1
        c.sl_pts = _ptr_f64(keep["sl_pts"])
        c.sl_control = _ptr_u8(keep["sl_control"])
        c.lane_stop_line = _ptr_i32(keep["lane_stop_line"])
        c.head_sl = _ptr_i32(keep["head_sl"])
        c.head_pos = _ptr_f64(keep["head_pos"])
        c.leg_off = _ptr_i64(plan["leg_off"])
        c.legs = _ptr_i32(plan["legs"])
        c.leg_head_off = _ptr_i64(plan["leg_head_off"])
        c.leg_heads = _ptr_i32(plan["leg_heads"])
        c.stage_off = _ptr_i64(plan["stage_off"])
        c.stage_kind = _ptr_u8(plan["stage_kind"])
        c.stage_ring = _ptr_u8(plan["stage_ring"])
        c.stage_barrier = _ptr_i32(plan["stage_barrier"])
        c.stage_head_off = _ptr_i64(plan["stage_head_off"])
        c.stage_heads = _ptr_i32(plan["stage_heads"])
        c.stage_perm_off = _ptr_i64(plan["stage_perm_off"])
        c.stage_perm = _ptr_i32(plan["stage_perm"])
        keep["conf_off"] = np.ascontiguousarray(conf.offsets, np.int64)
        keep["conf"] = np.ascontiguousarray(conf.values, np.int32)
        c.conf_off = _ptr_i64(keep["conf_off"])
        c.conf = _ptr_i32(keep["conf"])

    @property
    def signal_plan(self):
        """The static controller plan (see ``terrazero_env.maps.signal_plan``)."""
        return {k[5:]: v for k, v in self._keep.items() if k.startswith("plan_")}

    cdef _build_obs_cache(self, m, keep, double radius, double seg_len, double cell, int max_cand):
        parts = []
        for values, offsets, road_type, widths in (
                (m.lanes.centerline.values, m.lanes.centerline.offsets, 0, m.lanes.width),
                (m.road_edges.values, m.road_edges.offsets, 2, None),
                (m.road_lines.geometry.values, m.road_lines.geometry.offsets, 1, None)):
            a, b, row = _cut_polylines(values, offsets, seg_len)
            d = b - a
            length = np.linalg.norm(d[:, :2], axis=1)
            ok = length > 1e-6
            a, b, row, d, length = a[ok], b[ok], row[ok], d[ok], length[ok]
            w = np.asarray(widths, np.float64)[row] if widths is not None else np.zeros(row.shape[0])
            mid = 0.5 * (a + b)
            parts.append(np.column_stack([mid, length, w, d[:, 0] / length, d[:, 1] / length,
                                          np.full(row.shape[0], road_type, np.float64)]))
        seg = np.ascontiguousarray(np.concatenate(parts).astype(np.float32)).reshape(-1, 8)
        keep["obs_seg"] = seg
        xmin, ymin, xmax, ymax = m.bounds()
        x0, y0 = xmin - radius, ymin - radius
        nx = int((xmax + radius - x0) // cell) + 1
        ny = int((ymax + radius - y0) // cell) + 1
        # Candidates of a cell: segments whose midpoint lies within radius + half the cell diagonal
        # of its centre (a superset of what any agent in the cell can see), essential geometry
        # (lanes, edges) first, then by distance to the centre.
        reach = radius + 0.5 * cell * np.sqrt(2.0) + 0.5 * seg_len
        centres_x = x0 + (np.arange(nx) + 0.5) * cell
        centres_y = y0 + (np.arange(ny) + 0.5) * cell
        mid = seg[:, :2].astype(np.float64)
        essential = seg[:, 7] != 1
        counts = np.zeros(nx * ny, np.int64)
        items = []
        for iy in range(ny):
            d2 = (mid[None, :, 0] - centres_x[:, None]) ** 2 + (mid[None, :, 1] - centres_y[iy]) ** 2
            for ix in range(nx):
                near = np.nonzero(d2[ix] <= reach * reach)[0]
                if near.size:
                    order = np.lexsort((d2[ix, near], ~essential[near]))[:max_cand]
                    near = near[order]
                counts[iy * nx + ix] = near.size
                items.append(near.astype(np.int32))
        keep["obs_start"] = np.ascontiguousarray(np.r_[0, np.cumsum(counts)].astype(np.int64))
        keep["obs_items"] = np.ascontiguousarray(np.concatenate(items) if items else np.zeros(0, np.int32))
        cdef ObsSegC* o = &self.c.obs
        o.n = seg.shape[0]
        o.seg = _ptr_f32(seg)
        o.x0, o.y0, o.cell_size = x0, y0, cell
        o.nx, o.ny = nx, ny
        o.cell_start = _ptr_i64(keep["obs_start"])
        o.cell_items = _ptr_i32(keep["obs_items"])

    def project_to_lanes(self, points, double max_dist=50.0, double z_gate=DEFAULT_Z_GATE):
        """Nearest lane of each point (see :meth:`SegmentGrid.query`; ``row`` is the lane id)."""
        return self.lanes.query(points, max_dist, z_gate)

    @property
    def lane_neighbors(self):
        """(left, right): int32 ``[L]`` adjacent same-direction lane on each side, -1 if none, as the
        engine uses them (the map's neighbours where :func:`_lane_neighbors` accepts them)."""
        return self._keep["lane_left"].copy(), self._keep["lane_right"].copy()

    def track_goal_reachable(self, double max_dist=8.0, double z_gate=DEFAULT_Z_GATE):
        """uint8 ``[A]``: 1 where logged track ``A``'s last valid position, its logged goal, can be
        reached from its first along the lane graph (successors and lane changes to adjacent
        same-direction lanes; TerraZero appendix D.5), 0 where not or where either position is more
        than ``max_dist`` metres from every lane (``z_gate``: as for :meth:`project_to_lanes`).
        Pedestrian tracks are always 1: they walk off the lane graph. Computed once per
        (``max_dist``, ``z_gate``) and kept: the engine reads it at every log reset (a read-only view)."""
        key = (float(max_dist), float(z_gate))
        out = self._goal_reach.get(key)
        if out is None:
            out = np.zeros(self.c.n_tracks, np.uint8)
            seen = np.zeros(2 * self.c.n_lanes + 1, np.uint8)
            queue = np.zeros(2 * self.c.n_lanes + 1, np.int32)
            self._fill_goal_reach(out, seen, queue, max_dist, z_gate)
            out.flags.writeable = False
            self._goal_reach[key] = out
        return out.view()

    cdef _fill_goal_reach(self, unsigned char[::1] out, unsigned char[::1] seen, int[::1] queue, double max_dist,
                          double z_gate):
        if out.shape[0] == 0:
            return
        with nogil:
            track_goals_reachable(&self.c, max_dist, z_gate, &out[0], &seen[0], &queue[0])

    @property
    def num_lanes(self):
        return self.c.n_lanes

    @property
    def num_obs_segments(self):
        return self.c.obs.n

    def nbytes(self):
        """Bytes of the arrays this index owns (shared by every world on the map)."""
        own = sum(a.nbytes for a in self._keep.values() if isinstance(a, np.ndarray))
        for g in (self.lanes, self.road_edges, self.sidewalks, self.crosswalks):
            own += sum(a.nbytes for a in (g._seg, g._row, g._s0, g._start, g._items))
        return own


def footprint_offroad(RoadMap road, boxes, z=None, double z_gate=DEFAULT_Z_GATE):
    """The engine's off-road test for a batch of footprints: float64 ``[N, 5]`` rows of
    (cx, cy, heading, length, width) at heights ``z`` (default 0). Returns bool ``[N]``: the box
    crosses a road edge or touches a sidewalk."""
    b = np.ascontiguousarray(boxes, np.float64)
    if b.ndim != 2 or b.shape[1] != 5:
        raise ValueError(f"boxes must be float64 [N, 5], got shape {b.shape}")
    zz = np.zeros(b.shape[0])
    if z is not None:
        zz[:] = z
    cdef const double[:, ::1] bv = b
    cdef const double[::1] zv = zz
    out = np.zeros(b.shape[0], np.bool_)
    cdef unsigned char[::1] o = out.view(np.uint8)
    cdef Agent a
    cdef Py_ssize_t i
    with nogil:
        for i in range(bv.shape[0]):
            memset(&a, 0, sizeof(Agent))
            a.x, a.y, a.heading, a.length, a.width, a.z = bv[i, 0], bv[i, 1], bv[i, 2], bv[i, 3], bv[i, 4], zv[i]
            o[i] = offroad(&road.c, &a, z_gate)
    return out


def footprint_offroad_excursion(RoadMap road, boxes, z=None, double z_gate=DEFAULT_Z_GATE, double reach=8.0):
    """The engine's excursion beyond the drivable area for a batch of footprints (``rules.offroad_excursion``
    as the rule checks call it): float64 ``[N, 5]`` rows of (cx, cy, heading, length, width) at
    heights ``z`` (default 0); ``reach`` (m): how far from the centre the reference lane point is
    looked for (the engine passes ``EngineConfig.lane_max_distance``). Returns float64 ``[N]``: the
    largest distance (m) from a corner outside the drivable area to its boundary, 0 for a box that
    touches no edge or sidewalk (``footprint_offroad`` false)."""
    b = np.ascontiguousarray(boxes, np.float64)
    if b.ndim != 2 or b.shape[1] != 5:
        raise ValueError(f"boxes must be float64 [N, 5], got shape {b.shape}")
    if not reach >= 0:
        raise ValueError(f"reach must be a non-negative distance in metres, got {reach}")
    zz = np.zeros(b.shape[0])
    if z is not None:
        zz[:] = z
    cdef const double[:, ::1] bv = b
    cdef const double[::1] zv = zz
    out = np.zeros(b.shape[0], np.float64)
    cdef double[::1] o = out
    cdef Agent a
    cdef Py_ssize_t i
    with nogil:
        for i in range(bv.shape[0]):
            memset(&a, 0, sizeof(Agent))
            a.x, a.y, a.heading, a.length, a.width, a.z = bv[i, 0], bv[i, 1], bv[i, 2], bv[i, 3], bv[i, 4], zv[i]
            if offroad(&road.c, &a, z_gate):
                o[i] = offroad_excursion(&road.c, &a, reach, z_gate)
    return out
