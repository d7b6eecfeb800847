"""How tight each lane bends and how much road lies beside it there: what a long vehicle needs to
follow it. Computed once per map (``terrazero_env.engine.RoadMap``); the engine's goal walk reads it
(``InitConfig.goal_turnable``, placement.pxi) and ``benchmarks/turn_radii.py`` prints it.

A lane's radius is its centreline's arc length over heading change on a 3 m window, smallest along the
lane. Its clearances are the distances from its centreline to the nearest road edge on its left and
on its right, smallest along the lane, measured on lanes that bend tighter than ``BEND_RADIUS`` only.
"""

from __future__ import annotations

import numpy as np

from .analysis import segment_pairs
from .schema import MapData

__all__ = ["BEND_RADIUS", "CLEARANCE_REACH", "lane_bends", "lane_min_radii", "turnable_lanes"]

#: Lanes whose tightest radius is below this (m) get clearances; straighter lanes get inf.
BEND_RADIUS = 50.0
#: Clearances are looked for this far (m) from the centreline; farther edges read as this value.
CLEARANCE_REACH = 15.0


def lane_min_radii(points: np.ndarray, offsets: np.ndarray, window: float = 3.0) -> np.ndarray:
    """The smallest radius (m) along each lane's centreline, float64 ``[L]`` (inf for a lane that never
    turns): arc length over heading change on a ``window``-metre stretch, smallest along the lane (a
    stretch that would run past the lane's end is not measured). ``points``: ``[P, 2+]`` centreline
    points, ``offsets``: ``[L + 1]`` row offsets. Vectorized over all lanes."""
    pts = np.asarray(points, np.float64)
    pts = (pts.reshape(-1, 3) if pts.ndim == 1 else pts)[:, :2]
    off = np.asarray(offsets, np.int64)
    n = len(off) - 1
    out = np.full(n, np.inf)
    if len(pts) < 3 or n <= 0:
        return out
    lane_of = np.repeat(np.arange(n), np.diff(off))
    d = pts[1:] - pts[:-1]
    seg = np.hypot(d[:, 0], d[:, 1])
    keep = (lane_of[1:] == lane_of[:-1]) & (seg > 1e-9)
    d, seg, lane = d[keep], seg[keep], lane_of[:-1][keep]
    if len(seg) < 2:
        return out
    # unwrapped over the flat array: a lane's headings may carry a multiple of 2 pi from the lanes
    # before it, which the differences within the lane cancel
    h = np.unwrap(np.arctan2(d[:, 1], d[:, 0]))
    s = np.cumsum(seg) - seg
    j = np.searchsorted(s, s + window)
    i = np.nonzero(j < len(s))[0]
    j = j[i]
    same = lane[j] == lane[i]
    i, j = i[same], j[same]
    dh = np.abs(h[j] - h[i])
    turn = dh > 1e-3
    np.minimum.at(out, lane[i[turn]], (s[j[turn]] - s[i[turn]]) / dh[turn])
    return out


def _samples(pts: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """Points every ``step`` metres (and every vertex) along one polyline, with unit tangents."""
    d = np.diff(pts, axis=0)
    seg = np.hypot(d[:, 0], d[:, 1])
    keep = seg > 1e-9
    a, d, seg = pts[:-1][keep], d[keep], seg[keep]
    n = np.maximum(1, np.ceil(seg / step).astype(np.int64))
    k = np.repeat(np.arange(len(seg)), n)
    t = (np.arange(n.sum()) - np.repeat(np.cumsum(n) - n, n)) / n[k]
    p = a[k] + t[:, None] * d[k]
    tan = d[k] / seg[k, None]
    return np.vstack([p, pts[-1:]]), np.vstack([tan, tan[-1:]])


def lane_bends(m: MapData, step: float = 1.0) -> np.ndarray:
    """float32 ``[L, 4]`` per lane: its tightest radius (m, inf: straight), the turn's side there (+1
    left, -1 right, 0 straight), and its clearance (m) to the nearest road edge on its left and on
    its right, smallest along the lane (inf for lanes straighter than ``BEND_RADIUS``; at most
    ``CLEARANCE_REACH`` where no edge is nearer)."""
    cl = m.lanes.centerline
    pts_all = np.asarray(cl.values, np.float64)
    pts_all = (pts_all.reshape(-1, 3) if pts_all.ndim == 1 else pts_all)[:, :2]
    off = np.asarray(cl.offsets, np.int64)
    n = len(off) - 1
    out = np.full((n, 4), np.inf, np.float32)
    out[:, 1] = 0.0
    radius = lane_min_radii(pts_all, off)
    out[:, 0] = radius
    bent = np.nonzero(radius < BEND_RADIUS)[0]
    if not len(bent):
        return out
    ps, ts, owner = [], [], []
    for i in bent:
        p, t = _samples(pts_all[off[i]:off[i + 1]], step)
        ps.append(p)
        ts.append(t)
        owner.append(np.full(len(p), i))
        # the side of the turn: the sign of the heading change over the lane
        h = np.unwrap(np.arctan2(t[:, 1], t[:, 0]))
        out[i, 1] = np.sign(h[-1] - h[0])
    p, t, owner = np.vstack(ps), np.vstack(ts), np.concatenate(owner)
    left = np.full(len(p), CLEARANCE_REACH)
    right = np.full(len(p), CLEARANCE_REACH)
    pairs = segment_pairs(m.road_edges.values, m.road_edges.offsets, p, CLEARANCE_REACH)
    if pairs is not None:
        pq, sq, a, b, _ = pairs
        d = b[sq] - a[sq]
        dd = np.einsum("ij,ij->i", d, d)
        u = np.clip(np.einsum("ij,ij->i", p[pq] - a[sq], d) / np.where(dd > 0, dd, 1.0), 0.0, 1.0)
        e = a[sq] + u[:, None] * d - p[pq]
        dist = np.hypot(e[:, 0], e[:, 1])
        side = t[pq, 0] * e[:, 1] - t[pq, 1] * e[:, 0]  # > 0: the edge point lies left of the lane
        on_left = side > 0
        np.minimum.at(left, pq[on_left], np.minimum(dist[on_left], CLEARANCE_REACH))
        np.minimum.at(right, pq[~on_left], np.minimum(dist[~on_left], CLEARANCE_REACH))
    lc = np.full(n, np.inf)
    rc = np.full(n, np.inf)
    np.minimum.at(lc, owner, left)
    np.minimum.at(rc, owner, right)
    out[bent, 2] = lc[bent]
    out[bent, 3] = rc[bent]
    return out


def turnable_lanes(bends: np.ndarray, lane_width: np.ndarray, length: float, width: float, wheelbase: float,
                   max_steer: float, ahead: float) -> np.ndarray:
    """bool ``[L]``: the lanes a ``length`` x ``width`` box can follow, the rule of the engine's goal
    walk (``scene.pxd``'s ``lane_turnable``) over a whole map at once, for reports. ``bends``: from
    :func:`lane_bends`; the box turns about a point ``ahead`` metres behind its centre with
    ``wheelbase`` and steering limit ``max_steer`` (rad)."""
    b = np.asarray(bends, np.float64)
    r, side, left, right = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
    straight = ~np.isfinite(r)
    r_min = np.hypot(wheelbase / np.tan(max_steer), ahead)
    with np.errstate(invalid="ignore"):
        rr = np.sqrt(np.maximum(r * r - ahead * ahead, 0.0))
        outward = np.hypot(rr + width / 2, ahead + length / 2) - r
        inward = r - (rr - width / 2)
    low = np.minimum(left, right)
    inner = np.where(side > 0, left, np.where(side < 0, right, low))
    outer = np.where(side > 0, right, np.where(side < 0, left, low))
    spare = np.maximum(0.0, (np.asarray(lane_width, np.float64) - width) / 2)
    with np.errstate(invalid="ignore"):
        fits = np.maximum(outward - outer, -spare) <= np.minimum(inner - inward, spare)
    return straight | ((r >= r_min) & fits)
