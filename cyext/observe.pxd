# cython: language_level=3
"""Observation writer (TerraZero appendix C, tables 9-12).

Every spatial feature is in the ego frame of equation (1): x forward, y left. Headings stay as
(cos, sin) pairs so the hot path needs no atan2. Each group's padding is written only where the
previous step wrote entities that this step does not overwrite, so the buffer is never cleared
wholesale. Values go to float32 or float16 storage through ``obs_put``.

Entity widths, the type codes and the observation bound are the enums below; every normaliser is a
field of ``ObsNorm``, filled from ``ObsLayout.normalisers`` (``layout.pxi``), so no scale is typed
here.
"""

from libc.stdint cimport uint16_t, uint32_t
from libc.string cimport memcpy
from libc.math cimport sqrt, fabs, sin, cos
from geometry cimport wrap_angle
from scene cimport lane_length, lane_point
from lanegraph cimport LaneGraphScratch, goal_route_distance, route_successor
from common cimport (Agent, MapC, ObsSegC, CLS_PEDESTRIAN, CLS_CYCLIST, KIND_NONE, KIND_PARKED, KIND_CRASHED,
                    KIND_CONE, KIND_WORKER, KIND_DEBRIS, N_REWARD, N_KIN, STOP_NOT_IN_REGION,
                    STOP_MUST_STOP, STOP_CLEARED, SIG_RED, SIG_YELLOW, SIG_GREEN, SIG_OFF, SLC_SIGNAL)
from rng cimport Rng, rng_uniform, rng_normal
from neighbours cimport AgentGrid, nbr_box


# Categorical agent type of tables 9 and 10 (0 is left for padding).
cdef enum:
    OBS_TYPE_VEHICLE = 1
    OBS_TYPE_PEDESTRIAN = 2
    OBS_TYPE_CYCLIST = 3
    OBS_TYPE_STATIC_VEHICLE = 4    # a parked or crashed vehicle (table 10 allows more types)
    OBS_TYPE_CONE = 5
    OBS_TYPE_DEBRIS = 6

# Values per entity (tables 10-12), without the partners' optional acceleration pair. layout.pxi
# checks its feature tables add up to these.
cdef enum:
    PARTNER_WIDTH = 8
    PARTNER_ACCEL_WIDTH = 2
    ROAD_WIDTH = 7
    TRAFFIC_WIDTH = 12

# Every observed value is clamped to +-OBS_CLAMP (exported to Python as OBS_BOUND, the bound of the
# observation space).
cdef enum:
    OBS_CLAMP = 100

# Traffic-entity kinds (table 12).
cdef enum:
    TRAFFIC_STOP_LINE = 0
    TRAFFIC_LIGHT = 1

# ObsConfig.stop_line_route follows at most this many lanes past the current one (a bound against a
# lane graph with a cycle of lanes shorter in all than traffic_radius).
cdef enum:
    STOP_LINE_MAX_HOPS = 64


ctypedef struct ObsNorm:
    # Observation normalisers (appendix C). A ``*_scale`` multiplies the raw value; a ``*_range``
    # divides it (kept as a divisor so the observed values are bit-identical to the paper's formula).
    double position_scale      # 1/m: ego-frame positions of partners, road segments and stop lines
    double height_scale        # 1/m: a stop line's height relative to the agent
    double goal_scale          # 1/m: ObsConfig.goal_scale
    double speed_scale         # s/m: ObsConfig.speed_scale (ego and partner speeds, one scale)
    double width_range         # m: vehicle width (ego and partners)
    double length_range        # m: vehicle length (ego and partners)
    double steer_range         # rad: steering angle
    double accel_long_range    # m/s^2: longitudinal acceleration
    double accel_lat_range     # m/s^2: lateral acceleration
    double lane_heading_range  # rad: heading residual to the lane
    double lane_lateral_range  # m: lateral offset from the lane centre
    double segment_range       # m: road segment length and width
    double lateral_velocity_range  # m/s: velocity across the lane
    double yaw_rate_range      # rad/s
    double curvature_range     # 1/m: lane curvature ahead


ctypedef struct ObsOut:
    float* f                   # float32 storage (NULL when half)
    uint16_t* h                # float16 storage (NULL when single)
    Py_ssize_t dim
    double noise_std, noise_clip
    Rng* rng


cdef inline uint16_t float_to_half(float value) noexcept nogil:
    """IEEE 754 binary16 from binary32, round to nearest even (as numpy's astype(float16))."""
    cdef uint32_t x
    memcpy(&x, &value, 4)
    cdef uint32_t sign = (x >> 16) & 0x8000
    cdef uint32_t mant = x & 0x007FFFFF
    cdef int exp = <int>((x >> 23) & 0xFF)
    cdef uint32_t half, shift, rounded
    if exp == 0xFF:  # inf or nan
        return <uint16_t>(sign | 0x7C00 | (0x200 if mant else 0))
    exp = exp - 127 + 15
    if exp >= 0x1F:
        return <uint16_t>(sign | 0x7C00)
    if exp <= 0:
        if exp < -10:
            return <uint16_t>sign
        mant = mant | 0x00800000
        shift = <uint32_t>(14 - exp)
        half = mant >> shift
        rounded = mant & ((1u << shift) - 1)
        if rounded > (1u << (shift - 1)) or (rounded == (1u << (shift - 1)) and (half & 1)):
            half += 1
        return <uint16_t>(sign | half)
    half = sign | (<uint32_t>exp << 10) | (mant >> 13)
    rounded = mant & 0x1FFF
    if rounded > 0x1000 or (rounded == 0x1000 and (half & 1)):
        half += 1  # may carry into the exponent, which is the correct rounding
    return <uint16_t>half


cdef inline double clamp_obs(double v) noexcept nogil:
    if v > OBS_CLAMP:
        return OBS_CLAMP
    if v < -OBS_CLAMP:
        return -OBS_CLAMP
    return v


cdef inline void obs_put(ObsOut* o, Py_ssize_t i, double v) noexcept nogil:
    cdef double n
    if o.noise_std > 0:
        n = rng_normal(o.rng) * o.noise_std
        if n > o.noise_clip:
            n = o.noise_clip
        elif n < -o.noise_clip:
            n = -o.noise_clip
        v += n
    if o.h != NULL:
        o.h[i] = float_to_half(<float>v)
    else:
        o.f[i] = <float>v


cdef inline void obs_put_n(ObsOut* o, Py_ssize_t i, const double* v, int n) noexcept nogil:
    """Write ``n`` consecutive values (one entity) with a single storage and noise dispatch."""
    cdef int k
    cdef float* f
    if o.noise_std > 0:
        for k in range(n):
            obs_put(o, i + k, v[k])
    elif o.h != NULL:
        for k in range(n):
            o.h[i + k] = float_to_half(<float>v[k])
    else:
        f = o.f + i
        for k in range(n):
            f[k] = <float>v[k]


cdef inline void obs_zero(ObsOut* o, Py_ssize_t start, Py_ssize_t stop) noexcept nogil:
    cdef Py_ssize_t i
    if o.h != NULL:
        for i in range(start, stop):
            o.h[i] = 0
    else:
        for i in range(start, stop):
            o.f[i] = 0.0


cdef inline int type_code(int cls) noexcept nogil:
    """Categorical agent type of tables 9 and 10: vehicle = 1, pedestrian = 2, cyclist = 3."""
    if cls == CLS_PEDESTRIAN:
        return OBS_TYPE_PEDESTRIAN
    if cls == CLS_CYCLIST:
        return OBS_TYPE_CYCLIST
    return OBS_TYPE_VEHICLE


cdef inline int kind_code(int cls, int kind) noexcept nogil:
    """Type code of a partner: its class's, or for a static actor its kind's (a worker is a
    pedestrian; parked and crashed vehicles share one code)."""
    if kind == KIND_PARKED or kind == KIND_CRASHED:
        return OBS_TYPE_STATIC_VEHICLE
    if kind == KIND_CONE:
        return OBS_TYPE_CONE
    if kind == KIND_DEBRIS:
        return OBS_TYPE_DEBRIS
    if kind == KIND_WORKER:
        return OBS_TYPE_PEDESTRIAN
    return type_code(cls)


# Offsets of each ego feature inside the ego group (-1 when disabled); filled by the engine from the
# layout table in _engine.pyx.
ctypedef struct EgoLayout:
    int agent_type, rel_goal_pos, goal_dropout_flag, state_dropout_flag, speed, vehicle_dims
    int collision_state, steering_angle, acceleration, stop_sign_state, alpha_params
    int kinematic_params, lane_state
    int lateral_velocity, yaw_rate, road_curvature   # optional appendix C features (-1 when off)
    int topology_goal_distance
    int stop_line_ahead                            # ours: the stop line ending the current lane
    double stop_line_cap                           # m: traffic_radius, the distance read when none
    bint stop_line_route                           # stop_line_route: past the lane's end, along the route
    double curvature_lookahead                     # m
    bint curvature_route                           # road_curvature_route: past a fork, the goal's branch
    double topology_cap                            # m: topology_max_distance
    double lane_max_dist, z_gate                   # m: how the goal's lane is found (as an agent's)
    int n_alpha
    int alpha_idx[N_REWARD]
    double kin_lo, kin_hi
    ObsNorm n


ctypedef struct EntityLayout:
    int start                  # offset of the group in the row
    int max_n                  # entity budget
    int width                  # values per entity
    int accel                  # partners: offset of the optional acceleration pair, -1 off
    int lights_n               # traffic: slots for traffic lights after the max_n stop lines' (0: off)
    double radius, radius2, z_gate, dropout
    ObsNorm n


cdef inline double lane_curvature_ahead(const MapC* m, int lane, double s, double ahead, int via) noexcept nogil:
    """Mean curvature (1/m, + left) of the lane graph from arc length ``s`` of ``lane`` over the next
    ``ahead`` metres: the wrapped heading change divided by the arc length covered. Past the lane's
    end the walk continues onto its successor when there is exactly one, else onto ``via`` (a
    successor chosen by the caller, -1 for none), and otherwise stops at the end."""
    cdef double x, y, z, h0, h1, L = lane_length(m, lane), travelled, target = s + ahead
    cdef int ln = lane, nxt = -1
    lane_point(m, lane, s, &x, &y, &z, &h0)
    if target > L:
        if m.succ_off[lane + 1] - m.succ_off[lane] == 1:
            nxt = m.succ[m.succ_off[lane]]
        elif via >= 0:
            nxt = via
        if nxt >= 0:
            target -= L
            if target > lane_length(m, nxt):
                target = lane_length(m, nxt)
            travelled = (L - s) + target
            ln = nxt
        else:
            target = L
            travelled = L - s
    else:
        travelled = ahead
    if travelled <= 1e-6:
        return 0.0
    lane_point(m, ln, target, &x, &y, &z, &h1)
    return wrap_angle(h1 - h0) / travelled


cdef inline double topology_goal_distance(const MapC* m, const EgoLayout* L, Agent* a,
                                          LaneGraphScratch* sc) noexcept nogil:
    """Driving distance (m) from the agent's place on its lane to the goal's nearest lane point along
    the lane graph (``lanegraph.goal_route_distance``); ``L.topology_cap`` when either is off every
    lane or the goal is further than that."""
    cdef double d = goal_route_distance(m, a, L.lane_max_dist, L.z_gate, L.topology_cap, sc)
    return L.topology_cap if d < 0 else d


cdef inline void write_stop_line_ahead(ObsOut* o, Py_ssize_t b, const EgoLayout* L, Agent* a, const MapC* m,
                                      const unsigned char* sl_state, LaneGraphScratch* sc) noexcept nogil:
    """``ObsConfig.stop_line_ahead``: the stop line at the end of the agent's current lane, its distance
    along the lane x ``position_scale`` (capped at ``L.stop_line_cap``) and its state one-hot (red,
    yellow, green, off/unknown); no lane, or a lane ending in no line, reads the cap and off/unknown.
    With ``L.stop_line_route`` (``ObsConfig.stop_line_route``) a lane ending in no line is followed
    onto its successor (the only one, or at a fork the one on the goal's route) until a lane that
    ends in a line, the cap, a fork with the goal hidden or off the graph, or a lane without
    successors; the distance is then the sum along those lanes."""
    cdef int lane = a.lane
    cdef Py_ssize_t sl = -1
    cdef double d = L.stop_line_cap, ahead = 0.0
    cdef int state = SIG_OFF
    cdef int k, n, hops = 0
    if lane >= 0:
        sl = m.lane_stop_line[lane]
        ahead = lane_length(m, lane) - a.lane_arc
        if ahead < 0.0:
            ahead = 0.0
        if L.stop_line_route:
            while sl < 0 and ahead <= L.stop_line_cap and hops < STOP_LINE_MAX_HOPS:
                n = m.succ_off[lane + 1] - m.succ_off[lane]
                if n == 1:
                    lane = m.succ[m.succ_off[lane]]
                elif n > 1 and not a.goal_hidden:
                    lane = route_successor(m, a, lane, L.lane_max_dist, L.z_gate, L.topology_cap, sc)
                else:
                    lane = -1
                if lane < 0:
                    break
                ahead += lane_length(m, lane)
                sl = m.lane_stop_line[lane]
                hops += 1
    if sl >= 0:
        d = ahead
        if d > L.stop_line_cap:
            d = L.stop_line_cap
        elif m.sl_control[sl] == SLC_SIGNAL:
            state = sl_state[sl]
    obs_put(o, b, d * L.n.position_scale)
    for k in range(4):
        obs_put(o, b + 1 + k, 1.0 if state == k else 0.0)


cdef inline void write_ego(ObsOut* o, Py_ssize_t row, const EgoLayout* L, Agent* a, bint state_dropout,
                           const MapC* m, LaneGraphScratch* sc, const unsigned char* sl_state) noexcept nogil:
    cdef Py_ssize_t b = row
    cdef double dx, dy, v
    cdef int k, via
    if L.agent_type >= 0:
        obs_put(o, b + L.agent_type, type_code(a.cls))
    if L.rel_goal_pos >= 0:
        if a.goal_hidden:
            obs_put(o, b + L.rel_goal_pos, 0.0)
            obs_put(o, b + L.rel_goal_pos + 1, 0.0)
        else:
            dx = a.goal_x - a.x
            dy = a.goal_y - a.y
            # Saturates at the observation-space bound (OBS_CLAMP) when goal_scale is raised
            # for near goals and a goal is nevertheless far away.
            obs_put(o, b + L.rel_goal_pos, clamp_obs((dx * a.cos_h + dy * a.sin_h) * L.n.goal_scale))
            obs_put(o, b + L.rel_goal_pos + 1, clamp_obs((-dx * a.sin_h + dy * a.cos_h) * L.n.goal_scale))
    if L.goal_dropout_flag >= 0:
        obs_put(o, b + L.goal_dropout_flag, 1.0 if a.goal_hidden else 0.0)
    if L.state_dropout_flag >= 0:
        obs_put(o, b + L.state_dropout_flag, 1.0 if state_dropout else 0.0)
    if L.speed >= 0:
        v = sqrt(a.speed * a.speed + a.v_lat * a.v_lat)
        obs_put(o, b + L.speed, 0.0 if state_dropout else (-v if a.speed < 0 else v) * L.n.speed_scale)
    if L.vehicle_dims >= 0:
        obs_put(o, b + L.vehicle_dims, 0.0 if state_dropout else a.width / L.n.width_range)
        obs_put(o, b + L.vehicle_dims + 1, 0.0 if state_dropout else a.length / L.n.length_range)
    if L.collision_state >= 0:
        obs_put(o, b + L.collision_state, 0.0 if state_dropout else (1.0 if a.collided else 0.0))
    if L.steering_angle >= 0:
        obs_put(o, b + L.steering_angle, 0.0 if state_dropout else a.steer / L.n.steer_range)
    if L.acceleration >= 0:
        obs_put(o, b + L.acceleration, 0.0 if state_dropout else a.a_long / L.n.accel_long_range)
        obs_put(o, b + L.acceleration + 1, 0.0 if state_dropout else a.a_lat / L.n.accel_lat_range)
    if L.stop_sign_state >= 0:
        # One-hot (not in region, must stop, cleared).
        obs_put(o, b + L.stop_sign_state, 1.0 if a.stop_state == STOP_NOT_IN_REGION else 0.0)
        obs_put(o, b + L.stop_sign_state + 1, 1.0 if a.stop_state == STOP_MUST_STOP else 0.0)
        obs_put(o, b + L.stop_sign_state + 2, 1.0 if a.stop_state == STOP_CLEARED else 0.0)
    if L.alpha_params >= 0:
        for k in range(L.n_alpha):
            obs_put(o, b + L.alpha_params + k, a.rw_norm[L.alpha_idx[k]])
    if L.kinematic_params >= 0:
        for k in range(N_KIN):
            if L.kin_hi > L.kin_lo:
                obs_put(o, b + L.kinematic_params + k, 2.0 * (a.kin[k] - L.kin_lo) / (L.kin_hi - L.kin_lo) - 1.0)
            else:
                obs_put(o, b + L.kinematic_params + k, 0.0)
    if L.lane_state >= 0:
        obs_put(o, b + L.lane_state, a.lane_heading_res / L.n.lane_heading_range if a.lane >= 0 else 0.0)
        obs_put(o, b + L.lane_state + 1, a.lane_lat / L.n.lane_lateral_range if a.lane >= 0 else 0.0)
    if L.lateral_velocity >= 0:
        # Velocity across the lane (+ left): speed * sin(residual) + body lateral velocity * cos(residual).
        v = (a.speed * sin(a.lane_heading_res) + a.v_lat * cos(a.lane_heading_res)) if a.lane >= 0 else 0.0
        obs_put(o, b + L.lateral_velocity, 0.0 if state_dropout else v / L.n.lateral_velocity_range)
    if L.yaw_rate >= 0:
        obs_put(o, b + L.yaw_rate, 0.0 if state_dropout else a.yaw_rate / L.n.yaw_rate_range)
    if L.road_curvature >= 0:
        v = 0.0
        if a.lane >= 0:
            via = -1
            if (L.curvature_route and not a.goal_hidden and m.succ_off[a.lane + 1] - m.succ_off[a.lane] > 1
                    and a.lane_arc + L.curvature_lookahead > lane_length(m, a.lane)):
                via = route_successor(m, a, a.lane, L.lane_max_dist, L.z_gate, L.topology_cap, sc)
            v = lane_curvature_ahead(m, a.lane, a.lane_arc, L.curvature_lookahead, via)
        obs_put(o, b + L.road_curvature, clamp_obs(v / L.n.curvature_range))
    if L.topology_goal_distance >= 0:
        v = 0.0 if a.goal_hidden else topology_goal_distance(m, L, a, sc) * L.n.goal_scale
        obs_put(o, b + L.topology_goal_distance, clamp_obs(v))
    if L.stop_line_ahead >= 0:
        write_stop_line_ahead(o, b + L.stop_line_ahead, L, a, m, sl_state, sc)


cdef inline void select_next_nearest(double* d2buf, int* idxbuf, Py_ssize_t k, Py_ssize_t m) noexcept nogil:
    """One step of a selection sort: move the k-th nearest candidate (ties by index) to position k.
    Only the first ``max_n`` are ever needed and the candidate lists are short."""
    cdef Py_ssize_t j, best = k
    cdef double tmp
    cdef int ti
    for j in range(k + 1, m):
        if d2buf[j] < d2buf[best] or (d2buf[j] == d2buf[best] and idxbuf[j] < idxbuf[best]):
            best = j
    tmp = d2buf[k]
    d2buf[k] = d2buf[best]
    d2buf[best] = tmp
    ti = idxbuf[k]
    idxbuf[k] = idxbuf[best]
    idxbuf[best] = ti


cdef inline bint _nearer(double da, int ia, double db, int ib) noexcept nogil:
    """(distance, index) order: nearer first, ties by the lower index."""
    return da < db or (da == db and ia < ib)


cdef inline void _sift_down(double* d2buf, int* idxbuf, Py_ssize_t i, Py_ssize_t size) noexcept nogil:
    cdef Py_ssize_t c
    cdef double td = d2buf[i]
    cdef int ti = idxbuf[i]
    while True:
        c = 2 * i + 1
        if c >= size:
            break
        if c + 1 < size and _nearer(d2buf[c + 1], idxbuf[c + 1], d2buf[c], idxbuf[c]):
            c += 1
        if not _nearer(d2buf[c], idxbuf[c], td, ti):
            break
        d2buf[i] = d2buf[c]
        idxbuf[i] = idxbuf[c]
        i = c
    d2buf[i] = td
    idxbuf[i] = ti


cdef inline void nearest_heap(double* d2buf, int* idxbuf, Py_ssize_t m) noexcept nogil:
    """Arrange ``m`` candidates as a binary min-heap in (distance, index) order, in O(m): then
    ``nearest_pop`` hands them out nearest first, each in O(log m), in the order a full sort gives
    (the key is a total order), for as many as the caller takes."""
    cdef Py_ssize_t i
    for i in range(m // 2 - 1, -1, -1):
        _sift_down(d2buf, idxbuf, i, m)


cdef inline int nearest_pop(double* d2buf, int* idxbuf, Py_ssize_t size) noexcept nogil:
    """The nearest candidate of a heap of ``size`` (> 0), removed: the heap keeps ``size - 1``."""
    cdef int j = idxbuf[0]
    d2buf[0] = d2buf[size - 1]
    idxbuf[0] = idxbuf[size - 1]
    _sift_down(d2buf, idxbuf, 0, size - 1)
    return j


cdef inline int write_partners(ObsOut* o, Py_ssize_t row, const EntityLayout* L, Agent* agents, Py_ssize_t n,
                               Py_ssize_t self_i, double* d2buf, int* idxbuf, int prev_count,
                               AgentGrid* grid) noexcept nogil:
    """The nearest live agents within the radius and z gate, nearest first, ties by index (table 10).
    Candidates come from the neighbour grid where it answers (``neighbours.nbr_box``; the same agents
    as a scan, in another order that the sort makes irrelevant). Returns how many were written."""
    cdef Agent* a = &agents[self_i]
    cdef Agent* p
    cdef Py_ssize_t j, q, m = 0, cnt = -1
    cdef double dx, dy, d2
    cdef int count = 0
    cdef Py_ssize_t base
    cdef double v[PARTNER_WIDTH]
    if grid != NULL:
        cnt = nbr_box(grid, agents, n, a.x - L.radius, a.y - L.radius, a.x + L.radius, a.y + L.radius)
    for q in range(n if cnt < 0 else cnt):
        j = q if cnt < 0 else grid.cand[q]
        p = &agents[j]
        if j == self_i or not p.alive:
            continue
        dx = p.x - a.x
        dy = p.y - a.y
        d2 = dx * dx + dy * dy
        if d2 <= L.radius2 and fabs(p.z - a.z) <= L.z_gate:
            d2buf[m] = d2
            idxbuf[m] = <int>j
            m += 1
    # Nearest first through a heap: O(m + max_n log m) where a selection sort costs O(max_n m), which
    # in a dense world (hundreds of candidates within the radius) was the step's largest cost.
    nearest_heap(d2buf, idxbuf, m)
    while m > 0 and count < L.max_n:
        j = nearest_pop(d2buf, idxbuf, m)
        m -= 1
        if L.dropout > 0 and rng_uniform(o.rng) < L.dropout:
            continue
        p = &agents[j]
        dx = p.x - a.x
        dy = p.y - a.y
        base = row + L.start + count * L.width
        v[0] = (dx * a.cos_h + dy * a.sin_h) * L.n.position_scale
        v[1] = (-dx * a.sin_h + dy * a.cos_h) * L.n.position_scale
        v[2] = p.width / L.n.width_range
        v[3] = p.length / L.n.length_range
        v[4] = p.cos_h * a.cos_h + p.sin_h * a.sin_h
        v[5] = p.sin_h * a.cos_h - p.cos_h * a.sin_h
        v[6] = sqrt(p.speed * p.speed + p.v_lat * p.v_lat) * L.n.speed_scale
        v[7] = kind_code(p.cls, p.kind)
        obs_put_n(o, base, v, PARTNER_WIDTH)
        if L.accel >= 0:
            v[0] = p.a_long / L.n.accel_long_range
            v[1] = p.a_lat / L.n.accel_lat_range
            obs_put_n(o, base + L.accel, v, PARTNER_ACCEL_WIDTH)
        count += 1
    if prev_count > count:
        obs_zero(o, row + L.start + count * L.width, row + L.start + prev_count * L.width)
    return count


cdef inline int write_road(ObsOut* o, Py_ssize_t row, const EntityLayout* L, const ObsSegC* g, Agent* a,
                           int prev_count) noexcept nogil:
    """Road segments from the precomputed candidates of the agent's cell (lane centerlines and
    road edges first, then nearest first), kept within the radius and z gate (table 11)."""
    cdef Py_ssize_t ix, iy, c, k, base
    cdef const float* s
    cdef double dx, dy, r2 = L.radius2, zg = L.z_gate, ax = a.x, ay = a.y, az = a.z
    cdef double v[ROAD_WIDTH]
    cdef int count = 0, max_n = L.max_n
    if g.n > 0:
        ix = <Py_ssize_t>((a.x - g.x0) / g.cell_size)
        iy = <Py_ssize_t>((a.y - g.y0) / g.cell_size)
        if 0 <= ix < g.nx and 0 <= iy < g.ny and a.x >= g.x0 and a.y >= g.y0:
            c = iy * g.nx + ix
            for k in range(g.cell_start[c], g.cell_start[c + 1]):
                if count >= max_n:
                    break
                s = g.seg + 8 * g.cell_items[k]
                dx = s[0] - ax
                dy = s[1] - ay
                if dx * dx + dy * dy > r2 or fabs(s[2] - az) > zg:
                    continue
                if L.dropout > 0 and rng_uniform(o.rng) < L.dropout:
                    continue
                base = row + L.start + count * L.width
                v[0] = (dx * a.cos_h + dy * a.sin_h) * L.n.position_scale
                v[1] = (-dx * a.sin_h + dy * a.cos_h) * L.n.position_scale
                v[2] = s[3] / L.n.segment_range
                v[3] = s[4] / L.n.segment_range
                v[4] = s[5] * a.cos_h + s[6] * a.sin_h
                v[5] = s[6] * a.cos_h - s[5] * a.sin_h
                v[6] = s[7]
                obs_put_n(o, base, v, ROAD_WIDTH)
                count += 1
    if prev_count > count:
        obs_zero(o, row + L.start + count * L.width, row + L.start + prev_count * L.width)
    return count


cdef inline void _traffic_entity(double* v, int kind, const double* pos, int state, const double* p,
                                 Agent* a, const EntityLayout* L) noexcept nogil:
    """One table-12 entity: its kind, ego-frame position ``pos`` (3D), signal state one-hot and the
    ego-frame endpoints of stop line ``p`` ([2, 3])."""
    cdef double dx = pos[0] - a.x, dy = pos[1] - a.y
    v[0] = kind
    v[1] = (dx * a.cos_h + dy * a.sin_h) * L.n.position_scale
    v[2] = (-dx * a.sin_h + dy * a.cos_h) * L.n.position_scale
    v[3] = (pos[2] - a.z) * L.n.height_scale
    v[4] = 1.0 if state == SIG_RED else 0.0
    v[5] = 1.0 if state == SIG_YELLOW else 0.0
    v[6] = 1.0 if state == SIG_GREEN else 0.0
    v[7] = 1.0 if state >= SIG_OFF else 0.0
    dx = p[0] - a.x
    dy = p[1] - a.y
    v[8] = (dx * a.cos_h + dy * a.sin_h) * L.n.position_scale
    v[9] = (-dx * a.sin_h + dy * a.cos_h) * L.n.position_scale
    dx = p[3] - a.x
    dy = p[4] - a.y
    v[10] = (dx * a.cos_h + dy * a.sin_h) * L.n.position_scale
    v[11] = (-dx * a.sin_h + dy * a.cos_h) * L.n.position_scale


cdef inline int write_traffic_lights(ObsOut* o, Py_ssize_t row, const EntityLayout* L, const MapC* m, Agent* a,
                                     const unsigned char* head_state, double* d2buf, int* idxbuf,
                                     int first) noexcept nogil:
    """The signal heads nearest the agent within the radius and z gate, nearest first, as entities
    of type 1 (table 12) from slot ``first`` on, at most ``L.lights_n``. Returns how many were written."""
    cdef Py_ssize_t h, k, m_n = 0
    cdef const double* q
    cdef double dx, dy
    cdef int count = 0
    cdef double v[TRAFFIC_WIDTH]
    for h in range(m.n_heads):
        q = &m.head_pos[3 * h]
        dx = q[0] - a.x
        dy = q[1] - a.y
        if dx * dx + dy * dy <= L.radius2 and fabs(q[2] - a.z) <= L.z_gate:
            d2buf[m_n] = dx * dx + dy * dy
            idxbuf[m_n] = <int>h
            m_n += 1
    for k in range(m_n):
        if count >= L.lights_n:
            break
        select_next_nearest(d2buf, idxbuf, k, m_n)
        h = idxbuf[k]
        _traffic_entity(v, TRAFFIC_LIGHT, &m.head_pos[3 * h], head_state[h], &m.sl_pts[6 * m.head_sl[h]], a, L)
        obs_put_n(o, row + L.start + (first + count) * L.width, v, TRAFFIC_WIDTH)
        count += 1
    return count


cdef inline int write_traffic(ObsOut* o, Py_ssize_t row, const EntityLayout* L, const MapC* m, Agent* a,
                              const unsigned char* sl_state, double* d2buf, int* idxbuf, int prev_count,
                              const unsigned char* head_state, double* lt_d2, int* lt_idx) noexcept nogil:
    """The stop lines nearest the agent within the radius and z gate, nearest first (table 12), so
    the agent's own approaching stop line is never crowded out; then, when ``L.lights_n`` > 0, the
    nearest traffic lights right after them (``write_traffic_lights``). Returns the entities written."""
    cdef Py_ssize_t s, k, m_n = 0, base
    cdef const double* p
    cdef double cx, cy, cz, dx, dy, d2
    cdef int count = 0
    cdef double v[TRAFFIC_WIDTH]
    cdef double mid[3]
    for s in range(m.n_stop_lines):
        p = &m.sl_pts[6 * s]
        cx = 0.5 * (p[0] + p[3])
        cy = 0.5 * (p[1] + p[4])
        cz = 0.5 * (p[2] + p[5])
        dx = cx - a.x
        dy = cy - a.y
        d2 = dx * dx + dy * dy
        if d2 <= L.radius2 and fabs(cz - a.z) <= L.z_gate:
            d2buf[m_n] = d2
            idxbuf[m_n] = <int>s
            m_n += 1
    for k in range(m_n):
        if count >= L.max_n:
            break
        select_next_nearest(d2buf, idxbuf, k, m_n)
        s = idxbuf[k]
        p = &m.sl_pts[6 * s]
        mid[0] = 0.5 * (p[0] + p[3])
        mid[1] = 0.5 * (p[1] + p[4])
        mid[2] = 0.5 * (p[2] + p[5])
        _traffic_entity(v, TRAFFIC_STOP_LINE, mid, sl_state[s], p, a, L)
        base = row + L.start + count * L.width
        obs_put_n(o, base, v, TRAFFIC_WIDTH)
        count += 1
    if L.lights_n > 0:
        count += write_traffic_lights(o, row, L, m, a, head_state, lt_d2, lt_idx, count)
    if prev_count > count:
        obs_zero(o, row + L.start + count * L.width, row + L.start + prev_count * L.width)
    return count
