"""Highways: a gently curved divided road with an exit, a service road and an on-ramp.

The layout is drawn in road coordinates ``(s, t)``: ``s`` is the distance (m) along the reference
line (the middle of the median) and ``t`` the lateral offset (m, positive to the left of increasing
``s``). In right-hand traffic the carriageway travelling towards increasing ``s`` lies at ``t < 0``.
"""

from __future__ import annotations

import numpy as np

from ..schema import Handedness, MapData, RoadLineType
from .assembly import MapAssembler, check_lane_params, check_metres, parse_handedness
from .geometry import BALLOON_FLARE_MARGIN, balloon, curve

__all__ = ["highway"]

#: Half width (m) of the median between the two carriageways.
MEDIAN_HALF_WIDTH = 2.0
#: Radius (m) of the turnaround loops at both ends, measured on the median's centre line.
LOOP_RADIUS = 10.0
#: Shortest highway (m) that fits the ramps.
MIN_LENGTH = 400.0
MAX_LENGTH = 10_000.0  # m: the stations are sampled about 1 m apart
#: Speed limits (m/s) of ramps and turnaround loops, capped by the highway's own limit.
RAMP_SPEED = 16.7
LOOP_SPEED = 8.3


class _Frame:
    """Maps road coordinates ``(s, t)`` to the plane along a reference line of slowly varying heading."""

    def __init__(self, length: float, amplitude: float, wavelength: float, phase: float) -> None:
        self.amplitude, self.wavenumber, self.phase = amplitude, 2.0 * np.pi / wavelength, phase
        self.s = np.linspace(0.0, length, int(np.ceil(length / 0.5)) + 1)
        h = self.heading(self.s)
        ds = np.diff(self.s)
        self.x = np.concatenate([[0.0], np.cumsum(0.5 * (np.cos(h[1:]) + np.cos(h[:-1])) * ds)])
        self.y = np.concatenate([[0.0], np.cumsum(0.5 * (np.sin(h[1:]) + np.sin(h[:-1])) * ds)])
        self.x -= 0.5 * (self.x[0] + self.x[-1])
        self.y -= 0.5 * (self.y[0] + self.y[-1])

    def heading(self, s: np.ndarray | float) -> np.ndarray:
        """Heading (rad) of the reference line at station(s) ``s``."""
        return self.amplitude * np.sin(self.wavenumber * np.asarray(s, np.float64) + self.phase)

    def __call__(self, st: np.ndarray) -> np.ndarray:
        """Plane points ``[k, 2]`` of road coordinates ``st`` ``[k, 2]``."""
        st = np.asarray(st, np.float64).reshape(-1, 2)
        h = self.heading(st[:, 0])
        x = np.interp(st[:, 0], self.s, self.x) - st[:, 1] * np.sin(h)
        y = np.interp(st[:, 0], self.s, self.y) + st[:, 1] * np.cos(h)
        return np.stack([x, y], axis=1)


def _stations(a: float, b: float) -> np.ndarray:
    """Stations from ``a`` to ``b`` (either order) about 1 m apart."""
    return np.linspace(a, b, max(2, int(np.ceil(abs(b - a))) + 1))


def _line(a: float, b: float, t: float) -> np.ndarray:
    """Road coordinates of the line ``t`` = const from station ``a`` to ``b``."""
    s = _stations(a, b)
    return np.stack([s, np.full_like(s, t)], axis=1)


def _offset_st(st: np.ndarray, dist: float) -> np.ndarray:
    """Road-coordinate polyline shifted ``dist`` metres to its left, end points kept on exact offsets."""
    seg = np.diff(st, axis=0)
    seg /= np.linalg.norm(seg, axis=1, keepdims=True)
    tang = np.concatenate([seg[:1], seg[:-1] + seg[1:], seg[-1:]])
    tang /= np.linalg.norm(tang, axis=1, keepdims=True)
    out = st + dist * np.stack([-tang[:, 1], tang[:, 0]], axis=1)
    out[0, 1], out[-1, 1] = st[0, 1] + dist, st[-1, 1] + dist
    out[0, 0], out[-1, 0] = st[0, 0], st[-1, 0]
    return out


def _end_loops(asm: MapAssembler, frame: _Frame, s_end: float, ins: list[int], outs: list[int],
               speed: float, flare_margin: float = BALLOON_FLARE_MARGIN) -> None:
    """Turnaround loops at station ``s_end`` from the lanes ``ins`` arriving there to ``outs`` (innermost
    first), with their lane lines and curbs; ``flare_margin`` (m) widens the swing out before the
    loop (``geometry.balloon``'s flare, beyond the carriageway)."""
    n, w, m = len(ins), asm.lane_width, MEDIAN_HALF_WIDTH
    origin = frame(np.array([[s_end, 0.0]]))[0]
    forward = float(frame.heading(s_end)) + (0.0 if s_end > 0.0 else np.pi)

    def loop(lateral: float) -> np.ndarray:
        return balloon(origin, forward, lateral, m + n * w + flare_margin, LOOP_RADIUS)

    for i in range(n):
        pts = loop(m + (i + 0.5) * w)
        pts[0], pts[-1] = asm.end(ins[i]), asm.start(outs[i])
        lane = asm.add_lane(pts, speed)
        asm.connect(ins[i], lane)
        asm.connect(lane, outs[i])
    for k in range(1, n):
        asm.add_road_line(loop(m + k * w), RoadLineType.DASHED_WHITE)
    asm.add_curb(loop(m + n * w), sidewalk=False)
    asm.add_curb(loop(m)[::-1], sidewalk=False)


def highway(
    seed: int = 0,
    *,
    length: float = 600.0,
    lanes_per_direction: int = 3,
    lane_width: float = 3.5,
    handedness: Handedness | str = Handedness.RIGHT,
    speed_limit: float = 29.0,
    loop_flare: float = BALLOON_FLARE_MARGIN,
) -> MapData:
    """A divided highway about ``length`` metres long with ``lanes_per_direction`` lanes each way.

    The road curves gently (radius of several hundred metres). On one carriageway an exit diverges
    from the outermost lane into a service road running alongside, which comes back as an on-ramp
    joining an acceleration lane that merges into the outermost lane through a taper. The outermost
    lane is the right-most one in right-hand traffic and the left-most in left-hand traffic. Both
    carriageways are joined at each end by turnaround loops, so every lane can be entered and left.
    Lane lines are dashed white between lanes of one direction, solid yellow along the median and
    solid white along the outer edge (dashed beside the acceleration lane). The seed picks the
    curvature, the ramp stations and the service road's offset. ``length`` and ``lane_width`` are
    in metres, ``speed_limit`` in m/s. ``loop_flare`` (m) sets how wide the turnaround loops swing
    out before they turn (the radius of that first, opposite bend grows with it): the default draws a
    car-sized loop; the bundled ``highway`` map takes a gentler one for trucks and buses.
    """
    flare = check_metres("loop_flare", loop_flare, 1.0, 100.0)
    check_lane_params(lanes_per_direction, lane_width, speed_limit)
    hand = parse_handedness(handedness)
    if not (np.isfinite(length) and MIN_LENGTH <= length <= MAX_LENGTH):
        raise ValueError(f"length must be a number of metres in [{MIN_LENGTH}, {MAX_LENGTH}], got {length!r}")
    n, w, length = int(lanes_per_direction), float(lane_width), float(length)
    rng = np.random.default_rng(seed)
    frame = _Frame(length, rng.uniform(0.05, 0.1), length * rng.uniform(0.8, 1.3), rng.uniform(0.0, 2.0 * np.pi))
    m = MEDIAN_HALF_WIDTH
    edge = m + n * w
    t_outer, t_accel = -(m + (n - 0.5) * w), -(m + (n + 0.5) * w)
    t_service = t_outer - rng.uniform(25.0, 40.0)
    s_exit = length * (0.12 + rng.uniform(-0.02, 0.02))
    s_merge = length * (0.55 + rng.uniform(-0.03, 0.03))
    s_accel_end = s_merge + float(np.clip(0.2 * length, 80.0, 200.0))
    s_taper_end = s_accel_end + float(np.clip(0.1 * length, 40.0, 80.0))
    ramp = min(100.0, (s_merge - s_exit) / 3.0)

    asm = MapAssembler(w, speed_limit)
    ramp_speed, loop_speed = min(speed_limit, RAMP_SPEED), min(speed_limit, LOOP_SPEED)

    # Main carriageway towards +s, split where the ramps leave and join.
    cuts = [0.0, s_exit, s_merge, s_taper_end, length]
    grids = [_stations(a, b) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    sizes = np.cumsum([0] + [g.size - 1 for g in grids])
    s_all = np.concatenate([grids[0]] + [g[1:] for g in grids[1:]])
    east = np.zeros((n, len(grids)), np.int64)
    for i in range(n):
        pts = frame(np.stack([s_all, np.full_like(s_all, -(m + (i + 0.5) * w))], axis=1))
        east[i] = [asm.add_lane(pts[sizes[k]:sizes[k + 1] + 1]) for k in range(len(grids))]
        for k in range(len(grids) - 1):
            asm.connect(int(east[i, k]), int(east[i, k + 1]))
    west = [asm.add_lane(frame(_line(length, 0.0, m + (i + 0.5) * w))) for i in range(n)]
    asm.set_neighbors(west)

    def st_lane(st: np.ndarray, before: int, after: int | None, speed: float | None = None) -> int:
        pts = frame(st)
        pts[0] = asm.end(before)
        if after is not None:
            pts[-1] = asm.start(after)
        lane = asm.add_lane(pts, speed)
        asm.connect(before, lane)
        if after is not None:
            asm.connect(lane, after)
        return lane

    # Exit, service road, on-ramp, acceleration lane and taper.
    off_st = curve(np.array([s_exit, t_outer]), 0.0, np.array([s_exit + ramp, t_service]), 0.0)
    service_st = _line(s_exit + ramp, s_merge - ramp, t_service)
    on_st = curve(np.array([s_merge - ramp, t_service]), 0.0, np.array([s_merge, t_accel]), 0.0)
    accel_st = _line(s_merge, s_accel_end, t_accel)
    taper_st = curve(np.array([s_accel_end, t_accel]), 0.0, np.array([s_taper_end, t_outer]), 0.0)
    off = st_lane(off_st, int(east[n - 1, 0]), None, ramp_speed)
    service = st_lane(service_st, off, None, ramp_speed)
    on = st_lane(on_st, service, None, ramp_speed)
    accel = st_lane(accel_st, on, None)
    st_lane(taper_st, accel, int(east[n - 1, 3]))
    for k in range(len(grids)):
        asm.set_neighbors([int(e) for e in east[:, k]] + ([accel] if k == 2 else []))

    # Turnaround loops joining the carriageways at both ends.
    _end_loops(asm, frame, length, [int(e) for e in east[:, -1]], west, loop_speed, flare)
    _end_loops(asm, frame, 0.0, west, [int(e) for e in east[:, 0]], loop_speed, flare)

    # Lane lines.
    for k in range(1, n):
        for t in (-(m + k * w), m + k * w):
            asm.add_road_line(frame(_line(0.0, length, t)), RoadLineType.DASHED_WHITE)
    for t in (-m, m):
        asm.add_road_line(frame(_line(0.0, length, t)), RoadLineType.SOLID_YELLOW)
    ramp_st = np.concatenate([off_st, service_st[1:], on_st[1:]])
    left_edge = _offset_st(ramp_st, w / 2.0)
    gore = int(np.argmax(left_edge[:, 1] < -edge))
    s_gore = float(np.interp(-edge, left_edge[gore - 1:gore + 1, 1][::-1], left_edge[gore - 1:gore + 1, 0][::-1]))
    for a, b in ((0.0, s_exit), (s_gore, s_merge), (s_taper_end, length)):
        asm.add_road_line(frame(_line(a, b, -edge)), RoadLineType.SOLID_WHITE)
    asm.add_road_line(frame(_line(s_merge, s_accel_end, -edge)), RoadLineType.DASHED_WHITE)
    asm.add_road_line(frame(_line(0.0, length, edge)), RoadLineType.SOLID_WHITE)

    # Road edges, each with the drivable surface on its left.
    asm.add_curb(frame(_line(length, 0.0, -m)), sidewalk=False)
    asm.add_curb(frame(_line(0.0, length, m)), sidewalk=False)
    asm.add_curb(frame(_line(length, 0.0, edge)), sidewalk=False)
    outer_st = np.concatenate([_offset_st(ramp_st, -w / 2.0), _line(s_merge, s_accel_end, -edge - w)[1:],
                               _offset_st(taper_st, -w / 2.0)[1:]])
    for st in (_line(0.0, s_exit, -edge), outer_st, _line(s_taper_end, length, -edge)):
        asm.add_curb(frame(st), sidewalk=False)
    island = np.concatenate([[[s_gore, -edge]], _line(s_gore, s_merge, -edge)[1:], left_edge[gore:-1][::-1],
                             [[s_gore, -edge]]])
    asm.add_curb(frame(island), sidewalk=False)

    name = f"highway_{int(round(length))}m_s{seed}" + ("_lht" if hand == Handedness.LEFT else "")
    params = {"length": length, "lanes_per_direction": n, "lane_width": w, "handedness": hand.name,
              "speed_limit": float(speed_limit)}
    if flare != BALLOON_FLARE_MARGIN:  # maps drawn before keep their metadata
        params["loop_flare"] = flare
    return asm.finish(hand, name, {"generator": "highway", "seed": int(seed), "params": params})
