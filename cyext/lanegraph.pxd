# cython: language_level=3
"""Reachability over the lane graph (TerraZero appendix D.5): a logged goal is used only if it can be
reached from the agent's start by driving forward, following successor lanes and changing to the
adjacent same-direction lanes. ``track_goals_reachable`` checks every logged track of a map once
(``RoadMap.track_goal_reachable``, cached per lane tolerance), before any scene uses it, as the paper
checks a scenario before it enters the training pool.
"""

from libc.math cimport sqrt, cos, sin, INFINITY
from libc.string cimport memset
from common cimport Agent, MapC, CLS_PEDESTRIAN
from seggrid cimport seggrid_nearest


cdef inline int nearest_lane(const MapC* m, double x, double y, double z, double max_dist, double z_gate,
                             double* s) noexcept nogil:
    """The lane whose centerline is nearest to (x, y, z) within ``max_dist`` (as ``lane_state`` finds
    an agent's lane) and the arc length ``s`` of the nearest point along it; -1 when none."""
    cdef double d2, t
    cdef Py_ssize_t seg = seggrid_nearest(&m.lanes, x, y, z, max_dist, z_gate, &d2, &t)
    cdef const double* q
    if seg < 0:
        return -1
    q = m.lanes.seg + 6 * seg
    s[0] = m.lanes.seg_s0[seg] + t * sqrt((q[3] - q[0]) ** 2 + (q[4] - q[1]) ** 2)
    return m.lanes.seg_row[seg]


cdef inline bint lane_reachable(const MapC* m, int start, double start_s, int goal, double goal_s, bint ahead,
                                unsigned char* seen, int* queue) noexcept nogil:
    """Whether arc length ``goal_s`` of lane ``goal`` can be reached from ``start_s`` on lane ``start``
    by driving forward: a breadth-first search over (lane, whether a successor edge has been taken)
    whose moves are successors and lane changes to ``lane_left``/``lane_right``. A goal on a lane
    reached by lane changes alone must lie ahead: past ``start_s`` on the start lane itself, ``ahead``
    (in front of the agent along its heading) on a neighbour; after a successor edge every point of a
    lane is ahead. ``seen``: scratch of 2 * n_lanes bytes; ``queue``: of 2 * n_lanes ints (each
    node enters it at most once)."""
    cdef Py_ssize_t head = 0, tail = 1, k
    cdef int node, lane, via, nxt, side, nb
    memset(seen, 0, 2 * m.n_lanes)
    seen[2 * start] = 1
    queue[0] = 2 * start
    while head < tail:
        node = queue[head]
        head += 1
        lane = node >> 1
        via = node & 1
        if lane == goal and (via or (goal_s >= start_s if goal == start else ahead)):
            return True
        for k in range(m.succ_off[lane], m.succ_off[lane + 1]):
            nxt = 2 * m.succ[k] + 1
            if not seen[nxt]:
                seen[nxt] = 1
                queue[tail] = nxt
                tail += 1
        for side in range(2):
            nb = m.lane_left[lane] if side == 0 else m.lane_right[lane]
            if nb >= 0:
                nxt = 2 * nb + via
                if not seen[nxt]:
                    seen[nxt] = 1
                    queue[tail] = nxt
                    tail += 1
    return False


cdef inline void track_goals_reachable(const MapC* m, double max_dist, double z_gate, unsigned char* out,
                                       unsigned char* seen, int* queue) noexcept nogil:
    """``out[j]``: 1 when track ``j``'s last valid position (its logged goal) is reachable from its first
    along the lane graph (``lane_reachable`` from the lanes nearest to both), 0 when not or when either
    lies off every lane. Pedestrians walk off the lane graph: their goals are always 1."""
    cdef Py_ssize_t j, tt, T = m.track_steps, first, last
    cdef const double* a
    cdef const double* b
    cdef int l0, l1
    cdef double s0 = 0.0, s1 = 0.0
    cdef bint ahead
    for j in range(m.n_tracks):
        out[j] = 0
        first = -1
        last = -1
        for tt in range(T):
            if m.track_valid[j * T + tt]:
                if first < 0:
                    first = tt
                last = tt
        if first < 0:
            continue
        if m.track_type[j] == CLS_PEDESTRIAN:
            out[j] = 1
            continue
        a = &m.track_state[(j * T + first) * 6]
        b = &m.track_state[(j * T + last) * 6]
        l0 = nearest_lane(m, a[0], a[1], a[2], max_dist, z_gate, &s0)
        l1 = nearest_lane(m, b[0], b[1], b[2], max_dist, z_gate, &s1)
        if l0 < 0 or l1 < 0:
            continue
        ahead = (b[0] - a[0]) * cos(a[3]) + (b[1] - a[1]) * sin(a[3]) > 0
        out[j] = 1 if lane_reachable(m, l0, s0, l1, s1, ahead, seen, queue) else 0


ctypedef struct LaneGraphScratch:
    # Per-world scratch of ``lane_graph_distance``, each array n_lanes long. Between calls ``pot`` is
    # +inf and ``done`` 0 everywhere (the call restores the entries it touched).
    double* pot
    double* entry
    unsigned char* done
    int* touched


cdef inline int _relax(LaneGraphScratch* sc, int v, double p, double entry, int n_t) noexcept nogil:
    """Lower lane ``v``'s potential to ``p`` (entered at arc length ``entry``) when that is shorter and
    ``v`` is not settled; returns the new count of touched lanes."""
    if not sc.done[v] and p < sc.pot[v]:
        if sc.pot[v] == INFINITY:
            sc.touched[n_t] = v
            n_t += 1
        sc.pot[v] = p
        sc.entry[v] = entry
    return n_t


cdef inline double lane_graph_distance(const MapC* m, int start, double start_s, int goal, double goal_s,
                                       double cap, LaneGraphScratch* sc) noexcept nogil:
    """Shortest forward driving distance (m) from arc length ``start_s`` of lane ``start`` to arc
    length ``goal_s`` of lane ``goal``, over successor edges (to the successor's start) and lane
    changes to ``lane_left``/``lane_right`` (free, at the same arc length, as ``lane_reachable``
    treats them); -1 when the goal cannot be reached within ``cap`` metres.

    Dijkstra over lanes with a potential per lane: ``pot[l]`` is the distance driven when passing arc
    length 0 of ``l``, so a point at arc ``s >= entry[l]`` (where ``l`` was entered) costs
    ``pot[l] + s``. Edges then weigh a lane's length (successor) or 0 (lane change), never less than
    0. The frontier is scanned linearly: the lanes within ``cap`` of an agent are few."""
    cdef double best = INFINITY, p, L
    cdef int n_t = 0, k, u, v, side, j
    cdef double up
    if goal == start and goal_s >= start_s:
        best = goal_s - start_s
    sc.pot[start] = -start_s
    sc.entry[start] = start_s
    sc.touched[n_t] = start
    n_t += 1
    while True:
        u = -1
        up = INFINITY
        for k in range(n_t):
            j = sc.touched[k]
            if not sc.done[j] and sc.pot[j] < up:
                up = sc.pot[j]
                u = j
        # Every point still to be found costs at least pot (arc lengths are >= 0).
        if u < 0 or up >= best or up > cap:
            break
        sc.done[u] = 1
        L = m.lane_s0[m.lane_off[u + 1] - 1]
        for k in range(m.succ_off[u], m.succ_off[u + 1]):
            v = m.succ[k]
            p = up + L
            if v == goal and p + goal_s < best:
                best = p + goal_s
            n_t = _relax(sc, v, p, 0.0, n_t)
        for side in range(2):
            v = m.lane_left[u] if side == 0 else m.lane_right[u]
            if v < 0:
                continue
            if v == goal and goal_s >= sc.entry[u] and up + goal_s < best:
                best = up + goal_s
            n_t = _relax(sc, v, up, sc.entry[u], n_t)
    for k in range(n_t):
        j = sc.touched[k]
        sc.pot[j] = INFINITY
        sc.done[j] = 0
    if best > cap:
        return -1.0
    return best


cdef inline int route_successor(const MapC* m, const Agent* a, int lane, double lane_max_dist, double z_gate,
                                double cap, LaneGraphScratch* sc) noexcept nogil:
    """The successor of ``lane`` from whose start the agent's goal lies nearest along the lane graph
    (``lane_graph_distance`` to the goal's nearest lane point; ties to the first listed); -1 when the
    goal is off every lane or no successor reaches it within ``cap`` metres."""
    cdef double gs = 0.0, d, best = INFINITY
    cdef int gl = nearest_lane(m, a.goal_x, a.goal_y, a.goal_z, lane_max_dist, z_gate, &gs)
    cdef int k, v, out = -1
    if gl < 0:
        return -1
    for k in range(m.succ_off[lane], m.succ_off[lane + 1]):
        v = m.succ[k]
        d = lane_graph_distance(m, v, 0.0, gl, gs, cap, sc)
        if d >= 0 and d < best:
            best = d
            out = v
    return out


cdef inline double goal_route_distance(const MapC* m, const Agent* a, double lane_max_dist, double z_gate,
                                       double cap, LaneGraphScratch* sc) noexcept nogil:
    """Driving distance (m) from the agent's place on its lane (``a.lane``, ``a.lane_arc``: after
    ``lane_state``) to the point of the lane nearest its goal, along the lane graph
    (``lane_graph_distance``); -1 when the agent or the goal is off every lane or the goal is not
    reachable within ``cap`` metres."""
    cdef double gs = 0.0
    cdef int gl
    if a.lane < 0:
        return -1.0
    gl = nearest_lane(m, a.goal_x, a.goal_y, a.goal_z, lane_max_dist, z_gate, &gs)
    if gl < 0:
        return -1.0
    return lane_graph_distance(m, a.lane, a.lane_arc, gl, gs, cap, sc)
