# cython: language_level=3
"""Signal controllers (TerraZero section 4.5): Christmas, NEMA dual-ring and round-robin.

Each world owns its controller state; the static plans (legs, NEMA stages) come from the map
(``terrazero_env.maps.signal_plan``). A tick advances timers by dt and writes every head's state
and each stop line's aggregated state (the most permissive of its heads; OFF without heads).
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
    double green_med, green_sig, yellow_med, yellow_sig, red_med, red_sig
    double left_green, through_green, yellow, all_red, perm_prob


ctypedef struct SigState:
    unsigned char* head       # [G]
    unsigned char* sl         # [S]
    double* sl_timer          # [S] (Christmas)
    int* stage                # [I] current stage (NEMA) or leg (round robin)
    unsigned char* phase      # [I]
    double* timer             # [I]
    unsigned char* perm       # [I] protected lefts flipped to permissive


cdef inline double _lognormal(Rng* rng, double median, double sigma) noexcept nogil:
    return median * exp(sigma * rng_normal(rng))


cdef inline int _n_units(const MapC* m, const SigParams* p, Py_ssize_t i) noexcept nogil:
    """Stages (NEMA) or legs (round robin) of intersection i."""
    if p.controller == CTRL_NEMA:
        return <int>(m.stage_off[i + 1] - m.stage_off[i])
    return <int>(m.leg_off[i + 1] - m.leg_off[i])


cdef inline bint _skipped(const MapC* m, const SigParams* p, const SigState* s, Py_ssize_t i, int k) noexcept nogil:
    return p.controller == CTRL_NEMA and s.perm[i] and m.stage_kind[m.stage_off[i] + k] == STAGE_LEFT


cdef inline double _green_time(const MapC* m, const SigParams* p, Py_ssize_t i, int k) noexcept nogil:
    if p.controller == CTRL_NEMA and m.stage_kind[m.stage_off[i] + k] == STAGE_LEFT:
        return p.left_green
    return p.through_green


cdef inline int _next_unit(const MapC* m, const SigParams* p, const SigState* s, Py_ssize_t i, int k) noexcept nogil:
    cdef int n = _n_units(m, p, i), tries
    for tries in range(n):
        k = (k + 1) % n
        if not _skipped(m, p, s, i, k):
            return k
    return k


cdef inline void _paint(const MapC* m, const SigParams* p, SigState* s) noexcept nogil:
    """Head states from the controller state, then stop-line aggregates."""
    cdef Py_ssize_t i, h, q, sl, first, stg
    cdef int k
    cdef unsigned char colour
    if p.controller == CTRL_CHRISTMAS:
        for h in range(m.n_heads):
            s.head[h] = s.sl[m.head_sl[h]]
    else:
        for h in range(m.n_heads):
            s.head[h] = SIG_RED
        for i in range(m.n_inter):
            if _n_units(m, p, i) == 0 or s.phase[i] == PHASE_ALL_RED:
                continue
            colour = SIG_GREEN if s.phase[i] == PHASE_GREEN else SIG_YELLOW
            k = s.stage[i]
            if p.controller == CTRL_NEMA:
                stg = m.stage_off[i] + k
                for q in range(m.stage_head_off[stg], m.stage_head_off[stg + 1]):
                    s.head[m.stage_heads[q]] = colour
                if s.perm[i]:
                    for q in range(m.stage_perm_off[stg], m.stage_perm_off[stg + 1]):
                        s.head[m.stage_perm[q]] = colour
            else:
                first = m.leg_off[i] + k
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
    cdef Py_ssize_t sl, h, i
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
        n = _n_units(m, p, i)
        s.stage[i] = 0
        s.phase[i] = PHASE_GREEN
        s.timer[i] = 0.0
        if n > 0:
            k = rng_int(rng, n)
            if _skipped(m, p, s, i, k):
                k = _next_unit(m, p, s, i, k)
            s.stage[i] = k
            s.timer[i] = rng_uniform(rng) * _green_time(m, p, i, k)
    _paint(m, p, s)


cdef inline void signals_tick(const MapC* m, const SigParams* p, SigState* s, Rng* rng, double dt) noexcept nogil:
    cdef Py_ssize_t sl, h, i
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
            s.timer[i] -= dt
            while s.timer[i] <= 0:
                if s.phase[i] == PHASE_GREEN:
                    s.phase[i] = PHASE_YELLOW
                    s.timer[i] += p.yellow
                elif s.phase[i] == PHASE_YELLOW:
                    s.phase[i] = PHASE_ALL_RED
                    s.timer[i] += p.all_red
                else:
                    s.stage[i] = _next_unit(m, p, s, i, s.stage[i])
                    s.phase[i] = PHASE_GREEN
                    s.timer[i] += _green_time(m, p, i, s.stage[i])
    _paint(m, p, s)
