"""Structural checks and summaries of a built map, used by ``terrazero maps inspect`` and the tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from .schema import Handedness, MapData

__all__ = ["handedness_votes", "infer_handedness", "lane_graph_report", "successor_gaps", "summary"]


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


def handedness_votes(m: MapData, probe_lanes: float = 2.0) -> dict[str, int]:
    """Where, relative to each non-intersection lane, the nearest opposite-direction lane lies.

    From each lane's midpoint the nearest lane is looked up at offsets of 1..``probe_lanes`` lane
    widths to the left and to the right; a lane heading the other way (cosine < -0.7) counts as
    opposite traffic on that side. Returns counts of lanes with opposite traffic only on the left
    (right-hand traffic), only on the right (left-hand traffic), or on both sides.
    """
    from terrazero_env._engine import SegmentGrid  # the compiled spatial index

    cl = m.lanes.centerline
    grid = SegmentGrid(np.ascontiguousarray(cl.values), np.ascontiguousarray(cl.offsets, np.int64), 10.0)
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
            q = grid.query((p0 + p1) / 2 + sign * k * w * normal, max_dist=0.6 * float(w.max()), z_gate=-1.0)
            ok = (q["row"] >= 0) & (q["row"] != lanes)
            cosang = np.cos(q["heading"] - np.arctan2(t[:, 1], t[:, 0]))
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
