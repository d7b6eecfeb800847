# cython: language_level=3
"""The Intelligent Driver Model's acceleration law (Treiber et al. 2000), on its own so that both the
IDM step (``roadusers.pxd``) and the lane-change safety check (``lanechange.pxd``, which judges the
braking a change would impose on the new follower) evaluate the one law."""

from libc.math cimport sqrt, pow


cdef inline double idm_accel(double v, double v0, double gap, double lead_v, double T, double amax,
                             double bcomf, double s0, double delta) noexcept nogil:
    """The Intelligent Driver Model (Treiber et al. 2000): free-road term
    amax (1 - (v / v0)^delta) (-bcomf when the desired speed v0 is 0), less the interaction term
    amax (s* / gap)^2 with the desired gap s* = max(s0, s0 + v T + v (v - lead_v) / (2 sqrt(amax bcomf)))
    when there is a leader (``gap`` < 1e8 m; floored at 0.05 m). Units: m, s, m/s, m/s^2."""
    cdef double acc = amax * (1.0 - pow(v / v0, delta)) if v0 > 0 else -bcomf
    cdef double s_star
    if gap < 1e8:
        s_star = s0 + v * T + v * (v - lead_v) / (2.0 * sqrt(amax * bcomf))
        if s_star < s0:
            s_star = s0
        acc -= amax * (s_star / (gap if gap > 0.05 else 0.05)) ** 2
    return acc
