"""Structural checks and summaries of a built map, used by ``terrazero maps inspect`` and the tests.

Offline NumPy code: maps sit below the engine in the import order, so the nearest-lane queries of the
handedness vote use their own small grid index rather than the engine's ``SegmentGrid``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .schema import Handedness, MapData

__all__ = ["handedness_votes", "nearest_segments", "segment_pairs", "infer_handedness", "lane_graph_report", "successor_gaps", "summary"]


def successor_gaps(m: MapData) -> np.ndarray:
    """Distance (m) between each lane's last point and each successor's first point, one per edge."""
    cl, succ = m.lanes.centerline, m.lanes.successors
    end = cl.values[cl.offsets[1:] - 1, :2]
    start = cl.values[cl.offsets[:-1], :2]
    return np.linalg.norm(end[succ.row_ids()] - start[succ.values], axis=1)


def lane_graph_report(m: MapData) -> dict[str, Any]:
    """Lanes no other lane flows into, lanes that flow into no other lane, and the largest gap."""
    succ, pred = m.lanes.successors, m.lanes.predecessors
    src = succ.row_ids()
    dst = succ.values.astype(np.int64)
    other = src != dst  # a lane that only loops onto itself reaches no *other* lane
    n = len(m.lanes)
    has_out = np.zeros(n, bool)
    has_in = np.zeros(n, bool)
    has_out[src[other]] = True
    has_in[dst[other]] = True
    gaps = successor_gaps(m)
    return {
        "no_predecessor": np.nonzero(~has_in)[0],
        "no_successor": np.nonzero(~has_out)[0],
        "max_successor_gap": float(gaps.max()) if gaps.size else 0.0,
        "edges": int(dst.size),
        "inverse_consistent": bool(pred.values.size == succ.values.size),
    }


def segment_pairs(values: np.ndarray, offsets: np.ndarray, points: np.ndarray, max_dist: float
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Candidate (point, segment) pairs for queries within ``max_dist`` of a CSR polyline set: each
    point against the segments of its grid cell. Segments are bucketed into a uniform grid of
    ``max_dist`` cells (each under every cell its box, grown by ``max_dist``, covers), so every
    segment within ``max_dist`` of a point is among its pairs. Returns (point index ``[K]``, segment
    index ``[K]``, segment starts ``[S, 2]``, ends ``[S, 2]``, each segment's polyline ``[S]``), or
    None when the set has no segment or there is no point."""
    v = np.asarray(values, np.float64)[:, :2]
    off = np.asarray(offsets, np.int64)
    p = np.asarray(points, np.float64)[:, :2]
    rows = np.repeat(np.arange(off.shape[0] - 1), np.diff(off))
    a_idx = np.nonzero(rows[1:] == rows[:-1])[0]
    if a_idx.size == 0 or p.shape[0] == 0:
        return None
    a, b, seg_row = v[a_idx], v[a_idx + 1], rows[a_idx]
    cell = max(float(max_dist), 1e-3)
    lo = np.minimum(a, b) - max_dist
    hi = np.maximum(a, b) + max_dist
    x0, y0 = lo.min(axis=0)
    nx = int((hi[:, 0].max() - x0) // cell) + 1
    ny = int((hi[:, 1].max() - y0) // cell) + 1
    ix0, iy0 = ((lo[:, 0] - x0) // cell).astype(np.int64), ((lo[:, 1] - y0) // cell).astype(np.int64)
    span_x = ((hi[:, 0] - x0) // cell).astype(np.int64) - ix0 + 1
    span_y = ((hi[:, 1] - y0) // cell).astype(np.int64) - iy0 + 1
    reps = span_x * span_y
    sid = np.repeat(np.arange(a.shape[0]), reps)
    k = np.arange(sid.shape[0]) - np.repeat(np.cumsum(reps) - reps, reps)
    cells = (iy0[sid] + k // span_x[sid]) * nx + ix0[sid] + k % span_x[sid]
    order = np.lexsort((sid, cells))
    items = sid[order]
    start = np.r_[0, np.cumsum(np.bincount(cells, minlength=nx * ny))]
    qx, qy = np.floor((p[:, 0] - x0) / cell), np.floor((p[:, 1] - y0) / cell)
    inside = (qx >= 0) & (qx < nx) & (qy >= 0) & (qy < ny)
    q = np.nonzero(inside)[0]
    qc = (qy[q] * nx + qx[q]).astype(np.int64)
    counts = start[qc + 1] - start[qc]
    pq = np.repeat(q, counts)
    ps = items[np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(start[qc], counts)]
    return pq, ps, a, b, seg_row


def nearest_segments(values: np.ndarray, offsets: np.ndarray, points: np.ndarray,
                     max_dist: float) -> tuple[np.ndarray, np.ndarray]:
    """The polyline segment nearest to each point in (x, y), within ``max_dist`` metres.

    ``values``/``offsets``: a CSR polyline set (float ``[P, >=2]``, int ``[n + 1]``); ``points``: float
    ``[N, >=2]``. Returns (``row``: int64 ``[N]``, the polyline of the nearest segment or -1 when none
    lies within ``max_dist``; ``heading``: float64 ``[N]``, that segment's direction in radians, NaN
    when none). Ties go to the lowest segment index. A point only tests the segments of its own cell
    of a grid (``segment_pairs``).
    """
    p = np.asarray(points, np.float64)[:, :2]
    n_q = p.shape[0]
    row_out = np.full(n_q, -1, np.int64)
    head_out = np.full(n_q, np.nan)
    pairs = segment_pairs(values, offsets, p, max_dist)
    if pairs is None:
        return row_out, head_out
    pq, ps, a, b, seg_row = pairs
    d = b[ps] - a[ps]
    dd = np.einsum("ij,ij->i", d, d)
    t = np.clip(np.einsum("ij,ij->i", p[pq] - a[ps], d) / np.where(dd > 0, dd, 1.0), 0.0, 1.0)
    e = a[ps] + t[:, None] * d - p[pq]
    d2 = np.einsum("ij,ij->i", e, e)
    ok = d2 <= max_dist * max_dist
    pq, ps, d2 = pq[ok], ps[ok], d2[ok]
    best = np.lexsort((ps, d2, pq))
    first = best[np.r_[True, pq[best][1:] != pq[best][:-1]]] if best.size else best
    row_out[pq[first]] = seg_row[ps[first]]
    dir_ = b[ps[first]] - a[ps[first]]
    head_out[pq[first]] = np.arctan2(dir_[:, 1], dir_[:, 0])
    return row_out, head_out


def handedness_votes(m: MapData, probe_lanes: float = 2.0) -> dict[str, int]:
    """Where, relative to each non-intersection lane, the nearest opposite-direction lane lies.

    From each lane's midpoint the nearest lane is looked up at offsets of 1..``probe_lanes`` lane
    widths to the left and to the right; a lane heading the other way (cosine < -0.7) counts as
    opposite traffic on that side. Returns counts of lanes with opposite traffic only on the left
    (right-hand traffic), only on the right (left-hand traffic), or on both sides.
    """
    cl = m.lanes.centerline
    lanes = np.nonzero(m.lanes.intersection < 0)[0]
    if lanes.size == 0:
        return {"left": 0, "right": 0, "both": 0}
    mid = cl.offsets[lanes] + (cl.lengths()[lanes] - 1) // 2
    p0, p1 = cl.values[mid, :2], cl.values[mid + 1, :2]
    t = (p1 - p0) / np.linalg.norm(p1 - p0, axis=1, keepdims=True)
    normal = np.stack([-t[:, 1], t[:, 0]], axis=1)  # left of travel
    w = m.lanes.width[lanes].astype(np.float64)[:, None]
    found = {}
    for side, sign in (("left", 1.0), ("right", -1.0)):
        hit = np.zeros(lanes.size, bool)
        for k in np.arange(1.0, probe_lanes + 1e-9, 0.5):
            row, heading = nearest_segments(cl.values, cl.offsets, (p0 + p1) / 2 + sign * k * w * normal,
                                            max_dist=0.6 * float(w.max()))
            ok = (row >= 0) & (row != lanes)
            cosang = np.cos(heading - np.arctan2(t[:, 1], t[:, 0]))
            hit |= ok & (cosang < -0.7)
        found[side] = hit
    return {
        "left": int((found["left"] & ~found["right"]).sum()),
        "right": int((found["right"] & ~found["left"]).sum()),
        "both": int((found["left"] & found["right"]).sum()),
    }


def infer_handedness(m: MapData) -> Handedness:
    """Right- or left-hand traffic from the lane geometry of a raw or built map (right on a tie,
    e.g. a map of one-way roads only)."""
    from .builder import build

    votes = handedness_votes(m if m.intersections is not None and m.lanes.intersection.size else build(m))
    return Handedness.LEFT if votes["right"] > votes["left"] else Handedness.RIGHT


def summary(m: MapData) -> dict[str, Any]:
    """Counts, bounds, handedness and lane-graph health, as plain JSON-able values."""
    rep = lane_graph_report(m)
    xmin, ymin, xmax, ymax = m.bounds()
    lane_len = np.linalg.norm(np.diff(m.lanes.centerline.values[:, :2], axis=0), axis=1)
    same = m.lanes.centerline.row_ids()[1:] == m.lanes.centerline.row_ids()[:-1]
    return {
        "name": m.name,
        "handedness": Handedness(m.handedness).name.lower(),
        "counts": m.counts(),
        "bounds": {"xmin": xmin, "ymin": ymin, "xmax": xmax, "ymax": ymax,
                   "width_m": xmax - xmin, "height_m": ymax - ymin},
        "total_lane_length_m": float(lane_len[same].sum()),
        "lanes_without_predecessor": int(rep["no_predecessor"].size),
        "lanes_without_successor": int(rep["no_successor"].size),
        "max_successor_gap_m": rep["max_successor_gap"],
        "metadata": m.metadata,
    }
