# cython: language_level=3
"""Signal controllers (TerraZero section 4.5): Christmas, NEMA dual-ring and round-robin.

Each world owns its controller state; the static plans (legs, NEMA phases) come from the map
(``terrazero_env.maps.signal_plan``). A tick advances timers by dt and writes every head's state
and each stop line's aggregated state (the most permissive of its heads; OFF without heads).
NEMA runs two rings per intersection: within the current barrier group each ring steps through its
own phases (green, yellow, all-red), each green drawn per phase (LogNormal around the configured
left or through green), independently of the other ring; a ring that has cleared its last phase
waits at the barrier, and only when both have do both start the next group's phases together (any
phase of one ring is compatible with any phase of the other in the same group, by the plan).
Round robin turns one leg at a time through green, yellow and all-red; Christmas cycles each stop
line on its own with LogNormal dwells.
"""

from libc.math cimport exp
from common cimport MapC, SIG_RED, SIG_YELLOW, SIG_GREEN, SIG_OFF
from rng cimport Rng, rng_uniform, rng_normal, rng_int

cdef enum:
    CTRL_CHRISTMAS = 0
    CTRL_NEMA = 1
    CTRL_ROUND_ROBIN = 2
    N_CONTROLLERS = 3

cdef enum:
    PHASE_GREEN = 0
    PHASE_YELLOW = 1
    PHASE_ALL_RED = 2

cdef enum:
    STAGE_LEFT = 0
    STAGE_THROUGH = 1
    STAGE_ALL = 2
    N_STAGE_KINDS = 3


ctypedef struct SigParams:
    int controller
    int replay_log            # worlds initialized from the log replay the map's logged head states
    double green_med, green_sig, yellow_med, yellow_sig, red_med, red_sig
    double left_green, through_green, yellow, all_red, perm_prob, nema_sigma


ctypedef struct SigState:
    unsigned char* head       # [G]
    unsigned char* sl         # [S]
    double* sl_timer          # [S] (Christmas)
    int* stage                # [2I] per (intersection, ring): NEMA phase (-1: at the barrier); round robin: leg (ring 0)
    unsigned char* phase      # [2I] interval of that phase: green, yellow, all-red
    double* timer             # [2I] seconds left in the interval (NEMA at the barrier: since its end, <= 0)
    int* barrier              # [I] NEMA: current barrier group
    unsigned char* perm       # [I] protected lefts flipped to permissive


cdef inline double _lognormal(Rng* rng, double median, double sigma) noexcept nogil:
    return median * exp(sigma * rng_normal(rng))



cdef inline int _n_units(const MapC* m, const SigParams* p, Py_ssize_t i) noexcept nogil:
    """Phases (NEMA) or legs (round robin) of intersection i."""
    if p.controller == CTRL_NEMA:
        return <int>(m.stage_off[i + 1] - m.stage_off[i])
    return <int>(m.leg_off[i + 1] - m.leg_off[i])


# ------------------------------------------------------------------------------ NEMA rings

cdef inline bint _skipped(const MapC* m, const SigState* s, Py_ssize_t i, int k) noexcept nogil:
    """A protected-left phase is skipped while the intersection's lefts run permissive."""
    return s.perm[i] and m.stage_kind[m.stage_off[i] + k] == STAGE_LEFT


cdef inline double _phase_green(const MapC* m, const SigParams* p, Py_ssize_t i, int k, Rng* rng) noexcept nogil:
    """Green of phase k drawn as it starts: LogNormal around the configured left or through green."""
    cdef double base = p.left_green if m.stage_kind[m.stage_off[i] + k] == STAGE_LEFT else p.through_green
    if p.nema_sigma > 0:
        return _lognormal(rng, base, p.nema_sigma)
    return base


cdef inline int _ring_next(const MapC* m, const SigState* s, Py_ssize_t i, int r, int k) noexcept nogil:
    """The ring's next phase after k (k = -1: its first) in the current barrier group, -1 when none."""
    cdef long long base = m.stage_off[i], q
    cdef int g = s.barrier[i]
    for q in range(base + k + 1, m.stage_off[i + 1]):
        if m.stage_barrier[q] > g:
            break
        if m.stage_barrier[q] == g and m.stage_ring[q] == r and not _skipped(m, s, i, <int>(q - base)):
            return <int>(q - base)
    return -1


cdef inline void _start_phase(const MapC* m, const SigParams* p, SigState* s, Rng* rng, Py_ssize_t i, int r,
                              int k, double carry) noexcept nogil:
    """Ring r of intersection i starts phase k (green) or, k = -1, waits at the barrier; ``carry``
    is the time (<= 0) already past the instant it starts."""
    cdef Py_ssize_t j = 2 * i + r
    s.stage[j] = k
    if k < 0:
        s.phase[j] = PHASE_ALL_RED
        s.timer[j] = carry
    else:
        s.phase[j] = PHASE_GREEN
        s.timer[j] = carry + _phase_green(m, p, i, k, rng)


cdef inline bint _clearance(const SigParams* p, SigState* s, Py_ssize_t j) noexcept nogil:
    """Unit j's interval is up: green turns yellow, yellow turns all-red (True); False after all-red,
    when the caller starts the next phase."""
    if s.phase[j] == PHASE_GREEN:
        s.phase[j] = PHASE_YELLOW
        s.timer[j] += p.yellow
        return True
    if s.phase[j] == PHASE_YELLOW:
        s.phase[j] = PHASE_ALL_RED
        s.timer[j] += p.all_red
        return True
    return False


cdef inline void _ring_advance(const MapC* m, const SigParams* p, SigState* s, Rng* rng, Py_ssize_t i, int r) noexcept nogil:
    """Run ring r's intervals whose time is up; after its group's last all-red it waits (stage -1)
    with its timer counting the time since."""
    cdef Py_ssize_t j = 2 * i + r
    while s.stage[j] >= 0 and s.timer[j] <= 0:
        if not _clearance(p, s, j):
            _start_phase(m, p, s, rng, i, r, _ring_next(m, s, i, r, s.stage[j]), s.timer[j])


cdef inline void _cross_barrier(const MapC* m, const SigParams* p, SigState* s, Rng* rng, Py_ssize_t i) noexcept nogil:
    """Both rings are at the barrier: the next group with a phase to run starts on both rings at
    the instant the later ring arrived."""
    cdef int n_groups = m.stage_barrier[m.stage_off[i + 1] - 1] + 1, tries, r
    cdef double carry = s.timer[2 * i] if s.timer[2 * i] > s.timer[2 * i + 1] else s.timer[2 * i + 1]
    for tries in range(n_groups):
        s.barrier[i] = (s.barrier[i] + 1) % n_groups
        for r in range(2):
            _start_phase(m, p, s, rng, i, r, _ring_next(m, s, i, r, -1), carry)
        if s.stage[2 * i] >= 0 or s.stage[2 * i + 1] >= 0:
            return


cdef inline void _nema_reset(const MapC* m, const SigParams* p, SigState* s, Rng* rng, Py_ssize_t i) noexcept nogil:
    """A random barrier group; in it each ring at a random phase of its own, part-way through."""
    cdef int n = _n_units(m, p, i), r, k, count, pick
    cdef Py_ssize_t j
    s.barrier[i] = 0
    for r in range(2):
        s.stage[2 * i + r] = -1
        s.phase[2 * i + r] = PHASE_ALL_RED
        s.timer[2 * i + r] = 0.0
    if n == 0:
        return
    s.barrier[i] = rng_int(rng, m.stage_barrier[m.stage_off[i + 1] - 1] + 1)
    for r in range(2):
        count = 0
        k = _ring_next(m, s, i, r, -1)
        while k >= 0:
            count += 1
            k = _ring_next(m, s, i, r, k)
        if count == 0:
            continue
        pick = rng_int(rng, count)
        k = _ring_next(m, s, i, r, -1)
        while pick > 0:
            k = _ring_next(m, s, i, r, k)
            pick -= 1
        j = 2 * i + r
        _start_phase(m, p, s, rng, i, r, k, 0.0)
        s.timer[j] *= rng_uniform(rng)
    if s.stage[2 * i] < 0 and s.stage[2 * i + 1] < 0:
        _cross_barrier(m, p, s, rng, i)


cdef inline void _nema_tick(const MapC* m, const SigParams* p, SigState* s, Rng* rng, Py_ssize_t i, double dt) noexcept nogil:
    s.timer[2 * i] -= dt
    s.timer[2 * i + 1] -= dt
    while True:
        _ring_advance(m, p, s, rng, i, 0)
        _ring_advance(m, p, s, rng, i, 1)
        if s.stage[2 * i] >= 0 or s.stage[2 * i + 1] >= 0:
            return
        _cross_barrier(m, p, s, rng, i)


# ------------------------------------------------------------------------------ all controllers

cdef inline void _paint(const MapC* m, const SigParams* p, SigState* s) noexcept nogil:
    """Head states from the controller state, then stop-line aggregates."""
    cdef Py_ssize_t i, h, q, sl, first, stg, j
    cdef int r
    cdef unsigned char colour
    if p.controller == CTRL_CHRISTMAS:
        for h in range(m.n_heads):
            s.head[h] = s.sl[m.head_sl[h]]
    else:
        for h in range(m.n_heads):
            s.head[h] = SIG_RED
        for i in range(m.n_inter):
            if _n_units(m, p, i) == 0:
                continue
            for r in range(2 if p.controller == CTRL_NEMA else 1):
                j = 2 * i + r
                if s.stage[j] < 0 or s.phase[j] == PHASE_ALL_RED:
                    continue
                colour = SIG_GREEN if s.phase[j] == PHASE_GREEN else SIG_YELLOW
                if p.controller == CTRL_NEMA:
                    stg = m.stage_off[i] + s.stage[j]
                    for q in range(m.stage_head_off[stg], m.stage_head_off[stg + 1]):
                        s.head[m.stage_heads[q]] = colour
                    if s.perm[i]:
                        for q in range(m.stage_perm_off[stg], m.stage_perm_off[stg + 1]):
                            s.head[m.stage_perm[q]] = colour
                else:
                    first = m.leg_off[i] + s.stage[j]
                    for q in range(m.leg_head_off[first], m.leg_head_off[first + 1]):
                        s.head[m.leg_heads[q]] = colour
    if p.controller != CTRL_CHRISTMAS:
        for sl in range(m.n_stop_lines):
            s.sl[sl] = SIG_OFF
        for h in range(m.n_heads):
            sl = m.head_sl[h]
            if s.sl[sl] == SIG_OFF or s.head[h] > s.sl[sl]:
                s.sl[sl] = s.head[h]


cdef inline void signals_reset(const MapC* m, const SigParams* p, SigState* s, Rng* rng) noexcept nogil:
    """Randomized initial phase per stop line (Christmas) or per intersection, and the
    per-intersection draw that flips protected lefts to permissive."""
    cdef Py_ssize_t sl, h, i, j
    cdef double u
    cdef int n, k
    for sl in range(m.n_stop_lines):
        s.sl[sl] = SIG_OFF
        s.sl_timer[sl] = 0.0
    for h in range(m.n_heads):
        sl = m.head_sl[h]
        if s.sl[sl] == SIG_OFF:
            u = rng_uniform(rng)
            s.sl[sl] = SIG_GREEN if u < 0.4 else (SIG_YELLOW if u < 0.5 else SIG_RED)
            if s.sl[sl] == SIG_GREEN:
                s.sl_timer[sl] = rng_uniform(rng) * _lognormal(rng, p.green_med, p.green_sig)
            elif s.sl[sl] == SIG_YELLOW:
                s.sl_timer[sl] = rng_uniform(rng) * _lognormal(rng, p.yellow_med, p.yellow_sig)
            else:
                s.sl_timer[sl] = rng_uniform(rng) * _lognormal(rng, p.red_med, p.red_sig)
    for i in range(m.n_inter):
        s.perm[i] = 1 if rng_uniform(rng) < p.perm_prob else 0
        if p.controller == CTRL_NEMA:
            _nema_reset(m, p, s, rng, i)
            continue
        # Christmas draws these too (unused) so its random stream is unchanged.
        n = _n_units(m, p, i)
        j = 2 * i
        s.stage[j] = 0
        s.phase[j] = PHASE_GREEN
        s.timer[j] = 0.0
        if n > 0:
            k = rng_int(rng, n)
            s.stage[j] = k
            s.timer[j] = rng_uniform(rng) * p.through_green
    _paint(m, p, s)


cdef inline void signals_tick(const MapC* m, const SigParams* p, SigState* s, Rng* rng, double dt) noexcept nogil:
    cdef Py_ssize_t sl, i, j
    if p.controller == CTRL_CHRISTMAS:
        for sl in range(m.n_stop_lines):
            if s.sl[sl] == SIG_OFF:
                continue
            s.sl_timer[sl] -= dt
            while s.sl_timer[sl] <= 0:
                if s.sl[sl] == SIG_GREEN:
                    s.sl[sl] = SIG_YELLOW
                    s.sl_timer[sl] += _lognormal(rng, p.yellow_med, p.yellow_sig)
                elif s.sl[sl] == SIG_YELLOW:
                    s.sl[sl] = SIG_RED
                    s.sl_timer[sl] += _lognormal(rng, p.red_med, p.red_sig)
                else:
                    s.sl[sl] = SIG_GREEN
                    s.sl_timer[sl] += _lognormal(rng, p.green_med, p.green_sig)
    else:
        for i in range(m.n_inter):
            if _n_units(m, p, i) == 0:
                continue
            if p.controller == CTRL_NEMA:
                _nema_tick(m, p, s, rng, i, dt)
                continue
            j = 2 * i
            s.timer[j] -= dt
            while s.timer[j] <= 0:
                if not _clearance(p, s, j):
                    s.stage[j] = (s.stage[j] + 1) % _n_units(m, p, i)
                    s.phase[j] = PHASE_GREEN
                    s.timer[j] += p.through_green
    _paint(m, p, s)


cdef inline void signals_replay(const MapC* m, SigState* s, Py_ssize_t t) noexcept nogil:
    """Heads take the map's logged state at step t (the last logged state once the log ends) and
    stop lines the most permissive of their heads that the log knows (OFF where it knows none); the
    controller's own state is left as it is."""
    cdef Py_ssize_t h, sl, T = m.head_log_steps
    cdef unsigned char v
    if T <= 0:
        return
    if t >= T:
        t = T - 1
    if t < 0:
        t = 0
    for sl in range(m.n_stop_lines):
        s.sl[sl] = SIG_OFF
    for h in range(m.n_heads):
        v = m.head_log[h * T + t]
        s.head[h] = v
        if v == SIG_OFF:
            continue
        sl = m.head_sl[h]
        if s.sl[sl] == SIG_OFF or v > s.sl[sl]:
            s.sl[sl] = v
