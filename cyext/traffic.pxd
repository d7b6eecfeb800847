# cython: language_level=3
"""Stop lines, signals and stop signs at the simulation layer (TerraZero section 3.3).

A stop line is passed when the agent's swept path this step (its front centre, before -> after)
crosses the bar: a red-light violation if the line's signal is red at that tick (yellow is legal to
clear; waiting or creeping inside the region on red is not a violation), a stop-line violation if
it is a stop sign the agent has not cleared. A stop sign clears once the agent has held below a
speed threshold for a dwell time drawn when it entered the sign's region. Pedestrians are exempt.
"""

from libc.math cimport cos, sin, sqrt
from common cimport (Agent, MapC, SIG_RED, STOP_NOT_IN_REGION, STOP_MUST_STOP, STOP_CLEARED)
from geometry cimport segments_intersect, point_segment_dist2
from rewards cimport StepEvents
from rng cimport Rng, rng_range

cdef enum:
    CONTROL_SIGNAL = 1
    CONTROL_STOP_SIGN = 2


ctypedef struct StopRules:
    double stop_speed, dwell_lo, dwell_hi, region


cdef inline void front_centre(Agent* a, double* x, double* y) noexcept nogil:
    x[0] = a.x + 0.5 * a.length * cos(a.heading)
    y[0] = a.y + 0.5 * a.length * sin(a.heading)


cdef inline void traffic_rules(const MapC* m, Agent* a, int prev_lane, const unsigned char* sl_state,
                               const StopRules* r, Rng* rng, double dt, StepEvents* ev) noexcept nogil:
    """Passage of the stop line at the end of the agent's previous lane, then its stop-sign state
    on its current lane. Sets ``ev.red_light`` / ``ev.stop_line`` on a violation."""
    cdef double fx, fy, t, d2
    cdef const double* bar
    cdef Py_ssize_t sl
    cdef bint crossed = False
    a.red_light = 0
    a.ran_stop_line = 0
    front_centre(a, &fx, &fy)
    if prev_lane >= 0:
        sl = m.lane_stop_line[prev_lane]
        if sl >= 0:
            bar = &m.sl_pts[6 * sl]
            crossed = segments_intersect(a.front_x, a.front_y, fx, fy, bar[0], bar[1], bar[3], bar[4])
            if crossed:
                if m.sl_control[sl] == CONTROL_SIGNAL and sl_state[sl] == SIG_RED:
                    a.red_light = 1
                elif m.sl_control[sl] == CONTROL_STOP_SIGN and a.stop_state != STOP_CLEARED:
                    a.ran_stop_line = 1
                a.stop_state = STOP_NOT_IN_REGION
    ev.red_light = a.red_light
    ev.stop_line = a.ran_stop_line
    if crossed or a.lane < 0:
        return
    sl = m.lane_stop_line[a.lane]
    if sl < 0 or m.sl_control[sl] != CONTROL_STOP_SIGN:
        a.stop_state = STOP_NOT_IN_REGION
        return
    bar = &m.sl_pts[6 * sl]
    d2 = point_segment_dist2(fx, fy, bar[0], bar[1], bar[3], bar[4], &t)
    if d2 > r.region * r.region:
        a.stop_state = STOP_NOT_IN_REGION
        return
    if a.stop_state == STOP_NOT_IN_REGION:
        a.stop_state = STOP_MUST_STOP
        a.stop_dwell = 0.0
        a.stop_need = rng_range(rng, r.dwell_lo, r.dwell_hi)
    if a.stop_state == STOP_MUST_STOP and (a.speed if a.speed > 0 else -a.speed) < r.stop_speed:
        a.stop_dwell += dt
        if a.stop_dwell >= a.stop_need:
            a.stop_state = STOP_CLEARED
