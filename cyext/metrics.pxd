# cython: language_level=3
"""Per-episode driving metrics of controlled agents, accumulated in the engine.

One call per judged controlled agent and step (``episode_metrics_step``, from ``world_step.pxi``)
updates the agent's slot row of ``Engine.episode_metrics`` (columns ``EM_*`` of common.pxd): collision
onsets and whether the agent was at fault (``collision_type``: nuPlan's stopped-ego / stopped-other /
rear / front / lateral types, the lateral case decided by who closed the lateral gap), the shortest
time to collision under constant-velocity projection of the two boxes (``box_ttc``, exact for
translating rectangles), the smallest gap to another agent and time headway to a lead vehicle,
off-road steps, distance driven against the lane direction, over-speed against the lane's posted
limit, progress along the lane against a reference driving at that limit, stall time, hard braking
and acceleration onsets, comfort extrema and steps outside nuPlan's comfort bounds, and red-light,
stop-sign and yellow-light passages; at-fault onsets with static objects only (nuPlan's collision
partner classes) and the largest excursion of the box beyond the drivable area (``rules.offroad_excursion``,
measured by the rule checks). It only reads agents: observations and rewards do not change.
The meaning of every column and the score built from them live in ``terrazero_env.evaluation.metrics``.
"""

from libc.math cimport sqrt, fabs, cos, sin, atan2, INFINITY
from common cimport (Agent, MapC, CLS_PEDESTRIAN, SLC_SIGNAL, SIG_RED, SIG_YELLOW, STOP_MUST_STOP,
                     EM_STEPS, EM_COLLISIONS, EM_AT_FAULT_COLLISIONS, EM_MAX_IMPACT_SPEED, EM_MIN_TTC,
                     EM_TTC_STEPS, EM_MIN_GAP, EM_MIN_LEAD_HEADWAY, EM_OFFROAD_STEPS, EM_WRONG_WAY_DIST,
                     EM_OVERSPEED, EM_SPEEDING_STEPS, EM_SPEED_SUM, EM_LIMIT_SUM, EM_PROGRESS, EM_REF_PROGRESS,
                     EM_DISTANCE, EM_STALL_TIME, EM_HARD_BRAKES, EM_HARD_ACCELS, EM_MAX_LON_ACCEL,
                     EM_MIN_LON_ACCEL, EM_MAX_LAT_ACCEL, EM_MAX_LON_JERK, EM_MAX_JERK, EM_MAX_YAW_RATE,
                     EM_MAX_YAW_ACCEL, EM_COMFORT_STEPS, EM_RED_LIGHTS, EM_STOP_SIGNS, EM_YELLOW_ENTRIES,
                     EM_AT_FAULT_OBJECT_COLLISIONS, EM_MAX_OFFROAD_EXCURSION,
                     EM_IN_CONTACT, EM_PREV_HEADING, EM_PREV_YAW_RATE, KIND_CONE, KIND_DEBRIS,
                     COLL_STOPPED_EGO, COLL_STOPPED_OTHER, COLL_REAR, COLL_FRONT, COLL_LATERAL_EGO,
                     COLL_LATERAL_OTHER, COLL_SIDE_HIT)
from geometry cimport obb_overlap, segments_intersect, wrap_angle
from neighbours cimport AgentGrid, nbr_box


ctypedef struct MetricParams:
    # Thresholds of the metrics (defaults: metric_params_default; exported as METRIC_PARAMS).
    double stopped_speed       # m/s: below it an agent counts as stopped (nuPlan 0.05)
    double ttc_horizon         # s: constant-velocity projection horizon, and the cap of EM_MIN_TTC
    double ttc_threshold       # s: a step with TTC below it is a TTC violation (nuPlan 0.95)
    double gap_cap             # m: EM_MIN_GAP when no agent is nearer
    double lead_range          # m: how far ahead a lead vehicle is looked for
    double headway_cap         # s: EM_MIN_LEAD_HEADWAY without a lead vehicle
    double rear_angle          # rad: another agent this far from the heading (at the centre) is behind
    double parallel_angle      # rad: headings this close make a side contact lateral
    double stall_speed         # m/s: slower counts as standing
    double stall_gap           # m: standing with a lead vehicle this near is queueing, not stalling
    double max_lon_accel, min_lon_accel, max_lat_accel       # m/s^2 (nuPlan comfort bounds)
    double max_lon_jerk, max_jerk                            # m/s^3
    double max_yaw_rate, max_yaw_accel                       # rad/s, rad/s^2


cdef inline void metric_params_default(MetricParams* p) noexcept nogil:
    """nuPlan's closed-loop defaults where it has one (nuplan-devkit metric configs), ours else."""
    p.stopped_speed = 0.05
    p.ttc_horizon = 3.0
    p.ttc_threshold = 0.95
    p.gap_cap = 50.0
    p.lead_range = 50.0
    p.headway_cap = 10.0
    p.rear_angle = 2.6179938779914944   # 150 degrees, nuPlan's "agent behind" test
    p.parallel_angle = 0.5235987755982988   # 30 degrees
    p.stall_speed = 0.2
    p.stall_gap = 10.0
    p.max_lon_accel = 2.40
    p.min_lon_accel = -4.05
    p.max_lat_accel = 4.89
    p.max_lon_jerk = 4.13
    p.max_jerk = 8.37
    p.max_yaw_rate = 0.95
    p.max_yaw_accel = 1.93


cdef inline double _extent(double hl, double hw, double c, double s, double ux, double uy) noexcept nogil:
    """Half extent along unit ``u`` of a box with half sizes (hl, hw) and heading (c, s)."""
    return hl * fabs(ux * c + uy * s) + hw * fabs(-ux * s + uy * c)


cdef inline double box_ttc(double ax, double ay, double ah, double al, double aw, double avx, double avy,
                           double bx, double by, double bh, double bl, double bw, double bvx, double bvy,
                           double horizon) noexcept nogil:
    """First time in [0, horizon] at which two boxes (centre, heading, full length and width) moving
    at constant velocities overlap, or INFINITY. Exact: rectangles translating without rotation
    overlap exactly when their projections overlap on all four face normals, and each projection
    gap closes linearly, so the overlap times form one interval per axis."""
    cdef double px = bx - ax, py = by - ay, vx = bvx - avx, vy = bvy - avy
    cdef double t0 = 0.0, t1 = horizon, ux, uy, r, pp, vv, ta, tb, tmp
    cdef double ca = cos(ah), sa = sin(ah), cb = cos(bh), sb = sin(bh)
    cdef int k
    for k in range(4):
        if k == 0:
            ux, uy = ca, sa
        elif k == 1:
            ux, uy = -sa, ca
        elif k == 2:
            ux, uy = cb, sb
        else:
            ux, uy = -sb, cb
        r = _extent(0.5 * al, 0.5 * aw, ca, sa, ux, uy) + _extent(0.5 * bl, 0.5 * bw, cb, sb, ux, uy)
        pp = px * ux + py * uy
        vv = vx * ux + vy * uy
        if fabs(vv) < 1e-12:
            if fabs(pp) > r:
                return INFINITY
            continue
        ta = (-r - pp) / vv
        tb = (r - pp) / vv
        if ta > tb:
            tmp = ta
            ta = tb
            tb = tmp
        if ta > t0:
            t0 = ta
        if tb < t1:
            t1 = tb
        if t0 > t1:
            return INFINITY
    return t0


cdef inline void agent_velocity(const Agent* a, double* vx, double* vy) noexcept nogil:
    cdef double c = cos(a.heading), s = sin(a.heading)
    vx[0] = a.speed * c - a.v_lat * s
    vy[0] = a.speed * s + a.v_lat * c


cdef inline int collision_type(const Agent* a, const Agent* b, const MetricParams* p) noexcept nogil:
    """How ``a`` collided with ``b`` (COLL_* of common.pxd), seen from ``a``; nuPlan's order: a
    stopped ego is never at fault, hitting a stopped agent always is; an agent whose centre lies
    behind ``a`` (more than ``rear_angle`` off its heading) rear-ended it; a side contact between
    near-parallel agents is the fault of whichever closed the gap faster across the road (a's lane
    direction; the mean heading off the lanes); otherwise ``a``
    is at fault when its front edge is in the contact (head-on, rear-ending, driving into a side)
    and was hit on its side when not."""
    cdef double c = cos(a.heading), s = sin(a.heading), dx = b.x - a.x, dy = b.y - a.y
    cdef double lx = dx * c + dy * s, ly = -dx * s + dy * c
    cdef double avx, avy, bvx, bvy, side, mine, theirs, dh, fh, nx, ny
    if fabs(a.speed) < p.stopped_speed and fabs(a.v_lat) < p.stopped_speed:
        return COLL_STOPPED_EGO
    if fabs(b.speed) < p.stopped_speed and fabs(b.v_lat) < p.stopped_speed:
        return COLL_STOPPED_OTHER
    if (lx * lx + ly * ly > 0) and fabs(atan2(ly, lx)) > p.rear_angle:
        return COLL_REAR
    dh = fabs(wrap_angle(b.heading - a.heading))
    if dh < p.parallel_angle and fabs(ly) > 0.5 * a.width and fabs(lx) < 0.5 * (a.length + b.length):
        # sideways motion is measured across the road: a's lane direction, else the mean heading
        fh = a.heading - a.lane_heading_res if a.lane >= 0 else a.heading + 0.5 * wrap_angle(b.heading - a.heading)
        nx = -sin(fh)
        ny = cos(fh)
        agent_velocity(a, &avx, &avy)
        agent_velocity(b, &bvx, &bvy)
        side = 1.0 if dx * nx + dy * ny > 0 else -1.0
        mine = side * (avx * nx + avy * ny)         # a's velocity toward b, across the road
        theirs = -side * (bvx * nx + bvy * ny)      # b's velocity toward a
        return COLL_LATERAL_EGO if mine >= theirs else COLL_LATERAL_OTHER
    # the front edge of a as a thin box, 0.1 m deep, across its full width
    if obb_overlap(a.x + 0.5 * a.length * c, a.y + 0.5 * a.length * s, a.heading, 0.1, a.width,
                   b.x, b.y, b.heading, b.length, b.width):
        return COLL_FRONT
    return COLL_SIDE_HIT


cdef inline bint at_fault(int ctype) noexcept nogil:
    return ctype == COLL_STOPPED_OTHER or ctype == COLL_FRONT or ctype == COLL_LATERAL_EGO


cdef inline bint static_object(const Agent* b) noexcept nogil:
    """Whether ``b`` is a static object in nuPlan's sense (nuplan-devkit ``collision_utils.object_types``:
    traffic cones, barriers, construction signs, generic objects), which the at-fault collision
    multiplier scores apart from vehicles and vulnerable road users: a cone or a piece of debris.
    Parked and crashed vehicles stay vehicles, a construction worker a pedestrian."""
    return b.kind == KIND_CONE or b.kind == KIND_DEBRIS


cdef inline void _set_max(float* row, int col, double v) noexcept nogil:
    if v > row[col]:
        row[col] = <float>v


cdef inline void _set_min(float* row, int col, double v) noexcept nogil:
    if v < row[col]:
        row[col] = <float>v


cdef inline void episode_metrics_step(float* row, const MapC* m, const Agent* agents, Py_ssize_t n,
                                      Py_ssize_t i, int prev_lane, const unsigned char* sl_state,
                                      const MetricParams* p, double z_gate, double dt,
                                      double offroad_excursion, AgentGrid* grid=NULL) noexcept nogil:
    """Fold this step of controlled agent ``i`` (judged: lane state, rule flags and collision set)
    into its slot's metric row. ``prev_lane``: its lane before this step (for the stop-line
    passage); ``sl_state``: this tick's stop-line states; ``offroad_excursion``: how far (m) its box
    reaches beyond the drivable area this step (``rules.offroad_excursion``, 0 when on it)."""
    cdef const Agent* a = &agents[i]
    cdef const Agent* b
    cdef Py_ssize_t j, sl, q, cnt = -1
    cdef double c = cos(a.heading), s = sin(a.heading), v = fabs(a.speed)
    cdef double avx, avy, bvx, bvy, dx, dy, d, d2, reach, ux, uy, lx, ly, gap, ttc, yaw_rate, yaw_acc, lim
    cdef double ra, rb, free, vrel, sa
    cdef double fx, fy, lead_gap = INFINITY
    cdef bint contact = False, onset_fault = False, fault_not_object = False, comfort_bad, waiting
    cdef double impact = 0.0
    cdef int ctype
    if row[EM_STEPS] == 0:      # first judged step of the episode: start the running minima
        row[EM_MIN_TTC] = <float>p.ttc_horizon
        row[EM_MIN_GAP] = <float>p.gap_cap
        row[EM_MIN_LEAD_HEADWAY] = <float>p.headway_cap
    agent_velocity(a, &avx, &avy)
    ttc = INFINITY
    ra = 0.5 * sqrt(a.length * a.length + a.width * a.width)
    sa = sqrt(a.speed * a.speed + a.v_lat * a.v_lat)
    if grid != NULL:
        # every agent the reach test below keeps (the minima and flags it folds are the same in
        # any order of the agents)
        reach = (p.gap_cap + a.length + grid.longest) * (1.0 + 1e-9)
        cnt = nbr_box(grid, agents, n, a.x - reach, a.y - reach, a.x + reach, a.y + reach)
    for q in range(n if cnt < 0 else cnt):
        j = q if cnt < 0 else grid.cand[q]
        b = &agents[j]
        if j == i or not b.alive or fabs(b.z - a.z) > z_gate:
            continue
        dx = b.x - a.x
        dy = b.y - a.y
        d2 = dx * dx + dy * dy
        reach = p.gap_cap + a.length + b.length
        if d2 > reach * reach * (1.0 + 1e-12):   # beyond gap_cap + lengths (d > reach below decides)
            continue
        d = sqrt(d2)
        if d > reach:
            continue
        # Bounding circles (half diagonals ra, rb) decide cheaply what cannot matter: boxes whose
        # circles are apart do not touch, their gap is at least ``free``, and they cannot meet
        # before the circles do. The exact tests below run only where they could change the row.
        rb = 0.5 * sqrt(b.length * b.length + b.width * b.width)
        free = d - ra - rb
        if free <= 1e-9 and obb_overlap(a.x, a.y, a.heading, a.length, a.width,
                                         b.x, b.y, b.heading, b.length, b.width):
            contact = True
            if row[EM_IN_CONTACT] == 0:
                agent_velocity(b, &bvx, &bvy)
                impact = max(impact, sqrt((avx - bvx) ** 2 + (avy - bvy) ** 2))
                ctype = collision_type(a, b, p)
                if at_fault(ctype):
                    onset_fault = True
                    fault_not_object = fault_not_object or not static_object(b)
            continue
        if free - 1e-9 < row[EM_MIN_GAP]:
            ux = dx / d if d > 0 else 1.0
            uy = dy / d if d > 0 else 0.0
            gap = d - _extent(0.5 * a.length, 0.5 * a.width, c, s, ux, uy) \
                - _extent(0.5 * b.length, 0.5 * b.width, cos(b.heading), sin(b.heading), ux, uy)
            _set_min(row, EM_MIN_GAP, gap if gap > 0 else 0.0)
        lx = dx * c + dy * s
        ly = -dx * s + dy * c
        # TTC as nuPlan counts it: only while moving, only towards agents not behind
        # (the relative speed is at most the sum of the two speeds: agents too far apart to meet
        # within the running minimum are skipped before their velocities are computed)
        if v >= p.stopped_speed and lx > 0 and (free <= 1e-9 or free * (1.0 - 1e-9) - 1e-9 < (
                (sa + sqrt(b.speed * b.speed + b.v_lat * b.v_lat)) * (1.0 + 1e-9) * min(ttc, p.ttc_horizon))):
            agent_velocity(b, &bvx, &bvy)
            vrel = sqrt((bvx - avx) ** 2 + (bvy - avy) ** 2)
            # the circles meet no sooner than free / vrel (a margin keeps rounding on the safe side)
            if free <= 1e-9 or (vrel > 0 and free * (1.0 - 1e-9) - 1e-9 < vrel * min(ttc, p.ttc_horizon)):
                ttc = min(ttc, box_ttc(a.x, a.y, a.heading, a.length, a.width, avx, avy,
                                       b.x, b.y, b.heading, b.length, b.width, bvx, bvy, p.ttc_horizon))
        if lx > 0 and lx < p.lead_range and fabs(ly) < 0.5 * (a.width + b.width):
            lead_gap = min(lead_gap, lx - 0.5 * (a.length + b.length))
    if contact and row[EM_IN_CONTACT] == 0:
        row[EM_COLLISIONS] += 1
        if onset_fault:
            row[EM_AT_FAULT_COLLISIONS] += 1
            if not fault_not_object:
                row[EM_AT_FAULT_OBJECT_COLLISIONS] += 1
        _set_max(row, EM_MAX_IMPACT_SPEED, impact)
    row[EM_IN_CONTACT] = 1 if contact else 0
    if ttc < INFINITY:
        _set_min(row, EM_MIN_TTC, ttc)
        if ttc < p.ttc_threshold:
            row[EM_TTC_STEPS] += 1
    if lead_gap < INFINITY and v >= p.stopped_speed:
        _set_min(row, EM_MIN_LEAD_HEADWAY, max(lead_gap, 0.0) / v)
    # road: drivable area, direction, posted limit, progress along the lane
    row[EM_OFFROAD_STEPS] += a.offroad
    _set_max(row, EM_MAX_OFFROAD_EXCURSION, offroad_excursion)
    row[EM_DISTANCE] += v * dt
    if a.wrong_way:
        row[EM_WRONG_WAY_DIST] += v * dt
    if a.lane >= 0:
        lim = a.lane_speed
        row[EM_PROGRESS] += a.speed * cos(a.lane_heading_res) * dt
        if lim > 0:
            row[EM_REF_PROGRESS] += lim * dt
            row[EM_SPEED_SUM] += v * dt
            row[EM_LIMIT_SUM] += lim * dt
            if v > lim:
                row[EM_OVERSPEED] += (v - lim) * dt
                row[EM_SPEEDING_STEPS] += 1
    # standing without a reason: no lead vehicle near, no stop sign to serve, no red or yellow ahead
    if v < p.stall_speed and a.stop_state != STOP_MUST_STOP and not (lead_gap < p.stall_gap):
        waiting = False
        if a.lane >= 0:
            sl = m.lane_stop_line[a.lane]
            waiting = sl >= 0 and (sl_state[sl] == SIG_RED or sl_state[sl] == SIG_YELLOW)
        if not waiting:
            row[EM_STALL_TIME] += dt
    # comfort (nuPlan bounds) and hard braking / acceleration onsets
    if a.a_long < p.min_lon_accel and not (a.prev_a_long < p.min_lon_accel):
        row[EM_HARD_BRAKES] += 1
    if a.a_long > p.max_lon_accel and not (a.prev_a_long > p.max_lon_accel):
        row[EM_HARD_ACCELS] += 1
    _set_max(row, EM_MAX_LON_ACCEL, a.a_long)
    _set_min(row, EM_MIN_LON_ACCEL, a.a_long)
    _set_max(row, EM_MAX_LAT_ACCEL, fabs(a.a_lat))
    _set_max(row, EM_MAX_LON_JERK, fabs(a.j_long))
    _set_max(row, EM_MAX_JERK, sqrt(a.j_long * a.j_long + a.j_lat * a.j_lat))
    comfort_bad = (a.a_long > p.max_lon_accel or a.a_long < p.min_lon_accel or fabs(a.a_lat) > p.max_lat_accel
                   or fabs(a.j_long) > p.max_lon_jerk or sqrt(a.j_long * a.j_long + a.j_lat * a.j_lat) > p.max_jerk)
    if row[EM_STEPS] >= 1:
        yaw_rate = wrap_angle(a.heading - row[EM_PREV_HEADING]) / dt
        _set_max(row, EM_MAX_YAW_RATE, fabs(yaw_rate))
        comfort_bad = comfort_bad or fabs(yaw_rate) > p.max_yaw_rate
        if row[EM_STEPS] >= 2:
            yaw_acc = (yaw_rate - row[EM_PREV_YAW_RATE]) / dt
            _set_max(row, EM_MAX_YAW_ACCEL, fabs(yaw_acc))
            comfort_bad = comfort_bad or fabs(yaw_acc) > p.max_yaw_accel
        row[EM_PREV_YAW_RATE] = <float>yaw_rate
    row[EM_PREV_HEADING] = <float>a.heading
    if comfort_bad:
        row[EM_COMFORT_STEPS] += 1
    # traffic control: the rule checks' flags, and passages of a stop line on yellow
    row[EM_RED_LIGHTS] += a.red_light
    row[EM_STOP_SIGNS] += a.ran_stop_line
    if a.cls != CLS_PEDESTRIAN and prev_lane >= 0:
        sl = m.lane_stop_line[prev_lane]
        if sl >= 0 and sl_state[sl] == SIG_YELLOW and m.sl_control[sl] == SLC_SIGNAL:
            fx = a.x + 0.5 * a.length * c
            fy = a.y + 0.5 * a.length * s
            if segments_intersect(a.front_x, a.front_y, fx, fy, m.sl_pts[6 * sl], m.sl_pts[6 * sl + 1],
                                  m.sl_pts[6 * sl + 3], m.sl_pts[6 * sl + 4]):
                row[EM_YELLOW_ENTRIES] += 1
    row[EM_STEPS] += 1


cdef inline void handed_progress_step(float* row, const Agent* a, double dt) noexcept nogil:
    """One step of an agent handed to the IDM driver (``Engine.hand_to_idm``): its steps, distance,
    progress along the lane under it and the posted-limit reference, measured as
    ``episode_metrics_step`` measures them for a controlled agent. ``a``: the agent with this step's
    lane state (``rules.lane_state``: lane, heading residual, posted limit)."""
    row[EM_STEPS] += 1
    row[EM_DISTANCE] += fabs(a.speed) * dt
    if a.lane >= 0:
        row[EM_PROGRESS] += a.speed * cos(a.lane_heading_res) * dt
        if a.lane_speed > 0:
            row[EM_REF_PROGRESS] += a.lane_speed * dt
