# cython: language_level=3
"""Static actors (TerraZero section 4.4, figure 4): the geometry of each generator that places fixed
obstacles in a world at reset. Parked vehicles stand in rows at the curb (the outer side a margin
from the road edge on the handedness side, aligned with the lane), crashed-vehicle clusters take one
of figure 4's layouts (uniform disc, rear-end chain, T-bone, outward fan), construction zones tile
cones as a grid over one lane, a diagonal taper within one lane or a perpendicular line closing a lane (each
with optional stationary workers), and debris lies off a lane centre. A generator writes a whole
group of agents at once; the group is kept only when no member overlaps another member or any agent
already placed (with a clearance), and none leaves the road, else it is tried again elsewhere. The
agents are ``ROLE_STATIC`` with their ``kind`` set; nothing on the step path moves them.
"""

from libc.math cimport sqrt, cos, sin, fabs
from libc.string cimport memset
from common cimport (Agent, MapC, ROLE_STATIC, CLS_CAR, CLS_TRUCK, CLS_BUS, CLS_PEDESTRIAN, N_CP, CP_LEN_LO,
                     CP_LEN_HI, CP_WID_LO, CP_WID_HI, CP_HGT_LO, CP_HGT_HI, KIND_PARKED, KIND_CRASHED, KIND_CONE,
                     KIND_WORKER, KIND_DEBRIS, GEN_PARKED, GEN_CRASH_DISC, GEN_CRASH_CHAIN, GEN_CRASH_TBONE,
                     GEN_CRASH_FAN, GEN_CONE_GRID, GEN_CONE_TAPER, GEN_LANE_BLOCK, GEN_DEBRIS, N_GENERATORS)
from geometry cimport obb_overlap
from seggrid cimport seggrid_nearest
from rng cimport Rng, rng_uniform, rng_range, rng_int
from scene cimport lane_length, lane_point
from rules cimport offroad


cdef enum:
    MAX_GROUP = 24             # agents one generator writes at most (a cone grid with workers)

# Sizes and gaps (m), ours: a cone's square footprint 0.4 and height 0.7, a worker's 0.5 and 1.75
# (pedestrian-sized), a parked vehicle's outer side 0.3 from the road edge, members of one group
# 0.2 apart (touching counts as overlap). Inline functions: a .pxd may not hold module variables.
cdef inline double PI() noexcept nogil:
    return 3.141592653589793



ctypedef struct StaticParams:
    # Per-episode composition of the static generators (RoadUsersConfig; engine.pxi fills it).
    int count_lo[N_GENERATORS]    # instances of each generator per world, drawn in [lo, hi]
    int count_hi[N_GENERATORS]
    int row_lo, row_hi            # vehicles per parked row
    double size_w[3]              # relative frequency of car, truck and bus sizes (parked, crashed)
    int crash_lo, crash_hi        # vehicles per disc or fan cluster (a chain takes 2..crash_hi)
    double worker_prob            # probability that a construction zone has workers
    int workers_lo, workers_hi    # workers per zone that has them
    double debris_lo, debris_hi   # debris footprint side (m)
    double clearance              # gap kept to agents outside the group (m)
    int tries                     # placement attempts per instance
    bint any                      # some generator has count_hi > 0


cdef inline int _draw(Rng* rng, int lo, int hi) noexcept nogil:
    """An integer in [lo, hi] (no draw when the range is one value)."""
    return lo if hi <= lo else lo + <int>rng_int(rng, hi - lo + 1)


cdef inline void _actor(Agent* a, int kind, int cls, double x, double y, double z, double h, double L, double W,
                        double H) noexcept nogil:
    memset(a, 0, sizeof(Agent))
    a.cls = cls
    a.role = ROLE_STATIC
    a.kind = kind
    a.slot = -1
    a.lane = -1
    a.log_index = -1
    a.x, a.y, a.z, a.heading = x, y, z, h
    a.cos_h = cos(h)
    a.sin_h = sin(h)
    a.length, a.width, a.height = L, W, H
    a.goal_x, a.goal_y, a.goal_z = x, y, z
    a.kin[0] = a.kin[1] = a.kin[2] = a.kin[3] = 1.0
    a.alive = 1


cdef inline void _vehicle(Agent* a, Rng* rng, const StaticParams* p, const double* cp, int kind, double x, double y,
                          double z, double h) noexcept nogil:
    """A car-, truck- or bus-sized static vehicle (dimensions drawn from the class's ranges)."""
    cdef double u = rng_uniform(rng) * (p.size_w[0] + p.size_w[1] + p.size_w[2])
    cdef int c = CLS_CAR if u < p.size_w[0] else (CLS_TRUCK if u < p.size_w[0] + p.size_w[1] else CLS_BUS)
    cdef const double* q = &cp[c * N_CP]
    _actor(a, kind, c, x, y, z, h, rng_range(rng, q[CP_LEN_LO], q[CP_LEN_HI]), rng_range(rng, q[CP_WID_LO], q[CP_WID_HI]),
           rng_range(rng, q[CP_HGT_LO], q[CP_HGT_HI]))


cdef inline void _frame(const MapC* m, int lane, double s, double lat, double* x, double* y, double* z,
                        double* h) noexcept nogil:
    """The point ``lat`` metres left of a lane's centre at arc length ``s``, and the lane direction."""
    lane_point(m, lane, s, x, y, z, h)
    x[0] -= lat * sin(h[0])
    y[0] += lat * cos(h[0])


cdef inline double _curb_offset(const MapC* m, int lane, double s, double side, double z_gate) noexcept nogil:
    """Lateral distance from the lane centre to the road edge on the ``side`` (+1 left, -1 right),
    when that edge lies within a metre of the lane's own edge (a curb lane); -1 otherwise."""
    cdef double x, y, z, h, d2, t, hw = 0.5 * m.lane_width[lane], px, py, lat
    cdef const double* q
    cdef Py_ssize_t seg
    _frame(m, lane, s, side * hw, &x, &y, &z, &h)
    seg = seggrid_nearest(&m.edges, x, y, z, 1.0, z_gate, &d2, &t)
    if seg < 0:
        return -1.0
    q = m.edges.seg + 6 * seg
    px = q[0] + t * (q[3] - q[0])
    py = q[1] + t * (q[4] - q[1])
    lat = hw * side + (-(px - x) * sin(h) + (py - y) * cos(h))
    if lat * side <= 0.5 * hw:
        return -1.0
    return fabs(lat)


cdef inline bint _pick_lane(const MapC* m, Rng* rng, double need, int* lane, double* s,
                            bint junctions=False) noexcept nogil:
    """A random spawn lane (outside intersections unless ``junctions``) with ``need`` metres of room,
    and an arc length leaving that room ahead."""
    cdef double L
    if m.n_spawn_lanes == 0:
        return False
    lane[0] = m.spawn_lanes[rng_int(rng, m.n_spawn_lanes)]
    if m.lane_inter[lane[0]] >= 0 and not junctions:
        return False
    L = lane_length(m, lane[0])
    if L < need + 2.0:
        return False
    s[0] = rng_range(rng, 1.0, L - need - 1.0)
    return True


cdef inline int _gen_parked(const MapC* m, Rng* rng, const StaticParams* p, const double* cp, Agent* g, int room,
                            double z_gate) noexcept nogil:
    """A row of parked vehicles along the curb lane, the outer sides 0.3 from the road edge."""
    cdef int lane, k, n = _draw(rng, p.row_lo, p.row_hi)
    cdef double s, s0, curb, side = 1.0 if m.handedness == 1 else -1.0, x, y, z, h, need
    if n > room:
        n = room
    need = n * 15.5
    if not _pick_lane(m, rng, need, &lane, &s0):
        return 0
    curb = _curb_offset(m, lane, s0, side, z_gate)
    if curb < 0:
        return 0
    s = s0
    for k in range(n):
        _vehicle(&g[k], rng, p, cp, KIND_PARKED, 0, 0, 0, 0)
        s += 0.5 * g[k].length
        _frame(m, lane, s, side * (curb - 0.3 - 0.5 * g[k].width), &x, &y, &z, &h)
        g[k].x, g[k].y, g[k].z, g[k].heading = x, y, z, h
        g[k].cos_h, g[k].sin_h = cos(h), sin(h)
        g[k].goal_x, g[k].goal_y, g[k].goal_z = x, y, z
        s += 0.5 * g[k].length + rng_range(rng, 1.0, 2.5)
    return n


cdef inline void _place(Agent* a, double x, double y, double z, double h) noexcept nogil:
    a.x, a.y, a.z, a.heading = x, y, z, h
    a.cos_h, a.sin_h = cos(h), sin(h)
    a.goal_x, a.goal_y, a.goal_z = x, y, z


cdef inline bint _at_or_pick(const MapC* m, Rng* rng, double need, int at_lane, double at_s, int* lane, double* s,
                             bint junctions=False) noexcept nogil:
    """The given lane and arc length (``at_lane >= 0``: a group placed on a car's route, which must fit
    before the lane ends), else a random spawn lane (:func:`_pick_lane`)."""
    if at_lane < 0:
        return _pick_lane(m, rng, need, lane, s, junctions)
    if at_s < 0 or lane_length(m, at_lane) - at_s < need:
        return False
    lane[0], s[0] = at_lane, at_s
    return True


cdef inline int _gen_crash(const MapC* m, Rng* rng, const StaticParams* p, const double* cp, int layout, Agent* g,
                           int room, double z_gate, int at_lane=-1, double at_s=0.0) noexcept nogil:
    """A crashed-vehicle cluster on or beside a lane (intersections included) in one of figure 4's
    layouts; disc members are drawn until they stay on the road, a T-bone tries both sides. With
    ``at_lane >= 0`` the cluster starts at ``at_s`` on that lane (a car's route)."""
    cdef int lane, k, j, n, t
    cdef double s, x0, y0, z0, h0, x, y, z, h, r, ang, R, r0, side, wmax = 0.0, lat
    cdef bint clash
    if layout == GEN_CRASH_TBONE:
        n = 2
    elif layout == GEN_CRASH_CHAIN:
        n = _draw(rng, 2, p.crash_hi if p.crash_hi > 2 else 2)
    else:
        n = _draw(rng, p.crash_lo, p.crash_hi)
    if n > room:
        n = room
    # room along the lane: a random pick keeps its margin; on a route, what the cluster spans
    if n < 1 or not _at_or_pick(m, rng, n * 6.0 + 8.0 if at_lane < 0 else n * 5.0 + 5.0, at_lane, at_s, &lane, &s,
                                True):
        return 0
    lat = rng_range(rng, -0.4, 0.4) * m.lane_width[lane]
    _frame(m, lane, s + 4.0, lat, &x0, &y0, &z0, &h0)
    for k in range(n):
        _vehicle(&g[k], rng, p, cp, KIND_CRASHED, x0, y0, z0, h0)
        wmax = g[k].width if g[k].width > wmax else wmax
    if layout == GEN_CRASH_DISC:
        R = 2.0 + 1.5 * n
        for k in range(n):
            for t in range(30):  # a uniform point of the disc, on the road, clear of the members so far
                r = R * sqrt(rng_uniform(rng))
                ang = rng_range(rng, -PI(), PI())
                _place(&g[k], x0 + r * cos(ang), y0 + r * sin(ang), z0, rng_range(rng, -PI(), PI()))
                clash = offroad(m, &g[k], z_gate)
                for j in range(k if not clash else 0):
                    if obb_overlap(g[k].x, g[k].y, g[k].heading, g[k].length + 0.2, g[k].width + 0.2,
                                   g[j].x, g[j].y, g[j].heading, g[j].length, g[j].width):
                        clash = True
                        break
                if not clash:
                    break
    elif layout == GEN_CRASH_CHAIN:
        # Rear-end chain: nose to tail along the lane, each a little askew.
        s += 0.5 * g[0].length
        for k in range(n):
            if k > 0:
                s += 0.5 * g[k - 1].length + 0.5 * g[k].length + rng_range(rng, 0.4, 0.9)
            _frame(m, lane, s, lat + rng_range(rng, -0.3, 0.3), &x, &y, &z, &h)
            _place(&g[k], x, y, z, h + rng_range(rng, -0.2, 0.2))
    elif layout == GEN_CRASH_TBONE:
        # The second vehicle's nose against the first one's side, at right angles.
        side = 1.0 if rng_uniform(rng) < 0.5 else -1.0
        _place(&g[0], x0, y0, z0, h0)
        r = 0.5 * g[0].width + 0.2 + 0.1 + 0.5 * g[1].length
        ang = rng_range(rng, -0.25, 0.25) * g[0].length
        h = rng_range(rng, -0.15, 0.15)
        for t in range(2):
            _place(&g[1], x0 + ang * cos(h0) - side * r * sin(h0), y0 + ang * sin(h0) + side * r * cos(h0), z0,
                   h0 - side * 0.5 * PI() + h)
            if not offroad(m, &g[1], z_gate):
                break
            side = -side
    else:
        # Outward fan: noses out from a common point, evenly spread with a jitter.
        r0 = (0.5 * wmax + 0.2 + 0.1) / sin(PI() / n) if n > 2 else 0.5 * wmax + 0.2 + 0.3
        ang = rng_range(rng, -PI(), PI())
        for k in range(n):
            h = ang + 2.0 * PI() * k / n + rng_range(rng, -0.1, 0.1)
            r = r0 + 0.5 * g[k].length
            _place(&g[k], x0 + r * cos(h), y0 + r * sin(h), z0, h)
    return n


cdef inline int _workers(const MapC* m, Rng* rng, const StaticParams* p, Agent* g, int room, int lane, double s_lo,
                         double s_hi, double lat_lo, double lat_hi) noexcept nogil:
    """Stationary workers (with probability ``worker_prob``) in a lane-frame rectangle."""
    cdef int k, n
    cdef double x, y, z, h
    if p.worker_prob <= 0 or rng_uniform(rng) >= p.worker_prob:
        return 0
    n = _draw(rng, p.workers_lo, p.workers_hi)
    if n > room:
        n = room
    for k in range(n):
        _frame(m, lane, rng_range(rng, s_lo, s_hi), rng_range(rng, lat_lo, lat_hi), &x, &y, &z, &h)
        _actor(&g[k], KIND_WORKER, CLS_PEDESTRIAN, x, y, z, rng_range(rng, -PI(), PI()), 0.5, 0.5,
               1.75)
    return n


cdef inline int _gen_cones(const MapC* m, Rng* rng, const StaticParams* p, int layout, Agent* g, int room,
                           int at_lane=-1, double at_s=0.0) noexcept nogil:
    """A construction zone of cones within one lane (grid, taper or lane-block closure) with optional
    workers: the grid's inside them, the taper's and the closure's in the closed stretch past them.
    With ``at_lane >= 0`` the zone starts at ``at_s`` on that lane (a car's route)."""
    cdef int lane, k, i, j, rows, cols, n = 0
    cdef double s, w, hw, x, y, z, h, ds, side = 1.0 if m.handedness == 1 else -1.0
    # room along the lane: a random pick keeps the most any layout needs; on a route, the layout's own
    if not _at_or_pick(m, rng, 24.0 if at_lane < 0 or layout != GEN_LANE_BLOCK else 6.0, at_lane, at_s, &lane, &s):
        return 0
    w = m.lane_width[lane]
    hw = 0.5 * w - 0.5 * 0.4 - 0.15   # cones keep inside the lane's own edges
    if layout == GEN_CONE_GRID:
        # Rows spread over the lane's width, columns along it: the lane is closed, its edges kept.
        rows = 2 + <int>rng_int(rng, 2)
        cols = 3 + <int>rng_int(rng, 4)
        ds = rng_range(rng, 1.5, 2.5)
        for i in range(rows):
            for j in range(cols):
                if n >= room:
                    return n
                _frame(m, lane, s + j * ds, -hw + 2.0 * hw * i / (rows - 1), &x, &y, &z, &h)
                _actor(&g[n], KIND_CONE, CLS_CAR, x, y, z, h, 0.4, 0.4, 0.7)
                n += 1
        n += _workers(m, rng, p, &g[n], room - n, lane, s + 0.6, s + (cols - 1) * ds - 0.6, -hw + 0.6, hw - 0.6)
    elif layout == GEN_CONE_TAPER:
        # Diagonally across the lane toward the edge it shares with the lane left open: from the curb
        # on a curb lane, else from the lane's other edge; the adjacent lane holds no cone.
        if _curb_offset(m, lane, s, side, 1.0) < 0:
            side = -side
        k = 5 + <int>rng_int(rng, 4)
        ds = rng_range(rng, 1.8, 3.0)
        for i in range(k):
            if n >= room:
                return n
            _frame(m, lane, s + i * ds, side * hw * (1.0 - 2.0 * i / (k - 1)), &x, &y, &z, &h)
            _actor(&g[n], KIND_CONE, CLS_CAR, x, y, z, h, 0.4, 0.4, 0.7)
            n += 1
        n += _workers(m, rng, p, &g[n], room - n, lane, s + k * ds + 1.0, s + k * ds + 4.0, -0.5 * hw, 0.5 * hw)
    else:
        # A line of cones across the lane at right angles to it: the lane is closed.
        k = 1 + <int>((2.0 * hw) / 0.8)
        for i in range(k):
            if n >= room:
                return n
            _frame(m, lane, s, -hw + 2.0 * hw * i / (k - 1), &x, &y, &z, &h)
            _actor(&g[n], KIND_CONE, CLS_CAR, x, y, z, h, 0.4, 0.4, 0.7)
            n += 1
        n += _workers(m, rng, p, &g[n], room - n, lane, s + 1.5, s + 5.0, -0.5 * hw, 0.5 * hw)
    return n


cdef inline int _gen_debris(const MapC* m, Rng* rng, const StaticParams* p, Agent* g) noexcept nogil:
    """One piece of debris off the lane centre (a quarter to 0.4 of the lane width to either side)."""
    cdef int lane
    cdef double s, x, y, z, h, d = rng_range(rng, p.debris_lo, p.debris_hi)
    if not _pick_lane(m, rng, 2.0, &lane, &s):
        return 0
    _frame(m, lane, s, (1.0 if rng_uniform(rng) < 0.5 else -1.0) * rng_range(rng, 0.25, 0.4) * m.lane_width[lane],
           &x, &y, &z, &h)
    _actor(g, KIND_DEBRIS, CLS_CAR, x, y, z, rng_range(rng, -PI(), PI()), d, d * rng_range(rng, 0.5, 1.0), 0.3)
    return 1


cdef inline bint _group_fits(const MapC* m, Agent* agents, int n, int k, double clearance, double z_gate) noexcept nogil:
    """Members n..n+k-1 overlap neither each other (0.2) nor agents 0..n-1 (``clearance``), and
    stay on the road."""
    cdef int i, j
    cdef Agent* a
    cdef Agent* b
    for i in range(n, n + k):
        a = &agents[i]
        if offroad(m, a, z_gate):
            return False
        for j in range(i):
            b = &agents[j]
            if fabs(a.z - b.z) > z_gate:
                continue
            if j >= n:
                if obb_overlap(a.x, a.y, a.heading, a.length + 0.2, a.width + 0.2,
                               b.x, b.y, b.heading, b.length, b.width):
                    return False
            elif obb_overlap(a.x, a.y, a.heading, a.length + 2.0 * clearance, a.width + 2.0 * clearance,
                             b.x, b.y, b.heading, b.length, b.width):
                return False
    return True


cdef inline int place_route_group(const MapC* m, Rng* rng, Agent* agents, int n, int cap, const StaticParams* p,
                                  const double* cp, double z_gate, int kind, int lane, double s) noexcept nogil:
    """A construction zone (``kind`` 1: a cone taper or a lane-block line, half and half) or a crash
    cluster (``kind`` 2: a rear-end chain or a T-bone) starting ``s`` metres along ``lane``, placed
    only if it fits (:func:`_group_fits`); returns the number of agents after it."""
    cdef int k, layout
    if cap - n <= 0:
        return n
    if kind == 1:
        # a taper where the lane has room for one, else a line of cones across it
        layout = GEN_CONE_TAPER if rng_uniform(rng) < 0.5 and lane_length(m, lane) - s >= 24.0 else GEN_LANE_BLOCK
        k = _gen_cones(m, rng, p, layout, &agents[n], min(cap - n, MAX_GROUP), lane, s)
    else:
        layout = GEN_CRASH_CHAIN if rng_uniform(rng) < 0.5 else GEN_CRASH_TBONE
        k = _gen_crash(m, rng, p, cp, layout, &agents[n], min(cap - n, MAX_GROUP), z_gate, lane, s)
    if k > 0 and _group_fits(m, agents, n, k, p.clearance, z_gate):
        return n + k
    if k > 0:
        memset(&agents[n], 0, k * sizeof(Agent))
    return n


cdef inline int place_static_actors(const MapC* m, Rng* rng, Agent* agents, int n, int cap, const StaticParams* p,
                                    const double* cp, double z_gate) noexcept nogil:
    """Every generator in order, each drawing its instance count and placing each instance by
    rejection (``p.tries`` attempts); returns the number of agents after them (at most ``cap``)."""
    cdef int gen, count, inst, attempt, k
    if not p.any:
        return n
    for gen in range(N_GENERATORS):
        if p.count_hi[gen] <= 0:
            continue
        count = _draw(rng, p.count_lo[gen], p.count_hi[gen])
        for inst in range(count):
            for attempt in range(p.tries):
                if cap - n <= 0:
                    return n
                if gen == GEN_PARKED:
                    k = _gen_parked(m, rng, p, cp, &agents[n], min(cap - n, MAX_GROUP), z_gate)
                elif gen <= GEN_CRASH_FAN:
                    k = _gen_crash(m, rng, p, cp, gen, &agents[n], min(cap - n, MAX_GROUP), z_gate)
                elif gen <= GEN_LANE_BLOCK:
                    k = _gen_cones(m, rng, p, gen, &agents[n], min(cap - n, MAX_GROUP))
                else:
                    k = _gen_debris(m, rng, p, &agents[n])
                if k > 0 and _group_fits(m, agents, n, k, p.clearance, z_gate):
                    n += k
                    break
    return n
