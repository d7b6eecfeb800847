# cython: language_level=3
"""terrazero_env._engine: the compiled core.

* geometry kernels (separating-axis boxes, segments, polygons), the IDM acceleration law and rule
  checks (comfort, wrong way), each with a batch entry point so it can be tested without an engine;
* ``SegmentGrid`` and ``RoadMap``: a built ``MapData`` (read from ``.tzb`` by memory map) turned into
  C-side segment tables, spatial grids and observation caches, shared by every world on the map;
* ``Engine``: W worlds x K controlled slots stepped without the GIL into preallocated buffers;
* ``ObsLayout``: where every observation feature lives, read by policies instead of hand-typed indices.

Concerns live in their own ``.pxd`` modules (geometry, rng, dynamics, rules, traffic, signals, observe,
rewards, scene; rule-based road users in route, yielding and roadusers). The Engine class is in
``engine.pxi``; the work behind it is in module-level functions taking the engine, one ``.pxi`` per
concern (signal_store, placement, world_step, engine_state). Python never loops over agents on the
step path.
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
                    box_touches_segments, wrong_way, comfort_violations, pedestrian_rules, vehicle_rules,
                    goal_distance, goal_check, count_events, consequence, stop_in_place)
from observe cimport (ObsOut, EgoLayout, EntityLayout, write_ego, write_partners, write_road, write_traffic,
                     float_to_half)
from rewards cimport StepEvents, step_reward, goal_progress
from scene cimport lane_length, lane_point, sample_goal
from signals cimport SigParams, SigState, signals_reset, signals_tick
from traffic cimport StopRules, traffic_rules, front_centre
from roadusers cimport IdmParams, idm_step, idm_accel, idm_draw_mode
from static_actors cimport StaticParams, place_static_actors

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


def _float_columns(names, values):
    """Broadcast named array-likes to one shape; returns (shape, float64 [N, len(names)] C array)."""
    try:
        arrs = np.broadcast_arrays(*[np.asarray(v, dtype=np.float64) for v in values])
    except ValueError as err:
        raise ValueError(f"{', '.join(names)} must broadcast to one shape: {err}") from None
    shape = arrs[0].shape
    return shape, np.ascontiguousarray(np.stack([a.reshape(-1) for a in arrs], axis=1))


def idm_accel_batch(v, v0, gap, lead_speed, time_headway, max_accel, comfort_decel, min_gap, delta):
    """The Intelligent Driver Model's acceleration (m/s^2), the law the rule-based vehicles use
    (``roadusers.idm_accel``), on array-likes broadcast to one shape.

    ``v`` speed and ``v0`` desired speed (m/s; ``v0`` 0 gives ``-comfort_decel``), ``gap`` to the
    leader (m; 1e8 or more: no leader, floored at 0.05 m), ``lead_speed`` (m/s), ``time_headway`` T
    (s), ``max_accel`` a and ``comfort_decel`` b (m/s^2, both > 0), ``min_gap`` s0 (m), ``delta``
    (exponent). Returns float64 of the broadcast shape, before any braking clip.
    """
    names = ("v", "v0", "gap", "lead_speed", "time_headway", "max_accel", "comfort_decel", "min_gap", "delta")
    shape, cols = _float_columns(names, (v, v0, gap, lead_speed, time_headway, max_accel, comfort_decel,
                                         min_gap, delta))
    if not (np.all(cols[:, 5] > 0) and np.all(cols[:, 6] > 0)):
        raise ValueError("max_accel and comfort_decel must be > 0 (m/s^2)")
    cdef const double[:, ::1] c = cols
    cdef Py_ssize_t n = c.shape[0], i
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = idm_accel(c[i, 0], c[i, 1], c[i, 2], c[i, 3], c[i, 4], c[i, 5], c[i, 6], c[i, 7], c[i, 8])
    return out.reshape(shape)


def comfort_violations_batch(accel_long, accel_lat, jerk_long, jerk_lat, limits):
    """How many comfort limits each agent exceeds (``rules.comfort_violations``): array-likes of
    longitudinal and lateral acceleration (m/s^2) and jerk (m/s^3) broadcast to one shape, against
    ``limits`` = (|a_long|, |a_lat|, |j_long|, |j_lat|) maxima of the class. Returns int32 counts 0..4."""
    lim = np.asarray(limits, dtype=np.float64)
    if lim.shape != (4,):
        raise ValueError(f"limits must be 4 values (a_long, a_lat, j_long, j_lat), got shape {lim.shape}")
    shape, cols = _float_columns(("accel_long", "accel_lat", "jerk_long", "jerk_lat"),
                                 (accel_long, accel_lat, jerk_long, jerk_lat))
    cdef const double[:, ::1] c = cols
    cdef Py_ssize_t n = c.shape[0], i
    cdef double cp[N_CP]
    cdef Agent a
    memset(cp, 0, sizeof(cp))
    cp[CP_COMF_ALONG], cp[CP_COMF_ALAT], cp[CP_COMF_JLONG], cp[CP_COMF_JLAT] = lim[0], lim[1], lim[2], lim[3]
    out = np.empty(n, dtype=np.int32)
    cdef int[::1] o = out
    with nogil:
        memset(&a, 0, sizeof(Agent))
        for i in range(n):
            a.a_long, a.a_lat, a.j_long, a.j_lat = c[i, 0], c[i, 1], c[i, 2], c[i, 3]
            o[i] = comfort_violations(&a, cp)
    return out.reshape(shape)


def wrong_way_batch(heading_residual, speed, on_lane, in_intersection, double max_angle):
    """Whether each agent drives the wrong way (``rules.wrong_way``): its heading residual to the
    lane (radians, wrapped) and speed (m/s), whether it is on a lane at all and whether that lane is
    an intersection lane (bool array-likes), broadcast to one shape; ``max_angle`` in radians.
    Returns bool of the broadcast shape."""
    shape, cols = _float_columns(("heading_residual", "speed", "on_lane", "in_intersection"),
                                 (heading_residual, speed, on_lane, in_intersection))
    cdef const double[:, ::1] c = cols
    cdef Py_ssize_t n = c.shape[0], i
    cdef int lane_inter[2]
    cdef MapC m
    cdef Agent a
    lane_inter[0] = -1   # lane 0: an ordinary lane
    lane_inter[1] = 0    # lane 1: part of intersection 0
    out = np.zeros(n, dtype=np.bool_)
    cdef cnp.uint8_t[::1] o = out.view(np.uint8)
    with nogil:
        memset(&m, 0, sizeof(MapC))
        m.lane_inter = lane_inter
        memset(&a, 0, sizeof(Agent))
        for i in range(n):
            a.lane = -1 if c[i, 2] == 0 else (1 if c[i, 3] != 0 else 0)
            a.lane_heading_res = c[i, 0]
            a.speed = c[i, 1]
            o[i] = wrong_way(&m, &a, max_angle)
    return out.reshape(shape)


include "vocabulary.pxi"
include "roadmap.pxi"
include "layout.pxi"
include "engine.pxi"
include "signal_store.pxi"
include "placement.pxi"
include "world_step.pxi"
include "engine_state.pxi"
