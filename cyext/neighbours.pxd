# cython: language_level=3
"""Neighbour queries through a per-world grid of the agents (hashed cells of NBR_CELL metres, each
agent filed under its cell), so that a query looks at the agents near it instead of every agent of
the world (O(n) per query, O(n^2) per world step, in dense scenes the step's largest cost).

The collision grid (``rules.grid_build``, cells of twice the longest box) answers the 3 x 3-cell box
tests; this grid is finer, for the queries with a reach of tens of metres: the partner observation
(``observe.write_partners``), the IDM leader search along the predicted sweep
(``roadusers._leader_gap``) and its gap acceptance at a stop sign, a lane change's corridor
(``lanechange._lane_free``), the planner's neighbours (``planner._gather``) and the judged episode
metrics (``metrics.episode_metrics_step``). Each of them keeps its own exact test and runs it
over the grid's candidates (a superset of what the test keeps) instead of every agent; where the
order of the agents could matter it is made not to (ties by index), so a query answers as the scan
does, bit for bit (``tests/test_neighbours.py``).
"""

from libc.math cimport floor, fabs
from libc.stdlib cimport qsort
from common cimport Agent, CLS_PEDESTRIAN

# How neighbour queries are answered (EngineConfig.neighbour_search).
cdef enum:
    NEIGHBOURS_AUTO = 0    # the grid where a query's box is small against the map and the world
    NEIGHBOURS_GRID = 1
    NEIGHBOURS_SCAN = 2


# ------------------------------------------------------------------ the neighbour grid of one world
#
# A second, finer grid than the collision grid (whose cells must span two of the longest boxes, 45 m
# with buses, so that a box query looks at 3 x 3 cells): the queries above ask for the agents within
# a few tens of metres, which NBR_CELL-sized cells answer with few candidates. The
# cell size changes which agents are looked at, never an answer: each caller applies its own exact
# test to every candidate, and a candidate set is a superset of what that test keeps.
#
# The grid is exact at every moment of the motion phase: built from the positions at its start, each
# agent relinked to its new cell as soon as it has moved (agents move one at a time, in index order,
# and a later one's leader search sees the earlier ones where they now are, as a scan does).

cdef enum:
    NBR_BUCKETS = 512       # hashed buckets per world (a power of two)
    NBR_CELL = 12           # cell side (m)


ctypedef struct AgentGrid:
    int* head               # NBR_BUCKETS bucket heads (agent index, -1 for an empty bucket)
    int* nxt                # per agent of the world: the next agent of its bucket
    int* cx                 # per agent: the cell it is filed under (x, y), so a query compares integers
    int* cy
    int* cand               # scratch of max_agents indices: one query's candidates
    int* peds               # the world's live pedestrians, ascending (``nbr_start``)
    int n_peds
    double cell             # cell side (m)
    double map_area         # the map's bounding box (m^2)
    double reach            # the largest half length plus half width of the world's agents (m)
    double longest          # the largest length of the world's agents (m)
    double vmax             # the largest speed of the world's agents (m/s), kept up as they move
    int mode                # NEIGHBOURS_*: SCAN answers every query by the caller's scan
    int built               # 0 until the first query that takes the grid files the agents (nbr_box)


cdef inline Py_ssize_t _nbr_bucket(long long cx, long long cy) noexcept nogil:
    return <Py_ssize_t>(((cx * 73856093) ^ (cy * 19349663)) & (NBR_BUCKETS - 1))


cdef inline void nbr_start(AgentGrid* g, const Agent* agents, Py_ssize_t n) noexcept nogil:
    """A grid for the agents' present positions, filed on first use (``nbr_box``): until then
    nothing is built, so a world whose queries all go to the scan pays only for the world's largest
    agent extents and its list of pedestrians (agents are neither born nor change class while the
    grid serves: the motion phase, judging, observing)."""
    cdef Py_ssize_t i
    cdef double r
    g.reach = 0.0
    g.longest = 0.0
    g.vmax = 0.0
    g.built = 0
    g.n_peds = 0
    for i in range(n):
        if fabs(agents[i].speed) > g.vmax:
            g.vmax = fabs(agents[i].speed)
        r = 0.5 * (agents[i].length + agents[i].width)
        if r > g.reach:
            g.reach = r
        if agents[i].length > g.longest:
            g.longest = agents[i].length
        if agents[i].alive and agents[i].cls == CLS_PEDESTRIAN:
            g.peds[g.n_peds] = <int>i
            g.n_peds += 1


cdef inline void nbr_build(AgentGrid* g, const Agent* agents, Py_ssize_t n) noexcept nogil:
    """Every live agent into the bucket of its cell."""
    cdef Py_ssize_t i, b
    g.built = 1
    for b in range(NBR_BUCKETS):
        g.head[b] = -1
    for i in range(n):
        if agents[i].alive:
            g.cx[i] = <int>floor(agents[i].x / g.cell)
            g.cy[i] = <int>floor(agents[i].y / g.cell)
            b = _nbr_bucket(g.cx[i], g.cy[i])
            g.nxt[i] = g.head[b]
            g.head[b] = <int>i


cdef inline void nbr_moved(AgentGrid* g, const Agent* agents, Py_ssize_t i) noexcept nogil:
    """Agent ``i`` has moved: filed under its new cell if the cell changed (the motion phase's
    incremental update). An agent that was not alive when the grid was built stays out of it."""
    cdef int ncx, ncy
    cdef Py_ssize_t ob, nb
    cdef int j, prev
    if fabs(agents[i].speed) > g.vmax:
        g.vmax = fabs(agents[i].speed)
    if not g.built:
        return
    ncx = <int>floor(agents[i].x / g.cell)
    ncy = <int>floor(agents[i].y / g.cell)
    if g.cx[i] == ncx and g.cy[i] == ncy:
        return
    ob = _nbr_bucket(g.cx[i], g.cy[i])
    nb = _nbr_bucket(ncx, ncy)
    g.cx[i] = ncx
    g.cy[i] = ncy
    if ob == nb:
        return
    prev = -1
    j = g.head[ob]
    while j >= 0 and j != i:
        prev = j
        j = g.nxt[j]
    if j < 0:
        return          # not in the grid (it was not alive when the grid was built)
    if prev < 0:
        g.head[ob] = g.nxt[i]
    else:
        g.nxt[prev] = g.nxt[i]
    g.nxt[i] = g.head[nb]
    g.head[nb] = <int>i


cdef inline Py_ssize_t nbr_box(AgentGrid* g, const Agent* agents, Py_ssize_t n, double xmin, double ymin,
                               double xmax, double ymax) noexcept nogil:
    """The live agents whose centre lies in a cell that the box [xmin, xmax] x [ymin, ymax] touches,
    into ``g.cand`` in the grid's order; their count. -1 when the caller's scan is the cheaper answer
    (NEIGHBOURS_SCAN; under NEIGHBOURS_AUTO also a box of more cells than a quarter of the world's
    agents or of more than an eighth of the map's area: on a small map the scan's cheap rejections
    beat the grid's bookkeeping, BENCHMARKS.md, the density sweep)."""
    cdef long long cx0, cy0, cx1, cy1, cx, cy
    cdef Py_ssize_t m = 0
    cdef int j
    if g == NULL or g.mode == NEIGHBOURS_SCAN:
        return -1
    cx0 = <long long>floor(xmin / g.cell)
    cy0 = <long long>floor(ymin / g.cell)
    cx1 = <long long>floor(xmax / g.cell)
    cy1 = <long long>floor(ymax / g.cell)
    if g.mode == NEIGHBOURS_AUTO and (4 * (cx1 - cx0 + 1) * (cy1 - cy0 + 1) > n or
                                      8.0 * (xmax - xmin) * (ymax - ymin) > g.map_area):
        return -1
    if not g.built:
        nbr_build(g, agents, n)
    for cy in range(cy0, cy1 + 1):
        for cx in range(cx0, cx1 + 1):
            j = g.head[_nbr_bucket(cx, cy)]
            while j >= 0:
                if g.cx[j] == cx and g.cy[j] == cy and agents[j].alive:
                    g.cand[m] = j
                    m += 1
                j = g.nxt[j]
    return m


cdef inline int _ascending(const void* a, const void* b) noexcept nogil:
    return (<const int*>a)[0] - (<const int*>b)[0]


cdef inline Py_ssize_t nbr_box_sorted(AgentGrid* g, const Agent* agents, Py_ssize_t n, double xmin, double ymin,
                                      double xmax, double ymax) noexcept nogil:
    """``nbr_box`` with the candidates in ascending index, the order of a scan: for a caller whose
    answer depends on the order in which agents are met (ties kept in arrival order)."""
    cdef Py_ssize_t m = nbr_box(g, agents, n, xmin, ymin, xmax, ymax)
    if m > 1:
        qsort(g.cand, m, sizeof(int), _ascending)
    return m
