# cython: language_level=3
"""Rule-based pedestrians (TerraZero section 4.4, figure 4): crosswalk crossers and jaywalkers.

Arrivals: every crosswalk receives a Poisson stream of crossing events (a rate per second drawn per
episode from its range; the
number of events in a step is drawn from Poisson(rate dt), which makes the count over any run
exactly Poisson). An event is a group of one kind, drawn by ``group_cdf``: a single crosser, a pack
starting side by side from one end, a bidirectional flow (a pack from each end at once) or a
staggered sequence (one after another, ``stagger`` seconds apart). Jaywalkers arrive per world
(``jaywalk_rate`` per second) at a random point of a spawn lane and walk perpendicular to it from
beyond one road edge to beyond the other.

Rows: a pedestrian takes an agent row of the world, reusing the row of a pedestrian that has left
(a dead row of role ROLE_CROSSER or ROLE_JAYWALKER) before appending one within the world's
``max_agents_per_world``; an event finding no row drops the pedestrian (counted). Every member is
first written as a pending row (alive 0) with its entry pose and a delay; it enters (alive 1) once
the delay has passed and its entry disc is free of other agents, and is dropped when it waits
longer than PED_MAX_BLOCKED seconds.

Motion: every step each walking pedestrian heads for its goal point at its preferred speed; ORCA
(``orca.pxd``) turns that into a collision-free velocity against the other pedestrians within
``neighbor_dist`` (sharing the avoidance with other walkers, taking it all against pedestrians
that do not avoid) and against vehicles, each seen as a file of discs along its length. A pedestrian leaves (its row dies) once it passes its goal line: the far end of
the crosswalk, or the far road edge, plus its radius. A scripted crossing (``Engine.set_scene``'s
``crossing``, InterPlan's jaywalker) waits unseen until a trigger agent comes within its distance,
then walks straight to its goal at its speed without ORCA: it reacts to nothing. Per-world counters
(``PED_STAT_*``) record events and outcomes.
"""

from libc.math cimport sqrt, cos, sin, atan2, exp, fabs
from libc.string cimport memset
from common cimport (Agent, MapC, CLS_PEDESTRIAN, ROLE_CROSSER, ROLE_JAYWALKER, CP_DYN, CP_LEN_LO, CP_LEN_HI,
                     CP_WID_LO, CP_WID_HI, CP_HGT_LO, CP_HGT_HI, N_CP, GROUP_SINGLE, GROUP_PACK,
                     GROUP_BIDIRECTIONAL, GROUP_STAGGERED, N_GROUP_KINDS)
from geometry cimport obb_overlap
from rng cimport Rng, rng_uniform, rng_range, rng_int
from scene cimport lane_length, lane_point
from orca cimport ORCA_MAX_LINES, orca_velocity, orca_insert


cdef enum:
    PS_NONE = 0                # not a pending or walking pedestrian
    PS_PENDING = 1             # written, waiting to enter
    PS_WALKING = 2             # alive and walking

    PED_STAT_CROSSWALK_EVENTS = 0  # crossing events (groups) drawn at crosswalks
    PED_STAT_JAYWALK_EVENTS = 1    # jaywalkers drawn
    PED_STAT_ENTERED = 2           # pedestrians that entered the scene
    PED_STAT_LEFT = 3              # pedestrians that reached their far side and left
    PED_STAT_DROPPED = 4           # pedestrians dropped: no free row, no road edge, or blocked too long
    N_PED_STATS = 5

    PED_MAX_GROUP = 8          # members of one pack (per side)
    PED_MAX_BLOCKED = 20       # seconds a due pedestrian may wait for a free entry before it is dropped
    PED_ORCA_MARGIN_CM = 5     # extra radius (cm) in a walker's ORCA program


ctypedef struct PedParams:
    double rate, rate_hi       # range of crosswalk events per crosswalk per second (drawn per episode)
    double group_cdf[N_GROUP_KINDS]  # cumulative probabilities of the group kinds
    int pack_lo, pack_hi       # members of a pack, per side, and of a staggered sequence
    double stagger             # seconds between members of a staggered sequence
    double speed_lo, speed_hi  # preferred walking speed (m/s)
    double max_speed           # ORCA speed limit (m/s)
    double radius              # least ORCA radius (m); a body's half diagonal if larger
    double neighbor_dist       # ORCA neighbour range between disc edges (m)
    double time_horizon        # ORCA horizon tau (s)
    double jaywalk_rate, jaywalk_rate_hi   # range of jaywalkers per world per second (drawn per episode)
    double jaywalk_reach       # how far from the lane a road edge is searched for (m)


ctypedef struct PedState:
    double dir_x, dir_y        # unit crossing direction; the pedestrian leaves past its goal along it
    double pref                # preferred speed (m/s)
    double wait                # pending: seconds until due (negative: how long it has been blocked)
    double nvx, nvy            # this step's ORCA velocity
    int state                  # PS_*
    int scripted               # 1: a scripted crossing (Engine.set_scene): straight at ``pref``, no ORCA
    int trigger                # scripted: the agent row whose approach starts the crossing
    double trigger_dist        # scripted: it enters once that agent is this near (m); <= 0 at once


cdef inline double ped_radius(const Agent* a, double radius) noexcept nogil:
    """A pedestrian's ORCA radius: at least ``radius``, and its box's half diagonal (so discs apart
    means boxes apart)."""
    cdef double h = 0.5 * sqrt(a.length * a.length + a.width * a.width)
    return h if h > radius else radius


cdef inline int poisson_draw(Rng* rng, double lam) noexcept nogil:
    """A Poisson(lam) count by multiplying uniforms (lam is small: a rate times one step)."""
    cdef double lim = exp(-lam), prod = rng_uniform(rng)
    cdef int k = 0
    while prod > lim and k < 1000:
        prod *= rng_uniform(rng)
        k += 1
    return k


cdef inline void crosswalk_frame(const MapC* m, Py_ssize_t c, double* ox, double* oy, double* oz, double* ux,
                                 double* uy, double* s0, double* s1, double* t0, double* t1) noexcept nogil:
    """Crosswalk ring c as a frame: origin (its first point), unit crossing axis (along its longest
    edge: a crosswalk spans the road lengthwise) and the extents [s0, s1] along it, [t0, t1] across."""
    cdef Py_ssize_t a0 = m.cross_off[c], a1 = m.cross_off[c + 1], k, kn
    cdef double best = -1.0, ex, ey, l2, s, t, vx, vy
    ox[0] = m.cross_pts[3 * a0]
    oy[0] = m.cross_pts[3 * a0 + 1]
    oz[0] = m.cross_pts[3 * a0 + 2]
    ux[0], uy[0] = 1.0, 0.0
    for k in range(a0, a1):
        kn = k + 1 if k + 1 < a1 else a0
        ex = m.cross_pts[3 * kn] - m.cross_pts[3 * k]
        ey = m.cross_pts[3 * kn + 1] - m.cross_pts[3 * k + 1]
        l2 = ex * ex + ey * ey
        if l2 > best:
            best = l2
            ux[0] = ex / sqrt(l2) if l2 > 0 else 1.0
            uy[0] = ey / sqrt(l2) if l2 > 0 else 0.0
    s0[0] = t0[0] = 1e18
    s1[0] = t1[0] = -1e18
    for k in range(a0, a1):
        vx = m.cross_pts[3 * k] - ox[0]
        vy = m.cross_pts[3 * k + 1] - oy[0]
        s = vx * ux[0] + vy * uy[0]
        t = -vx * uy[0] + vy * ux[0]
        s0[0] = s if s < s0[0] else s0[0]
        s1[0] = s if s > s1[0] else s1[0]
        t0[0] = t if t < t0[0] else t0[0]
        t1[0] = t if t > t1[0] else t1[0]


cdef inline Py_ssize_t _free_row(Agent* agents, PedState* ps, int* n_agents, Py_ssize_t cap) noexcept nogil:
    """A row for a new pedestrian: a left pedestrian's, else a new one within ``cap``; -1 if none."""
    cdef Py_ssize_t i
    for i in range(n_agents[0]):
        if not agents[i].alive and ps[i].state == PS_NONE and \
                (agents[i].role == ROLE_CROSSER or agents[i].role == ROLE_JAYWALKER):
            return i
    if n_agents[0] < cap:
        i = n_agents[0]
        n_agents[0] += 1
        memset(&ps[i], 0, sizeof(PedState))
        return i
    return -1


cdef inline void _write_pending(Agent* agents, PedState* ps, int* n_agents, Py_ssize_t cap, const PedParams* p,
                                const double* cp, Rng* rng, int role, double x, double y, double z, double dx,
                                double dy, double gx, double gy, double pref, double delay,
                                long long* stats) noexcept nogil:
    """One pending pedestrian entering at (x, y, z) towards goal (gx, gy) along (dx, dy) after ``delay`` s."""
    cdef Py_ssize_t i = _free_row(agents, ps, n_agents, cap)
    cdef Agent* a
    if i < 0:
        stats[PED_STAT_DROPPED] += 1
        return
    a = &agents[i]
    memset(a, 0, sizeof(Agent))
    a.cls = CLS_PEDESTRIAN
    a.dyn = <int>cp[CP_DYN]
    a.role = role
    a.slot = -1
    a.lane = -1
    a.log_index = -1
    a.route_lane = -1
    a.length = rng_range(rng, cp[CP_LEN_LO], cp[CP_LEN_HI])
    a.width = rng_range(rng, cp[CP_WID_LO], cp[CP_WID_HI])
    a.height = rng_range(rng, cp[CP_HGT_LO], cp[CP_HGT_HI])
    a.x, a.y, a.z = x, y, z
    a.heading = atan2(dy, dx)
    a.cos_h, a.sin_h = dx, dy
    a.goal_x, a.goal_y, a.goal_z = gx, gy, z
    a.alive = 0
    ps[i].dir_x, ps[i].dir_y = dx, dy
    ps[i].pref = pref
    ps[i].wait = delay
    ps[i].nvx = ps[i].nvy = 0.0
    ps[i].state = PS_PENDING
    ps[i].scripted = 0
    ps[i].trigger = -1
    ps[i].trigger_dist = 0.0


cdef inline int _group_kind(const PedParams* p, Rng* rng) noexcept nogil:
    cdef double u = rng_uniform(rng)
    cdef int k
    for k in range(N_GROUP_KINDS - 1):
        if u < p.group_cdf[k]:
            return k
    return N_GROUP_KINDS - 1


cdef inline void _crossing_side(Agent* agents, PedState* ps, int* n_agents, Py_ssize_t cap, const MapC* m,
                                Py_ssize_t c, const PedParams* p, const double* cp, Rng* rng, int side,
                                int count, double stagger, long long* stats) noexcept nogil:
    """``count`` crossers of crosswalk c from one end (side 0: the s0 end), side by side in rows
    behind the curb (``stagger`` 0) or one after another ``stagger`` seconds apart in one file."""
    cdef double ox, oy, oz, ux, uy, s0, s1, t0, t1, dx, dy, r, gap, t_lo, t_hi, s_start, s_goal
    cdef double s, t, pref, across, t_file
    cdef int k, per_row
    crosswalk_frame(m, c, &ox, &oy, &oz, &ux, &uy, &s0, &s1, &t0, &t1)
    r = p.radius if p.radius > 0.5 else 0.5  # room per member (a body's half diagonal is at most ~0.5 m)
    gap = 2.0 * r + 0.2
    t_lo = t0 + r
    t_hi = t1 - r
    if t_hi < t_lo:
        t_lo = t_hi = 0.5 * (t0 + t1)
    per_row = <int>((t_hi - t_lo) / gap) + 1
    dx, dy = (ux, uy) if side == 0 else (-ux, -uy)
    pref = rng_range(rng, p.speed_lo, p.speed_hi)  # a group keeps one pace
    t_file = rng_range(rng, t_lo, t_hi) if stagger > 0 else 0.0
    for k in range(count):
        if stagger > 0:
            t = t_file  # one file, one after another
            across = 0.0
        else:
            across = (k // per_row) * gap
            t = t_lo + (k % per_row) * gap if per_row > 1 else t_lo
            if per_row > 1 and count - (k // per_row) * per_row < per_row:
                t += 0.5 * (per_row - (count - (k // per_row) * per_row)) * gap  # centre a short row
        if side == 0:
            s_start = s0 - r - across
            s_goal = s1 + r
        else:
            s_start = s1 + r + across
            s_goal = s0 - r
        s = s_start
        _write_pending(agents, ps, n_agents, cap, p, cp, rng, ROLE_CROSSER,
                       ox + s * ux - t * uy, oy + s * uy + t * ux, oz, dx, dy,
                       ox + s_goal * ux - t * uy, oy + s_goal * uy + t * ux, pref * rng_range(rng, 0.95, 1.05),
                       k * stagger, stats)


cdef inline void _crossing_event(Agent* agents, PedState* ps, int* n_agents, Py_ssize_t cap, const MapC* m,
                                 Py_ssize_t c, const PedParams* p, const double* cp, Rng* rng,
                                 long long* stats) noexcept nogil:
    cdef int kind = _group_kind(p, rng), side = rng_int(rng, 2), n
    n = p.pack_lo + rng_int(rng, p.pack_hi - p.pack_lo + 1)
    if n > PED_MAX_GROUP:
        n = PED_MAX_GROUP
    if kind == GROUP_SINGLE:
        _crossing_side(agents, ps, n_agents, cap, m, c, p, cp, rng, side, 1, 0.0, stats)
    elif kind == GROUP_PACK:
        _crossing_side(agents, ps, n_agents, cap, m, c, p, cp, rng, side, n, 0.0, stats)
    elif kind == GROUP_BIDIRECTIONAL:
        _crossing_side(agents, ps, n_agents, cap, m, c, p, cp, rng, 0, n, 0.0, stats)
        n = p.pack_lo + rng_int(rng, p.pack_hi - p.pack_lo + 1)
        _crossing_side(agents, ps, n_agents, cap, m, c, p, cp, rng, 1, n if n <= PED_MAX_GROUP else PED_MAX_GROUP,
                       0.0, stats)
    else:
        _crossing_side(agents, ps, n_agents, cap, m, c, p, cp, rng, side, n, p.stagger, stats)


cdef inline double _edge_hit(const MapC* m, double px, double py, double nx, double ny, double reach,
                             double* t_neg) noexcept nogil:
    """Along the line p + t n (|t| <= reach): the nearest road-edge crossing with t > 0 (returned)
    and with t < 0 (``t_neg``); 1e18 / -1e18 where there is none."""
    cdef Py_ssize_t k
    cdef const double* sg
    cdef double ex, ey, den, t, u, best = 1e18
    t_neg[0] = -1e18
    for k in range(m.edges.n_segments):
        sg = &m.edges.seg[6 * k]
        ex = sg[3] - sg[0]
        ey = sg[4] - sg[1]
        den = nx * ey - ny * ex
        if fabs(den) < 1e-12:
            continue
        # p + t n = a + u e
        t = ((sg[0] - px) * ey - (sg[1] - py) * ex) / den
        u = ((sg[0] - px) * ny - (sg[1] - py) * nx) / den
        if u < 0.0 or u > 1.0 or fabs(t) > reach:
            continue
        if t > 0 and t < best:
            best = t
        elif t <= 0 and t > t_neg[0]:
            t_neg[0] = t
    return best


cdef inline void _jaywalk_event(Agent* agents, PedState* ps, int* n_agents, Py_ssize_t cap, const MapC* m,
                                const PedParams* p, const double* cp, Rng* rng, long long* stats) noexcept nogil:
    """A jaywalker at a random point of a spawn lane, crossing perpendicular to it from beyond one
    road edge to beyond the other (the edges nearest the lane on either side)."""
    cdef Py_ssize_t lane
    cdef double x, y, z, h, nx, ny, t_pos, t_neg, r = p.radius + 0.3, t_a, t_b
    if m.n_spawn_lanes == 0 or m.edges.n_segments == 0:
        stats[PED_STAT_DROPPED] += 1
        return
    lane = m.spawn_lanes[rng_int(rng, m.n_spawn_lanes)]
    lane_point(m, lane, rng_range(rng, 0.0, lane_length(m, lane)), &x, &y, &z, &h)
    nx, ny = -sin(h), cos(h)
    if rng_uniform(rng) < 0.5:
        nx, ny = -nx, -ny
    t_pos = _edge_hit(m, x, y, nx, ny, p.jaywalk_reach, &t_neg)
    if t_pos > 1e17 or t_neg < -1e17:
        stats[PED_STAT_DROPPED] += 1
        return
    t_a = t_neg - r
    t_b = t_pos + r
    _write_pending(agents, ps, n_agents, cap, p, cp, rng, ROLE_JAYWALKER, x + t_a * nx, y + t_a * ny, z, nx, ny,
                   x + t_b * nx, y + t_b * ny, rng_range(rng, p.speed_lo, p.speed_hi), 0.0, stats)


cdef inline bint _entry_free(Agent* agents, Py_ssize_t n, Py_ssize_t i, double r, double z_gate) noexcept nogil:
    """Whether pending pedestrian i's disc (as a square of side 2r) is clear of every live agent."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j
    cdef double dx, dy, reach
    for j in range(n):
        b = &agents[j]
        if j == i or not b.alive or fabs(b.z - a.z) > z_gate:
            continue
        dx = b.x - a.x
        dy = b.y - a.y
        reach = 1.5 * r + 0.5 * (b.length + b.width)
        if dx * dx + dy * dy > reach * reach:
            continue
        if b.cls == CLS_PEDESTRIAN:
            reach = r + ped_radius(b, 0.0) + 0.05
            if dx * dx + dy * dy < reach * reach:
                return False
        elif obb_overlap(a.x, a.y, a.heading, 2.0 * r + 0.1, 2.0 * r + 0.1, b.x, b.y, b.heading, b.length, b.width):
            return False
    return True


cdef inline int _vehicle_discs(const Agent* b, double x, double y, double reach, double* nb, double* nd2,
                               int m_nb) noexcept nogil:
    """A vehicle (or cyclist) as ORCA neighbours that do not avoid: a file of discs along its
    length at most a width apart, each of radius 0.71 of its width (so each covers a square of the
    width and together they cover the box), moving with it; those within ``reach`` of their edge
    from (x, y) are inserted."""
    cdef int k, nd
    cdef double rd = 0.71 * b.width, span, cx, cy, dx, dy, d2, rr
    nd = <int>(b.length / b.width) + 1
    span = b.length - b.width if b.length > b.width else 0.0
    for k in range(nd):
        rr = (-0.5 * span + span * k / (nd - 1)) if nd > 1 else 0.0
        cx = b.x + rr * b.cos_h
        cy = b.y + rr * b.sin_h
        dx = cx - x
        dy = cy - y
        d2 = dx * dx + dy * dy
        if d2 > (reach + rd) * (reach + rd):
            continue
        m_nb = orca_insert(nb, nd2, m_nb, d2, cx, cy, b.speed * b.cos_h, b.speed * b.sin_h, rd, 1.0)
    return m_nb


cdef inline bint _trigger_near(const Agent* agents, Py_ssize_t n, const Agent* a, int trigger,
                               double reach) noexcept nogil:
    """Whether a scripted crossing may start: ``reach`` <= 0, or agent row ``trigger`` is alive and
    within ``reach`` metres of the pedestrian's entry point."""
    cdef double dx, dy
    if reach <= 0:
        return True
    if not 0 <= trigger < n or not agents[trigger].alive:
        return False
    dx = agents[trigger].x - a.x
    dy = agents[trigger].y - a.y
    return dx * dx + dy * dy <= reach * reach


cdef inline void pedestrians_reset(PedState* ps, Py_ssize_t cap, long long* stats) noexcept nogil:
    """A world's pedestrian state at reset: no pending or walking rule-based pedestrian, counters 0."""
    memset(ps, 0, cap * sizeof(PedState))
    memset(stats, 0, N_PED_STATS * sizeof(long long))


cdef inline void pedestrians_step(const MapC* m, Agent* agents, PedState* ps, int* n_agents, Py_ssize_t cap,
                                  const PedParams* p, const double* rates, const double* cp_ped, Rng* rng,
                                  double dt, double z_gate, long long* stats) noexcept nogil:
    """One step of a world's rule-based pedestrians: arrivals, entries, ORCA velocities (all from the
    same instant), motion, and leaving at the far side. ``rates``: this episode's crossing and
    jaywalk rates (drawn at reset). Draws nothing when no generator is on and no
    pedestrian is pending or walking."""
    cdef Py_ssize_t c, i, j, n
    cdef int k, cnt, m_nb
    cdef Agent* a
    cdef Agent* b
    cdef double nb[6 * ORCA_MAX_LINES]
    cdef double nd2[ORCA_MAX_LINES]
    cdef double r, rb, dx, dy, d2, reach, gx, gy, gl, vx, vy, v
    # A walker's preferred heading turns 0.05 rad towards the traffic side (right in right-hand traffic).
    cdef double keep_c = cos(0.05), keep_s = sin(-0.05 if m.handedness == 0 else 0.05)
    if rates[0] > 0:
        for c in range(m.n_cross):
            cnt = poisson_draw(rng, rates[0] * dt)
            for k in range(cnt):
                stats[PED_STAT_CROSSWALK_EVENTS] += 1
                _crossing_event(agents, ps, n_agents, cap, m, c, p, cp_ped, rng, stats)
    if rates[1] > 0:
        cnt = poisson_draw(rng, rates[1] * dt)
        for k in range(cnt):
            stats[PED_STAT_JAYWALK_EVENTS] += 1
            _jaywalk_event(agents, ps, n_agents, cap, m, p, cp_ped, rng, stats)
    n = n_agents[0]
    # Entries: due pedestrians whose entry is free (in row order, so earlier ones go first).
    for i in range(n):
        if ps[i].state != PS_PENDING:
            continue
        a = &agents[i]
        if ps[i].scripted:
            # A scripted crossing (InterPlan's jaywalker) starts when its trigger agent comes within
            # reach, whatever stands in its way: it does not react.
            if _trigger_near(agents, n, a, ps[i].trigger, ps[i].trigger_dist):
                a.alive = 1
                a.speed = ps[i].pref
                ps[i].state = PS_WALKING
                stats[PED_STAT_ENTERED] += 1
            continue
        ps[i].wait -= dt
        if ps[i].wait > 0:
            continue
        if _entry_free(agents, n, i, ped_radius(a, p.radius), z_gate):
            a.alive = 1
            a.speed = 0.0
            ps[i].state = PS_WALKING
            stats[PED_STAT_ENTERED] += 1
        elif ps[i].wait < -PED_MAX_BLOCKED:
            ps[i].state = PS_NONE
            stats[PED_STAT_DROPPED] += 1
    # ORCA velocities, every walker from the same positions.
    for i in range(n):
        if ps[i].state != PS_WALKING:
            continue
        a = &agents[i]
        if ps[i].scripted:  # non-reactive: straight along its crossing direction at its speed
            ps[i].nvx = ps[i].dir_x * ps[i].pref
            ps[i].nvy = ps[i].dir_y * ps[i].pref
            continue
        r = ped_radius(a, p.radius)
        gx = a.goal_x - a.x
        gy = a.goal_y - a.y
        gl = sqrt(gx * gx + gy * gy)
        # Head for the goal; past it along the crossing direction the pedestrian leaves anyway.
        if gl > 1e-6:
            gx, gy = gx / gl * ps[i].pref, gy / gl * ps[i].pref
        else:
            gx, gy = ps[i].dir_x * ps[i].pref, ps[i].dir_y * ps[i].pref
        # Keep slightly to the traffic side: exactly opposed walkers would otherwise slow down
        # symmetrically and stall face to face (a known ORCA deadlock).
        vx = gx * keep_c - gy * keep_s
        gy = gx * keep_s + gy * keep_c
        gx = vx
        m_nb = 0
        for j in range(n):
            b = &agents[j]
            if j == i or not b.alive or fabs(b.z - a.z) > z_gate:
                continue
            dx = b.x - a.x
            dy = b.y - a.y
            d2 = dx * dx + dy * dy
            if b.cls != CLS_PEDESTRIAN:
                m_nb = _vehicle_discs(b, a.x, a.y, r + p.neighbor_dist, nb, nd2, m_nb)
                continue
            rb = ped_radius(b, p.radius if ps[j].state == PS_WALKING else 0.0)
            reach = p.neighbor_dist + r + rb
            if d2 > reach * reach:
                continue
            m_nb = orca_insert(nb, nd2, m_nb, d2, b.x, b.y, b.speed * b.cos_h, b.speed * b.sin_h, rb,
                               0.5 if ps[j].state == PS_WALKING else 1.0)
        # The program keeps PED_ORCA_MARGIN_CM more than the discs: when it is infeasible (crowds
        # against vehicles or standing pedestrians, which do not give way) the fallback then
        # overlaps the margin rather than the bodies.
        orca_velocity(a.x, a.y, a.speed * a.cos_h, a.speed * a.sin_h, r + 0.01 * PED_ORCA_MARGIN_CM, nb, m_nb,
                      p.time_horizon, dt,
                      p.max_speed, gx, gy, &ps[i].nvx, &ps[i].nvy)
    # Motion and leaving.
    for i in range(n):
        if ps[i].state != PS_WALKING:
            continue
        a = &agents[i]
        vx, vy = ps[i].nvx, ps[i].nvy
        v = sqrt(vx * vx + vy * vy)
        a.x += vx * dt
        a.y += vy * dt
        a.a_long = (v - a.speed) / dt
        a.speed = v
        if v > 0.05:
            a.heading = atan2(vy, vx)
            a.cos_h = vx / v
            a.sin_h = vy / v
        if (a.x - a.goal_x) * ps[i].dir_x + (a.y - a.goal_y) * ps[i].dir_y >= 0.0:
            a.alive = 0
            a.speed = 0.0
            ps[i].state = PS_NONE
            stats[PED_STAT_LEFT] += 1
