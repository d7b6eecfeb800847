"""Which intersection lanes conflict: their centerlines cross, or they merge into the same lane.

Used by rule-based traffic to give way: a vehicle about to enter an intersection lane waits while
another vehicle is on (or about to take, with priority) a conflicting one. Computed once per map.
"""

from __future__ import annotations

import numpy as np

from .schema import MapData, Ragged

__all__ = ["lane_conflicts"]


def _segments(cl: Ragged, lane: int) -> np.ndarray:
    p = cl.row(lane)[:, :2]
    return np.concatenate([p[:-1], p[1:]], axis=1)  # [k, 4]


def _cross(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether any segment of ``a`` properly crosses any segment of ``b`` (touching ends excluded)."""
    p, r = a[:, None, :2], a[:, None, 2:] - a[:, None, :2]
    q, s = b[None, :, :2], b[None, :, 2:] - b[None, :, :2]
    denom = r[..., 0] * s[..., 1] - r[..., 1] * s[..., 0]
    qp = q - p
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (qp[..., 0] * s[..., 1] - qp[..., 1] * s[..., 0]) / denom
        u = (qp[..., 0] * r[..., 1] - qp[..., 1] * r[..., 0]) / denom
    eps = 1e-6
    return bool(np.any((np.abs(denom) > 1e-12) & (t > eps) & (t < 1 - eps) & (u > eps) & (u < 1 - eps)))


def lane_conflicts(m: MapData) -> Ragged:
    """For each lane, the lanes of its intersection that cross it or end in one of its successors
    (int32 CSR; empty rows outside intersections). ``m`` must be built."""
    n = len(m.lanes)
    rows: list[list[int]] = [[] for _ in range(n)]
    if m.intersections is None:
        return Ragged.from_rows(rows, np.int32)
    cl = m.lanes.centerline
    succ = m.lanes.successors
    for i in range(len(m.intersections)):
        lanes = m.intersections.lanes.row(i)
        segs = {int(lane): _segments(cl, int(lane)) for lane in lanes}
        ends = {int(lane): set(succ.row(int(lane)).tolist()) for lane in lanes}
        for x in range(len(lanes)):
            a = int(lanes[x])
            for y in range(x + 1, len(lanes)):
                b = int(lanes[y])
                if (ends[a] & ends[b]) or _cross(segs[a], segs[b]):
                    rows[a].append(b)
                    rows[b].append(a)
    return Ragged.from_rows(rows, np.int32)
