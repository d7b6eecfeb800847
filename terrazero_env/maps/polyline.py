"""Small polyline helpers shared by the converters and the renderer (offline code, not the engine)."""

from __future__ import annotations

import numpy as np

__all__ = ["convex_hull", "dedupe", "normalized_arc", "resample_at"]


def dedupe(pts: np.ndarray, min_seg: float = 1e-2) -> np.ndarray:
    """Drop points closer than ``min_seg`` (in x, y) to the previously kept one; the last point is
    kept (it replaces the previously kept one when they are too close)."""
    keep = [0]
    for i in range(1, len(pts)):
        if np.linalg.norm(pts[i, :2] - pts[keep[-1], :2]) >= min_seg:
            keep.append(i)
    if len(keep) > 1 and np.linalg.norm(pts[-1, :2] - pts[keep[-1], :2]) > 0:
        keep[-1] = len(pts) - 1
    return pts[keep]


def normalized_arc(p: np.ndarray) -> np.ndarray:
    """Arc length of each point of ``p`` divided by the total, 0..1 (uniform when it has no length)."""
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1))])
    return s / s[-1] if s[-1] > 0 else np.linspace(0.0, 1.0, len(p))


def resample_at(p: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Polyline ``p`` (all columns) sampled at normalized arc lengths ``u``."""
    s = normalized_arc(p)
    return np.stack([np.interp(u, s, p[:, k]) for k in range(p.shape[1])], axis=1)


def convex_hull(points: np.ndarray) -> np.ndarray:
    """Counter-clockwise convex hull ``[h, 2]`` of 2-D ``points`` (monotone chain)."""
    pts = np.unique(points, axis=0)
    if len(pts) < 3:
        return pts

    def half(seq: np.ndarray) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for q in seq:
            while len(out) >= 2 and ((out[-1][0] - out[-2][0]) * (q[1] - out[-2][1])
                                     - (out[-1][1] - out[-2][1]) * (q[0] - out[-2][0])) <= 0:
                out.pop()
            out.append(q)
        return out[:-1]

    return np.array(half(pts) + half(pts[::-1]))
