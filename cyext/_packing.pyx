# cython: language_level=3
"""terrazero_env._packing: the policy's entity packing on the CPU, in one compiled pass per group.

The Deep Sets encoder (``agents/policies.py``) runs its per-entity MLP on the present entities only: the
rows of a group's ``[count, width]`` block that are not all zero. In torch that takes a comparison of
the whole block, a reduction, a ``nonzero`` and a gather, each a pass over the observation and most of
them allocating a temporary of its size; the padding is most of the block. :func:`pack_present` does it
in two tight passes without the GIL: the first finds the present entities (stopping at the first
non-zero feature of each), the second copies them out. Same rows, same order (row-major), as
``(block != 0).any(-1).nonzero()``.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

cnp.import_array()


def pack_present(const float[:, ::1] obs, Py_ssize_t start, Py_ssize_t count, Py_ssize_t width):
    """The present entities of one group of ``obs`` (float32 ``[B, D]``, C-contiguous): the entities
    ``obs[b, start + e * width : start + (e + 1) * width]``, ``e < count``, with a non-zero feature.

    Returns ``(rows, feats)``: int64 ``[P]``, the observation row of each present entity, and float32
    ``[P, width]``, its features, in row-major order. ``-0.0`` counts as zero, NaN as non-zero (as
    ``!= 0`` does).
    """
    if start < 0 or count < 0 or width < 1 or start + count * width > obs.shape[1]:
        raise ValueError(f"group [start {start}, count {count}, width {width}] does not fit observation rows of "
                         f"{obs.shape[1]} features")
    cdef Py_ssize_t n = obs.shape[0], b, e, f, p = 0, total = n * count
    cdef const float* base
    cdef uint8_t* mask = <uint8_t*>malloc(total if total > 0 else 1)
    if mask == NULL:
        raise MemoryError()
    try:
        with nogil:
            for b in range(n):
                for e in range(count):
                    base = &obs[b, 0] + start + e * width
                    mask[b * count + e] = 0
                    for f in range(width):
                        if base[f] != 0.0:  # true for NaN too
                            mask[b * count + e] = 1
                            p += 1
                            break
        rows = np.empty(p, dtype=np.int64)
        feats = np.empty((p, width), dtype=np.float32)
        _fill(obs, start, count, width, mask, rows, feats)
    finally:
        free(mask)
    return rows, feats


cdef void _fill(const float[:, ::1] obs, Py_ssize_t start, Py_ssize_t count, Py_ssize_t width,
                const uint8_t* mask, int64_t[::1] rows, float[:, ::1] feats) noexcept:
    cdef Py_ssize_t n = obs.shape[0], b, e, p = 0
    if rows.shape[0] == 0:
        return
    with nogil:
        for b in range(n):
            for e in range(count):
                if mask[b * count + e]:
                    rows[p] = b
                    memcpy(&feats[p, 0], &obs[b, 0] + start + e * width, width * sizeof(float))
                    p += 1


def segment_max(const float[:, ::1] h, const int64_t[::1] rows, Py_ssize_t n_rows):
    """The max-pool of the packed encoder: ``pooled[r, c] = max(0, max of h[p, c] over p with rows[p] == r)``
    (float32 ``[n_rows, H]``), and ``arg[r, c]``, the first ``p`` that attains it, or -1 where no ``h``
    exceeds 0 (int64 ``[n_rows, H]``). A NaN in a column wins it (as ``scatter_reduce("amax")`` gives NaN).
    The backward pass routes each pooled gradient to ``arg`` (``agents/policies.py``)."""
    if rows.shape[0] != h.shape[0]:
        raise ValueError(f"rows has {rows.shape[0]} entries for {h.shape[0]} rows of h")
    cdef Py_ssize_t p, c, r, width = h.shape[1], n = h.shape[0]
    pooled = np.zeros((n_rows, width), dtype=np.float32)
    arg = np.full((n_rows, width), -1, dtype=np.int64)
    cdef float[:, ::1] out = pooled
    cdef int64_t[:, ::1] at = arg
    cdef float v
    cdef bint bad = False
    with nogil:
        for p in range(n):
            r = rows[p]
            if r < 0 or r >= n_rows:
                bad = True
                break
            for c in range(width):
                v = h[p, c]
                if v > out[r, c] or (v != v and out[r, c] == out[r, c]):
                    out[r, c] = v
                    at[r, c] = p
    if bad:
        raise ValueError(f"rows must lie in [0, {n_rows})")
    return pooled, arg
