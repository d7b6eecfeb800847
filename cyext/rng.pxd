# cython: language_level=3
"""Per-world random numbers: xoshiro256** seeded through splitmix64.

Every world owns one generator state, so a world's rollout depends only on its own seed, never on
which other worlds share the batch or on thread scheduling.
"""

from libc.stdint cimport uint64_t
from libc.math cimport log, sqrt, cos

ctypedef struct Rng:
    uint64_t s[4]


cdef inline uint64_t _rotl(uint64_t x, int k) noexcept nogil:
    return (x << k) | (x >> (64 - k))


cdef inline uint64_t splitmix64(uint64_t* state) noexcept nogil:
    state[0] += <uint64_t>0x9E3779B97F4A7C15ULL
    cdef uint64_t z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t>0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * <uint64_t>0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline void rng_seed(Rng* r, uint64_t seed) noexcept nogil:
    cdef uint64_t sm = seed
    cdef int i
    for i in range(4):
        r.s[i] = splitmix64(&sm)


cdef inline uint64_t rng_next(Rng* r) noexcept nogil:
    cdef uint64_t result = _rotl(r.s[1] * 5, 7) * 9
    cdef uint64_t t = r.s[1] << 17
    r.s[2] ^= r.s[0]
    r.s[3] ^= r.s[1]
    r.s[1] ^= r.s[2]
    r.s[0] ^= r.s[3]
    r.s[2] ^= t
    r.s[3] = _rotl(r.s[3], 45)
    return result


cdef inline double rng_uniform(Rng* r) noexcept nogil:
    """Uniform in [0, 1) with 53 random bits."""
    return (rng_next(r) >> 11) * (1.0 / 9007199254740992.0)


cdef inline double rng_range(Rng* r, double lo, double hi) noexcept nogil:
    return lo + (hi - lo) * rng_uniform(r)


cdef inline double rng_episode_value(Rng* r, double lo, double hi) noexcept nogil:
    """A per-episode value from its configured range; a fixed value (lo == hi) draws nothing, so
    configs without ranges keep their random streams."""
    return rng_range(r, lo, hi) if hi > lo else lo


cdef inline Py_ssize_t rng_int(Rng* r, Py_ssize_t n) noexcept nogil:
    """Uniform integer in [0, n); n >= 1."""
    return <Py_ssize_t>(rng_uniform(r) * n)


cdef inline double rng_normal(Rng* r) noexcept nogil:
    """Standard normal (Box-Muller)."""
    cdef double u1 = rng_uniform(r)
    cdef double u2 = rng_uniform(r)
    if u1 < 1e-300:
        u1 = 1e-300
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2)
