"""Planar geometry helpers for the procedural generators.

Every function works on ``[k, 2]`` float64 point arrays in metres and headings in radians
(counter-clockwise from +x). Curves are sampled by arc length so consecutive points are at most
``step`` metres apart and never coincide.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "arc",
    "BALLOON_FLARE_MARGIN",
    "balloon",
    "chain",
    "curve",
    "direction",
    "left_normal",
    "offset",
    "resample",
    "strip",
    "wrap_angle",
]

#: Default sampling step of generated curves (m).
STEP = 1.0


def direction(angle: float | np.ndarray) -> np.ndarray:
    """Unit vector(s) ``[..., 2]`` for heading(s) ``angle`` (rad)."""
    a = np.asarray(angle, np.float64)
    return np.stack([np.cos(a), np.sin(a)], axis=-1)


def left_normal(v: np.ndarray) -> np.ndarray:
    """``v`` rotated by +90 degrees (the left side when travelling along ``v``)."""
    v = np.asarray(v, np.float64)
    return np.stack([-v[..., 1], v[..., 0]], axis=-1)


def wrap_angle(a: float | np.ndarray) -> np.ndarray:
    """Angle(s) wrapped to ``[-pi, pi)``."""
    return (np.asarray(a, np.float64) + np.pi) % (2.0 * np.pi) - np.pi


def resample(points: np.ndarray, step: float = STEP) -> np.ndarray:
    """Points spaced evenly along ``points`` at most ``step`` metres apart; end points kept exactly.

    Repeated consecutive points of the input are dropped first.
    """
    src = np.asarray(points, np.float64)
    keep = np.concatenate([[True], np.linalg.norm(np.diff(src, axis=0), axis=1) > 1e-9])
    pts = src[keep]
    if pts.shape[0] < 2:
        raise ValueError("cannot resample a polyline of zero length")
    seg = np.linalg.norm(np.diff(pts, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    n = max(1, int(np.ceil(s[-1] / step - 1e-9)))
    t = np.linspace(0.0, s[-1], n + 1)
    out = np.stack([np.interp(t, s, pts[:, 0]), np.interp(t, s, pts[:, 1])], axis=1)
    out[0], out[-1] = src[0], src[-1]
    return out


def _handles(p0: np.ndarray, h0: float, p1: np.ndarray, h1: float) -> tuple[float, float]:
    """Bezier handle lengths (m) that make a cubic between two poses close to a circular arc."""
    d0, d1 = direction(h0), direction(h1)
    chord = float(np.linalg.norm(p1 - p0))
    turn = abs(float(wrap_angle(h1 - h0)))
    if turn > np.deg2rad(170.0):
        return 2.0 * chord / 3.0, 2.0 * chord / 3.0
    if turn > np.deg2rad(5.0):
        # Distances from each pose to where the two tangent lines meet.
        a, b = np.linalg.solve(np.stack([d0, d1], axis=1), p1 - p0)
        if a > 0.0 and b > 0.0:
            k = 4.0 / 3.0 * np.tan(turn / 4.0) / np.tan(turn / 2.0)
            return float(k * a), float(k * b)
    return chord / 3.0, chord / 3.0


def curve(p0: np.ndarray, h0: float, p1: np.ndarray, h1: float, step: float = STEP) -> np.ndarray:
    """Smooth cubic Bezier from pose ``(p0, h0)`` to pose ``(p1, h1)``, sampled every ``<= step`` m.

    Handles are chosen so that a symmetric turn is close to a circular arc; nearly parallel poses
    give straight lines or S-curves. The first and last points equal ``p0`` and ``p1`` exactly.
    """
    p0, p1 = np.asarray(p0, np.float64), np.asarray(p1, np.float64)
    l0, l1 = _handles(p0, h0, p1, h1)
    c0, c1 = p0 + l0 * direction(h0), p1 - l1 * direction(h1)
    approx = np.linalg.norm(c0 - p0) + np.linalg.norm(c1 - c0) + np.linalg.norm(p1 - c1)
    u = np.linspace(0.0, 1.0, max(16, int(approx * 4.0)))[:, None]
    pts = (1 - u) ** 3 * p0 + 3 * (1 - u) ** 2 * u * c0 + 3 * (1 - u) * u**2 * c1 + u**3 * p1
    return resample(pts, step)


def tight_turn(p0: np.ndarray, h0: float, p1: np.ndarray, h1: float, tangent: float,
               step: float = STEP) -> np.ndarray:
    """A turn from pose ``(p0, h0)`` to pose ``(p1, h1)`` that runs straight along each pose's line and
    bends only within ``tangent`` metres of the point where the two lines meet (a :func:`curve` there),
    so it hugs that corner instead of cutting it. Falls back to :func:`curve` when the lines are
    parallel or either end is already within ``tangent`` of the meeting point."""
    p0, p1 = np.asarray(p0, np.float64), np.asarray(p1, np.float64)
    d0, d1 = direction(h0), direction(h1)
    det = d0[0] * d1[1] - d0[1] * d1[0]
    if abs(det) < 1e-6:
        return curve(p0, h0, p1, h1, step)
    rel = p1 - p0
    s = (rel[0] * d1[1] - rel[1] * d1[0]) / det  # p0 + s d0 == p1 + r d1
    r = (rel[0] * d0[1] - rel[1] * d0[0]) / det
    if s <= tangent or -r <= tangent:
        return curve(p0, h0, p1, h1, step)
    corner = p0 + s * d0
    q0, q1 = corner - tangent * d0, corner + tangent * d1
    pts = np.concatenate([p0[None], curve(q0, h0, q1, h1, step), p1[None]])
    return resample(pts, step)


def arc(center: np.ndarray, radius: float, a0: float, a1: float, step: float = STEP) -> np.ndarray:
    """Circular arc from polar angle ``a0`` to ``a1`` (rad; counter-clockwise when ``a1 > a0``)."""
    n = max(2, int(np.ceil(abs(a1 - a0) * radius / step - 1e-9)) + 1)
    return np.asarray(center, np.float64) + radius * direction(np.linspace(a0, a1, n))


#: Metres by which a turnaround's flare arcs reach beyond its outermost lane: the radius of the
#: outermost lane's flare arcs, where the loop turns away from the road before it turns back. At 9 m
#: a 5 m car on the steering-rate-limited model (0.6 rad/s) can follow the reversal from that arc into
#: the loop around the island while its corners stay on the road (4 m left the outermost lane's
#: corners 0.2 m of room and asked for a reversal of 0.7 rad at once).
BALLOON_FLARE_MARGIN = 9.0


def balloon(origin: np.ndarray, forward: float, lateral: float, flare: float, radius: float,
            step: float = STEP) -> np.ndarray:
    """A balloon-shaped U-turn loop for right-hand traffic, ``lateral`` metres off a road axis.

    The road axis passes through ``origin`` heading ``forward`` (rad). The loop starts ``lateral``
    metres right of the axis heading ``forward``, swings right on an arc (``flare - lateral`` m
    radius), runs counter-clockwise around a circle (``radius + lateral`` m) centred on the axis ahead
    and swings back to end ``lateral`` metres left of the axis, heading the opposite way. Loops of
    different ``lateral`` are exact parallels: lateral 0 is the tip of the central island and
    ``lateral`` must stay below ``flare``.
    """
    xc = float(np.sqrt(radius**2 + 2.0 * flare * radius))
    g = float(np.arctan2(flare, xc))
    local = np.concatenate([
        arc(np.array([0.0, -flare]), flare - lateral, np.pi / 2, g, step),
        arc(np.array([xc, 0.0]), radius + lateral, g - np.pi, np.pi - g, step)[1:],
        arc(np.array([0.0, flare]), flare - lateral, -g, -np.pi / 2, step)[1:],
    ])
    fwd = direction(forward)
    return np.asarray(origin, np.float64) + local[:, :1] * fwd + local[:, 1:] * left_normal(fwd)


def offset(points: np.ndarray, dist: float) -> np.ndarray:
    """``points`` shifted ``dist`` metres to the left (negative: right) of the direction of travel."""
    pts = np.asarray(points, np.float64)
    seg = np.diff(pts, axis=0)
    seg /= np.linalg.norm(seg, axis=1, keepdims=True)
    tang = np.concatenate([seg[:1], seg[:-1] + seg[1:], seg[-1:]])
    tang /= np.linalg.norm(tang, axis=1, keepdims=True)
    return pts + dist * left_normal(tang)


def strip(points: np.ndarray, width: float) -> np.ndarray:
    """Polygon ring of the band ``width`` metres wide on the right of polyline ``points``."""
    return np.concatenate([points, offset(points, -width)[::-1]])


def chain(pieces: list[np.ndarray], tol: float = 1e-6) -> list[np.ndarray]:
    """Join polylines whose end point meets another's start point (within ``tol`` m) into longer ones.

    Open chains start at a piece that no other piece leads into; the rest form closed loops, whose
    last point repeats the first.
    """
    if not pieces:
        return []
    starts = np.array([p[0] for p in pieces])
    ends = np.array([p[-1] for p in pieces])
    gap = np.linalg.norm(ends[:, None, :] - starts[None, :, :], axis=2)
    np.fill_diagonal(gap, np.inf)
    nxt = np.where(gap.min(axis=1) <= tol, gap.argmin(axis=1), -1)
    has_prev = np.zeros(len(pieces), bool)
    has_prev[nxt[nxt >= 0]] = True
    used = np.zeros(len(pieces), bool)
    out = []
    for first in [*np.nonzero(~has_prev)[0], *range(len(pieces))]:
        if used[first]:
            continue
        parts, i = [pieces[first]], int(first)
        used[i] = True
        while nxt[i] >= 0 and not used[nxt[i]]:
            i = int(nxt[i])
            used[i] = True
            parts.append(pieces[i][1:])
        out.append(np.concatenate(parts))
    return out
