# cython: language_level=3
"""terrazero_env._engine: the compiled core.

* geometry kernels (separating-axis boxes, segments, polygons) with batch entry points for tests;
* ``SegmentGrid`` and ``RoadMap``: a built ``MapData`` (read from ``.tzb`` by memory map) turned into
  C-side segment tables, spatial grids and observation caches, shared by every world on the map;
* ``Engine``: W worlds x K controlled slots stepped without the GIL into preallocated buffers;
* ``ObsLayout``: where every observation feature lives, read by policies instead of hand-typed indices.

Concerns live in their own ``.pxd`` modules (geometry, rng, dynamics, rules, observe, rewards, scene);
this module only orchestrates them. Python never loops over agents on the step path.
"""

import numpy as np
cimport numpy as cnp
from libc.math cimport atan2, sqrt, floor, fabs, cos, sin, INFINITY
from libc.stdlib cimport calloc, free
from libc.string cimport memset, memcpy
from libc.stdint cimport uint16_t
from cython.parallel cimport prange

from common cimport *
from geometry cimport (point_segment_dist2, obb_overlap, segments_intersect, point_in_polygon,
                       box_corners)
from seggrid cimport seggrid_nearest
from rng cimport Rng, rng_seed, rng_uniform, rng_range, rng_int, rng_normal
from dynamics cimport step_dynamics
from rules cimport (AGENT_BUCKETS, offroad, lane_state, grid_build, collides, point_in_rings,
                    box_touches_segments)
from observe cimport (ObsOut, EgoLayout, EntityLayout, write_ego, write_partners, write_road, write_traffic,
                     float_to_half)
from rewards cimport StepEvents, step_reward
from scene cimport lane_length, lane_point, sample_goal
from signals cimport SigParams, SigState, signals_reset, signals_tick
from traffic cimport StopRules, traffic_rules, front_centre
from roadusers cimport IdmParams, idm_step

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


include "vocabulary.pxi"
include "roadmap.pxi"
include "layout.pxi"
include "engine.pxi"
