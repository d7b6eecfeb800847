# cython: language_level=3
"""The reference driver: a controller that drives a controlled agent through its own class dynamics
and its own discrete action grid (the actions a policy could choose), the simulator's drivability
check (every bundled map can be driven on the controls a policy has).

Each step, for one agent:

1. **Route.** The agent's present lane (``lane_state``: ``a.lane``, ``a.lane_arc``) and, past its end,
   the successor on the shortest lane-graph route to its goal (``lanegraph.route_successor``; the
   only or first successor when the goal is hidden or off the graph).
2. **Speed.** The Intelligent Driver Model on that route, with the rule-based vehicles' constraints
   (``roadusers.idm_desired_accel``: the first agent or obstacle its body would sweep into, the stop
   bar on red, on yellow when there is room to stop, or at a stop sign not yet cleared, yielding at
   junction and curve entries, pedestrians crossing its path, comfortable speed in curves), with the
   desired speed capped so that it arrives at its goal below ``RefParams.goal_speed``.
3. **Steering.** Pure pursuit along the same route (``route._predict``, the rule-based vehicles'
   law); the steering the driver asks for is the curvature of the predicted path ``preview`` seconds
   ahead, so the wheels, which turn at a bounded rate, start turning before the curve does.
3b. **Passing and the goal's lane** (``_pass_or_change``). When the nearest constraint is an obstacle
   at rest (``ROLE_STATIC``: a stopped, parked or crashed vehicle, a cone, a worker) within
   ``pass_distance``, the driver takes an adjacent same-direction lane whose stretch around it is free
   (``lanechange._lane_free``, the rule-based vehicles' MOBIL check) and clear of that obstacle; else
   it drives around it at the smallest lateral offset whose sweep no obstacle at rest blocks, towards
   the overtaking side (a lane width onto a same-direction neighbour or an oncoming lane, else within
   its lane), then the other (a lane width onto a same-direction neighbour, else within its lane),
   never nearer in than it already is while the obstacle blocks its own lane, over the centre line
   only when no oncoming vehicle could reach the stretch it passes on (the gap, two of its lengths
   and 10 m) before it has driven it at 4 m/s or more, with ``pass_time`` seconds to spare (once
   over, it finishes);
   while it waits it stands ``pass_room`` metres back, room to turn out when the way clears. Where
   its goal lies on a same-direction neighbour's successors and not on its own lane's, it changes
   to that lane when the stretch is free and no obstacle at rest stands in it within
   ``pass_distance``. Pedestrians and moving vehicles are waited for, never passed (the IDM
   constraints above).
3c. **Swept path** (``swept.swept_offset``). Where the box, centred on the route at each predicted pose,
   would touch a road edge or a sidewalk (a long vehicle's corners swing out of a bend by about
   (length / 2)^2 / (2 R)), it drives at a lateral offset, up to ``swept_path`` metres either side
   (a 7 m box's or a longer one's; a shorter one in proportion to its length),
   whose predicted boxes all stay on the road: the middle of the run of such offsets nearest the centre.
   The boxes keep ``swept_margin`` metres from the edges where some offset allows it (room for the
   wheels' tracking error; a 5 m car on a 10.7 m turnaround loop with 0.4 m to spare ran wide by more).
4. **Action.** Every action of the class grid is tried on a copy of the agent through the engine's
   own dynamics (``dynamics.step_dynamics``, with the agent's sampled kinematic coefficients, so a
   car with a weak c_steer is steered as such), and the one whose next acceleration and steering
   angle come nearest the asked-for ones wins (errors in units of the step each can make; a small
   price on any non-zero action, a large one on a step that would reverse).

Pedestrians (the unicycle) walk toward their goal at ``RefParams.walk_speed``. The driver reads the
world (privileged information, as the rule-based road users do) and changes nothing in it.
"""

from libc.math cimport atan, atan2, sqrt, fabs, tan, cos, sin, cbrt
from common cimport (Agent, MapC, N_CP, CP_STEERMAX, CP_DYN, DYN_UNICYCLE, DYN_BICYCLE_JERK, KIN_THROTTLE,
                     KIN_STEER, CP_COMF_JLONG, CP_COMF_JLAT, CP_STEERRATE, ROLE_STATIC, CLS_PEDESTRIAN)
from geometry cimport wrap_angle
from dynamics cimport step_dynamics, clip
from route cimport Sweep, _lookahead
from roadusers cimport IdmParams, Leader, idm_desired_accel
from lanegraph cimport LaneGraphScratch, route_successor, goal_route_distance, nearest_lane
from lanechange cimport _lane_foot, _lane_free
from scene cimport lane_length, lane_point, TurnBox, turn_box, lane_turnable
from seggrid cimport seggrid_nearest_where
from swept cimport swept_offset


ctypedef struct RefParams:
    double preview             # s: the path curvature steered for lies this far ahead at the present speed
    double goal_speed          # m/s: speed at which to arrive at the goal
    double goal_decel          # m/s^2: comfortable braking toward the goal
    double action_price        # cost of a non-zero action component, in units of a squared step
    double comfort_price       # cost of a step whose jerk exceeds the class's comfort limit (appendix B)
    double walk_speed          # m/s: pedestrians
    double lane_max_dist       # m: how far from its goal a lane may be (as for the observation's route)
    double z_gate              # m
    double route_cap           # m: longest route searched to the goal
    double lane_angle          # rad: a lane heading further than this from the agent is not its route
    double horizon             # s: how far ahead along the predicted path the steering looks
    double curve_accel         # m/s^2: lateral acceleration the speed allows in curves
    double curve_full_radius   # m: in bends tighter than this the allowance falls with the radius (0: off)
    double turn_in             # m: travel over which the wheels may be turned into a curve
    double accel_tau           # s: the jerk model closes the gap to the asked-for acceleration over this
    double steer_tolerance     # rad: how far from a predicted pose's steering angle the wheels may be there
    double passing             # 1: pass obstacles at rest and change to the goal's lane; 0: stay in lane
    double pass_distance       # m: an obstacle at rest this near along the route prompts a pass
    double pass_time           # s: margin on the time a pass over the centre line takes, against oncoming traffic
    double pass_lookahead      # m: least pure-pursuit lookahead while passing or changing lane (a gentle S)
    double pass_room           # m: gap to the obstacle at which a car waiting to pass it stands
    double swept_path          # m: largest lateral offset taken to keep the box's sweep on the road (0: off)
    double swept_margin        # m: room the predicted boxes of step 3c keep from the road edges


cdef inline void reference_params_default(RefParams* rp) noexcept nogil:
    rp.preview = 0.3
    rp.goal_speed = 2.0
    rp.goal_decel = 1.0
    rp.action_price = 0.05
    rp.comfort_price = 100.0
    rp.walk_speed = 1.2
    rp.lane_angle = 0.6
    rp.horizon = 2.5
    rp.curve_accel = 2.0
    rp.curve_full_radius = 25.0
    rp.turn_in = 3.0
    rp.accel_tau = 0.5
    rp.steer_tolerance = 0.05
    rp.passing = 1.0
    rp.pass_distance = 30.0
    rp.pass_time = 2.0
    rp.pass_lookahead = 10.0
    rp.pass_room = 6.0
    rp.swept_path = 1.5
    rp.swept_margin = 0.2


cdef inline double _arrival_cap(const MapC* m, Agent* a, const RefParams* rp, LaneGraphScratch* sc) noexcept nogil:
    """The desired-speed cap (m/s) that brings the agent to its goal at ``goal_speed``: the speed from
    which it can brake to that at ``goal_decel`` over the route distance left; 1e9 with a hidden goal
    or none on the lane graph."""
    cdef double d
    if a.goal_hidden:
        return 1e9
    d = goal_route_distance(m, a, rp.lane_max_dist, rp.z_gate, rp.route_cap, sc)
    if d < 0:
        return 1e9
    return sqrt(rp.goal_speed * rp.goal_speed + 2.0 * rp.goal_decel * d)


cdef inline void _signs_within(const double* grid, int n, double coef, double limit, bint* neg_ok,
                               bint* pos_ok) noexcept nogil:
    """Whether some negative (``neg_ok``) and some positive (``pos_ok``) value of a jerk grid, times the
    agent's coefficient, lies within the comfort ``limit``."""
    cdef int k
    for k in range(n):
        if fabs(grid[k] * coef) <= limit:
            if grid[k] < 0:
                neg_ok[0] = True
            elif grid[k] > 0:
                pos_ok[0] = True


cdef inline int _best_action(Agent* a, const double* cp, int model, const double* grid_long,
                             const double* grid_lat, int n_long, int n_lat, double acc_ref, double steer_ref,
                             double yaw_ref, const RefParams* rp, double dt) noexcept nogil:
    """The action index (``i_long * n_lat + i_lat``) whose one-step outcome on a copy of ``a`` lies
    nearest the asked-for acceleration and steering angle (yaw rate for the unicycle)."""
    cdef Agent b
    cdef int il, it, best = 0
    cdef bint brake_ok, speed_ok, left_ok, right_ok
    cdef double qa, qs, ea, es, cost, best_cost = 1e300, lat_now, a_next
    # The step each control can make, for the error units.
    if model == DYN_BICYCLE_JERK:
        qa = 0.0
        for il in range(n_long):
            qa = fabs(grid_long[il]) if (grid_long[il] != 0 and (qa == 0 or fabs(grid_long[il]) < qa)) else qa
        qa = qa * a.kin[KIN_THROTTLE] * dt if qa > 0 else 1.0
    else:
        qa = 0.5
    qs = 1e300
    for it in range(n_lat):
        if grid_lat[it] == 0:
            continue
        b = a[0]
        step_dynamics(&b, cp, model, 0.0, grid_lat[it], dt)
        lat_now = fabs((b.yaw_rate - a.yaw_rate) if model == DYN_UNICYCLE else (b.steer - a.steer))
        if 1e-6 < lat_now < qs:
            qs = lat_now
    if qs > 1e299:
        qs = 0.05
    # Which signs of longitudinal jerk the grid can step within the comfort limit: where none of its
    # braking (or speeding-up) values can (a grid step times this agent's throttle coefficient above
    # the limit), pricing them would leave the agent unable to brake at all, so they go unpriced.
    # The same for the signs of lateral jerk (a steering coefficient above 1.25 takes the default
    # grid's 4 m/s^3 past the 5 m/s^3 limit: priced, such a car would never turn into a bend).
    brake_ok = speed_ok = left_ok = right_ok = False
    if model == DYN_BICYCLE_JERK:
        _signs_within(grid_long, n_long, a.kin[KIN_THROTTLE], cp[CP_COMF_JLONG], &brake_ok, &speed_ok)
        _signs_within(grid_lat, n_lat, a.kin[KIN_STEER], cp[CP_COMF_JLAT], &right_ok, &left_ok)
    # The acceleration asked for next: the jerk model closes the gap to ``acc_ref`` over ``accel_tau``
    # seconds (so a comfortable jerk does what a small gap needs, and the emergency value only what a
    # large one does); the acceleration-actuated models set it at once.
    a_next = acc_ref
    if model == DYN_BICYCLE_JERK and rp.accel_tau > dt:
        a_next = a.a_long + (acc_ref - a.a_long) * dt / rp.accel_tau
        # A gap of more than two grid steps is closed by at least one: the smoothed target alone can
        # lie nearer no change than one step where a step (the grid's least jerk times this agent's
        # throttle coefficient) is coarse, and the agent then never leaves its acceleration (a bus
        # at rest with a coefficient of 1.45 asked for 1.5 m/s^2 and stayed at rest).
        if fabs(acc_ref - a.a_long) > 2.0 * qa and fabs(a_next - a.a_long) < qa:
            a_next = a.a_long + (qa if acc_ref > a.a_long else -qa)
    for il in range(n_long):
        for it in range(n_lat):
            b = a[0]
            step_dynamics(&b, cp, model, grid_long[il], grid_lat[it], dt)
            ea = (b.a_long - a_next) / qa
            if model == DYN_UNICYCLE:
                es = (b.yaw_rate - yaw_ref) / qs
            else:
                es = (b.steer - steer_ref) / qs
            cost = ea * ea + es * es
            if grid_long[il] != 0:
                cost += rp.action_price
            if grid_lat[it] != 0:
                cost += rp.action_price
            # The comfort price applies where the grid can keep within the limits: the jerk model
            # steps its acceleration by a jerk, but an acceleration-actuated class (trucks,
            # cyclists) jumps to the grid's acceleration, so every change of its value is a jerk
            # of at least (grid step) / dt, far above any comfort limit; priced, such a class would
            # never brake or speed up again.
            if model == DYN_BICYCLE_JERK:
                if fabs(b.j_long) > cp[CP_COMF_JLONG] and (brake_ok if b.j_long < 0 else speed_ok):
                    cost += rp.comfort_price
                if fabs(b.j_lat) > cp[CP_COMF_JLAT] and (right_ok if b.j_lat < 0 else left_ok):
                    cost += rp.comfort_price
            if b.speed < -1e-9 and a.speed >= -1e-9:
                cost += 1e6  # never start to reverse
            if cost < best_cost:
                best_cost = cost
                best = il * n_lat + it
    return best


cdef inline void _route_lane(const MapC* m, Agent* a, const RefParams* rp) noexcept nogil:
    """The lane the route starts on and the agent's arc length along it (``a.lane``, ``a.lane_s``):
    the lane state's, unless that lane heads more than ``lane_angle`` away from the agent (where
    connectors overlap the nearest one may cross its path); then the nearest lane heading along it
    that has it within half its width, if any."""
    cdef double d2, t, dx, dy
    cdef Py_ssize_t sgi
    cdef const double* q
    a.lane_s = a.lane_arc
    if fabs(a.lane_heading_res) <= rp.lane_angle:
        return
    sgi = seggrid_nearest_where(&m.lanes, a.x, a.y, a.z, rp.lane_max_dist, rp.z_gate, a.cos_h, a.sin_h,
                                cos(rp.lane_angle), m.lane_width, &d2, &t)
    if sgi < 0:
        # over the centre line in a pass: the nearest lane heading its way within a lane and a half
        sgi = seggrid_nearest_where(&m.lanes, a.x, a.y, a.z, 1.5 * m.lane_width[a.lane], rp.z_gate, a.cos_h,
                                    a.sin_h, cos(rp.lane_angle), NULL, &d2, &t)
    if sgi < 0:
        return
    q = m.lanes.seg + 6 * sgi
    dx = q[3] - q[0]
    dy = q[4] - q[1]
    a.lane = m.lanes.seg_row[sgi]
    a.lane_s = m.lanes.seg_s0[sgi] + t * sqrt(dx * dx + dy * dy)


cdef inline double _swept_cap(const Agent* a, const RefParams* rp) noexcept nogil:
    """The largest swept-path offset the agent takes (m): ``swept_path`` for a box of 7 m or more
    (the shortest truck: every truck and bus takes all of it), in proportion to the length below (a
    bend's swing-out and off-tracking grow with the box). A car allowed the whole 1.5 m stood 0.75-1 m
    out before a tight near-side turn, entered it too far out to come back and left it over the
    centre line."""
    return rp.swept_path * (a.length / 7.0 if a.length < 7.0 else 1.0)


cdef inline double _steer_authority(Agent* a, const double* cp) noexcept nogil:
    """How fast (rad/s) the agent can turn its wheels near straight: the class's steering-rate limit,
    and for the jerk model the lateral jerk of the grid's largest value at its speed (d tan(delta)/dt =
    j c_steer L / v^2). A large number when neither limits it."""
    cdef double r = cp[CP_STEERRATE] if cp[CP_STEERRATE] >= 0 else 1e3, v2 = a.speed * a.speed, jr
    if <int>cp[CP_DYN] == DYN_BICYCLE_JERK and v2 > 1e-6:
        jr = 3.0 * a.kin[KIN_STEER] * a.wheelbase / v2
        if jr < r:
            r = jr
    return r


cdef inline double _steer_target(const Sweep* sw, Agent* a, const RefParams* rp, double rate) noexcept nogil:
    """The steering angle to turn toward. Each predicted pose k of the next ``horizon`` seconds asks
    for the angle of its pure-pursuit curvature, within ``steer_tolerance``, by the time the agent
    reaches it less ``preview`` seconds of lead. Going back from the farthest pose, the set of
    angles from which every later one can still be met at the wheels' rate ``rate`` (rad/s) is an
    interval that widens by the rate times the time between two poses and is cut to each pose's
    band; where a nearer pose's band misses it, the nearer pose wins. The target is the present
    pose's angle clipped into the interval left for now: the wheels start turning before a curve,
    and through a reversal (right, then left) they follow the first curve before the second."""
    cdef int k, last = 0
    cdef double v = a.speed if a.speed > 0.5 else 0.5, lo = -1e9, hi = 1e9, want, t, t_prev, nlo, nhi
    cdef double tol = rp.steer_tolerance
    if sw.n < 1:
        return 0.0
    for k in range(1, sw.n + 1):
        if sw.d[k - 1] > v * rp.horizon:
            break
        last = k
    t_prev = sw.d[last - 1] / v - rp.preview
    for k in range(last, 1, -1):
        t = sw.d[k - 1] / v - rp.preview
        if t < 0.0:
            t = 0.0
        if t_prev > t:
            lo -= rate * (t_prev - t)
            hi += rate * (t_prev - t)
        t_prev = t
        want = atan(sw.k[k] * a.wheelbase)
        nlo = lo if lo > want - tol else want - tol
        nhi = hi if hi < want + tol else want + tol
        if nlo <= nhi:
            lo, hi = nlo, nhi
        else:
            lo, hi = want - tol, want + tol
    if t_prev > 0.0:
        lo -= rate * t_prev
        hi += rate * t_prev
    return clip(atan(sw.k[1] * a.wheelbase), lo, hi)


cdef inline double _curve_speed_accel(const Sweep* sw, Agent* a, const RefParams* rp, double rate) noexcept nogil:
    """The braking (m/s^2, negative; 1e9 when none is needed) that brings the agent to each curve of
    the predicted path at a speed it can take: a lateral acceleration of at most ``curve_accel`` (times
    radius / ``curve_full_radius`` in bends tighter than that), slow
    enough that its wheels turn in within ``turn_in`` metres at its steering authority, and slow
    enough that they turn from their present angle to the curve's (less ``steer_tolerance``) in the
    time left to reach it at ``rate`` (rad/s): a reversal from one curve into the next."""
    cdef int k
    cdef double out = 1e9, kap, vc, vt, g, v = a.speed if a.speed > 0 else 0.0, jl, dd, dsteer
    jl = 3.0 * a.kin[KIN_STEER]
    for k in range(1, sw.n + 1):
        kap = fabs(sw.k[k])
        if kap < 0.02:
            continue
        # near the steering limit the wheels have little left to correct a drift with: in bends
        # tighter than curve_full_radius the lateral acceleration allowed falls with the radius
        if rp.curve_full_radius > 0.0 and kap * rp.curve_full_radius > 1.0:
            vc = sqrt(rp.curve_accel / (rp.curve_full_radius * kap * kap))
        else:
            vc = sqrt(rp.curve_accel / kap)
        # turning in: tan(delta) grows at j c_steer L / v^2, so reaching kappa L takes v^2 kappa / (j c)
        # seconds and v^3 kappa / (j c) metres
        vt = cbrt(rp.turn_in * jl / kap)
        if vt < vc:
            vc = vt
        # turning from the present angle: the change to this pose's angle (beyond the tolerance)
        # must fit in the time left to reach it at the wheels' rate
        dd = sw.d[k - 1] if sw.d[k - 1] > 0.5 else 0.5
        dsteer = fabs(atan(sw.k[k] * a.wheelbase) - a.steer) - rp.steer_tolerance
        if dsteer > 0.0:
            vt = rate * dd / dsteer
            if vt < vc:
                vc = vt
        if v > vc:
            g = (vc * vc - v * v) / (2.0 * dd)
            if g < out:
                out = g
    return out


ctypedef struct RefPlan:
    # What the driver decided for one agent (``Engine.reference_plan``).
    int lane, route_lane, sweep_points, leader
    double lane_s, accel, steer, v0, gap, lat_off


cdef inline int _open_successor(const MapC* m, const Agent* a, const double* cp, int lane) noexcept nogil:
    """The next lane where the goal gives none (hidden, or not reachable): the first successor of
    ``lane`` the agent's box can follow (``scene.lane_turnable``: a long vehicle does not take a turn
    it cannot make inside the road edges), else the first; -1 when there is no successor."""
    cdef TurnBox tb
    cdef long long k
    if lane < 0 or m.succ_off[lane + 1] <= m.succ_off[lane]:
        return -1
    if turn_box(a, cp, &tb):
        for k in range(m.succ_off[lane], m.succ_off[lane + 1]):
            if lane_turnable(m, m.succ[k], &tb):
                return m.succ[k]
    return m.succ[m.succ_off[lane]]


cdef inline bint _succ_reaches(const MapC* m, int lane, int goal_lane, int depth) noexcept nogil:
    """Whether ``goal_lane`` is ``lane`` or one of its successors ``depth`` lanes deep."""
    cdef long long k
    if lane == goal_lane:
        return True
    if depth <= 0:
        return False
    for k in range(m.succ_off[lane], m.succ_off[lane + 1]):
        if _succ_reaches(m, m.succ[k], goal_lane, depth - 1):
            return True
    return False


cdef inline double _offset_from(const MapC* m, const Agent* a) noexcept nogil:
    """The agent's signed offset (m, + left) from its route lane's centre at ``a.lane_s``."""
    cdef double x, y, z, h
    lane_point(m, a.lane, a.lane_s, &x, &y, &z, &h)
    return -(a.x - x) * sin(h) + (a.y - y) * cos(h)


cdef inline bint _oncoming_clear(Agent* agents, Py_ssize_t n, Py_ssize_t i, double side, double lane_w,
                                 double dist, double margin) noexcept nogil:
    """No vehicle driving against the agent on its ``side`` (+1 left), between a third of a lane and
    two and a half lanes across, could reach the stretch of ``dist`` metres ahead before the agent has
    driven it (at 4 m/s or its speed if faster) plus ``margin`` seconds."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j
    cdef double dx, dy, lon, lat, v = a.speed if a.speed > 4.0 else 4.0, t_need = dist / v + margin
    for j in range(n):
        b = &agents[j]
        if j == i or not b.alive or b.role == ROLE_STATIC or b.cls == CLS_PEDESTRIAN:
            continue
        if b.cos_h * a.cos_h + b.sin_h * a.sin_h > -0.5:
            continue
        dx = b.x - a.x
        dy = b.y - a.y
        lon = dx * a.cos_h + dy * a.sin_h
        lat = side * (-dx * a.sin_h + dy * a.cos_h)
        if lon < -a.length or lat < 0.3 * lane_w or lat > 2.5 * lane_w:
            continue
        if lon - 0.5 * (a.length + b.length) < (b.speed if b.speed > 0 else 0.0) * t_need + dist + 5.0:
            return False
    return True


cdef inline bint _oncoming_lane_beside(const MapC* m, const Agent* a, double side, double w) noexcept nogil:
    """Whether a lane running against the agent's route lane lies one lane width ``w`` to its ``side``
    (+1 left) at its position, holding that point within half its width: the oncoming lane a pass
    over the centre line would use (a median or a curb has none)."""
    cdef double x, y, z, h, d2, t
    lane_point(m, a.lane, a.lane_s, &x, &y, &z, &h)
    x -= side * w * sin(h)
    y += side * w * cos(h)
    return seggrid_nearest_where(&m.lanes, x, y, z, w, -1.0, -cos(h), -sin(h), 0.8, m.lane_width, &d2, &t) >= 0


cdef inline bint _on_lane_ahead(const MapC* m, const Agent* a, const Agent* b) noexcept nogil:
    """Whether ``b`` lies along the agent's own lane (``a.lane``) ahead of it, within a lane width of its
    centre: a pass starts on the obstacle's lane, never before a turn or a junction leading to it."""
    cdef double s, fx, fy, tc, ts
    if not _lane_foot(m, a.lane, b.x, b.y, &s, &fx, &fy, &tc, &ts):
        return False
    if s < a.lane_s or s > lane_length(m, a.lane) + 0.5 * b.length:
        return False
    return (b.x - fx) * (b.x - fx) + (b.y - fy) * (b.y - fy) <= m.lane_width[a.lane] * m.lane_width[a.lane]


cdef inline double _pass_reach(Agent* a, const IdmParams* p, const RefParams* rp, double gap) noexcept nogil:
    """``lc_reach`` (s of travel added to the pure-pursuit lookahead, route.pxd) while passing or
    changing lane: enough for a lookahead of ``pass_lookahead`` metres, or of one second of travel
    when that is longer, so the car crosses in a gentle S at any speed; but no longer than the
    ``gap`` to the obstacle (a car already close behind it turns out more sharply)."""
    cdef double v = a.speed if a.speed > 0.5 else 0.5, want = rp.pass_lookahead, base
    if v > want:
        want = v
    if want > gap and gap > 3.0:
        want = gap
    a.lc_reach = 0.0
    base = _lookahead(a, v)
    return (want - base) / v if want > base else 0.0


cdef inline bint _try_lane(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp_all,
                           const IdmParams* p, const unsigned char* sl_state, int lane, double cap,
                           const RefParams* rp, LaneGraphScratch* sc, bint need_free, bint away_from_static,
                           Sweep* sw, Leader* ld, double* acc, double* v0) noexcept nogil:
    """Route the agent on the neighbour ``lane`` (beside it, heading its way): True, with the plan
    along it in ``sw``, ``ld``, ``acc``, ``v0`` and the agent's lane fields moved there, when its stretch
    is free (``_lane_free``, unless ``need_free`` is False) and, with ``away_from_static``, its sweep
    meets no obstacle at rest within ``pass_distance``. On False the agent's lane fields are as they were."""
    cdef Agent* a = &agents[i]
    cdef double s, fx, fy, tc, ts, d, v = a.speed if a.speed > 0 else 0.0
    cdef int mode = a.idm_mode, old_lane = a.lane, old_route = a.route_lane
    cdef double old_s = a.lane_s, old_reach = a.lc_reach, old_arc = a.lane_arc, a2, v2
    cdef Sweep sw2
    cdef Leader ld2
    if lane < 0 or m.lane_inter[lane] >= 0:
        return False
    if not _lane_foot(m, lane, a.x, a.y, &s, &fx, &fy, &tc, &ts):
        return False
    d = sqrt((a.x - fx) * (a.x - fx) + (a.y - fy) * (a.y - fy))
    if tc * a.cos_h + ts * a.sin_h < 0.87 or d > m.lane_width[a.lane] + m.lane_width[lane] or s <= 0 or \
            lane_length(m, lane) - s < a.length:
        return False
    if need_free and not _lane_free(m, agents, n, i, &p.lc, lane, fx, fy, tc, ts, v,
                                    p.v0_scale[mode] * m.lane_speed[lane], p.time_headway[mode], p.max_accel[mode],
                                    p.comfort_decel[mode], p.min_gap[mode], p.delta, NULL):
        return False
    a.lane = lane
    a.lane_s = s
    a.lane_arc = s
    a.route_lane = -1
    if not a.goal_hidden:
        a.route_lane = route_successor(m, a, lane, rp.lane_max_dist, rp.z_gate, rp.route_cap, sc)
    if a.route_lane < 0:
        a.route_lane = _open_successor(m, a, &cp_all[a.cls * N_CP], lane)
    a.lc_reach = _pass_reach(a, p, rp, ld.gap)
    a2 = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, 0.0, cap, &sw2, &ld2, &v2)
    if away_from_static and ld2.who >= 0 and agents[ld2.who].role == ROLE_STATIC and ld2.gap < rp.pass_distance:
        a.lane, a.lane_s, a.route_lane, a.lc_reach, a.lane_arc = old_lane, old_s, old_route, old_reach, old_arc
        return False
    sw[0] = sw2
    ld[0] = ld2
    acc[0] = a2
    v0[0] = v2
    return True


cdef inline double _pass_or_change(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp_all,
                                   const IdmParams* p, const unsigned char* sl_state, double cap, const RefParams* rp,
                                   LaneGraphScratch* sc, Sweep* sw, Leader* ld, double* acc, double* v0) noexcept nogil:
    """Step 3b of the module header, on the plan along the agent's own lane (``sw``, ``ld``, ``acc``,
    ``v0``), which it replaces when it passes or changes lane. Returns the lateral offset (m, + left)
    it drives at from its (possibly new) route lane's centre."""
    cdef Agent* a = &agents[i]
    cdef int side_k, lane, gl
    cdef double gs = 0.0, side, mag, w = m.lane_width[a.lane], lat_now, a2, v2, best_mag, best_gap, top, v
    cdef bint clear
    cdef double over = 0.5 * m.lane_width[a.lane] - 0.5 * a.width
    cdef Sweep sw2
    cdef Leader ld2
    cdef bint blocked = ld.who >= 0 and agents[ld.who].role == ROLE_STATIC and ld.gap < rp.pass_distance \
        and m.lane_inter[a.lane] < 0 and _on_lane_ahead(m, a, &agents[ld.who])
    # The goal's lane: on a neighbour's successors and not on the agent's own.
    if not blocked and not a.goal_hidden and m.lane_inter[a.lane] < 0:
        gl = nearest_lane(m, a.goal_x, a.goal_y, a.goal_z, rp.lane_max_dist, rp.z_gate, &gs)
        if gl >= 0 and not _succ_reaches(m, a.lane, gl, 6):
            lat_now = _offset_from(m, a)
            for side_k in range(2):
                lane = m.lane_left[a.lane] if side_k == 0 else m.lane_right[a.lane]
                if lane < 0 or not _succ_reaches(m, lane, gl, 6):
                    continue
                # already under way towards it: finish the change
                if _try_lane(m, agents, n, i, cp_all, p, sl_state, lane, cap, rp, sc,
                             not ((lat_now > 0.5) if side_k == 0 else (lat_now < -0.5)), True, sw, ld, acc, v0):
                    return 0.0
        return 0.0
    if not blocked:
        if fabs(_offset_from(m, a)) > 0.75:  # back from a pass: as gently as it went out
            a.lc_reach = _pass_reach(a, p, rp, 1e9)
            acc[0] = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, 0.0, cap, sw, ld, v0)
        return 0.0
    # An adjacent same-direction lane, the overtaking side first (left in right-hand traffic).
    for side_k in range(2):
        lane = m.lane_left[a.lane] if (side_k == 0) == (m.handedness == 0) else m.lane_right[a.lane]
        if _try_lane(m, agents, n, i, cp_all, p, sl_state, lane, cap, rp, sc, True, True, sw, ld, acc, v0):
            return 0.0
    # Around it within the road: the smallest offset towards the overtaking side whose sweep meets no
    # obstacle at rest nearby, over the centre line only with the oncoming side clear.
    a.lc_reach = _pass_reach(a, p, rp, ld.gap)
    for side_k in range(2):
        # the overtaking side (left in right-hand traffic) up to a lane width; then the other side,
        # up to a lane width onto a same-direction neighbour, else only within the lane
        side = (1.0 if m.handedness == 0 else -1.0) * (1.0 if side_k == 0 else -1.0)
        lat_now = side * _offset_from(m, a)
        top = w
        if (m.lane_left[a.lane] if side > 0 else m.lane_right[a.lane]) < 0 and \
                (side_k == 1 or not _oncoming_lane_beside(m, a, side, w)):
            top = over - 0.05  # no lane there (a curb, a median): within its own lane only
        best_mag = -1.0
        best_gap = ld.gap + 1.0
        mag = 0.5
        # out already: no nearer in than it is until the way back is clear (no hugging the obstacle)
        while mag + 0.5 <= lat_now + 0.25 and mag + 0.5 <= top + 1e-9:
            mag += 0.5
        while mag <= top + 1e-9:
            a2 = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, side * mag, cap, &sw2, &ld2, &v2)
            clear = not (ld2.who >= 0 and agents[ld2.who].role == ROLE_STATIC and ld2.gap < rp.pass_distance)
            if clear or ld2.gap > best_gap:
                if not (side_k == 1 or mag <= over + 0.1 or lat_now > over + 0.3 or
                        _oncoming_clear(agents, n, i, side, w, ld.gap + 2.0 * a.length + 10.0, rp.pass_time)):
                    break  # the way round crosses into traffic: wait behind the obstacle
                if clear:
                    sw[0] = sw2
                    ld[0] = ld2
                    acc[0] = a2
                    v0[0] = v2
                    return side * mag
                # blocked at every offset so far: the one that gets furthest, should none clear it
                best_mag = mag
                best_gap = ld2.gap
            mag += 0.5
        if best_mag > 0 and lat_now > 0.5:  # under way round it: keep going at the best offset
            acc[0] = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, side * best_mag, cap, sw, ld, v0)
            return side * best_mag
    a.lc_reach = 0.0
    # Waiting to pass: stand ``pass_room`` metres back, room to turn out when the way clears.
    v = a.speed if a.speed > 0 else 0.0
    if ld.gap <= rp.pass_room:
        acc[0] = -2.0 * v if -2.0 * v < acc[0] else acc[0]
    elif acc[0] > -v * v / (2.0 * (ld.gap - rp.pass_room)):
        acc[0] = -v * v / (2.0 * (ld.gap - rp.pass_room))
    return 0.0


cdef inline int reference_action(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp_all,
                                 const IdmParams* p, const unsigned char* sl_state, const double* grid_long,
                                 const double* grid_lat, int n_long, int n_lat, LaneGraphScratch* sc,
                                 const RefParams* rp, double dt, RefPlan* plan=NULL) noexcept nogil:
    """The reference driver's action for ``agents[i]`` (this module's header); ``agents[i]`` is used as
    scratch for the route and restored before returning."""
    cdef Agent* a = &agents[i]
    cdef Agent saved = a[0]
    cdef const double* cp = &cp_all[a.cls * N_CP]
    cdef int model = <int>cp[CP_DYN], k, out
    cdef double acc, v0, cap, steer_ref, yaw_ref = 0.0, bearing, steer_rate, acc_curve, lat_off
    cdef Sweep sw
    cdef Leader ld
    if model == DYN_UNICYCLE:
        bearing = atan2(a.goal_y - a.y, a.goal_x - a.x)
        yaw_ref = clip(2.0 * wrap_angle(bearing - a.heading), -1.0, 1.0)
        acc = clip((rp.walk_speed - a.speed) / 1.0, -1.0, 1.0)
        return _best_action(a, cp, model, grid_long, grid_lat, n_long, n_lat, acc, 0.0, yaw_ref,
                            rp, dt)
    if a.lane < 0:  # off every lane: stop with straight wheels
        return _best_action(a, cp, model, grid_long, grid_lat, n_long, n_lat, -2.0, 0.0, 0.0,
                            rp, dt)
    _route_lane(m, a, rp)
    a.route_lane = -1
    if not a.goal_hidden:
        a.route_lane = route_successor(m, a, a.lane, rp.lane_max_dist, rp.z_gate, rp.route_cap, sc)
    if a.route_lane < 0:
        a.route_lane = _open_successor(m, a, cp, a.lane)
    a.idm_mode = 0
    a.lc_reach = 0.0
    cap = _arrival_cap(m, a, rp, sc)
    acc = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, 0.0, cap, &sw, &ld, &v0)
    lat_off = 0.0
    if rp.passing > 0:
        lat_off = _pass_or_change(m, agents, n, i, cp_all, p, sl_state, cap, rp, sc, &sw, &ld, &acc, &v0)
    if lat_off == 0.0:
        lat_off = swept_offset(m, agents, n, i, cp_all, p, sl_state, cap, _swept_cap(a, rp), rp.swept_margin, rp.z_gate,
                               &sw, &ld, &acc, &v0)
    steer_rate = _steer_authority(a, cp)
    acc_curve = _curve_speed_accel(&sw, a, rp, steer_rate)
    if acc_curve < acc:
        acc = acc_curve
    steer_ref = _steer_target(&sw, a, rp, steer_rate)
    if plan != NULL:
        plan.lane, plan.route_lane, plan.sweep_points = a.lane, a.route_lane, sw.n
        plan.lane_s, plan.accel, plan.steer, plan.v0, plan.gap = a.lane_s, acc, steer_ref, v0, ld.gap
        plan.lat_off = lat_off
        plan.leader = <int>ld.who
    a[0] = saved
    out = _best_action(a, cp, model, grid_long, grid_lat, n_long, n_lat, acc, steer_ref, 0.0,
                       rp, dt)
    return out
