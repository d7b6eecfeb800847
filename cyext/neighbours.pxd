# cython: language_level=3
"""Neighbour queries through the agent grid (``rules.grid_build``: live agents hashed by cell into
``AGENT_BUCKETS`` singly linked lists, rebuilt after every motion phase).

A query visits the cells within the radius and keeps each candidate only if it really lies in the
visited cell (buckets are hashed, so a bucket holds agents of several cells; the check also means no
agent is seen twice). The candidates come in the grid's order, not by index: a caller that needs an
order sorts them (by distance, ties by index), so a query gives the same answer as a scan over every
agent of the world. ``grid_pays`` says when the grid is expected to be cheaper than that scan.
"""

from libc.math cimport floor, ceil, fabs
from common cimport Agent
from rules cimport AGENT_BUCKETS

# How neighbour queries are answered (EngineConfig.neighbour_search).
cdef enum:
    NEIGHBOURS_AUTO = 0    # the grid where it visits fewer cells than a scan visits agents
    NEIGHBOURS_GRID = 1
    NEIGHBOURS_SCAN = 2


cdef inline bint grid_pays(int mode, Py_ssize_t n, double radius, double cell, double map_area) noexcept nogil:
    """Whether a query of ``radius`` in a world of ``n`` agents on a map of ``map_area`` square
    metres (its bounding box) goes through the grid: always under NEIGHBOURS_GRID, never under
    NEIGHBOURS_SCAN. Under NEIGHBOURS_AUTO when the ``(2R + 1)^2`` cells it visits cover at most a
    sixteenth of the map and the scan's ``n`` agent tests exceed twice their number. The grid's cell
    is sized for collisions (twice the longest class's box), so on a town-sized map a 50 m query
    covers much of it and the scan is cheaper (BENCHMARKS.md, the density sweep)."""
    if mode == NEIGHBOURS_SCAN:
        return False
    if mode == NEIGHBOURS_GRID:
        return True
    cdef double side = 2.0 * ceil(radius / cell) + 1.0
    return n > 2.0 * side * side and 16.0 * side * side * cell * cell <= map_area


cdef inline Py_ssize_t grid_within(const Agent* agents, Py_ssize_t self_i, double x, double y, double z,
                                   double radius, double radius2, double z_gate, const int* head,
                                   const int* nxt, double cell, double* d2buf, int* idxbuf) noexcept nogil:
    """The live agents other than ``self_i`` whose centre lies within ``radius`` (``radius2`` its
    square, as the caller's scan compares it) of ``(x, y)`` and within ``z_gate`` of ``z``: their
    squared distances (``dx * dx + dy * dy`` with ``d = agent - query``, as a scan computes them) into
    ``d2buf`` and indices into ``idxbuf``, in grid order. Returns how many."""
    cdef long long R = <long long>ceil(radius / cell)
    cdef long long cx0 = <long long>floor(x / cell), cy0 = <long long>floor(y / cell), cx, cy
    cdef Py_ssize_t m = 0, bucket
    cdef int j
    cdef const Agent* p
    cdef double dx, dy, d2
    for cy in range(cy0 - R, cy0 + R + 1):
        for cx in range(cx0 - R, cx0 + R + 1):
            bucket = <Py_ssize_t>(((cx * 73856093) ^ (cy * 19349663)) & (AGENT_BUCKETS - 1))
            j = head[bucket]
            while j >= 0:
                p = &agents[j]
                if (j != self_i and p.alive and <long long>floor(p.x / cell) == cx
                        and <long long>floor(p.y / cell) == cy):
                    dx = p.x - x
                    dy = p.y - y
                    d2 = dx * dx + dy * dy
                    if d2 <= radius2 and fabs(p.z - z) <= z_gate:
                        d2buf[m] = d2
                        idxbuf[m] = j
                        m += 1
                j = nxt[j]
    return m
