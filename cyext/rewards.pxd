# cython: language_level=3
"""Per-step reward of one agent (TerraZero appendix B, table 8).

Every weight comes from the agent's own sampled parameter vector ``rw`` (a null parameter is 0, so
its term vanishes). Speed terms are multiplied by dt to be per-step. Stop-line and red-light terms
read the events the traffic-rules layer records (none until that layer runs). ``RewardForm`` picks
the form of the velocity-alignment and speed-limit terms (``terrazero_env.config.RewardForms``).
"""

from libc.math cimport fabs, sqrt
from common cimport (Agent, RW_GOAL, RW_COLLISION, RW_BOUNDARY, RW_COMFORT, RW_LANE_ALIGN, RW_LANE_CENTER,
                     RW_VELOCITY, RW_VEL_ALIGN, RW_REVERSE, RW_TIMESTEP, RW_STOP_LINE, RW_RED_LIGHT,
                     RW_ROAD_INCURSION, RW_SPEED_LIMIT, RW_EDGE_PREFERENCE, RW_GOAL_PROGRESS,
                     RW_TARGET_SPEED, RW_WRONG_WAY, RW_B_CENTER, RW_GAMMA_COL, RW_V_SPEED_LIM,
                     KIN_VEL, CP_VMAX, RT_GOAL, RT_COLLISION, RT_BOUNDARY, RT_COMFORT, RT_LANE_ALIGN,
                     RT_LANE_CENTER, RT_VEL_ALIGN, RT_EDGE_PREFERENCE, RT_VELOCITY, RT_REVERSE, RT_TIMESTEP,
                     RT_STOP_LINE, RT_RED_LIGHT, RT_ROAD_INCURSION, RT_SPEED_LIMIT, RT_GOAL_PROGRESS,
                     RT_WRONG_WAY, N_REWARD_TERMS)
from libc.string cimport memset


# Values of RewardForm's fields (terrazero_env.config.VelAlignForm, SpeedLimitSource and
# GoalProgressForm).
cdef enum:
    VEL_ALIGN_NORMALIZED = 0   # -alpha * dt * |v - target| / v_max
    VEL_ALIGN_TABLE8 = 1       # -alpha * dt * |v - target| (table 8's -alpha * |dv|, per step)
    SPEED_LIMIT_SAMPLED = 0    # cap: the sampled v_speed_lim
    SPEED_LIMIT_LANE = 1       # cap: the current lane's posted limit where there is one
    GOAL_PROGRESS_EUCLIDEAN = 0   # metres of straight-line distance to the goal gained
    GOAL_PROGRESS_ROUTE = 1       # metres of driving distance along the lane graph gained
    PROGRESS_DIFFERENCE = 0       # goal progress pays d_prev - d
    PROGRESS_POTENTIAL = 1        # pays d_prev - gamma * d (potential-based, the new goal charged back)


ctypedef struct RewardForm:
    int vel_align
    int speed_limit
    int goal_progress
    double route_cap           # m: the route search of GOAL_PROGRESS_ROUTE stops this far out
    int shaping                # PROGRESS_DIFFERENCE or PROGRESS_POTENTIAL
    double gamma               # PROGRESS_POTENTIAL's discount per step


ctypedef struct StepEvents:
    bint goal                  # reached the goal this step
    bint collided
    bint offroad               # vehicles and cyclists: footprint off the drivable area
    double offroad_excursion   # m: how far the box reaches beyond it (rules.offroad_excursion; 0 on it)
    bint incursion             # pedestrians: on the carriageway and not on a crosswalk
    bint wrong_way
    bint stop_line             # ran a stop line (traffic-rules layer)
    bint red_light             # crossed a stop bar on red (traffic-rules layer)
    int comfort_violations
    double goal_progress       # metres closer to the goal than last step


cdef inline double step_reward(Agent* a, const StepEvents* e, const double* cp, double dt,
                               int handedness, const RewardForm* form, double* terms) noexcept nogil:
    """The step's reward, and each term of it in ``terms`` (``N_REWARD_TERMS`` doubles, ``RT_*``
    order, which is the order they are added in: the reward is their sum in that order, so a
    reader of the terms recovers it bit for bit). A term that does not apply is 0."""
    cdef const double* w = a.rw
    cdef double v = a.speed
    cdef double speed = fabs(v)
    cdef double v_max = cp[CP_VMAX] * a.kin[KIN_VEL]
    cdef double r = 0.0, target, edge, v_lim, t
    memset(terms, 0, N_REWARD_TERMS * sizeof(double))
    if e.goal:
        t = w[RW_GOAL]
        terms[RT_GOAL] = t
        r += t
    if e.collided:
        t = -(w[RW_COLLISION] + w[RW_GAMMA_COL] * speed)
        terms[RT_COLLISION] = t
        r += t
    if e.offroad:
        t = -w[RW_BOUNDARY]
        terms[RT_BOUNDARY] = t
        r += t
    t = -(w[RW_COMFORT] * e.comfort_violations)
    terms[RT_COMFORT] = t
    r += t
    if a.lane >= 0:
        t = -(w[RW_LANE_ALIGN] * fabs(a.lane_heading_res))
        terms[RT_LANE_ALIGN] = t
        r += t
        t = -(w[RW_LANE_CENTER] * fabs(a.lane_lat + w[RW_B_CENTER]))
        terms[RT_LANE_CENTER] = t
        r += t
        # Velocity alignment: distance to the target speed (the lane's posted limit unless a
        # positive target speed is set), per step (x dt, appendix B). NORMALIZED also divides by
        # v_max like the velocity term; TABLE8 is table 8's -alpha * |dv| in m/s.
        if w[RW_VEL_ALIGN] != 0.0 and v_max > 0:
            target = w[RW_TARGET_SPEED] if w[RW_TARGET_SPEED] > 0 else a.lane_speed
            if target > v_max:
                target = v_max
            if form.vel_align == VEL_ALIGN_TABLE8:
                t = -(w[RW_VEL_ALIGN] * dt * fabs(v - target))
            else:
                t = -(w[RW_VEL_ALIGN] * dt * fabs(v - target) / v_max)
            terms[RT_VEL_ALIGN] = t
            r += t
        if w[RW_EDGE_PREFERENCE] != 0.0 and a.lane_width > 0:
            # Toward the curb side: right of travel in right-hand traffic, left in left-hand.
            edge = (a.lane_lat if handedness == 1 else -a.lane_lat) / a.lane_width
            edge = -1.0 if edge < -1.0 else (1.0 if edge > 1.0 else edge)
            t = w[RW_EDGE_PREFERENCE] * dt * edge
            terms[RT_EDGE_PREFERENCE] = t
            r += t
    if v_max > 0:
        t = w[RW_VELOCITY] * dt * v / v_max
        terms[RT_VELOCITY] = t
        r += t
    if v < 0:
        t = -w[RW_REVERSE]
        terms[RT_REVERSE] = t
        r += t
    t = w[RW_TIMESTEP]
    terms[RT_TIMESTEP] = t
    r += t
    if e.stop_line:
        t = -w[RW_STOP_LINE]
        terms[RT_STOP_LINE] = t
        r += t
    if e.red_light:
        t = -(w[RW_RED_LIGHT] + w[RW_GAMMA_COL] * speed)
        terms[RT_RED_LIGHT] = t
        r += t
    if e.incursion:
        t = -(w[RW_ROAD_INCURSION] * dt)
        terms[RT_ROAD_INCURSION] = t
        r += t
    v_lim = w[RW_V_SPEED_LIM]
    if form.speed_limit == SPEED_LIMIT_LANE and a.lane >= 0 and a.lane_speed > 0:
        v_lim = a.lane_speed   # appendix B: v_lim "resolved per lane from the posted limit"
    if w[RW_SPEED_LIMIT] != 0.0 and v_lim > 0 and speed > v_lim and v_max > 0:
        t = -(w[RW_SPEED_LIMIT] * dt * (speed - v_lim) / v_max)
        terms[RT_SPEED_LIMIT] = t
        r += t
    t = w[RW_GOAL_PROGRESS] * e.goal_progress
    terms[RT_GOAL_PROGRESS] = t
    r += t
    if e.wrong_way:
        t = -(w[RW_WRONG_WAY] * dt)
        terms[RT_WRONG_WAY] = t
        r += t
    return r


cdef inline double goal_progress(Agent* a, double d) noexcept nogil:
    """The goal-progress term's input in its EUCLIDEAN form: metres closer to the goal than at the last
    step (``d``: the distance now, remembered for the next step)."""
    cdef double progress = a.prev_goal_dist - d
    a.prev_goal_dist = d
    return progress


cdef inline double route_progress(Agent* a, double d, double limit) noexcept nogil:
    """The goal-progress term's input in its ROUTE form: metres of driving distance to the goal (``d``,
    along the lane graph; negative when unknown) gained since the last step it was known. Nothing is
    paid while it is unknown (the agent or its goal off every lane, or the goal out of the search's
    reach: driving against the lane, past the goal), and a step pays at most ``limit`` metres either
    way (one step at the agent's top speed), so a jump of the distance (back on a lane after a detour,
    the nearest lane switching) is worth no more than driving. ``a.prev_goal_dist`` holds the last
    known distance, negative while none is."""
    cdef double progress
    if d < 0:
        return 0.0
    if a.prev_goal_dist < 0:
        a.prev_goal_dist = d
        return 0.0
    progress = a.prev_goal_dist - d
    a.prev_goal_dist = d
    if progress > limit:
        return limit
    if progress < -limit:
        return -limit
    return progress
