# cython: language_level=3
"""terrazero_env._engine: the compiled core.

* geometry kernels (separating-axis boxes, segments, polygons), the IDM acceleration law, rule
  checks (comfort, wrong way) and the pedestrians' ORCA step and its linear program, each with a
  batch entry point so it can be tested without an engine;
* ``SegmentGrid`` and ``RoadMap``: a built ``MapData`` (read from ``.tzb`` by memory map) turned into
  C-side segment tables, spatial grids and observation caches, shared by every world on the map;
* ``Engine``: W worlds x K controlled slots stepped without the GIL into preallocated buffers;
* ``ObsLayout``: where every observation feature lives, read by policies instead of hand-typed indices.

Concerns live in their own ``.pxd`` modules and the Engine class's work in one ``.pxi`` per concern;
``docs/design.md`` ("Where each concept lives") is the one list of them. Python never loops over agents
on the step path.
"""

import numpy as np
from collections.abc import Mapping
cimport numpy as cnp
from libc.math cimport atan2, atan, tan, sqrt, floor, fabs, cos, sin, INFINITY
from libc.stdlib cimport calloc, free
from libc.string cimport memset, memcpy
from libc.stdint cimport uint16_t
from cpython.exc cimport PyErr_CheckSignals
from cython.parallel cimport prange

from common cimport *
from geometry cimport (point_segment_dist2, obb_overlap, segments_intersect, point_in_polygon,
                       box_corners)
from seggrid cimport seggrid_nearest
from rng cimport Rng, rng_seed, rng_uniform, rng_range, rng_int, rng_normal, rng_episode_value
from dynamics cimport step_dynamics
from neighbours cimport (NEIGHBOURS_AUTO, NEIGHBOURS_GRID, NEIGHBOURS_SCAN, NBR_BUCKETS, NBR_CELL, AgentGrid,
                        nbr_start, nbr_moved)
from rules cimport (AGENT_BUCKETS, offroad, offroad_excursion, lane_state, lane_state_tracked, grid_build, collides,
                    point_in_rings,
                    box_touches_segments, wrong_way, comfort_violations, pedestrian_rules, vehicle_rules,
                    goal_distance, goal_check, count_events, consequence, stop_in_place)
from observe cimport (ObsOut, EgoLayout, EntityLayout, write_ego, write_partners, write_road, write_traffic,
                     float_to_half)
from rewards cimport StepEvents, RewardForm, step_reward, goal_progress, route_progress, GOAL_PROGRESS_ROUTE, PROGRESS_POTENTIAL
from scene cimport lane_length, lane_point, sample_goal, TurnBox, turn_box, lane_turnable
from geometry cimport wrap_angle
from observe cimport lane_curvature_ahead
from lanegraph cimport nearest_lane, track_goals_reachable, LaneGraphScratch, goal_route_distance, route_successor
from signals cimport SigParams, SigState, signals_replay, signals_reset, signals_tick
from traffic cimport StopRules, traffic_rules, front_centre
from roadusers cimport IdmParams, idm_step, idm_draw_mode
from lanechange cimport LaneChangeParams
from idm_law cimport idm_accel
from static_actors cimport StaticParams, place_route_group, place_static_actors
from metrics cimport MetricParams, metric_params_default, episode_metrics_step, handed_progress_step, box_ttc, collision_type
from orca cimport ORCA_MAX_LINES, OrcaLine, orca_line, orca_solve, orca_velocity, orca_insert, half_plane_violation
from pedestrians cimport PedParams, PedState, N_PED_STATS, PS_PENDING, pedestrians_reset, pedestrians_step
from reference cimport RefParams, RefPlan, reference_params_default, reference_action
from planner cimport PlannerParams, PlanState, PLAN_STATS, PLAN_MAX_OFFSETS, PLAN_MAX_SPEEDS, PLAN_MAX_STEPS, plan_step

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
    (``idm_law.idm_accel``), on array-likes broadcast to one shape.

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


#: Columns of ``dynamics_step_batch``'s state, in order.
DYNAMICS_STATE = ("x", "y", "heading", "speed", "steer", "a_long", "a_lat", "yaw_rate", "v_lat",
                  "length", "wheelbase", "c_throttle", "c_steer", "c_acc", "c_vel")


def dynamics_step_batch(state, u_long, u_lat, class_params, int model, double dt=0.1):
    """One ``dt`` step of a class's dynamics (``dynamics.step_dynamics``, the engine's own step) for
    N agents: ``state`` float64 ``[N, 15]`` with the columns ``DYNAMICS_STATE`` (metres, radians, m/s,
    m/s^2, rad/s; the four kinematic coefficients last), ``u_long`` and ``u_lat`` the two action values
    (``[N]``, the class grid's values before the coefficients), ``class_params`` one row of the
    engine's class table (``EngineConfig.tables()["class_params"][cls]``, ``CLASS_PARAMS`` order) and
    ``model`` a ``DynamicsModel``. Returns the new state, float64 ``[N, 15]`` (the same columns), and the
    realised jerks ``[N, 2]`` (longitudinal, lateral)."""
    st = np.ascontiguousarray(state, dtype=np.float64)
    if st.ndim != 2 or st.shape[1] != len(DYNAMICS_STATE):
        raise ValueError(f"state must be [N, {len(DYNAMICS_STATE)}] ({', '.join(DYNAMICS_STATE)}), "
                         f"got shape {st.shape}")
    cdef Py_ssize_t n = st.shape[0], i
    ul = np.ascontiguousarray(np.broadcast_to(np.asarray(u_long, np.float64), (n,)))
    ua = np.ascontiguousarray(np.broadcast_to(np.asarray(u_lat, np.float64), (n,)))
    row = np.ascontiguousarray(class_params, dtype=np.float64)
    if row.shape != (N_CP,):
        raise ValueError(f"class_params must be one class's {N_CP} parameters, got shape {row.shape}")
    if not 0 <= model <= DYN_BICYCLE_TIRE:
        raise ValueError(f"model must be a DynamicsModel (0..{DYN_BICYCLE_TIRE}), got {model}")
    if not (dt > 0 and np.isfinite(dt)):
        raise ValueError(f"dt must be a positive number of seconds, got {dt}")
    if not (np.isfinite(st).all() and np.isfinite(ul).all() and np.isfinite(ua).all()):
        raise ValueError("state, u_long and u_lat must be finite")
    if n and (st[:, 9].min() <= 0 or st[:, 10].min() <= 0):
        raise ValueError("length and wheelbase must be positive metres")
    out = st.copy()
    jerks = np.empty((n, 2), np.float64)
    cdef double[:, ::1] o = out
    cdef double[:, ::1] jk = jerks
    cdef const double[::1] l = ul
    cdef const double[::1] t = ua
    cdef double cp[N_CP]
    cdef Agent a
    for i in range(N_CP):
        cp[i] = row[i]
    with nogil:
        memset(&a, 0, sizeof(Agent))
        for i in range(n):
            a.x, a.y, a.heading, a.speed, a.steer = o[i, 0], o[i, 1], o[i, 2], o[i, 3], o[i, 4]
            a.a_long, a.a_lat, a.yaw_rate, a.v_lat = o[i, 5], o[i, 6], o[i, 7], o[i, 8]
            a.length, a.wheelbase = o[i, 9], o[i, 10]
            a.kin[KIN_THROTTLE], a.kin[KIN_STEER], a.kin[KIN_ACC], a.kin[KIN_VEL] = o[i, 11], o[i, 12], o[i, 13], o[i, 14]
            a.cos_h, a.sin_h = cos(a.heading), sin(a.heading)
            step_dynamics(&a, cp, model, l[i], t[i], dt)
            o[i, 0], o[i, 1], o[i, 2], o[i, 3], o[i, 4] = a.x, a.y, a.heading, a.speed, a.steer
            o[i, 5], o[i, 6], o[i, 7], o[i, 8] = a.a_long, a.a_lat, a.yaw_rate, a.v_lat
            jk[i, 0], jk[i, 1] = a.j_long, a.j_lat
    return out, jerks


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


def box_ttc_batch(const double[:, ::1] boxes_a, const double[:, ::1] boxes_b, double horizon):
    """Time to collision of pairs of boxes moving at constant velocity (``metrics.box_ttc``).

    ``boxes_a``, ``boxes_b``: float64 ``[N, 7]`` rows of (cx, cy, heading, length, width, vx, vy) in
    metres, radians and m/s. Returns float64 ``[N]``: the first time in [0, ``horizon``] s at which the
    boxes overlap (0 if they already do), ``inf`` if they do not within the horizon."""
    if boxes_a.shape[0] != boxes_b.shape[0] or boxes_a.shape[1] != 7 or boxes_b.shape[1] != 7:
        raise ValueError(f"expected two float64 [N, 7] arrays, got {(boxes_a.shape[0], boxes_a.shape[1])} and "
                         f"{(boxes_b.shape[0], boxes_b.shape[1])}")
    cdef Py_ssize_t n = boxes_a.shape[0], i
    out = np.zeros(n, dtype=np.float64)
    cdef double[::1] o = out
    with nogil:
        for i in range(n):
            o[i] = box_ttc(boxes_a[i, 0], boxes_a[i, 1], boxes_a[i, 2], boxes_a[i, 3], boxes_a[i, 4], boxes_a[i, 5],
                           boxes_a[i, 6], boxes_b[i, 0], boxes_b[i, 1], boxes_b[i, 2], boxes_b[i, 3], boxes_b[i, 4],
                           boxes_b[i, 5], boxes_b[i, 6], horizon)
    return out


def collision_type_batch(const double[:, ::1] agents_a, const double[:, ::1] agents_b):
    """How agent ``a`` of each colliding pair collided with ``b`` (``metrics.collision_type``; codes
    index ``COLLISION_TYPES``). Rows: float64 ``[N, 6]`` of (x, y, heading, length, width, speed)."""
    if agents_a.shape[0] != agents_b.shape[0] or agents_a.shape[1] != 6 or agents_b.shape[1] != 6:
        raise ValueError("expected two float64 [N, 6] arrays of (x, y, heading, length, width, speed)")
    cdef Py_ssize_t n = agents_a.shape[0], i
    cdef Agent a, b
    cdef MetricParams p
    out = np.zeros(n, dtype=np.int32)
    cdef int[::1] o = out
    with nogil:
        metric_params_default(&p)
        memset(&a, 0, sizeof(Agent))
        memset(&b, 0, sizeof(Agent))
        a.lane = -1     # off the lanes: sideways motion is judged across the mean heading
        b.lane = -1
        for i in range(n):
            a.x, a.y, a.heading, a.length, a.width, a.speed = (agents_a[i, 0], agents_a[i, 1], agents_a[i, 2],
                                                               agents_a[i, 3], agents_a[i, 4], agents_a[i, 5])
            b.x, b.y, b.heading, b.length, b.width, b.speed = (agents_b[i, 0], agents_b[i, 1], agents_b[i, 2],
                                                               agents_b[i, 3], agents_b[i, 4], agents_b[i, 5])
            o[i] = collision_type(&a, &b, &p)
    return out


def orca_solve_batch(const double[:, ::1] lines, pref_velocity, double max_speed):
    """ORCA's linear program (``orca.orca_solve``) on one set of half-planes: float64 ``[M, 4]``
    rows (px, py, dx, dy) of a point and a direction (m/s; the permitted side is the left one,
    ``det(d, v - p) >= 0``; directions are normalised here), the preferred velocity (vx, vy) and
    the speed limit (m/s). Returns (velocity float64 ``[2]``, whether every half-plane was met;
    when not, the velocity minimises the largest violation). At most ORCA_MAX_LINES lines."""
    if lines.shape[1] != 4 or lines.shape[0] > ORCA_MAX_LINES:
        raise ValueError(f"lines must be float64 [M <= {ORCA_MAX_LINES}, 4], got {(lines.shape[0], lines.shape[1])}")
    pref = np.asarray(pref_velocity, np.float64)
    if pref.shape != (2,) or not np.all(np.isfinite(pref)):
        raise ValueError(f"pref_velocity must be 2 finite values, got {pref_velocity!r}")
    if not max_speed > 0:
        raise ValueError(f"max_speed must be > 0 (m/s), got {max_speed}")
    cdef OrcaLine ls[ORCA_MAX_LINES]
    cdef Py_ssize_t m = lines.shape[0], k
    cdef double vx, vy, nrm, px = pref[0], py = pref[1]
    cdef bint ok
    for k in range(m):
        nrm = sqrt(lines[k, 2] ** 2 + lines[k, 3] ** 2)
        if not nrm > 0:
            raise ValueError(f"lines[{k}]: the direction must be non-zero")
        ls[k].px, ls[k].py, ls[k].dx, ls[k].dy = lines[k, 0], lines[k, 1], lines[k, 2] / nrm, lines[k, 3] / nrm
    with nogil:
        ok = orca_solve(ls, <int>m, max_speed, px, py, &vx, &vy)
    return np.array([vx, vy]), bool(ok)


def orca_step_batch(const double[:, ::1] positions, const double[:, ::1] velocities, const double[::1] radii,
                    const double[:, ::1] pref_velocities, double max_speed, double neighbor_distance,
                    double time_horizon, double dt):
    """One ORCA step of N discs that all avoid each other (the walkers of ``pedestrians.pxd``):
    positions and velocities float64 ``[N, 2]`` (m, m/s), radii ``[N]`` (m), preferred velocities
    ``[N, 2]``; neighbours within ``neighbor_distance`` of a disc's edge (the nearest
    ORCA_MAX_LINES) share the avoidance equally. Returns the new velocities float64 ``[N, 2]``
    (all from the same instant; the caller integrates them)."""
    cdef Py_ssize_t n = positions.shape[0], i, j
    if positions.shape[1] != 2 or velocities.shape[0] != n or velocities.shape[1] != 2 or radii.shape[0] != n \
            or pref_velocities.shape[0] != n or pref_velocities.shape[1] != 2:
        raise ValueError("positions, velocities, pref_velocities must be float64 [N, 2] and radii [N] for one N")
    for name, v in (("max_speed", max_speed), ("time_horizon", time_horizon), ("dt", dt)):
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    if not neighbor_distance >= 0:
        raise ValueError(f"neighbor_distance must be >= 0 (m), got {neighbor_distance}")
    out = np.zeros((n, 2), np.float64)
    cdef double[:, ::1] o = out
    cdef double nb[6 * ORCA_MAX_LINES]
    cdef double nd2[ORCA_MAX_LINES]
    cdef double dx, dy, d2, reach
    cdef int m_nb
    with nogil:
        for i in range(n):
            m_nb = 0
            for j in range(n):
                if j == i:
                    continue
                dx = positions[j, 0] - positions[i, 0]
                dy = positions[j, 1] - positions[i, 1]
                d2 = dx * dx + dy * dy
                reach = neighbor_distance + radii[i] + radii[j]
                if d2 > reach * reach:
                    continue
                m_nb = orca_insert(nb, nd2, m_nb, d2, positions[j, 0], positions[j, 1], velocities[j, 0],
                                   velocities[j, 1], radii[j], 0.5)
            orca_velocity(positions[i, 0], positions[i, 1], velocities[i, 0], velocities[i, 1], radii[i], nb, m_nb,
                          time_horizon, dt, max_speed, pref_velocities[i, 0], pref_velocities[i, 1],
                          &o[i, 0], &o[i, 1])
    return out


include "vocabulary.pxi"
include "segment_grid.pxi"
include "roadmap.pxi"
include "layout.pxi"
include "engine.pxi"
include "engine_setup.pxi"
include "road_user_setup.pxi"
include "scene_checks.pxi"
include "signal_store.pxi"
include "placement.pxi"
include "log_placement.pxi"
include "handover.pxi"
include "reference_driver.pxi"
include "world_step.pxi"
include "engine_state.pxi"
