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


cdef inline int _sweep_offroad_at(const MapC* m, const Agent* a, const Sweep* sw, double z_gate) noexcept nogil:
    """The first predicted pose (1..n) at which the agent's box would touch a road edge or a
    sidewalk (``rules.offroad``), or ``sw.n + 1`` when none does."""
    cdef Agent b = a[0]
    cdef int k
    for k in range(1, sw.n + 1):
        b.x = sw.x[k]
        b.y = sw.y[k]
        b.heading = atan2(sw.s[k], sw.c[k])
        if offroad(m, &b, z_gate):
            return k
    return sw.n + 1


cdef inline double swept_offset(const MapC* m, Agent* agents, Py_ssize_t n, Py_ssize_t i, const double* cp_all,
                                const IdmParams* p, const unsigned char* sl_state, double cap, double swept_path,
                                double z_gate, Sweep* sw, Leader* ld, double* acc, double* v0) noexcept nogil:
    """Step 3c: a long box centred on its lane swings its corners out of a bend by about
    (length / 2)^2 / (2 R), which for a bus or a truck is more than the lane leaves beside it. When
    the box would touch a road edge or a sidewalk at one of the predicted poses along its lane's
    centre (``sw``), the driver tries every lateral offset (steps of 0.25 m up to ``swept_path``,
    either side). Of the offsets whose predicted boxes all stay on the road it takes the middle of
    the run nearest the centre (the smallest such offset would leave no margin, and from one step to
    the next it flickers as the predicted poses move on, and the wheels with it); failing any, the
    one whose first touch lies furthest ahead. The plan is replaced with the one along it. Returns
    the offset (m, + left)."""
    cdef int first = _sweep_offroad_at(m, &agents[i], sw, z_gate), best_first, k, f, kmax, j, j0 = 0, j1
    cdef int side_k, step
    cdef double best_off = 0.0, off, a2, v2
    cdef unsigned char ok[2 * SWEPT_STEPS_MAX + 1]
    cdef Sweep sw2
    cdef Leader ld2
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
            f = _sweep_offroad_at(m, &agents[i], &sw2, z_gate)
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
    if best_off != 0.0:
        acc[0] = idm_desired_accel(m, agents, n, i, cp_all, p, sl_state, -1.0, best_off, cap, sw, ld, v0)
    return best_off
