# cython: language_level=3
"""Reciprocal collision avoidance for pedestrians (ORCA; van den Berg, Guy, Lin and Manocha 2011,
"Reciprocal n-body collision avoidance").

Each pedestrian is a disc with a current and a preferred velocity. For every neighbour within the
neighbour distance the velocity obstacle over a time horizon ``tau`` (the velocities that lead to
contact within ``tau``) gives one half-plane of permitted velocities: the smallest change ``u`` of
the relative velocity that leaves the obstacle, shared between the two (each takes ``share`` of
it: 0.5 between two ORCA walkers, 1.0 against an agent that does not avoid). The new velocity is the
one nearest the preferred velocity inside every half-plane and the disc of the maximum speed, a
2-D linear program solved incrementally (``orca_solve``: one 1-D program per constraint line, in
random-free insertion order); when the half-planes leave no room it minimises the largest
violation instead (the paper's section 5.2, a 3-D program solved as a sequence of 2-D ones).

A line is (px, py, dx, dy): a point and a unit direction; its permitted side is the left one,
``det(d, v - p) >= 0``. Everything is ``noexcept nogil`` and allocation-free.
"""

from libc.math cimport sqrt, fabs

cdef enum:
    ORCA_MAX_LINES = 24        # neighbours taken into one program (the nearest ones)

ctypedef struct OrcaLine:
    double px, py              # a point on the line (m/s)
    double dx, dy              # its unit direction; permitted velocities lie on its left


cdef inline double _det(double ax, double ay, double bx, double by) noexcept nogil:
    return ax * by - ay * bx


cdef inline void orca_line(double rpx, double rpy, double rvx, double rvy, double radius, double tau,
                           double dt, double vx, double vy, double share, OrcaLine* ln) noexcept nogil:
    """The half-plane of velocities of an agent at velocity (vx, vy) that avoids a neighbour at
    relative position (rpx, rpy) = neighbour - agent with relative velocity (rvx, rvy) = agent -
    neighbour, for combined radius ``radius`` over horizon ``tau`` (s). Already overlapping, the
    agent is pushed apart within one step ``dt``. ``share`` of the escape goes to this agent."""
    cdef double d2 = rpx * rpx + rpy * rpy, r2 = radius * radius, inv_tau = 1.0 / tau
    cdef double wx, wy, w2, wl, dot, leg, ux, uy, ddx, ddy, s, inv_dt
    if d2 > r2:
        # w: relative velocity seen from the centre of the truncation disc.
        wx = rvx - inv_tau * rpx
        wy = rvy - inv_tau * rpy
        w2 = wx * wx + wy * wy
        dot = wx * rpx + wy * rpy
        if dot < 0.0 and dot * dot > r2 * w2:
            # Nearest boundary is the truncation arc.
            wl = sqrt(w2)
            wx /= wl
            wy /= wl
            ddx, ddy = wy, -wx
            s = radius * inv_tau - wl
            ux, uy = s * wx, s * wy
        else:
            # Nearest boundary is one of the two legs of the cone.
            leg = sqrt(d2 - r2)
            if _det(rpx, rpy, wx, wy) > 0.0:
                ddx = (rpx * leg - rpy * radius) / d2
                ddy = (rpx * radius + rpy * leg) / d2
            else:
                ddx = -(rpx * leg + rpy * radius) / d2
                ddy = -(-rpx * radius + rpy * leg) / d2
            s = rvx * ddx + rvy * ddy
            ux = s * ddx - rvx
            uy = s * ddy - rvy
    else:
        # Overlapping: leave the disc of the combined radius within one step.
        inv_dt = 1.0 / dt
        wx = rvx - inv_dt * rpx
        wy = rvy - inv_dt * rpy
        wl = sqrt(wx * wx + wy * wy)
        if wl < 1e-9:
            wx, wy, wl = -rpx, -rpy, sqrt(d2) + 1e-9
        wx /= wl
        wy /= wl
        ddx, ddy = wy, -wx
        s = radius * inv_dt - wl
        ux, uy = s * wx, s * wy
    ln.px = vx + share * ux
    ln.py = vy + share * uy
    ln.dx = ddx
    ln.dy = ddy


cdef inline bint _lp1(const OrcaLine* lines, int i, double vmax, double optx, double opty, bint dir_opt,
                      double* rx, double* ry) noexcept nogil:
    """The best point on line i within the speed disc and the half-planes of lines 0..i-1 (nearest
    to opt, or furthest along opt when ``dir_opt``). False when that segment is empty."""
    cdef const OrcaLine* li = &lines[i]
    cdef const OrcaLine* lj
    cdef double dot = li.px * li.dx + li.py * li.dy
    cdef double disc = dot * dot + vmax * vmax - (li.px * li.px + li.py * li.py)
    cdef double sq, tl, tr, den, num, t
    cdef int j
    if disc < 0.0:
        return False
    sq = sqrt(disc)
    tl = -dot - sq
    tr = -dot + sq
    for j in range(i):
        lj = &lines[j]
        den = _det(li.dx, li.dy, lj.dx, lj.dy)
        num = _det(lj.dx, lj.dy, li.px - lj.px, li.py - lj.py)
        if fabs(den) <= 1e-9:
            if num < 0.0:
                return False  # parallel and on the forbidden side of line j
            continue
        t = num / den
        if den >= 0.0:
            if t < tr:
                tr = t
        elif t > tl:
            tl = t
        if tl > tr:
            return False
    if dir_opt:
        t = tr if optx * li.dx + opty * li.dy > 0.0 else tl
    else:
        t = li.dx * (optx - li.px) + li.dy * (opty - li.py)
        if t < tl:
            t = tl
        elif t > tr:
            t = tr
    rx[0] = li.px + t * li.dx
    ry[0] = li.py + t * li.dy
    return True


cdef inline int _lp2(const OrcaLine* lines, int n, double vmax, double optx, double opty, bint dir_opt,
                     double* rx, double* ry) noexcept nogil:
    """Incremental 2-D program: the velocity nearest opt (or furthest along it) in the speed disc
    and every half-plane. Returns n on success, else the index of the first line it could not meet
    (the result then satisfies lines before it)."""
    cdef double l
    cdef int i
    if dir_opt:
        rx[0] = optx * vmax
        ry[0] = opty * vmax
    elif optx * optx + opty * opty > vmax * vmax:
        l = sqrt(optx * optx + opty * opty)
        rx[0] = optx / l * vmax
        ry[0] = opty / l * vmax
    else:
        rx[0] = optx
        ry[0] = opty
    for i in range(n):
        if _det(lines[i].dx, lines[i].dy, lines[i].px - rx[0], lines[i].py - ry[0]) > 0.0:
            if not _lp1(lines, i, vmax, optx, opty, dir_opt, rx, ry):
                return i
    return n


cdef inline void _lp3(const OrcaLine* lines, int n, int begin, double vmax, double* rx, double* ry) noexcept nogil:
    """Infeasible program: the velocity that minimises the largest violation of lines begin..n-1
    (each failing line in turn is met by a 2-D program over the bisectors of it and the lines
    before it, whose optimum direction is its inward normal)."""
    cdef OrcaLine proj[ORCA_MAX_LINES]
    cdef double dist = 0.0, den, t, ux, uy, tx, ty, l
    cdef int i, j, m
    for i in range(begin, n):
        if _det(lines[i].dx, lines[i].dy, lines[i].px - rx[0], lines[i].py - ry[0]) <= dist:
            continue
        m = 0
        for j in range(i):
            den = _det(lines[i].dx, lines[i].dy, lines[j].dx, lines[j].dy)
            if fabs(den) <= 1e-9:
                if lines[i].dx * lines[j].dx + lines[i].dy * lines[j].dy > 0.0:
                    continue  # same direction: j adds nothing
                proj[m].px = 0.5 * (lines[i].px + lines[j].px)
                proj[m].py = 0.5 * (lines[i].py + lines[j].py)
            else:
                t = _det(lines[j].dx, lines[j].dy, lines[i].px - lines[j].px, lines[i].py - lines[j].py) / den
                proj[m].px = lines[i].px + t * lines[i].dx
                proj[m].py = lines[i].py + t * lines[i].dy
            ux = lines[j].dx - lines[i].dx
            uy = lines[j].dy - lines[i].dy
            l = sqrt(ux * ux + uy * uy)
            if l <= 1e-9:
                continue
            proj[m].dx = ux / l
            proj[m].dy = uy / l
            m += 1
        tx, ty = rx[0], ry[0]
        if _lp2(proj, m, vmax, -lines[i].dy, lines[i].dx, True, rx, ry) < m:
            rx[0], ry[0] = tx, ty  # numerical corner case: keep the previous answer
        dist = _det(lines[i].dx, lines[i].dy, lines[i].px - rx[0], lines[i].py - ry[0])


cdef inline bint orca_solve(const OrcaLine* lines, int n, double vmax, double prefx, double prefy,
                            double* vx, double* vy) noexcept nogil:
    """The permitted velocity nearest (prefx, prefy) with speed at most vmax; True when every
    half-plane could be met, False when the least-violation fallback answered."""
    cdef int fail = _lp2(lines, n, vmax, prefx, prefy, False, vx, vy)
    if fail < n:
        _lp3(lines, n, fail, vmax, vx, vy)
        return False
    return True


cdef inline double half_plane_violation(const OrcaLine* ln, double vx, double vy) noexcept nogil:
    """How far (m/s) velocity (vx, vy) lies on the forbidden side of a line (<= 0: permitted)."""
    return _det(ln.dx, ln.dy, ln.px - vx, ln.py - vy)


cdef inline bint orca_velocity(double px, double py, double vx, double vy, double r, const double* nb, int m,
                               double tau, double dt, double vmax, double prefx, double prefy,
                               double* out_x, double* out_y) noexcept nogil:
    """One agent's ORCA velocity. ``nb``: ``m`` neighbour rows (x, y, vx, vy, radius, share), at
    most ORCA_MAX_LINES, nearest first. Returns whether every half-plane was met."""
    cdef OrcaLine lines[ORCA_MAX_LINES]
    cdef int k
    if m > ORCA_MAX_LINES:
        m = ORCA_MAX_LINES
    for k in range(m):
        orca_line(nb[6 * k] - px, nb[6 * k + 1] - py, vx - nb[6 * k + 2], vy - nb[6 * k + 3], r + nb[6 * k + 4],
                  tau, dt, vx, vy, nb[6 * k + 5], &lines[k])
    return orca_solve(lines, m, vmax, prefx, prefy, out_x, out_y)


cdef inline int orca_insert(double* nb, double* nd2, int m, double d2, double x, double y, double vx, double vy,
                            double r, double share) noexcept nogil:
    """Insert a neighbour into ``nb`` (rows as in ``orca_velocity``) kept sorted by squared distance
    ``nd2``, holding at most ORCA_MAX_LINES (the furthest drops out). Returns the new count."""
    cdef int k = m if m < ORCA_MAX_LINES else ORCA_MAX_LINES - 1
    if m >= ORCA_MAX_LINES and d2 >= nd2[ORCA_MAX_LINES - 1]:
        return m
    while k > 0 and nd2[k - 1] > d2:
        nd2[k] = nd2[k - 1]
        nb[6 * k], nb[6 * k + 1], nb[6 * k + 2] = nb[6 * k - 6], nb[6 * k - 5], nb[6 * k - 4]
        nb[6 * k + 3], nb[6 * k + 4], nb[6 * k + 5] = nb[6 * k - 3], nb[6 * k - 2], nb[6 * k - 1]
        k -= 1
    nd2[k] = d2
    nb[6 * k], nb[6 * k + 1], nb[6 * k + 2], nb[6 * k + 3], nb[6 * k + 4], nb[6 * k + 5] = x, y, vx, vy, r, share
    return m + 1 if m < ORCA_MAX_LINES else m
