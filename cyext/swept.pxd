# cython: language_level=3
"""The reference driver's step 3c (``reference.pxd``): a long box centred on its lane swings its
corners out of a bend by about (length / 2)^2 / (2 R), which for a bus or a truck is more than the
lane leaves beside it. Where the predicted boxes along the lane's centre would touch a road edge or
a sidewalk (``rules.offroad``), the driver drives at a lateral offset whose predicted boxes do not."""

from libc.math cimport atan2
from common cimport Agent, MapC
from route cimport Sweep
from roadusers cimport IdmParams, Leader, idm_desired_accel
from rules cimport offroad


cdef enum:
    SWEPT_STEPS_MAX = 12  # 0.25 m steps of the offset at its bound (``swept_path`` <= 3 m, reference_driver.pxi)


cdef inline int _sweep_offroad_at(const MapC* m, const Agent* a, const Sweep* sw, double margin,
                                  double z_gate) noexcept nogil:
    """The first predicted pose (1..n) at which the agent's box, grown by ``margin`` metres on every
    side, would touch a road edge or a sidewalk (``rules.offroad``), or ``sw.n + 1`` when none does."""
    cdef Agent b = a[0]
    cdef int k
    b.length = a.length + 2.0 * margin
    b.width = a.width + 2.0 * margin
    for k in range(1, sw.n + 1):
        b.x = sw.x[k]
        b.y = sw.y[k]
        b.heading = atan2(sw.s[k], sw.c[k])
        if offroad(m, &b, z_gate):
            return k
    return sw.n + 1


cdef inline double _swept_search(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp_all,
                                 const IdmParams* p, const unsigned char* sl_state, double cap, double swept_path,
                                 double margin, int min_first, double z_gate, Sweep* sw, Leader* ld, double* acc,
                                 double* v0, bint* kept) noexcept nogil:
    """One search of ``swept_offset`` with boxes grown by ``margin``. Where no offset keeps every box
    on the road, the offset whose first touch lies furthest ahead is taken if that touch lies at pose
    ``min_first`` or later; otherwise nothing changes and ``kept`` is set False."""
    cdef int first = _sweep_offroad_at(m, &agents[i], sw, margin, z_gate), best_first, k, f, kmax, j, j0 = 0, j1
    cdef int side_k, step
    cdef double best_off = 0.0, off, v2
    cdef unsigned char ok[2 * SWEPT_STEPS_MAX + 1]
    cdef Sweep sw2
    cdef Leader ld2
    kept[0] = True
    if first > sw.n or swept_path <= 0.0:
        return 0.0
    kmax = <int>(swept_path / 0.25 + 1e-9)
    if kmax > SWEPT_STEPS_MAX:
        kmax = SWEPT_STEPS_MAX
    best_first = first
    ok[SWEPT_STEPS_MAX] = 0
    for k in range(1, kmax + 1):
        for side_k in range(2):
            j = k if side_k == 0 else -k
            off = 0.25 * j
            idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, off, cap, &sw2, &ld2, &v2)
            f = _sweep_offroad_at(m, &agents[i], &sw2, margin, z_gate)
            ok[SWEPT_STEPS_MAX + j] = f > sw2.n
            if f > sw2.n and j0 == 0:
                j0 = j  # the feasible offset nearest the centre (left first on a tie)
            if f > best_first:
                best_first = f
                best_off = off
    if j0 != 0:
        j1 = j0
        step = 1 if j0 > 0 else -1
        while -kmax <= j1 + step <= kmax and ok[SWEPT_STEPS_MAX + j1 + step]:
            j1 += step
        j = (j0 + j1) // 2 if j0 > 0 else -((-j0 - j1) // 2)
        best_off = 0.25 * j
    elif best_first < min_first:
        kept[0] = False
        return 0.0
    if best_off != 0.0:
        acc[0] = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, best_off, cap, sw, ld, v0)
    return best_off


cdef inline double swept_offset(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp_all,
                                const IdmParams* p, const unsigned char* sl_state, double cap, double swept_path,
                                double margin, double z_gate, Sweep* sw, Leader* ld, double* acc,
                                double* v0) noexcept nogil:
    """Step 3c: a long box centred on its lane swings its corners out of a bend by about
    (length / 2)^2 / (2 R), which for a bus or a truck is more than the lane leaves beside it. When
    the box would touch a road edge or a sidewalk at one of the predicted poses along its lane's
    centre (``sw``), the driver tries every lateral offset (steps of 0.25 m up to ``swept_path``,
    either side). Of the offsets whose predicted boxes all stay on the road it takes the middle of
    the run nearest the centre (the smallest such offset would leave no margin, and from one step to
    the next it flickers as the predicted poses move on, and the wheels with it); failing any, the
    one whose first touch lies furthest ahead. The plan is replaced with the one along it.
    ``margin``: the boxes are first grown by this much on every side (room for the wheels' tracking
    error: a 5 m car on a 10.7 m turnaround loop with 0.4 m to spare ran wide by more); where no
    offset keeps that room, with half of it; failing that, the offset that keeps the room furthest
    ahead if it keeps it through the first half of the predicted poses; else the boxes as they are (a
    long vehicle in a tight bend may have no room to spare). Returns the offset (m, + left)."""
    cdef bint kept = True
    cdef double off
    cdef double stage_margin[3]
    cdef int stage_first[3]
    cdef int k
    if margin > 0.0:
        # the margin kept all along, then half of it, then the margin kept through the first half of
        # the predicted poses (a touch further ahead is planned again as the agent gets nearer)
        stage_margin[0], stage_first[0] = margin, sw.n + 1
        stage_margin[1], stage_first[1] = 0.5 * margin, sw.n + 1
        stage_margin[2], stage_first[2] = margin, sw.n // 2 + 1
        for k in range(3):
            off = _swept_search(m, agents, n, i, cp_all, p, sl_state, cap, swept_path, stage_margin[k],
                                stage_first[k], z_gate, sw, ld, acc, v0, &kept)
            if kept:
                return off
    return _swept_search(m, agents, n, i, cp_all, p, sl_state, cap, swept_path, 0.0, 0, z_gate, sw, ld, acc, v0,
                         &kept)
