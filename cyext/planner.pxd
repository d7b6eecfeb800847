# cython: language_level=3
"""Planner-driven traffic in the style of PDM-Closed (Dauner et al. 2023; TerraZero section 4.4,
"reactive vehicles"). A planner vehicle is an IDM vehicle (``ROLE_IDM``) whose row of the engine's
``PlanState`` array is switched on: to every other part of the engine and to the policy it is an IDM
vehicle. Every ``interval`` seconds ``plan_step`` chooses what it tracks until the next replan:

1. ``_gather``: the nearest agents within reach (static actors, vehicles, pedestrians) and their
   constant-velocity futures, at most PLAN_NEIGHBOURS of them; agents already touching the vehicle
   are left out (it cannot plan its way out of a contact).
2. Proposals: each lateral offset (lane widths from the centre of the vehicle's lane, left positive:
   beyond half a lane the vehicle moves to the neighbour lane on that side, the rest is an offset
   from that lane's centre) times each target speed (a fraction of the lane's speed limit).
   ``_lateral_target``: an offset leaving the drivable area (the vehicle's lane and its same-direction
   neighbours outside intersections) is vetoed for every speed.
3. ``_rollout``: each proposal is forward-simulated for ``horizon`` seconds at ``resolution``: the
   lateral position moves to the target along a smoothstep over ``lateral_time`` seconds, the speed
   follows the IDM law (the vehicle's behaviour mode's gains) with the proposal's target speed behind
   the nearest future box in its corridor; the route is the vehicle's own (``route.pxd``), offset
   sideways. A proposal whose body (widened by ``margin``) overlaps a future box is vetoed when the
   vehicle is at fault: the box is ahead of its centre, or the proposal moves it sideways.
4. ``_score``: a weighted mean of progress (metres along the route over the best of the surviving
   proposals; all 1 when that best is under ``min_progress``), time to collision (1 when the
   corridor's least TTC exceeds ``ttc_threshold``), comfort (the share of steps within the class's
   comfort accelerations and jerk) and lane keeping (1 less the mean lateral distance from the centre
   of the vehicle's present lane, in lane widths). The highest score wins; ties go to the earlier
   proposal (stay in lane first, then the overtaking side, faster speeds first). When every proposal
   is vetoed the vehicle keeps its lane with the speed whose first contact comes latest.
5. The winner is tracked: a move to a neighbour lane switches the vehicle's lane at once (as the
   rule-based lane change does, ``lanechange.pxd``: pure pursuit with a longer lookahead carries it
   across), and until the next replan the IDM step drives with the winner's target speed and lateral
   offset (``roadusers.idm_step``), keeping every safety rule of an IDM vehicle (leaders, signals,
   stop signs, yielding, pedestrians).

All work is bounded: PLAN_MAX_OFFSETS x PLAN_MAX_SPEEDS proposals of at most PLAN_MAX_STEPS steps
against at most PLAN_NEIGHBOURS futures, once per interval.
"""

from libc.math cimport sqrt, fabs, sin, cos
from common cimport (Agent, MapC, ROLE_STATIC, N_CP, CP_COMF_ALONG, CP_COMF_ALAT, CP_COMF_JLONG)
from scene cimport lane_length, lane_point
from geometry cimport obb_overlap_cs
from route cimport Route, Cursor, _route_build, _cursor_start, _route_xy, _route_next
from lanechange cimport _lane_foot
from neighbours cimport AgentGrid, nbr_box_sorted
from idm_law cimport idm_accel
from dynamics cimport clip
from rng cimport Rng


cdef enum:
    PLAN_MAX_OFFSETS = 5
    PLAN_MAX_SPEEDS = 8
    PLAN_MAX_STEPS = 60
    PLAN_NEIGHBOURS = 24
    PLAN_STATS = 3             # columns of PlanState.stats


# Per-vehicle counters (PlanState.stats; Engine.planner_state).
cdef enum:
    PST_REPLANS = 0            # plans made
    PST_LANE_CHANGES = 1       # plans that moved the vehicle to a neighbour lane
    PST_ALL_VETOED = 2         # plans where every proposal was vetoed


ctypedef struct PlannerParams:
    double interval            # seconds between two plans of a vehicle
    double horizon             # seconds each proposal is simulated
    double resolution          # seconds per simulated step
    int n_steps                # horizon / resolution (<= PLAN_MAX_STEPS)
    int n_offsets, n_speeds
    double offsets[PLAN_MAX_OFFSETS]   # lane widths, left positive, in evaluation order (0 first)
    double speeds[PLAN_MAX_SPEEDS]     # fractions of the speed limit, fastest first
    double w_progress, w_ttc, w_comfort, w_lane
    double ttc_threshold       # s
    double min_progress        # m
    double margin              # m of lateral clearance (corridor and veto)
    double lateral_time        # s for a lateral move in the simulation
    double reach               # s of travel (both agents) within which neighbours are gathered
    double lc_lookahead        # extra pure-pursuit lookahead while crossing (s of travel)


ctypedef struct PlanState:
    int on                     # 1: this IDM vehicle is planner-driven
    int choice                 # index of the winning proposal (offset * n_speeds + speed), -1 before the first plan
    double timer               # s until the next plan
    double speed_factor        # the winner's target speed (fraction of the speed limit)
    double lat_off             # the winner's lateral offset from its lane's centre (m, left positive)
    double score               # the winner's score
    long long stats[PLAN_STATS]


ctypedef struct Future:
    # A neighbour's constant-velocity future: position at t = 0, velocity, heading, half extents;
    # ``close``: already within the margin of the vehicle's body (its veto then uses the bare body).
    double x, y, vx, vy, c, s, hl, hw
    bint close


ctypedef struct Rollout:
    # What one proposal's simulation found.
    bint vetoed
    double first_hit           # s until its first at-fault contact (1e9: none)
    double progress            # m along the route
    double min_ttc             # s
    double comfort             # share of comfortable steps
    double lane_keep           # 1 - mean lateral distance from the present lane's centre (lane widths)


cdef inline int _gather(Agent* agents, Py_ssize_t n, Py_ssize_t i, double reach, double margin,
                        Future* fut, AgentGrid* grid) noexcept nogil:
    """The nearest agents that could meet vehicle i within ``reach`` seconds (both moving at their
    speed), at most PLAN_NEIGHBOURS, nearest first (ties in index order); those touching it now are
    left out, those within ``margin`` of its body marked ``close``. Candidates from ``grid`` where it
    answers (within the reach of the world's fastest and longest agent, in index order)."""
    cdef Agent* a = &agents[i]
    cdef Agent* b
    cdef Py_ssize_t j, q, m = -1
    cdef int k, cnt = 0
    cdef double d2[PLAN_NEIGHBOURS]
    cdef double dx, dy, r, dd, va = fabs(a.speed)
    cdef Future f
    if grid != NULL:
        r = ((va + grid.vmax) * reach + 0.5 * (a.length + grid.longest) + 5.0) * (1.0 + 1e-9)
        m = nbr_box_sorted(grid, agents, n, a.x - r, a.y - r, a.x + r, a.y + r)
    for q in range(n if m < 0 else m):
        j = q if m < 0 else grid.cand[q]
        if j == i:
            continue
        b = &agents[j]
        if not b.alive:
            continue
        dx = b.x - a.x
        dy = b.y - a.y
        r = (va + fabs(b.speed)) * reach + 0.5 * (a.length + b.length) + 5.0
        dd = dx * dx + dy * dy
        if dd > r * r:
            continue
        if obb_overlap_cs(a.x, a.y, a.cos_h, a.sin_h, 0.5 * a.length, 0.5 * a.width,
                          b.x, b.y, b.cos_h, b.sin_h, 0.5 * b.length, 0.5 * b.width):
            continue
        if cnt == PLAN_NEIGHBOURS and dd >= d2[cnt - 1]:
            continue
        f.x, f.y, f.c, f.s = b.x, b.y, b.cos_h, b.sin_h
        f.vx = b.speed * b.cos_h
        f.vy = b.speed * b.sin_h
        f.hl, f.hw = 0.5 * b.length, 0.5 * b.width
        f.close = obb_overlap_cs(a.x, a.y, a.cos_h, a.sin_h, 0.5 * a.length + margin, 0.5 * a.width + margin,
                                 b.x, b.y, b.cos_h, b.sin_h, f.hl, f.hw)
        k = cnt if cnt < PLAN_NEIGHBOURS else PLAN_NEIGHBOURS - 1
        while k > 0 and d2[k - 1] > dd:
            if k < PLAN_NEIGHBOURS:
                d2[k] = d2[k - 1]
                fut[k] = fut[k - 1]
            k -= 1
        d2[k] = dd
        fut[k] = f
        if cnt < PLAN_NEIGHBOURS:
            cnt += 1
    return cnt


cdef inline int _neighbour_lane(const MapC* m, Agent* a, int side) noexcept nogil:
    """The same-direction lane on ``side`` (+1 left, -1 right) the vehicle could move to, or -1:
    neither lane in an intersection, the neighbour running its way, beside it and not about to end
    (the tests of ``lanechange.lane_change``)."""
    cdef int lane = m.lane_left[a.lane] if side > 0 else m.lane_right[a.lane]
    cdef double s, fx, fy, tc, ts, d
    if lane < 0 or m.lane_inter[lane] >= 0 or m.lane_inter[a.lane] >= 0:
        return -1
    if not _lane_foot(m, lane, a.x, a.y, &s, &fx, &fy, &tc, &ts):
        return -1
    d = sqrt((a.x - fx) * (a.x - fx) + (a.y - fy) * (a.y - fy))
    if tc * a.cos_h + ts * a.sin_h < 0.87 or d > m.lane_width[a.lane] + m.lane_width[lane] or \
            s <= 0 or lane_length(m, lane) - s < a.length:
        return -1
    return lane


cdef inline bint _lateral_target(const MapC* m, Agent* a, double offset, int left, int right, int* lane,
                                 double* d1, double* residual) noexcept nogil:
    """Where a lateral offset (lane widths, left positive) puts the vehicle: the lane it moves to
    (``lane``), the target's lateral position from the present lane's centre (``d1``, m) and its
    offset from the new lane's centre (``residual``, m). False when the body would leave the drivable
    area: the present lane and the same-direction neighbours it could move to (``left``, ``right``,
    -1 for none; ``_neighbour_lane``)."""
    cdef int side = 0 if fabs(offset) <= 0.5 else (1 if offset > 0 else -1)
    cdef double w = m.lane_width[a.lane], wt, hi, lo, hw = 0.5 * a.width
    lane[0] = a.lane
    d1[0] = 0.0
    residual[0] = 0.0
    wt = w
    if side != 0:
        lane[0] = left if side > 0 else right
        if lane[0] < 0:
            return False
        wt = m.lane_width[lane[0]]
    residual[0] = (offset - side) * wt
    d1[0] = side * 0.5 * (w + wt) + residual[0]
    if offset == 0.0:
        return True  # the vehicle's own lane is drivable, whatever its width
    hi = 0.5 * w + (m.lane_width[left] if left >= 0 else 0.0)
    lo = -0.5 * w - (m.lane_width[right] if right >= 0 else 0.0)
    return d1[0] + hw <= hi + 1e-9 and d1[0] - hw >= lo - 1e-9


cdef inline void _pose(const MapC* m, const Route* r, Cursor* cur, double s, double d, double slope, double* x,
                       double* y, double* c, double* sn) noexcept nogil:
    """The body's centre and heading ``d`` metres left of the route at arc length ``s`` (not
    decreasing between calls with one cursor), drifting sideways ``slope`` metres per metre."""
    cdef double px, py, tc, ts, nrm
    _route_xy(m, r, cur, s, &px, &py)
    tc = m.lane_pts[3 * cur.q + 3] - m.lane_pts[3 * cur.q]
    ts = m.lane_pts[3 * cur.q + 4] - m.lane_pts[3 * cur.q + 1]
    nrm = sqrt(tc * tc + ts * ts)
    if nrm < 1e-9:
        tc, ts = 1.0, 0.0
    else:
        tc /= nrm
        ts /= nrm
    x[0] = px - d * ts
    y[0] = py + d * tc
    c[0] = tc - slope * ts
    sn[0] = ts + slope * tc
    nrm = sqrt(c[0] * c[0] + sn[0] * sn[0])
    c[0] /= nrm
    sn[0] /= nrm


cdef inline void _rollout(const MapC* m, Agent* a, const Route* route, const Future* fut, int nf,
                          const PlannerParams* pp, const double* cp, double d0, double d1, double v0, double T,
                          double amax, double bcomf, double s0, double delta, double max_decel,
                          Rollout* out) noexcept nogil:
    """Forward-simulate one proposal (lateral target ``d1`` m from the present lane's centre, IDM
    target speed ``v0`` m/s) from the vehicle's state; see the module header (step 3)."""
    cdef Cursor cur
    cdef int k, j, ok_steps = 0
    cdef double h = pp.resolution, t, u, d, dd, ddd, v = a.speed if a.speed > 0 else 0.0, v1, s = a.lane_s
    cdef double acc, prev_acc = a.a_long, gap, lead_v, x, y, c, sn, bx, by, dx, dy, lon, lat, elon, elat, cr, sr
    cdef double hl = 0.5 * a.length, hw = 0.5 * a.width, w = m.lane_width[a.lane], ttc, lane_dev = 0.0
    cdef double D = d1 - d0, Tl = pp.lateral_time
    cdef bint sideways = fabs(D) > 0.5
    out.vetoed = False
    out.first_hit = 1e9
    out.min_ttc = 1e9
    _cursor_start(m, route, &cur)
    for k in range(pp.n_steps):
        t = k * h
        u = t / Tl if t < Tl else 1.0
        d = d0 + D * u * u * (3.0 - 2.0 * u)
        dd = D * 6.0 * u * (1.0 - u) / Tl if t < Tl else 0.0
        ddd = D * (6.0 - 12.0 * u) / (Tl * Tl) if t < Tl else 0.0
        _pose(m, route, &cur, s, d, dd / (v if v > 1.0 else 1.0), &x, &y, &c, &sn)
        # At-fault contact now (step 0 is the present: touching agents were left out by _gather).
        gap = 1e9
        lead_v = 0.0
        for j in range(nf):
            bx = fut[j].x + fut[j].vx * t
            by = fut[j].y + fut[j].vy * t
            dx = bx - x
            dy = by - y
            lon = dx * c + dy * sn
            lat = -dx * sn + dy * c
            cr = fabs(fut[j].c * c + fut[j].s * sn)
            sr = fabs(fut[j].c * sn - fut[j].s * c)
            elon = fut[j].hl * cr + fut[j].hw * sr
            elat = fut[j].hl * sr + fut[j].hw * cr
            # Boxes apart by more than the margin along either axis of the vehicle cannot touch.
            if fabs(lat) - elat < hw + pp.margin and fabs(lon) - elon < hl + pp.margin and \
                    (lon > 0 or sideways) and k > 0 and obb_overlap_cs(
                    x, y, c, sn, hl, hw if fut[j].close else hw + pp.margin, bx, by, fut[j].c, fut[j].s,
                    fut[j].hl, fut[j].hw):
                if not out.vetoed:
                    out.vetoed = True
                    out.first_hit = t
            # The corridor's nearest box ahead is the IDM leader.
            if fabs(lat) - elat < hw + pp.margin and lon - elon - hl > -0.5 * hl and lon > 0:
                if lon - elon - hl < gap:
                    gap = lon - elon - hl
                    lead_v = fut[j].vx * c + fut[j].vy * sn
        if gap < 1e8 and v > lead_v:
            ttc = (gap if gap > 0 else 0.0) / (v - lead_v)
            if ttc < out.min_ttc:
                out.min_ttc = ttc
        acc = clip(idm_accel(v, v0, gap, lead_v, T, amax, bcomf, s0, delta), -max_decel, amax)
        if fabs(acc) <= cp[CP_COMF_ALONG] and fabs(acc - prev_acc) <= cp[CP_COMF_JLONG] * h and \
                fabs(ddd) <= cp[CP_COMF_ALAT]:
            ok_steps += 1
        prev_acc = acc
        lane_dev += fabs(d) / w if fabs(d) < w else 1.0
        v1 = v + acc * h
        if v1 < 0:
            v1 = 0.0
        s += 0.5 * (v + v1) * h
        v = v1
    out.progress = s - a.lane_s
    out.comfort = ok_steps / <double>pp.n_steps
    out.lane_keep = 1.0 - lane_dev / pp.n_steps


cdef inline void plan_step(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, PlanState* ps,
                           const PlannerParams* pp, const double* cp, double T, double amax, double bcomf,
                           double s0, double delta, double max_decel, Rng* rng, AgentGrid* grid=NULL) noexcept nogil:
    """Choose what planner vehicle i tracks until its next plan (the module header, steps 1-5).
    ``cp``: its class's parameter row; (T, amax, bcomf, s0, delta): its behaviour mode's IDM gains."""
    cdef Agent* a = &agents[i]
    cdef Future fut[PLAN_NEIGHBOURS]
    cdef Rollout ro[PLAN_MAX_OFFSETS * PLAN_MAX_SPEEDS]
    cdef int order[PLAN_MAX_OFFSETS]
    cdef int lanes[PLAN_MAX_OFFSETS]
    cdef double resid[PLAN_MAX_OFFSETS]
    cdef double target[PLAN_MAX_OFFSETS]
    cdef bint drivable[PLAN_MAX_OFFSETS]
    cdef Route route
    cdef int nf, oi, o, q, k, best = -1, lane, left, right
    cdef double x, y, z, hd, d0, d1, best_score = -1.0, max_prog = 0.0, prog, score, wsum, late = -2.0
    cdef double s, fx, fy, tc, ts, limit = m.lane_speed[a.lane]
    if a.route_lane < 0:
        a.route_lane = _route_next(m, rng, a.lane)
    nf = _gather(agents, n, i, pp.reach, pp.margin, fut, grid)
    _route_build(m, a, &route)
    lane_point(m, a.lane, a.lane_s, &x, &y, &z, &hd)
    d0 = -(a.x - x) * sin(hd) + (a.y - y) * cos(hd)
    left = _neighbour_lane(m, a, 1)
    right = _neighbour_lane(m, a, -1)
    # Evaluation order: the offsets are stored by size, the left one of a pair first (the overtaking
    # side in right-hand traffic); in left-hand traffic the right one of a pair goes first.
    for oi in range(pp.n_offsets):
        order[oi] = oi
        if m.handedness == 1 and oi > 0 and pp.offsets[oi] == -pp.offsets[oi - 1] and order[oi - 1] == oi - 1:
            order[oi - 1] = oi
            order[oi] = oi - 1
    for oi in range(pp.n_offsets):
        o = order[oi]
        drivable[oi] = _lateral_target(m, a, pp.offsets[o], left, right, &lanes[oi], &d1, &resid[oi])
        target[oi] = d1
        for q in range(pp.n_speeds):
            k = oi * pp.n_speeds + q
            if not drivable[oi]:
                ro[k].vetoed = True
                ro[k].first_hit = -1.0
                continue
            _rollout(m, a, &route, fut, nf, pp, cp, d0, d1, pp.speeds[q] * limit, T, amax, bcomf, s0, delta,
                     max_decel, &ro[k])
            if not ro[k].vetoed and ro[k].progress > max_prog:
                max_prog = ro[k].progress
    wsum = pp.w_progress + pp.w_ttc + pp.w_comfort + pp.w_lane
    for k in range(pp.n_offsets * pp.n_speeds):
        if ro[k].vetoed:
            continue
        prog = ro[k].progress / max_prog if max_prog >= pp.min_progress else 1.0
        score = (pp.w_progress * prog + pp.w_ttc * (1.0 if ro[k].min_ttc > pp.ttc_threshold else 0.0) +
                 pp.w_comfort * ro[k].comfort + pp.w_lane * ro[k].lane_keep) / wsum
        if score > best_score:
            best_score = score
            best = k
    ps.stats[PST_REPLANS] += 1
    if best < 0:
        # Every proposal vetoed: keep the lane (offset 0, stored first, is always drivable) at the
        # speed whose first contact comes latest (the slower on a tie).
        ps.stats[PST_ALL_VETOED] += 1
        for q in range(pp.n_speeds):
            if ro[q].first_hit >= late:
                late = ro[q].first_hit
                best = q
        best_score = 0.0
    oi = best // pp.n_speeds
    ps.choice = order[oi] * pp.n_speeds + best % pp.n_speeds
    ps.score = best_score
    ps.speed_factor = pp.speeds[best % pp.n_speeds]
    ps.lat_off = resid[oi]
    lane = lanes[oi]
    if fabs(target[oi] - d0) > 0.5:
        # A lateral move: pure pursuit with the lane change's longer lookahead makes it as gradual as
        # the simulated one (until the vehicle settles at its offset; lanechange.lane_change).
        a.lc_reach = pp.lc_lookahead
    if lane != a.lane and _lane_foot(m, lane, a.x, a.y, &s, &fx, &fy, &tc, &ts):
        a.lane = lane
        a.lane_s = s
        a.route_lane = _route_next(m, rng, lane)
        ps.stats[PST_LANE_CHANGES] += 1
