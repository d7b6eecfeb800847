# cython: language_level=3
"""Lane changes of rule-based vehicles around obstacles at rest (TerraZero section 4.4): the
decision, its safety check and the switch. Called at the end of the IDM step (``roadusers.pxd``).

A vehicle whose nearest constraint is a static actor (a parked or crashed vehicle, a cone, debris, a
worker; ``ROLE_STATIC``) within ``trigger_dist`` of travel, outside intersections, looks at the
adjacent same-direction lanes (``MapC.lane_left``/``lane_right``; the overtaking side first) and takes
the first whose stretch around it is free: nothing alongside, nothing at rest within ``clear_ahead``
ahead of its front (so an obstacle that also blocks that lane keeps it where it is), a moving leader
there it could follow without braking harder than ``safe_decel``, and, the MOBIL safety criterion
(Kesting, Treiber and Helbing 2007), a new follower whose IDM braking with the vehicle as its leader
stays under ``safe_decel``. The switch moves the vehicle's lane and lane position to the neighbour
and redraws its route from there; pure pursuit then steers it across, with a lookahead lengthened
by ``lookahead_time`` seconds of travel until it is settled on the new centre, and ``cooldown``
seconds pass before it may change again (it does not flip back and forth); a refused change is
looked at again LC_RETRY_STEPS steps later. The other lanes are approximated by their tangent at the
vehicle's foot point over the checked stretch.
"""

from libc.math cimport sqrt, fabs
from common cimport Agent, MapC, ROLE_STATIC
from scene cimport lane_length, lane_point
from route cimport _route_next
from rng cimport Rng
from idm_law cimport idm_accel
from neighbours cimport AgentGrid, nbr_box


cdef enum:
    LC_BEHIND = 80             # metres behind the vehicle searched for a new follower
    LC_RETRY_STEPS = 5         # after a refused change, steps before the vehicle looks again


ctypedef struct LaneChangeParams:
    bint enabled               # off: vehicles stop behind obstacles as they are
    double trigger_dist        # an obstacle at rest this near (travel, m) prompts a change
    double clear_ahead         # nothing at rest may lie this far ahead of the front in the new lane (m)
    double safe_decel          # braking (m/s^2) a change may impose on the new follower, or on the vehicle
    double cooldown            # seconds between two changes of one vehicle
    double lookahead_time      # extra pure-pursuit lookahead while crossing (s of travel)
    double margin              # lateral clearance (m) the vehicle's corridor keeps from agents beside it
    double settle              # lateral offset (m) from the new centre under which the crossing is over
    # The new follower is taken to drive by the default behaviour mode's IDM law.
    double v0_scale, T, amax, bcomf, s0


cdef inline bint _lane_foot(const MapC* m, int lane, double x, double y, double* s, double* fx, double* fy,
                            double* tc, double* ts) noexcept nogil:
    """Nearest point of ``lane`` to (x, y): its arc length, position and unit direction. Scans the
    whole lane (run only when a change is considered). False for a degenerate lane."""
    cdef Py_ssize_t k, first = m.lane_off[lane], last = m.lane_off[lane + 1] - 1
    cdef double ax, ay, ex, ey, L2, t, px, py, d2, best = 1e300, n
    cdef bint found = False
    for k in range(first, last):
        ax = m.lane_pts[3 * k]
        ay = m.lane_pts[3 * k + 1]
        ex = m.lane_pts[3 * k + 3] - ax
        ey = m.lane_pts[3 * k + 4] - ay
        L2 = ex * ex + ey * ey
        if L2 <= 0:
            continue
        t = ((x - ax) * ex + (y - ay) * ey) / L2
        t = 0.0 if t < 0 else (1.0 if t > 1 else t)
        px = ax + t * ex
        py = ay + t * ey
        d2 = (px - x) * (px - x) + (py - y) * (py - y)
        if d2 < best:
            best = d2
            n = sqrt(L2)
            s[0] = m.lane_s0[k] + t * (m.lane_s0[k + 1] - m.lane_s0[k])
            fx[0], fy[0], tc[0], ts[0] = px, py, ex / n, ey / n
            found = True
    return found


cdef inline bint _lane_free(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const LaneChangeParams* p,
                            int lane, double fx, double fy, double tc, double ts, double v, double v0, double T,
                            double amax, double bcomf, double s0, double delta,
                            AgentGrid* grid) noexcept nogil:
    """Whether the stretch of ``lane`` around vehicle i (foot point (fx, fy), direction (tc, ts)) is
    free for it: see the module header. The vehicle's own law is (v0, T, amax, bcomf, s0, delta)."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j, q, cnt = -1
    cdef double ahl = 0.5 * a.length, reach, dx, dy, lon, lat, cr, sr, elon, elat, g, vb
    cdef double v0f = p.v0_scale * m.lane_speed[lane]
    reach = (p.clear_ahead if p.clear_ahead > LC_BEHIND else LC_BEHIND) + ahl + 20.0
    if grid != NULL:  # the agents within ``reach`` of the foot point (the first test below)
        cnt = nbr_box(grid, agents, n, fx - reach, fy - reach, fx + reach, fy + reach)
    for q in range(n if cnt < 0 else cnt):
        j = q if cnt < 0 else grid.cand[q]
        if j == i:
            continue
        b = &agents[j]
        if not b.alive:
            continue
        dx = b.x - fx
        dy = b.y - fy
        if dx * dx + dy * dy > reach * reach:
            continue
        lon = dx * tc + dy * ts
        lat = -dx * ts + dy * tc
        cr = fabs(b.cos_h * tc + b.sin_h * ts)
        sr = fabs(b.cos_h * ts - b.sin_h * tc)
        elon = 0.5 * b.length * cr + 0.5 * b.width * sr
        elat = 0.5 * b.length * sr + 0.5 * b.width * cr
        if fabs(lat) - elat >= 0.5 * a.width + p.margin:
            continue  # beside the corridor the vehicle needs
        vb = b.speed * (b.cos_h * tc + b.sin_h * ts)
        if lon - elon > ahl:  # ahead
            g = lon - elon - ahl
            if b.role == ROLE_STATIC or fabs(b.speed) < 0.5:
                if g < p.clear_ahead:
                    return False
            elif idm_accel(v, v0, g, vb, T, amax, bcomf, s0, delta) < -p.safe_decel:
                return False
        elif lon + elon < -ahl:  # behind: the new follower
            g = -(lon + elon) - ahl
            if b.role != ROLE_STATIC and vb > 0.5 and (
                    g < p.s0 or idm_accel(vb, v0f, g, v, p.T, p.amax, p.bcomf, p.s0, delta) < -p.safe_decel):
                return False
        else:
            return False  # alongside
    return True


cdef inline void lane_change(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const LaneChangeParams* p,
                             Py_ssize_t who, double gap, double v0, double T, double amax, double bcomf, double s0,
                             double delta, Rng* rng, double dt, double lat_off=0.0,
                             AgentGrid* grid=NULL) noexcept nogil:
    """After vehicle i's IDM step, whose nearest constraint was agent ``who`` (-1: a stopping point)
    ``gap`` metres of travel ahead: count down its cooldown, end its crossing once it is settled on
    its lane (``lat_off`` metres left of its centre for a planner vehicle, ``planner.pxd``), and change
    lane when an obstacle at rest blocks it and a neighbour lane is free."""
    cdef Agent* a = &agents[i]
    cdef int side, lane
    cdef double s, fx, fy, tc, ts, x, y, z, h, d, v = a.speed if a.speed > 0 else 0.0
    if a.lc_wait > 0:
        a.lc_wait -= dt
    if a.lc_reach > 0:
        lane_point(m, a.lane, a.lane_s, &x, &y, &z, &h)
        if fabs(-(a.x - x) * a.sin_h + (a.y - y) * a.cos_h - lat_off) < p.settle:
            a.lc_reach = 0.0
    if a.lc_wait > 0 or who < 0 or agents[who].role != ROLE_STATIC or gap > p.trigger_dist or \
            m.lane_inter[a.lane] >= 0:
        return
    for side in range(2):
        # Overtaking side first: the left in right-hand traffic, the right in left-hand traffic.
        lane = m.lane_left[a.lane] if (side == 0) == (m.handedness == 0) else m.lane_right[a.lane]
        if lane < 0 or m.lane_inter[lane] >= 0:
            continue
        if not _lane_foot(m, lane, a.x, a.y, &s, &fx, &fy, &tc, &ts):
            continue
        d = sqrt((a.x - fx) * (a.x - fx) + (a.y - fy) * (a.y - fy))
        if tc * a.cos_h + ts * a.sin_h < 0.87 or d > m.lane_width[a.lane] + m.lane_width[lane] or \
                s <= 0 or lane_length(m, lane) - s < a.length:
            continue  # not beside the vehicle, not its way, or about to end
        if not _lane_free(m, agents, n, i, p, lane, fx, fy, tc, ts, v, v0, T, amax, bcomf, s0, delta, grid):
            # Looking again every few steps rather than every step bounds the cost of vehicles
            # waiting behind an obstacle with the neighbour lane busy.
            a.lc_wait = (LC_RETRY_STEPS - 0.5) * dt
            continue
        a.lane = lane
        a.lane_s = s
        a.route_lane = _route_next(m, rng, lane)
        a.lc_wait = p.cooldown
        a.lc_reach = p.lookahead_time
        return
