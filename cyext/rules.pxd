# cython: language_level=3
"""Rule checks and their consequences at the simulation layer (TerraZero section 3.3): footprint
against road edges and sidewalks (off-road), lane state (heading residual, signed lateral offset),
containment in crosswalks and sidewalks, the per-world agent grid used for collision candidates,
wrong-way driving, comfort limits, goal arrival, the per-slot event counters, and what an event
does to the agent (``consequence``: nothing, stop in place, or removal). Stop lines and signals
are checked by ``traffic.pxd``; the reward that prices these events is ``rewards.pxd``."""

from libc.math cimport floor, fabs, sqrt, atan2, cos, sin, INFINITY
from common cimport (Agent, MapC, SegGridC, CP_COMF_ALONG, CP_COMF_ALAT, CP_COMF_JLONG, CP_COMF_JLAT,
                     RW_DELTA_GOAL, RW_V_GOAL, CONSEQ_NONE, CONSEQ_STOP, CONSEQ_REMOVE, CNT_COLLISION,
                     CNT_OFFROAD, CNT_WRONG_WAY, CNT_GOAL, CNT_COMFORT, CNT_STOP_LINE, CNT_RED_LIGHT)
from rewards cimport StepEvents
from geometry cimport (box_corners, segments_intersect, obb_overlap, point_in_polygon, wrap_angle,
                       point_segment_dist2)
from seggrid cimport seggrid_nearest, seggrid_nearest_where, heads_along
from lanegraph cimport LaneGraphScratch, route_successor

# Agent grid: a hashed uniform grid per world (no per-map allocation); the cell side is chosen by
# the engine to exceed the largest possible sum of two agents' half-diagonals.
cdef enum:
    AGENT_BUCKETS = 256


cdef inline bint _point_in_quad(double px, double py, const double* xs, const double* ys) noexcept nogil:
    """P inside a convex counter-clockwise quad (boundary included)."""
    cdef int i, j
    for i in range(4):
        j = (i + 1) & 3
        if (xs[j] - xs[i]) * (py - ys[i]) - (ys[j] - ys[i]) * (px - xs[i]) < 0:
            return False
    return True


cdef inline bint box_touches_segments(const SegGridC* g, const double* xs, const double* ys, double z,
                                      double z_gate) noexcept nogil:
    """Whether any segment of ``g`` (within ``z_gate`` in z) crosses or lies inside the box with
    corners (xs, ys)."""
    if g.n_segments == 0:
        return False
    cdef double bx0 = min(min(xs[0], xs[1]), min(xs[2], xs[3])), bx1 = max(max(xs[0], xs[1]), max(xs[2], xs[3]))
    cdef double by0 = min(min(ys[0], ys[1]), min(ys[2], ys[3])), by1 = max(max(ys[0], ys[1]), max(ys[2], ys[3]))
    cdef Py_ssize_t ix0 = <Py_ssize_t>floor((bx0 - g.x0) / g.cell_size), ix1 = <Py_ssize_t>floor((bx1 - g.x0) / g.cell_size)
    cdef Py_ssize_t iy0 = <Py_ssize_t>floor((by0 - g.y0) / g.cell_size), iy1 = <Py_ssize_t>floor((by1 - g.y0) / g.cell_size)
    cdef Py_ssize_t cx, cy, k, s
    cdef int e
    cdef const double* q
    if ix1 < 0 or iy1 < 0 or ix0 >= g.nx or iy0 >= g.ny:
        return False
    ix0 = max(ix0, 0)
    iy0 = max(iy0, 0)
    ix1 = min(ix1, g.nx - 1)
    iy1 = min(iy1, g.ny - 1)
    for cy in range(iy0, iy1 + 1):
        for cx in range(ix0, ix1 + 1):
            for k in range(g.cell_start[cy * g.nx + cx], g.cell_start[cy * g.nx + cx + 1]):
                s = g.cell_items[k]
                q = g.seg + 6 * s
                if z_gate >= 0 and fabs(0.5 * (q[2] + q[5]) - z) > z_gate:
                    continue
                if max(q[0], q[3]) < bx0 or min(q[0], q[3]) > bx1 or max(q[1], q[4]) < by0 or min(q[1], q[4]) > by1:
                    continue
                if _point_in_quad(q[0], q[1], xs, ys) or _point_in_quad(q[3], q[4], xs, ys):
                    return True
                for e in range(4):
                    if segments_intersect(q[0], q[1], q[3], q[4], xs[e], ys[e], xs[(e + 1) & 3], ys[(e + 1) & 3]):
                        return True
    return False


cdef inline bint point_in_rings(double px, double py, const double* pts, const long long* off,
                                const double* bbox, Py_ssize_t n) noexcept nogil:
    """Whether P lies inside any ring of a CSR polygon set (bounding boxes prefilter)."""
    cdef Py_ssize_t r, i, j
    cdef bint inside
    cdef double xi, yi, xj, yj
    for r in range(n):
        if px < bbox[4 * r] or py < bbox[4 * r + 1] or px > bbox[4 * r + 2] or py > bbox[4 * r + 3]:
            continue
        inside = False
        j = off[r + 1] - 1
        for i in range(off[r], off[r + 1]):
            xi = pts[3 * i]
            yi = pts[3 * i + 1]
            xj = pts[3 * j]
            yj = pts[3 * j + 1]
            if (yi > py) != (yj > py):
                if px < (xj - xi) * (py - yi) / (yj - yi) + xi:
                    inside = not inside
            j = i
        if inside:
            return True
    return False


cdef inline bint offroad(const MapC* m, Agent* a, double z_gate) noexcept nogil:
    """The footprint crosses a road edge or touches a sidewalk (geometry beyond ``z_gate`` in z is
    ignored, so overpasses do not count)."""
    cdef double xs[4]
    cdef double ys[4]
    box_corners(a.x, a.y, a.heading, a.length, a.width, xs, ys)
    if box_touches_segments(&m.edges, xs, ys, a.z, z_gate):
        return True
    if box_touches_segments(&m.walks, xs, ys, a.z, z_gate):
        return True
    return point_in_rings(a.x, a.y, m.walk_pts, m.walk_off, m.walk_bbox, m.n_walks)


# Crossings counted along one path at most (more is no road geometry: the parity is then read from the first).
cdef enum:
    MAX_PATH_CROSSINGS = 32


cdef inline bint _path_crosses(double px, double py, double qx, double qy, const double* q) noexcept nogil:
    """Whether segment ``q`` (ax, ay, az, bx, by, bz) crosses the path P -> Q. Its end points are
    split by the path's line half-open (a point on the line counts as on its right), so a polyline
    through a vertex on the path counts once where it crosses and not where it only touches."""
    cdef double sx = qx - px, sy = qy - py
    cdef bint a_left = sx * (q[1] - py) - sy * (q[0] - px) > 0
    cdef bint b_left = sx * (q[4] - py) - sy * (q[3] - px) > 0
    cdef double ex, ey, dp, dq
    if a_left == b_left:
        return False
    ex = q[3] - q[0]
    ey = q[4] - q[1]
    dp = ex * (py - q[1]) - ey * (px - q[0])
    dq = ex * (qy - q[1]) - ey * (qx - q[0])
    return (dp > 0 and dq <= 0) or (dp <= 0 and dq > 0)


cdef inline int path_crossings(const SegGridC* g, double px, double py, double qx, double qy, double z,
                               double z_gate, double* nearest_crossed) noexcept nogil:
    """How many segments of ``g`` (within ``z_gate`` in z, by their mid height as ``box_touches_segments``
    gates them) cross the path P -> Q, each counted once although the grid lists it in every cell it
    spans; ``nearest_crossed`` receives the distance from Q to the nearest crossing segment (infinity
    when none)."""
    cdef double bx0 = min(px, qx), bx1 = max(px, qx), by0 = min(py, qy), by1 = max(py, qy), d2, t
    cdef Py_ssize_t ix0, ix1, iy0, iy1, cx, cy, k, s
    cdef int seen[MAX_PATH_CROSSINGS]
    cdef int n = 0, j
    cdef bint dup
    cdef const double* q
    nearest_crossed[0] = INFINITY
    if g.n_segments == 0:
        return 0
    ix0 = <Py_ssize_t>floor((bx0 - g.x0) / g.cell_size)
    ix1 = <Py_ssize_t>floor((bx1 - g.x0) / g.cell_size)
    iy0 = <Py_ssize_t>floor((by0 - g.y0) / g.cell_size)
    iy1 = <Py_ssize_t>floor((by1 - g.y0) / g.cell_size)
    if ix1 < 0 or iy1 < 0 or ix0 >= g.nx or iy0 >= g.ny:
        return 0
    ix0 = max(ix0, 0)
    iy0 = max(iy0, 0)
    ix1 = min(ix1, g.nx - 1)
    iy1 = min(iy1, g.ny - 1)
    for cy in range(iy0, iy1 + 1):
        for cx in range(ix0, ix1 + 1):
            for k in range(g.cell_start[cy * g.nx + cx], g.cell_start[cy * g.nx + cx + 1]):
                s = g.cell_items[k]
                q = g.seg + 6 * s
                if z_gate >= 0 and fabs(0.5 * (q[2] + q[5]) - z) > z_gate:
                    continue
                if max(q[0], q[3]) < bx0 or min(q[0], q[3]) > bx1 or max(q[1], q[4]) < by0 or min(q[1], q[4]) > by1:
                    continue
                if not _path_crosses(px, py, qx, qy, q):
                    continue
                dup = False
                for j in range(n):
                    if seen[j] == s:
                        dup = True
                        break
                if dup or n == MAX_PATH_CROSSINGS:
                    continue
                seen[n] = <int>s
                n += 1
                d2 = point_segment_dist2(qx, qy, q[0], q[1], q[3], q[4], &t)
                if d2 < nearest_crossed[0]:
                    nearest_crossed[0] = d2
    if n > 0:
        nearest_crossed[0] = sqrt(nearest_crossed[0])
    return n


cdef inline double offroad_excursion(const MapC* m, const Agent* a, double reach, double z_gate) noexcept nogil:
    """How far (m) the agent's box reaches beyond the drivable area: the largest distance from one of
    its four corners outside the drivable area to the area's boundary, 0 when every corner is on it
    (nuPlan's drivable-area compliance measures the ego's corners the same way, nuplan-devkit
    ``drivable_area_compliance``).

    The road edges carry no side, so a corner's side is read from a point known to be drivable: the
    nearest point of a lane centerline to the box centre within ``reach`` (the centre itself when no
    lane is that near). A corner whose path from there crosses the road edges an odd number of times
    is beyond an edge, at its distance to the nearest road edge; a corner inside a sidewalk ring
    (and not beyond an edge) is on a sidewalk within the road, at its distance to the sidewalk's
    outline. Geometry beyond ``z_gate`` in z is ignored as in ``offroad``. The engine calls it only
    for a box that ``offroad`` finds touching an edge or a sidewalk."""
    cdef double xs[4]
    cdef double ys[4]
    cdef double rx = a.x, ry = a.y, d2, t, d, worst = 0.0, crossed, reach_k
    cdef Py_ssize_t s
    cdef const double* q
    cdef int k
    box_corners(a.x, a.y, a.heading, a.length, a.width, xs, ys)
    s = seggrid_nearest(&m.lanes, a.x, a.y, a.z, reach, z_gate, &d2, &t)
    if s >= 0:
        q = m.lanes.seg + 6 * s
        rx = q[0] + t * (q[3] - q[0])
        ry = q[1] + t * (q[4] - q[1])
    for k in range(4):
        d = 0.0
        if path_crossings(&m.edges, rx, ry, xs[k], ys[k], a.z, z_gate, &crossed) & 1:
            # the nearest edge is no further than the crossed one
            reach_k = crossed * (1.0 + 1e-9) + 1e-9
            d = crossed
            if seggrid_nearest(&m.edges, xs[k], ys[k], a.z, reach_k, z_gate, &d2, &t) >= 0 and d2 < d * d:
                d = sqrt(d2)
        elif point_in_rings(xs[k], ys[k], m.walk_pts, m.walk_off, m.walk_bbox, m.n_walks):
            # rings ignore z (as ``offroad`` reads them); the ring's own outline bounds the search
            if seggrid_nearest(&m.walks, xs[k], ys[k], a.z, 1e9, -1.0, &d2, &t) >= 0:
                d = sqrt(d2)
        if d > worst:
            worst = d
    return worst


cdef inline void lane_state(const MapC* m, Agent* a, double max_dist, double z_gate, double align_cos) noexcept nogil:
    """Current lane: the nearest centerline segment within ``max_dist``; heading residual
    (agent heading minus lane direction, wrapped) and signed lateral offset (+ left). Where lanes
    overlap (intersection connectors, the mouth of a turning loop) the nearest centerline may cross
    or oppose the agent's travel: when the nearest segment's direction makes a cosine below
    ``align_cos`` with the agent's heading, the nearest segment that heads along it (cosine at least
    ``align_cos``) and has the agent within half its lane's width is taken instead, if there is one.
    An agent outside every such lane keeps the plain nearest (a car over the centre line reads the
    opposing lane, so wrong-way driving still counts). ``align_cos`` of -1 or below (an angle of pi): the plain nearest."""
    cdef double d2, t, dx, dy, L, d2b, tb, hx, hy
    cdef Py_ssize_t s = seggrid_nearest(&m.lanes, a.x, a.y, a.z, max_dist, z_gate, &d2, &t)
    cdef Py_ssize_t sb
    cdef const double* q
    if s < 0:
        a.lane = -1
        a.lane_heading_res = 0.0
        a.lane_lat = 0.0
        return
    if align_cos > -1.0:
        hx = cos(a.heading)
        hy = sin(a.heading)
        if not heads_along(m.lanes.seg + 6 * s, hx, hy, align_cos):
            sb = seggrid_nearest_where(&m.lanes, a.x, a.y, a.z, max_dist, z_gate, hx, hy, align_cos, m.lane_width,
                                       &d2b, &tb)
            if sb >= 0:
                s = sb
                t = tb
    q = m.lanes.seg + 6 * s
    dx = q[3] - q[0]
    dy = q[4] - q[1]
    L = sqrt(dx * dx + dy * dy)
    a.lane = m.lanes.seg_row[s]
    a.lane_heading_res = wrap_angle(a.heading - atan2(dy, dx))
    a.lane_lat = (dx * (a.y - q[1]) - dy * (a.x - q[0])) / L if L > 0 else 0.0
    a.lane_arc = m.lanes.seg_s0[s] + t * L
    a.lane_width = m.lane_width[a.lane]
    a.lane_speed = m.lane_speed[a.lane]


# Lane tracking (``lane_state_tracked``). A tracked lane is kept while the agent's centre lies within
# half its width (inside an intersection, where wrong-way driving is not judged, TRACK_JUNCTION_MARGIN
# more) and its heading makes at most 60 degrees (cosine TRACK_COS) with the lane there; the
# projection looks TRACK_WINDOW metres plus TRACK_WINDOW_TIME seconds of travel either side of the
# previous arc length, so a lane that passes near itself (a loop) is not matched at its far part.
# All four values are ours: 60 degrees admits the residuals of a car cutting a tight connector (the
# hand-written driver's reach 40 degrees) and refuses connectors that cross at 90 degrees.
cdef extern from *:
    """
    static const double TZ_TRACK_COS = 0.5;              /* cos(60 degrees) */
    static const double TZ_TRACK_JUNCTION_MARGIN = 0.25; /* m */
    static const double TZ_TRACK_WINDOW = 8.0;           /* m */
    static const double TZ_TRACK_WINDOW_TIME = 1.0;      /* s */
    """
    const double TRACK_COS "TZ_TRACK_COS"
    const double TRACK_JUNCTION_MARGIN "TZ_TRACK_JUNCTION_MARGIN"
    const double TRACK_WINDOW "TZ_TRACK_WINDOW"
    const double TRACK_WINDOW_TIME "TZ_TRACK_WINDOW_TIME"

cdef enum:
    TRACK_NONE = -1


cdef inline bint _project_on_lane(const MapC* m, int lane, double px, double py, double s_lo, double s_hi,
                                  Py_ssize_t* seg_out, double* t_out, double* d2_out) noexcept nogil:
    """Nearest point of ``lane``'s centerline to P among its segments whose arc range meets
    [``s_lo``, ``s_hi``]: the segment (an index into ``m.lanes``), the parameter along it and the
    squared distance; False when the lane has no segment there. A lane of n points owns segments
    ``lane_off[lane] - lane`` onwards (``SegmentGrid`` cuts each polyline into n - 1 segments, in order)."""
    cdef long long p0 = m.lane_off[lane], n_seg = m.lane_off[lane + 1] - p0 - 1, lo = 0, hi, mid, k
    cdef Py_ssize_t first = <Py_ssize_t>(p0 - lane), best = -1
    cdef double d2, t = 0.0, best_d2 = 0.0, best_t = 0.0
    cdef const double* q
    if n_seg <= 0:
        return False
    # The first segment whose end lies at or past s_lo (lane_s0 grows along the lane).
    hi = n_seg - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if m.lane_s0[p0 + mid + 1] < s_lo:
            lo = mid + 1
        else:
            hi = mid
    k = lo
    while k < n_seg and (k == lo or m.lane_s0[p0 + k] <= s_hi):
        q = m.lanes.seg + 6 * (first + k)
        d2 = point_segment_dist2(px, py, q[0], q[1], q[3], q[4], &t)
        if best < 0 or d2 < best_d2:
            best = first + <Py_ssize_t>k
            best_d2 = d2
            best_t = t
        k += 1
    seg_out[0] = best
    t_out[0] = best_t
    d2_out[0] = best_d2
    return True


cdef inline bint _lane_holds(const MapC* m, const Agent* a, int lane, Py_ssize_t s, double t, double d2,
                             double hx, double hy, double z_gate) noexcept nogil:
    """Whether the agent is on ``lane`` at its nearest point (segment ``s``, parameter ``t``, squared
    distance ``d2``): within half the lane's width (plus the intersection margin), heading within
    60 degrees of it, and within ``z_gate`` of it in z (``z_gate`` < 0: no gate)."""
    cdef const double* q = m.lanes.seg + 6 * s
    cdef double half = 0.5 * m.lane_width[lane]
    if m.lane_inter[lane] >= 0:
        half += TRACK_JUNCTION_MARGIN
    if d2 > half * half or not heads_along(q, hx, hy, TRACK_COS):
        return False
    return z_gate < 0 or fabs(q[2] + t * (q[5] - q[2]) - a.z) <= z_gate


cdef inline void _write_lane(const MapC* m, Agent* a, Py_ssize_t s, double t) noexcept nogil:
    """The lane state from the agent's nearest point on segment ``s`` of ``m.lanes`` (parameter ``t``)."""
    cdef const double* q = m.lanes.seg + 6 * s
    cdef double dx = q[3] - q[0], dy = q[4] - q[1]
    cdef double L = sqrt(dx * dx + dy * dy)
    a.lane = m.lanes.seg_row[s]
    a.lane_heading_res = wrap_angle(a.heading - atan2(dy, dx))
    a.lane_lat = (dx * (a.y - q[1]) - dy * (a.x - q[0])) / L if L > 0 else 0.0
    a.lane_arc = m.lanes.seg_s0[s] + t * L
    a.lane_width = m.lane_width[a.lane]
    a.lane_speed = m.lane_speed[a.lane]


cdef inline bint _try_lane(const MapC* m, Agent* a, int lane, double s_lo, double s_hi, double hx, double hy,
                           double z_gate) noexcept nogil:
    """Take ``lane`` as the agent's lane if it holds the agent near arc lengths [s_lo, s_hi]."""
    cdef Py_ssize_t s = -1
    cdef double t = 0.0, d2 = 0.0
    if lane < 0 or not _project_on_lane(m, lane, a.x, a.y, s_lo, s_hi, &s, &t, &d2):
        return False
    if not _lane_holds(m, a, lane, s, t, d2, hx, hy, z_gate):
        return False
    _write_lane(m, a, s, t)
    return True


cdef inline void lane_state_tracked(const MapC* m, Agent* a, double max_dist, double z_gate, double align_cos,
                                    double route_cap, LaneGraphScratch* sc) noexcept nogil:
    """Current lane by continuity (``EngineConfig.lane_tracking``): the lane in ``a.lane`` (last step's,
    or the one the agent was placed on; its nearest point near ``a.lane_arc``) while it holds the agent
    (``_lane_holds``); past that lane's end, its successors first, the one on the goal's route
    (``lanegraph.route_successor``, within ``route_cap`` metres) before the others in listed order;
    then its left and right neighbours; only then any lane within ``max_dist``, by ``lane_state``
    with an alignment cosine of at least TRACK_COS. A car outside its lane's half width (over the
    centre line, say) is no longer held by it, so it reads the opposing lane and drives the wrong way
    as before; inside an intersection it keeps the connector it entered rather than whichever
    overlapping connector is nearest. The lane state written is ``lane_state``'s."""
    cdef int prev = a.lane, first_succ = TRACK_NONE, v, side
    cdef Py_ssize_t s = -1, last
    cdef double t = 0.0, d2 = 0.0, w, over = 0.0, hx = cos(a.heading), hy = sin(a.heading)
    cdef long long k
    cdef const double* q
    cdef bint held
    if 0 <= prev < m.n_lanes:
        w = TRACK_WINDOW + TRACK_WINDOW_TIME * fabs(a.speed)
        if _project_on_lane(m, prev, a.x, a.y, a.lane_arc - w, a.lane_arc + w, &s, &t, &d2):
            last = <Py_ssize_t>(m.lane_off[prev + 1] - prev - 2)
            if s == last and t >= 1.0:
                q = m.lanes.seg + 6 * s
                over = ((a.x - q[3]) * (q[3] - q[0]) + (a.y - q[4]) * (q[4] - q[1])) / sqrt(
                    (q[3] - q[0]) ** 2 + (q[4] - q[1]) ** 2)
            held = _lane_holds(m, a, prev, s, t, d2, hx, hy, z_gate)
            if over > 0.0 and m.succ_off[prev + 1] > m.succ_off[prev]:
                # past the end: onto a successor, the goal's route first
                if m.succ_off[prev + 1] - m.succ_off[prev] > 1:
                    first_succ = route_successor(m, a, prev, max_dist, z_gate, route_cap, sc)
                if _try_lane(m, a, first_succ, 0.0, over + w, hx, hy, z_gate):
                    return
                for k in range(m.succ_off[prev], m.succ_off[prev + 1]):
                    v = m.succ[k]
                    if v != first_succ and _try_lane(m, a, v, 0.0, over + w, hx, hy, z_gate):
                        return
            if held:
                _write_lane(m, a, s, t)
                return
            # a neighbour can hold the agent only within half this lane's width plus the neighbour's
            for side in range(2):
                v = m.lane_left[prev] if side == 0 else m.lane_right[prev]
                if v >= 0 and d2 <= (0.5 * m.lane_width[prev] + m.lane_width[v]) ** 2:
                    if _try_lane(m, a, v, -INFINITY, INFINITY, hx, hy, z_gate):
                        return
    lane_state(m, a, max_dist, z_gate, align_cos if align_cos > TRACK_COS else TRACK_COS)


cdef inline Py_ssize_t agent_bucket(double x, double y, double cell) noexcept nogil:
    cdef long long cx = <long long>floor(x / cell), cy = <long long>floor(y / cell)
    return <Py_ssize_t>(((cx * 73856093) ^ (cy * 19349663)) & (AGENT_BUCKETS - 1))


cdef inline void grid_build(Agent* agents, Py_ssize_t n, int* head, int* nxt, double cell) noexcept nogil:
    """Insert every live agent into its bucket (singly linked lists through ``nxt``)."""
    cdef Py_ssize_t i, b
    for b in range(AGENT_BUCKETS):
        head[b] = -1
    for i in range(n):
        if agents[i].alive:
            b = agent_bucket(agents[i].x, agents[i].y, cell)
            nxt[i] = head[b]
            head[b] = <int>i


cdef inline bint collides(Agent* agents, Py_ssize_t i, const int* head, const int* nxt, double cell,
                          double z_gate, double clearance) noexcept nogil:
    """Whether agent i's box (grown by ``clearance`` metres) overlaps another live agent's box.

    Candidates come from the 3 x 3 cells around i (cells are larger than any two half-diagonals),
    prefiltered by squared centre distance before the separating-axis test. Buckets are hashed, so a
    candidate is accepted only if it really lies in the visited cell."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef long long cx0 = <long long>floor(a.x / cell), cy0 = <long long>floor(a.y / cell)
    cdef long long cx, cy
    cdef Py_ssize_t bucket
    cdef int j
    cdef double ra = 0.5 * sqrt(a.length * a.length + a.width * a.width) + clearance, rb, dx, dy
    for cy in range(cy0 - 1, cy0 + 2):
        for cx in range(cx0 - 1, cx0 + 2):
            bucket = <Py_ssize_t>(((cx * 73856093) ^ (cy * 19349663)) & (AGENT_BUCKETS - 1))
            j = head[bucket]
            while j >= 0:
                b = &agents[j]
                if j != i and <long long>floor(b.x / cell) == cx and <long long>floor(b.y / cell) == cy:
                    dx = b.x - a.x
                    dy = b.y - a.y
                    rb = 0.5 * sqrt(b.length * b.length + b.width * b.width)
                    if dx * dx + dy * dy <= (ra + rb) * (ra + rb) and fabs(b.z - a.z) <= z_gate:
                        if obb_overlap(a.x, a.y, a.heading, a.length + 2 * clearance, a.width + 2 * clearance,
                                       b.x, b.y, b.heading, b.length, b.width):
                            return True
                j = nxt[j]
    return False


# ------------------------------------------------------------------- per-step checks of one agent

cdef inline bint wrong_way(const MapC* m, const Agent* a, double max_angle) noexcept nogil:
    """Driving against the lane: on a lane outside intersections (turning there is free), with a
    heading residual above ``max_angle`` radians, at more than 0.5 m/s (so turning on the spot or
    standing still is not counted)."""
    return (a.lane >= 0 and m.lane_inter[a.lane] < 0 and
            fabs(a.lane_heading_res) > max_angle and fabs(a.speed) > 0.5)


cdef inline int comfort_violations(const Agent* a, const double* cp) noexcept nogil:
    """How many of the four comfort limits of the agent's class (``cp``: its class-parameter row)
    the agent exceeds this step: longitudinal and lateral acceleration, longitudinal and lateral jerk
    (TerraZero appendix B)."""
    return ((fabs(a.a_long) > cp[CP_COMF_ALONG]) + (fabs(a.a_lat) > cp[CP_COMF_ALAT]) +
            (fabs(a.j_long) > cp[CP_COMF_JLONG]) + (fabs(a.j_lat) > cp[CP_COMF_JLAT]))


cdef inline void pedestrian_rules(const MapC* m, Agent* a, StepEvents* ev) noexcept nogil:
    """Pedestrians are never off-road nor wrong-way; walking on the carriageway (within half a lane
    width of a centerline) outside a crosswalk is a road incursion."""
    a.offroad = 0
    a.on_crosswalk = point_in_rings(a.x, a.y, m.cross_pts, m.cross_off, m.cross_bbox, m.n_cross)
    ev.incursion = (a.lane >= 0 and fabs(a.lane_lat) < 0.5 * a.lane_width and not a.on_crosswalk)
    a.wrong_way = 0


cdef inline void vehicle_rules(const MapC* m, Agent* a, double z_gate, double wrong_way_angle,
                               double offroad_tolerance, double lane_reach, StepEvents* ev) noexcept nogil:
    """Vehicles and cyclists: off-road footprint and wrong-way driving (after ``lane_state``). A box
    touching an edge or a sidewalk has its excursion beyond the drivable area measured
    (``offroad_excursion``, reference lane within ``lane_reach``); with ``offroad_tolerance`` 0 any touch
    is off-road (TerraZero section 3.3), above 0 only an excursion beyond it."""
    cdef bint touch = offroad(m, a, z_gate)
    ev.offroad_excursion = offroad_excursion(m, a, lane_reach, z_gate) if touch else 0.0
    a.offroad = touch if offroad_tolerance <= 0.0 else ev.offroad_excursion > offroad_tolerance
    ev.offroad = a.offroad
    a.wrong_way = wrong_way(m, a, wrong_way_angle)
    ev.wrong_way = a.wrong_way


cdef inline double goal_distance(const Agent* a) noexcept nogil:
    """Planar distance from the agent's centre to its goal (m)."""
    return sqrt((a.goal_x - a.x) ** 2 + (a.goal_y - a.y) ** 2)


cdef inline void goal_check(Agent* a, double d, StepEvents* ev) noexcept nogil:
    """The goal is reached within the agent's own goal radius ``rw[RW_DELTA_GOAL]`` at a speed under
    ``rw[RW_V_GOAL]`` (``d``: ``goal_distance``)."""
    ev.goal = d < a.rw[RW_DELTA_GOAL] and fabs(a.speed) < a.rw[RW_V_GOAL]
    a.goal_reached = ev.goal


cdef inline void count_events(int* row, const StepEvents* ev) noexcept nogil:
    """Add this step's events to a slot's cumulative counters (``row``: its ``N_COUNTERS`` ints)."""
    row[CNT_COLLISION] += ev.collided
    row[CNT_OFFROAD] += ev.offroad
    row[CNT_WRONG_WAY] += ev.wrong_way
    row[CNT_GOAL] += ev.goal
    row[CNT_COMFORT] += ev.comfort_violations
    row[CNT_STOP_LINE] += ev.stop_line
    row[CNT_RED_LIGHT] += ev.red_light


cdef inline int consequence(const StepEvents* ev, int on_collision, int on_offroad,
                            int on_wrong_way, int on_red_light) noexcept nogil:
    """What this step's events do to the agent, given the configured consequence of each
    (``CONSEQ_*``): ``CONSEQ_REMOVE`` if any event that happened removes it, else ``CONSEQ_STOP`` if
    any stops it, else ``CONSEQ_NONE``."""
    if ((ev.collided and on_collision == CONSEQ_REMOVE) or (ev.offroad and on_offroad == CONSEQ_REMOVE) or
            (ev.wrong_way and on_wrong_way == CONSEQ_REMOVE) or (ev.red_light and on_red_light == CONSEQ_REMOVE)):
        return CONSEQ_REMOVE
    if ((ev.collided and on_collision == CONSEQ_STOP) or (ev.offroad and on_offroad == CONSEQ_STOP) or
            (ev.wrong_way and on_wrong_way == CONSEQ_STOP) or (ev.red_light and on_red_light == CONSEQ_STOP)):
        return CONSEQ_STOP
    return CONSEQ_NONE


cdef inline void stop_in_place(Agent* a) noexcept nogil:
    """The ``CONSEQ_STOP`` consequence: the agent keeps its pose and loses all motion."""
    a.speed = 0.0
    a.a_long = 0.0
    a.a_lat = 0.0
    a.v_lat = 0.0
    a.yaw_rate = 0.0
