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
                     KIN_STEER, CP_COMF_JLONG, CP_COMF_JLAT, CP_STEERRATE)
from geometry cimport wrap_angle
from dynamics cimport step_dynamics, clip
from route cimport Sweep, _only_successor
from roadusers cimport IdmParams, Leader, idm_desired_accel
from lanegraph cimport LaneGraphScratch, route_successor, goal_route_distance
from seggrid cimport seggrid_nearest_where


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
    double turn_in             # m: travel over which the wheels may be turned into a curve
    double accel_tau           # s: the jerk model closes the gap to the asked-for acceleration over this
    double steer_tolerance     # rad: how far from a predicted pose's steering angle the wheels may be there


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
    rp.turn_in = 3.0
    rp.accel_tau = 0.5
    rp.steer_tolerance = 0.05


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


cdef inline int _best_action(Agent* a, const double* cp, int model, const double* grid_long,
                             const double* grid_lat, int n_long, int n_lat, double acc_ref, double steer_ref,
                             double yaw_ref, const RefParams* rp, double dt) noexcept nogil:
    """The action index (``i_long * n_lat + i_lat``) whose one-step outcome on a copy of ``a`` lies
    nearest the asked-for acceleration and steering angle (yaw rate for the unicycle)."""
    cdef Agent b
    cdef int il, it, best = 0
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
    # The acceleration asked for next: the jerk model closes the gap to ``acc_ref`` over ``accel_tau``
    # seconds (so a comfortable jerk does what a small gap needs, and the emergency value only what a
    # large one does); the acceleration-actuated models set it at once.
    a_next = acc_ref
    if model == DYN_BICYCLE_JERK and rp.accel_tau > dt:
        a_next = a.a_long + (acc_ref - a.a_long) * dt / rp.accel_tau
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
            if fabs(b.j_long) > cp[CP_COMF_JLONG]:
                cost += rp.comfort_price
            if fabs(b.j_lat) > cp[CP_COMF_JLAT]:
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
        return
    q = m.lanes.seg + 6 * sgi
    dx = q[3] - q[0]
    dy = q[4] - q[1]
    a.lane = m.lanes.seg_row[sgi]
    a.lane_s = m.lanes.seg_s0[sgi] + t * sqrt(dx * dx + dy * dy)


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
    the predicted path at a speed it can take: a lateral acceleration of at most ``curve_accel``, slow
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
    int lane, route_lane, sweep_points
    double lane_s, accel, steer, v0, gap


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
    cdef double acc, v0, cap, steer_ref, yaw_ref = 0.0, bearing, steer_rate, acc_curve
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
        a.route_lane = _only_successor(m, a.lane)
    if a.route_lane < 0 and m.succ_off[a.lane + 1] > m.succ_off[a.lane]:
        a.route_lane = m.succ[m.succ_off[a.lane]]
    a.idm_mode = 0
    a.lc_reach = 0.0
    cap = _arrival_cap(m, a, rp, sc)
    acc = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, 0.0, cap, &sw, &ld, &v0)
    steer_rate = _steer_authority(a, cp)
    acc_curve = _curve_speed_accel(&sw, a, rp, steer_rate)
    if acc_curve < acc:
        acc = acc_curve
    steer_ref = _steer_target(&sw, a, rp, steer_rate)
    if plan != NULL:
        plan.lane, plan.route_lane, plan.sweep_points = a.lane, a.route_lane, sw.n
        plan.lane_s, plan.accel, plan.steer, plan.v0, plan.gap = a.lane_s, acc, steer_ref, v0, ld.gap
    a[0] = saved
    out = _best_action(a, cp, model, grid_long, grid_lat, n_long, n_lat, acc, steer_ref, 0.0,
                       rp, dt)
    return out
