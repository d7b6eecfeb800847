# cython: language_level=3
"""Per-class dynamics (TerraZero section 3.2), one step of ``dt`` seconds.

Every model reads its two action values (already looked up in the agent's class grid), scales them
by the agent's kinematic coefficients, integrates, then clips speed and acceleration to the
coefficient-scaled limits (appendix D.4: clips applied after integration). Each model also leaves
the realized longitudinal and lateral acceleration and jerk in the agent for the comfort term and
the observation.

The kinematic bicycle is referenced so that the agent's position turns on a circle of radius
``wheelbase / tan(steer)``; poses advance along exact arcs of the step's mean speed and yaw rate. With
a class's ``rear_axle`` (``CP_REARAXLE``) that point is the rear axle, that fraction of the length
behind the box centre, and the box centre rides ahead of it (the tire model's centre of mass half a
wheelbase ahead of the rear axle); 0 keeps every model turning about the box centre.

With a class's steering-rate limit (``CP_STEERRATE`` >= 0, ``ClassSpec.max_steer_rate``) the steering
angle is state, as in PufferDrive's jerk model (``pufferlib/ocean/drive``): each step it moves toward
the angle the action asks for by at most ``rate * dt``, the realised lateral acceleration follows
from the limited angle (v^2 tan(delta) / L), and a speed (or, in the jerk model, an acceleration) that
a step would carry across zero stops at exactly zero. So a car that brakes in a turn without new
lateral jerk keeps the turn's radius, a slow car does not swing its wheels by tens of degrees in a
step, and driving straight and stopping are exact. A negative limit keeps the earlier models, where
the angle follows the command at once.
"""

from libc.math cimport cos, sin, tan, atan, atan2, fabs, sqrt
from common cimport (Agent, DYN_UNICYCLE, DYN_BICYCLE_ACCEL, DYN_BICYCLE_JERK, DYN_BICYCLE_TIRE,
                     KIN_THROTTLE, KIN_STEER, KIN_ACC, KIN_VEL, CP_VMAX, CP_VREV, CP_AMAX, CP_DMAX,
                     CP_ALATMAX, CP_STEERMAX, CP_CORNERING, CP_MASS, CP_STEERRATE, CP_REARAXLE)
from geometry cimport wrap_angle


cdef inline double clip(double v, double lo, double hi) noexcept nogil:
    return lo if v < lo else (hi if v > hi else v)


cdef inline double _clip_speed(Agent* a, const double* cp, double v) noexcept nogil:
    return clip(v, -cp[CP_VREV], cp[CP_VMAX] * a.kin[KIN_VEL])


cdef inline double _toward(double current, double target, double max_step) noexcept nogil:
    """``target``, or ``current`` moved toward it by ``max_step`` when it lies further away."""
    if target > current + max_step:
        return current + max_step
    if target < current - max_step:
        return current - max_step
    return target


cdef inline double _steer_toward(Agent* a, const double* cp, double target, double dt) noexcept nogil:
    """The steering angle after one step toward ``target`` (clipped to the class's steering range),
    moving at most ``CP_STEERRATE * dt``; a negative rate reaches the target at once."""
    cdef double t = clip(target, -cp[CP_STEERMAX], cp[CP_STEERMAX])
    if cp[CP_STEERRATE] < 0:
        return t
    return _toward(a.steer, t, cp[CP_STEERRATE] * dt)


cdef inline double _speed_after(Agent* a, const double* cp, double v0, double accel, double dt) noexcept nogil:
    """Speed after ``dt`` at ``accel``, clipped to the class's range; with a steering-rate limit a
    speed that would change sign in the step stops at zero (a brake stops the car, it does not
    reverse it; reversing starts from a standstill)."""
    cdef double v1 = _clip_speed(a, cp, v0 + accel * dt)
    if cp[CP_STEERRATE] >= 0 and v0 * v1 < 0:
        return 0.0
    return v1


cdef inline void _advance_pose(Agent* a, double v_mid, double yaw_rate, double dt) noexcept nogil:
    """Move along the exact arc of constant speed and yaw rate (a straight line when yaw_rate = 0)."""
    cdef double h0 = a.heading, h1 = a.heading + yaw_rate * dt
    cdef double dh = yaw_rate * dt
    if fabs(dh) > 1e-9:
        a.x += v_mid / yaw_rate * (sin(h1) - sin(h0))
        a.y += v_mid / yaw_rate * (cos(h0) - cos(h1))
    else:
        a.x += v_mid * cos(h0 + 0.5 * dh) * dt
        a.y += v_mid * sin(h0 + 0.5 * dh) * dt
    a.heading = wrap_angle(h1)
    a.cos_h = cos(a.heading)
    a.sin_h = sin(a.heading)


cdef inline void _bicycle_pose(Agent* a, const double* cp, double v0, double v1, double steer,
                               double dt) noexcept nogil:
    """Kinematic bicycle pose update for a speed change v0 -> v1 at a steering angle."""
    cdef double v_mid = 0.5 * (v0 + v1)
    a.steer = clip(steer, -cp[CP_STEERMAX], cp[CP_STEERMAX])
    cdef double yaw_rate = v_mid * tan(a.steer) / a.wheelbase
    # ClassSpec.rear_axle: the arc is the rear axle's, the box centre rides c metres ahead of it
    cdef double c = cp[CP_REARAXLE] * a.length
    if c != 0.0:
        a.x -= c * cos(a.heading)
        a.y -= c * sin(a.heading)
    _advance_pose(a, v_mid, yaw_rate, dt)
    if c != 0.0:
        a.x += c * a.cos_h
        a.y += c * a.sin_h
    a.speed = v1
    a.yaw_rate = yaw_rate
    a.v_lat = 0.0
    a.a_long = (v1 - v0) / dt
    a.a_lat = v_mid * yaw_rate


cdef inline void step_unicycle(Agent* a, const double* cp, double accel, double yaw_rate, double dt) noexcept nogil:
    """Pedestrians: acceleration and yaw-rate actions."""
    cdef double amax = cp[CP_AMAX] * a.kin[KIN_ACC], dmax = cp[CP_DMAX] * a.kin[KIN_ACC]
    cdef double v0 = a.speed
    cdef double v1 = _clip_speed(a, cp, v0 + clip(accel * a.kin[KIN_THROTTLE], -dmax, amax) * dt)
    cdef double w = yaw_rate * a.kin[KIN_STEER]
    _advance_pose(a, 0.5 * (v0 + v1), w, dt)
    a.speed = v1
    a.yaw_rate = w
    a.steer = 0.0
    a.v_lat = 0.0
    a.a_long = (v1 - v0) / dt
    a.a_lat = 0.5 * (v0 + v1) * w


cdef inline void step_bicycle_accel(Agent* a, const double* cp, double accel, double steer, double dt) noexcept nogil:
    """Cyclists: kinematic bicycle actuated by acceleration and a target steering angle."""
    cdef double amax = cp[CP_AMAX] * a.kin[KIN_ACC], dmax = cp[CP_DMAX] * a.kin[KIN_ACC]
    cdef double v0 = a.speed
    cdef double v1 = _speed_after(a, cp, v0, clip(accel * a.kin[KIN_THROTTLE], -dmax, amax), dt)
    _bicycle_pose(a, cp, v0, v1, _steer_toward(a, cp, steer * a.kin[KIN_STEER], dt), dt)


cdef inline void _step_bicycle_jerk_direct(Agent* a, const double* cp, double j_long, double j_lat,
                                           double dt) noexcept nogil:
    """The jerk model without a steering-rate limit: lateral acceleration is the state, and the
    steering angle is recomputed from it every step as atan(a_lat * L / v^2)."""
    cdef double amax = cp[CP_AMAX] * a.kin[KIN_ACC], dmax = cp[CP_DMAX] * a.kin[KIN_ACC]
    cdef double a_cmd = clip(a.a_long + j_long * a.kin[KIN_THROTTLE] * dt, -dmax, amax)
    cdef double alat_cmd = clip(a.a_lat + j_lat * a.kin[KIN_STEER] * dt, -cp[CP_ALATMAX], cp[CP_ALATMAX])
    cdef double v0 = a.speed
    cdef double v1 = _clip_speed(a, cp, v0 + a_cmd * dt)
    cdef double v_mid = 0.5 * (v0 + v1)
    cdef double steer = 0.0
    if fabs(v_mid) > 0.1:
        steer = atan(alat_cmd * a.wheelbase / (v_mid * v_mid))
    _bicycle_pose(a, cp, v0, v1, steer, dt)


cdef inline void step_bicycle_jerk(Agent* a, const double* cp, double j_long, double j_lat, double dt) noexcept nogil:
    """Cars and buses: jerk-actuated kinematic bicycle. The longitudinal jerk integrates into the
    acceleration; the lateral jerk changes the lateral acceleration the wheels give at the step's
    starting speed (v0^2 tan(delta) / L), and the wheels turn toward the angle that gives the new
    value, at no more than the class's steering rate. Zero lateral jerk therefore holds the steering
    angle, and with it the turn's radius, whatever the speed does. An acceleration, lateral
    acceleration or speed that a step would carry across zero stops at zero, and a car stopped so
    keeps no acceleration (a zero jerk then holds it still). At a standstill a lateral
    jerk turns the wheels toward full lock in its direction (the angle any finite lateral
    acceleration asks for as v -> 0)."""
    if cp[CP_STEERRATE] < 0:
        _step_bicycle_jerk_direct(a, cp, j_long, j_lat, dt)
        return
    cdef double amax = cp[CP_AMAX] * a.kin[KIN_ACC], dmax = cp[CP_DMAX] * a.kin[KIN_ACC]
    cdef double a_cmd = clip(a.a_long + j_long * a.kin[KIN_THROTTLE] * dt, -dmax, amax)
    if a_cmd * a.a_long < 0 and fabs(a.a_long) > 1e-6:  # a residue below 1e-6 m/s^2 is no sign
        a_cmd = 0.0
    cdef double v0 = a.speed, v2 = v0 * v0
    cdef double alat0 = v2 * tan(a.steer) / a.wheelbase
    cdef double dlat = j_lat * a.kin[KIN_STEER] * dt
    cdef double alat_cmd = clip(alat0 + dlat, -cp[CP_ALATMAX], cp[CP_ALATMAX])
    if alat_cmd * alat0 < 0 and fabs(alat0) > 1e-6:
        alat_cmd = 0.0
    cdef double target
    if dlat == 0 and alat_cmd == alat0:
        target = a.steer  # held exactly (not through atan(tan(delta)), whose rounding would leave a residue)
    elif v2 > 1e-6:
        target = atan(alat_cmd * a.wheelbase / v2)
    elif dlat > 0:
        target = cp[CP_STEERMAX]
    elif dlat < 0:
        target = -cp[CP_STEERMAX]
    else:
        target = a.steer
    cdef double v1 = _speed_after(a, cp, v0, a_cmd, dt)
    _bicycle_pose(a, cp, v0, v1, _steer_toward(a, cp, target, dt), dt)
    if v1 == 0.0 and v0 != 0.0:
        # Stopped by the snap: the car stands with no acceleration left to integrate, so a zero
        # jerk holds it still (without this it would start to reverse on the next step).
        a.a_long = 0.0


cdef inline void step_bicycle_tire(Agent* a, const double* cp, double accel, double steer, double dt) noexcept nogil:
    """Trucks: dynamic bicycle with linear tire cornering forces, actuated by acceleration and a
    target steering angle, so the body slips laterally at speed. Below 2 m/s forward, and in reverse,
    the slip model is singular (or, backward, undefined) and the kinematic bicycle takes over."""
    cdef double amax = cp[CP_AMAX] * a.kin[KIN_ACC], dmax = cp[CP_DMAX] * a.kin[KIN_ACC]
    cdef double v0 = a.speed
    cdef double v1 = _speed_after(a, cp, v0, clip(accel * a.kin[KIN_THROTTLE], -dmax, amax), dt)
    cdef double delta = _steer_toward(a, cp, steer * a.kin[KIN_STEER], dt)
    # Slow, or reversing: atan2 of a backward vx reads as a slip of pi. The rate-free model kept its
    # earlier test on |v1| (reversing at the 2 m/s limit took the slip model) so old runs reproduce.
    if (v1 < 2.0) if cp[CP_STEERRATE] >= 0 else (fabs(v1) < 2.0):
        _bicycle_pose(a, cp, v0, v1, delta, dt)
        return
    cdef double lf = 0.5 * a.wheelbase, lr = 0.5 * a.wheelbase
    cdef double C = cp[CP_CORNERING], m = cp[CP_MASS]
    cdef double iz = m * (0.5 * a.length) * (0.5 * a.length) / 3.0
    cdef double vx, vy = a.v_lat, r = a.yaw_rate, af, ar, fyf, fyr
    cdef int k, n_sub = 4
    cdef double sub = dt / n_sub
    # ClassSpec.rear_axle: the centre of mass lies half a wheelbase ahead of the rear axle, c metres
    # behind the box centre (c < 0: ahead of it); the slip model moves the centre of mass
    cdef double c = cp[CP_REARAXLE] * a.length - lr if cp[CP_REARAXLE] != 0.0 else 0.0
    if c != 0.0:
        a.x -= c * cos(a.heading)
        a.y -= c * sin(a.heading)
    for k in range(n_sub):
        vx = v0 + (v1 - v0) * (k + 0.5) / n_sub
        af = atan2(vy + lf * r, vx) - delta
        ar = atan2(vy - lr * r, vx)
        fyf = -C * af
        fyr = -C * ar
        vy += ((fyf * cos(delta) + fyr) / m - vx * r) * sub
        r += ((lf * fyf * cos(delta) - lr * fyr) / iz) * sub
        a.x += (vx * cos(a.heading) - vy * sin(a.heading)) * sub
        a.y += (vx * sin(a.heading) + vy * cos(a.heading)) * sub
        a.heading = wrap_angle(a.heading + r * sub)
    a.cos_h = cos(a.heading)
    a.sin_h = sin(a.heading)
    if c != 0.0:
        a.x += c * a.cos_h
        a.y += c * a.sin_h
    a.speed = v1
    a.v_lat = vy
    a.yaw_rate = r
    a.steer = delta
    a.a_long = (v1 - v0) / dt
    a.a_lat = 0.5 * (v0 + v1) * r


cdef inline void step_dynamics(Agent* a, const double* cp, int model, double u_long, double u_lat,
                               double dt) noexcept nogil:
    """Advance one agent by ``dt`` under its class model; updates jerks from the previous step."""
    a.prev_a_long = a.a_long
    a.prev_a_lat = a.a_lat
    if model == DYN_BICYCLE_JERK:
        step_bicycle_jerk(a, cp, u_long, u_lat, dt)
    elif model == DYN_BICYCLE_TIRE:
        step_bicycle_tire(a, cp, u_long, u_lat, dt)
    elif model == DYN_BICYCLE_ACCEL:
        step_bicycle_accel(a, cp, u_long, u_lat, dt)
    else:
        step_unicycle(a, cp, u_long, u_lat, dt)
    a.j_long = (a.a_long - a.prev_a_long) / dt
    a.j_lat = (a.a_lat - a.prev_a_lat) / dt
