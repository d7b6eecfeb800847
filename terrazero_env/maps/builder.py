"""Validate a ``MapData`` and derive what the simulator needs (TerraZero section 3.4).

:func:`build` rejects bad input with a :class:`MapValidationError` that names the element and the
problem, then derives: the lane graph (predecessors as the exact inverse of successors), turn
movements of intersection lanes, intersections inferred from lane topology where the source gives
none, stop lines and signals tied to lanes, each lane's controlling stop line and legal movements,
and per-type default speed limits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .schema import (
    AgentType,
    ControlType,
    Intersections,
    Lanes,
    LaneType,
    MapData,
    Movement,
    Ragged,
    RoadLineType,
    Signals,
    StopLines,
)

__all__ = ["BuildConfig", "MapValidationError", "MAX_MAP_EXTENT", "build", "validate", "validate_built", "lane_movements",
           "infer_intersections"]

#: Largest side (m) of a map's bounding box. The engine's road index is a uniform grid over the
#: bounding box, so its memory grows with the square of the extent (two lanes 283 km apart would need
#: 18 GiB); 20 km covers a city district. Crop or split larger maps.
MAX_MAP_EXTENT = 20_000.0


class MapValidationError(ValueError):
    """A map element is invalid; the message names the element (e.g. ``lanes[4].centerline``)."""


@dataclass(frozen=True)
class BuildConfig:
    """Builder tolerances and defaults."""

    successor_tolerance: float = 0.5
    """Max gap (m) between a lane's last point and each successor's first point."""
    min_segment_length: float = 1e-3
    """Consecutive polyline points closer than this (m) are a zero-length segment."""
    stop_line_tie_distance: float = 1.5
    """Max distance (m) from a lane's end point to an untied stop line for the builder to tie them."""
    straight_threshold: float = np.deg2rad(30.0)
    """Heading change (rad) below which an intersection lane is STRAIGHT."""
    uturn_threshold: float = np.deg2rad(150.0)
    """Heading change (rad) above which an intersection lane is a U-turn."""
    default_speed_limit_vehicle: float = 13.4
    """m/s (30 mph) for vehicle lanes whose source gives no limit."""
    default_speed_limit_bike: float = 6.0
    """m/s for bike lanes."""
    default_speed_limit_bus: float = 13.4
    """m/s for bus lanes."""

    def __post_init__(self) -> None:
        for name in ("successor_tolerance", "min_segment_length", "stop_line_tie_distance"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"BuildConfig.{name} must be a positive finite number, got {v!r}")
        if not 0 < self.straight_threshold < self.uturn_threshold <= np.pi:
            raise ValueError("BuildConfig needs 0 < straight_threshold < uturn_threshold <= pi")


# --------------------------------------------------------------------------------------------------
# validation


def _fail(msg: str) -> None:
    raise MapValidationError(msg)


def _check_ragged(r: Ragged, name: str, n_rows: int | None = None) -> None:
    off = np.asarray(r.offsets)
    if off.ndim != 1 or off.shape[0] < 1 or off[0] != 0:
        _fail(f"{name}: offsets must be a 1-D array starting at 0")
    if np.any(np.diff(off) < 0):
        _fail(f"{name}: offsets decrease at row {int(np.argmax(np.diff(off) < 0))}")
    if off[-1] != r.values.shape[0]:
        _fail(f"{name}: offsets end at {int(off[-1])} but there are {r.values.shape[0]} values")
    if n_rows is not None and len(r) != n_rows:
        _fail(f"{name}: {len(r)} rows, expected {n_rows}")


def _check_geometry(r: Ragged, name: str, min_points: int, min_seg: float | None) -> None:
    """Finite points, enough points per row, no zero-length segments."""
    _check_ragged(r, name)
    if r.values.shape[0] and (r.values.ndim != 2 or r.values.shape[1] != 3):
        _fail(f"{name}: points must have shape [P, 3], got {r.values.shape}")
    bad = ~np.isfinite(r.values).all(axis=1) if r.values.shape[0] else np.zeros(0, bool)
    if bad.any():
        p = int(np.argmax(bad))
        row = int(r.row_ids()[p])
        _fail(f"{name}[{row}]: point {p - int(r.offsets[row])} is not finite ({r.values[p].tolist()})")
    short = np.nonzero(r.lengths() < min_points)[0]
    if short.size:
        i = int(short[0])
        kind = "polygon" if min_points >= 3 else "polyline"
        _fail(f"{name}[{i}]: a {kind} needs at least {min_points} points, got {int(r.lengths()[i])}")
    if min_seg is not None and r.values.shape[0] > 1:
        seg = np.linalg.norm(np.diff(r.values[:, :2], axis=0), axis=1)
        rid = r.row_ids()
        same_row = rid[1:] == rid[:-1]
        zero = np.nonzero(same_row & (seg < min_seg))[0]
        if zero.size:
            p = int(zero[0])
            row = int(rid[p])
            _fail(f"{name}[{row}]: zero-length segment between points {p - int(r.offsets[row])} and "
                  f"{p - int(r.offsets[row]) + 1} (length {seg[p]:.2e} m)")


def _check_ids(ids: np.ndarray, name: str, n: int, allow_none: bool = False) -> None:
    ids = np.asarray(ids)
    lo = -1 if allow_none else 0
    bad = np.nonzero((ids < lo) | (ids >= n))[0]
    if bad.size:
        i = int(bad[0])
        _fail(f"{name}: reference {int(ids[i])} at entry {i} is out of range (valid: {lo}..{n - 1})")


def _check_ragged_ids(r: Ragged, name: str, n_rows: int, n_targets: int, target: str) -> None:
    _check_ragged(r, name, n_rows)
    bad = np.nonzero((r.values < 0) | (r.values >= n_targets))[0]
    if bad.size:
        p = int(bad[0])
        row = int(r.row_ids()[p])
        _fail(f"{name}[{row}]: {target} id {int(r.values[p])} is out of range (there are {n_targets})")


def _check_len(a: np.ndarray, name: str, n: int) -> None:
    if np.asarray(a).shape[:1] != (n,):
        _fail(f"{name}: expected {n} entries, got shape {np.asarray(a).shape}")


def _check_enum(a: np.ndarray, name: str, enum: type) -> None:
    valid = np.array([int(e) for e in enum])  # type: ignore[attr-defined]
    bad = np.nonzero(~np.isin(a, valid))[0]
    if bad.size:
        i = int(bad[0])
        _fail(f"{name}[{i}]: {int(a[i])} is not a valid {enum.__name__} ({', '.join(e.name for e in enum)})")  # type: ignore[attr-defined]


def validate(m: MapData, config: BuildConfig = BuildConfig()) -> None:
    """Raise :class:`MapValidationError` for the first problem found; return None when ``m`` is valid."""
    lanes = m.lanes
    n = len(lanes.centerline.offsets) - 1 if lanes.centerline.offsets.ndim == 1 else 0
    if n <= 0:
        _fail("lanes: the map has no lanes")
    _check_geometry(lanes.centerline, "lanes.centerline", 2, config.min_segment_length)
    for name in ("lane_type", "width", "speed_limit", "left_neighbor", "right_neighbor", "intersection",
                 "movement", "allowed_movements", "stop_line"):
        _check_len(getattr(lanes, name), f"lanes.{name}", n)
    _check_enum(lanes.lane_type, "lanes.lane_type", LaneType)
    bad = np.nonzero(~(np.isfinite(lanes.width) & (lanes.width > 0)))[0]
    if bad.size:
        _fail(f"lanes[{int(bad[0])}].width: must be a positive finite number of metres, got {lanes.width[bad[0]]}")
    sl = lanes.speed_limit
    bad = np.nonzero(~np.isnan(sl) & ~(np.isfinite(sl) & (sl > 0)))[0]
    if bad.size:
        _fail(f"lanes[{int(bad[0])}].speed_limit: must be positive m/s or NaN (unknown), got {sl[bad[0]]}")
    _check_ragged_ids(lanes.successors, "lanes.successors", n, n, "lane")
    _check_ragged_ids(lanes.predecessors, "lanes.predecessors", n, n, "lane")
    _check_ids(lanes.left_neighbor, "lanes.left_neighbor", n, allow_none=True)
    _check_ids(lanes.right_neighbor, "lanes.right_neighbor", n, allow_none=True)

    rl = m.road_lines
    _check_geometry(rl.geometry, "road_lines", 2, config.min_segment_length)
    _check_len(rl.line_type, "road_lines.line_type", len(rl.geometry))
    _check_enum(rl.line_type, "road_lines.line_type", RoadLineType)
    _check_geometry(m.road_edges, "road_edges", 2, config.min_segment_length)
    _check_geometry(m.sidewalks, "sidewalks", 3, None)
    _check_geometry(m.crosswalks, "crosswalks", 3, None)

    s = m.stop_lines
    ns = int(s.points.shape[0])
    if s.points.shape[1:] != (2, 3):
        _fail(f"stop_lines.points: expected shape [S, 2, 3], got {s.points.shape}")
    bad = np.nonzero(~np.isfinite(s.points).all(axis=(1, 2)))[0]
    if bad.size:
        _fail(f"stop_lines[{int(bad[0])}]: end points are not finite ({s.points[bad[0]].tolist()})")
    bar = np.linalg.norm(s.points[:, 1, :2] - s.points[:, 0, :2], axis=1)
    bad = np.nonzero(bar < config.min_segment_length)[0]
    if bad.size:
        _fail(f"stop_lines[{int(bad[0])}]: zero-length bar")
    _check_ragged_ids(s.lanes, "stop_lines.lanes", ns, n, "lane")
    # A lane ends at one stop line: lanes.stop_line holds one per lane.
    counts = np.bincount(s.lanes.values.astype(np.int64), minlength=n) if s.lanes.values.size else np.zeros(n, np.int64)
    dup = np.nonzero(counts > 1)[0]
    if dup.size:
        lane = int(dup[0])
        rows = np.unique(s.lanes.row_ids()[s.lanes.values == lane]).tolist()
        _fail(f"stop_lines.lanes: lane {lane} is tied to stop lines {rows} (a lane ends at one stop line)")
    _check_len(s.control, "stop_lines.control", ns)
    _check_len(s.intersection, "stop_lines.intersection", ns)

    g = m.signals
    ng = len(g)
    _check_len(g.movement, "signals.movement", ng)
    _check_enum(g.movement, "signals.movement", Movement)
    _check_ids(g.stop_line, "signals.stop_line", ns)
    _check_ragged_ids(g.lanes, "signals.lanes", ng, n, "lane")
    if g.position.shape != (ng, 3) or not np.isfinite(g.position).all():
        _fail(f"signals.position: expected finite float [{ng}, 3], got shape {g.position.shape}")

    st = m.stop_signs
    _check_ids(st.stop_line, "stop_signs.stop_line", ns)
    if st.position.shape != (len(st), 3) or not np.isfinite(st.position).all():
        _fail(f"stop_signs.position: expected finite float [{len(st)}, 3], got shape {st.position.shape}")
    both = np.intersect1d(g.stop_line, st.stop_line)
    if both.size:
        _fail(f"stop_lines[{int(both[0])}]: controlled by both a signal and a stop sign")

    if m.intersections is not None:
        _check_ragged_ids(m.intersections.lanes, "intersections.lanes", len(m.intersections), n, "lane")
        counts = np.bincount(m.intersections.lanes.values, minlength=n)
        dup = np.nonzero(counts > 1)[0]
        if dup.size:
            _fail(f"intersections: lane {int(dup[0])} is listed in more than one intersection")

    x0, y0, x1, y1 = _bounding_box(m)
    side = max(x1 - x0, y1 - y0)
    if side > MAX_MAP_EXTENT:
        _fail(f"map extent: the bounding box is {x1 - x0:.0f} m x {y1 - y0:.0f} m, over the {MAX_MAP_EXTENT:.0f} m "
              "limit (the road index grows with the square of the extent); crop or split the map")

    if m.tracks is not None:
        _validate_tracks(m)


def _bounding_box(m: MapData) -> tuple[float, float, float, float]:
    pts = [r.values[:, :2] for r in (m.lanes.centerline, m.road_lines.geometry, m.road_edges, m.sidewalks,
                                     m.crosswalks) if r.values.shape[0]]
    xy = np.concatenate(pts)
    lo, hi = xy.min(axis=0), xy.max(axis=0)
    return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])


def validate_built(m: MapData, config: BuildConfig = BuildConfig()) -> None:
    """Everything :func:`validate` checks, plus the derived fields :func:`build` fills (intersections,
    movements, stop-line ties, controls): what the engine's unchecked loops rely on. Every map that reaches the engine passes it, whether built now or read from a ``.tzb`` file.
    Raises :class:`MapValidationError` naming the first problem."""
    validate(m, config)
    lanes = m.lanes
    if m.intersections is None:
        _fail("intersections: missing (the map is not built; run terrazero_env.maps.build or `terrazero maps build`)")
    ni = len(m.intersections)
    _check_ids(lanes.intersection, "lanes.intersection", ni, allow_none=True)
    _check_enum(lanes.movement, "lanes.movement", Movement)
    if np.any(np.asarray(lanes.allowed_movements) >= (1 << (max(int(e) for e in Movement) + 1))):
        _fail("lanes.allowed_movements: bits set beyond the known movements")
    ns = len(m.stop_lines)
    _check_ids(lanes.stop_line, "lanes.stop_line", ns, allow_none=True)
    _check_enum(m.stop_lines.control, "stop_lines.control", ControlType)
    _check_ids(m.stop_lines.intersection, "stop_lines.intersection", ni, allow_none=True)
    _check_len(m.signals.intersection, "signals.intersection", len(m.signals))
    _check_ids(m.signals.intersection, "signals.intersection", ni, allow_none=True)
    # Each lane a stop line controls points back at that stop line.
    tied = m.stop_lines.lanes
    if tied.values.size:
        back = np.asarray(lanes.stop_line)[tied.values]
        bad = np.nonzero(back != tied.row_ids())[0]
        if bad.size:
            p = int(bad[0])
            _fail(f"stop_lines[{int(tied.row_ids()[p])}].lanes: lane {int(tied.values[p])} names stop line "
                  f"{int(back[p])} as its own")
    # Predecessors are the exact inverse of successors (the builder derives them so).
    succ = np.stack([lanes.successors.row_ids(), lanes.successors.values.astype(np.int64)], axis=1)
    pred = np.stack([lanes.predecessors.values.astype(np.int64), lanes.predecessors.row_ids()], axis=1)
    if succ.shape != pred.shape or not np.array_equal(np.unique(succ, axis=0), np.unique(pred, axis=0)):
        _fail("lanes.predecessors: not the inverse of lanes.successors")


def _validate_tracks(m: MapData) -> None:
    t = m.tracks
    assert t is not None
    a = len(t)
    if t.state.ndim != 3 or t.state.shape[0] != a or t.state.shape[2] != 6:
        _fail(f"tracks.state: expected shape [{a}, T, 6] (x, y, z, heading, vx, vy), got {t.state.shape}")
    steps = t.state.shape[1]
    if t.valid.shape != (a, steps):
        _fail(f"tracks.valid: shape {t.valid.shape} does not match tracks.state {t.state.shape[:2]}")
    if t.size.shape != (a, 3):
        _fail(f"tracks.size: expected shape [{a}, 3] (length, width, height), got {t.size.shape}")
    _check_enum(t.agent_type, "tracks.agent_type", AgentType)
    bad = np.argwhere(t.valid & ~np.isfinite(t.state).all(axis=2))
    if bad.size:
        _fail(f"tracks[{int(bad[0, 0])}]: state at step {int(bad[0, 1])} is valid but not finite")
    if not (np.isfinite(t.size).all() and (t.size > 0).all()):
        _fail("tracks.size: dimensions must be positive finite metres")
    if not (np.isfinite(t.dt) and t.dt > 0):
        _fail(f"tracks.dt: must be positive seconds, got {t.dt}")


def _check_continuity(lanes: Lanes, tol: float) -> None:
    cl = lanes.centerline
    src = lanes.successors.row_ids()
    dst = lanes.successors.values.astype(np.int64)
    if src.size == 0:
        return
    end = cl.values[cl.offsets[1:] - 1]
    start = cl.values[cl.offsets[:-1]]
    gap = np.linalg.norm(end[src, :2] - start[dst, :2], axis=1)
    bad = np.nonzero(gap > tol)[0]
    if bad.size:
        i = int(bad[0])
        _fail(f"lanes[{int(src[i])}].successors: lane {int(dst[i])} starts {gap[i]:.2f} m from this lane's "
              f"end (tolerance {tol} m)")


# --------------------------------------------------------------------------------------------------
# derivation


def _symmetric_graph(lanes: Lanes) -> tuple[Ragged, Ragged]:
    """Successor and predecessor lists made exact inverses of each other (union of both inputs)."""
    n = len(lanes)
    src = np.concatenate([lanes.successors.row_ids(), lanes.predecessors.values.astype(np.int64)])
    dst = np.concatenate([lanes.successors.values.astype(np.int64), lanes.predecessors.row_ids()])
    edges = np.unique(np.stack([src, dst], axis=1), axis=0) if src.size else np.zeros((0, 2), np.int64)

    def csr(keys: np.ndarray, vals: np.ndarray) -> Ragged:
        order = np.lexsort((vals, keys))
        off = np.zeros(n + 1, np.int64)
        np.add.at(off, keys + 1, 1)
        return Ragged(values=vals[order].astype(np.int32), offsets=np.cumsum(off))

    return csr(edges[:, 0], edges[:, 1]), csr(edges[:, 1], edges[:, 0])


def _end_headings(cl: Ragged) -> tuple[np.ndarray, np.ndarray]:
    v = cl.values
    first, last = cl.offsets[:-1], cl.offsets[1:] - 1
    d0 = v[first + 1, :2] - v[first, :2]
    d1 = v[last, :2] - v[last - 1, :2]
    return np.arctan2(d0[:, 1], d0[:, 0]), np.arctan2(d1[:, 1], d1[:, 0])


def lane_movements(lanes: Lanes, config: BuildConfig = BuildConfig()) -> np.ndarray:
    """Turn class of every lane from its heading change (uint8 :class:`Movement`, never NONE)."""
    h0, h1 = _end_headings(lanes.centerline)
    d = np.angle(np.exp(1j * (h1 - h0)))
    mv = np.full(len(lanes), Movement.STRAIGHT, np.uint8)
    mv[d >= config.straight_threshold] = Movement.LEFT
    mv[d <= -config.straight_threshold] = Movement.RIGHT
    mv[np.abs(d) >= config.uturn_threshold] = Movement.UTURN
    return mv


def _union_find_groups(n: int, pairs: np.ndarray) -> np.ndarray:
    parent = np.arange(n)

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        ra, rb = root(int(a)), root(int(b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([root(i) for i in range(n)])


def infer_intersections(lanes: Lanes, config: BuildConfig = BuildConfig()) -> Intersections:
    """Junctions from lane topology: where a lane branches into successors of different turn classes,
    those successors are junction lanes; junction lanes whose extents overlap (1 m margin) form one
    intersection."""
    succ, _ = _symmetric_graph(lanes)
    turn = lane_movements(lanes, config)
    src = succ.row_ids()
    dst = succ.values.astype(np.int64)
    n = len(lanes)
    # Branch points whose successors disagree on turn class.
    tmin = np.full(n, 255, np.int64)
    tmax = np.zeros(n, np.int64)
    np.minimum.at(tmin, src, turn[dst])
    np.maximum.at(tmax, src, turn[dst])
    branching = tmax > tmin
    cand = np.unique(dst[branching[src]])
    if cand.size == 0:
        return Intersections.create([])
    cl = lanes.centerline
    rid = cl.row_ids()
    lo = np.full((n, 2), np.inf)
    hi = np.full((n, 2), -np.inf)
    np.minimum.at(lo, rid, cl.values[:, :2])
    np.maximum.at(hi, rid, cl.values[:, :2])
    blo, bhi = lo[cand] - 1.0, hi[cand] + 1.0
    overlap = (blo[:, None, :] <= bhi[None, :, :]).all(-1) & (blo[None, :, :] <= bhi[:, None, :]).all(-1)
    ii, jj = np.nonzero(np.triu(overlap, 1))
    groups = _union_find_groups(cand.size, np.stack([ii, jj], axis=1))
    _, label = np.unique(groups, return_inverse=True)
    return Intersections.create([cand[label == k].tolist() for k in range(int(label.max()) + 1)])


def _tie_stop_lines(m: MapData, config: BuildConfig) -> Ragged:
    """Stop-line -> lane ties: kept where given, else the lanes whose end point lies within
    ``stop_line_tie_distance`` of the bar and which no other stop line holds; a lane whose end is near
    several untied bars goes to the nearest (the lowest index on a tie), since a lane ends at one stop
    line (``lanes.stop_line``)."""
    s = m.stop_lines
    cl = m.lanes.centerline
    ends = cl.values[cl.offsets[1:] - 1, :2]
    n = ends.shape[0]
    given = [s.lanes.row(i) for i in range(len(s))]
    untied = [i for i in range(len(s)) if given[i].size == 0]
    if not untied:
        return Ragged.from_rows(given, np.int32)
    free = np.ones(n, bool)
    free[s.lanes.values] = False
    best = np.full(n, -1, np.int64)
    dist = np.full(n, np.inf)
    near = {}
    for i in untied:
        a, b = s.points[i, 0, :2], s.points[i, 1, :2]
        ab = b - a
        t = np.clip(((ends - a) @ ab) / (ab @ ab), 0.0, 1.0)
        d = np.linalg.norm(a + t[:, None] * ab - ends, axis=1)
        near[i] = np.nonzero(d <= config.stop_line_tie_distance)[0]
        closer = free & (d <= config.stop_line_tie_distance) & (d < dist)  # strict: the lowest index keeps a tie
        best[closer], dist[closer] = i, d[closer]
    rows = []
    for i in range(len(s)):
        if given[i].size:
            rows.append(given[i])
            continue
        tied = np.nonzero(best == i)[0]
        if tied.size == 0:
            why = (f"the lanes ending within {config.stop_line_tie_distance} m of it ({near[i].tolist()}) are tied "
                   "to other stop lines" if near[i].size else
                   f"no lane ends within {config.stop_line_tie_distance} m of the bar")
            _fail(f"stop_lines[{i}]: tied to no lane ({why})")
        rows.append(tied)
    return Ragged.from_rows(rows, np.int32)


def build(m: MapData, config: BuildConfig = BuildConfig()) -> MapData:
    """Validate ``m`` and return a new, simulation-ready ``MapData`` with every derived field filled."""
    validate(m, config)
    lanes = m.lanes
    n = len(lanes)
    succ, pred = _symmetric_graph(lanes)
    lanes = replace(lanes, successors=succ, predecessors=pred)
    _check_continuity(lanes, config.successor_tolerance)

    defaults = np.array([config.default_speed_limit_vehicle, config.default_speed_limit_bike,
                         config.default_speed_limit_bus], np.float32)
    speed = np.where(np.isnan(lanes.speed_limit), defaults[lanes.lane_type], lanes.speed_limit).astype(np.float32)

    inters = m.intersections if m.intersections is not None else infer_intersections(lanes, config)
    lane_inter = np.full(n, -1, np.int32)
    lane_inter[inters.lanes.values] = inters.lanes.row_ids().astype(np.int32)
    turn = lane_movements(lanes, config)
    movement = np.where(lane_inter >= 0, turn, Movement.NONE).astype(np.uint8)

    # Legal movements at a lane's end: the turn classes of the intersection lanes it feeds.
    allowed = np.zeros(n, np.uint8)
    src, dst = succ.row_ids(), succ.values.astype(np.int64)
    np.bitwise_or.at(allowed, src, np.where(lane_inter[dst] >= 0, 1 << movement[dst], 1 << Movement.NONE).astype(np.uint8))

    stop_lanes = _tie_stop_lines(m, config)
    ns = len(m.stop_lines)
    lane_stop = np.full(n, -1, np.int32)
    lane_stop[stop_lanes.values] = stop_lanes.row_ids().astype(np.int32)
    # A stop line guards the intersection its lanes flow into.
    stop_inter = np.full(ns, -1, np.int32)
    feeds = lane_stop[src] >= 0
    np.maximum.at(stop_inter, lane_stop[src[feeds]], lane_inter[dst[feeds]])
    control = np.zeros(ns, np.uint8)
    control[m.stop_signs.stop_line] = ControlType.STOP_SIGN
    control[m.signals.stop_line] = ControlType.SIGNAL

    g = m.signals
    sig_rows = []
    for k in range(len(g)):
        given = g.lanes.row(k)
        if given.size:
            sig_rows.append(given)
            continue
        entry = stop_lanes.row(int(g.stop_line[k]))
        cand = np.unique(np.concatenate([succ.row(int(e)) for e in entry])) if entry.size else np.zeros(0, np.int64)
        sig_rows.append(cand[(lane_inter[cand] >= 0) & (movement[cand] == g.movement[k])])
    signals = Signals(stop_line=g.stop_line, movement=g.movement, lanes=Ragged.from_rows(sig_rows, np.int32),
                      position=g.position, intersection=stop_inter[g.stop_line] if len(g) else np.zeros(0, np.int32))

    lanes = replace(lanes, speed_limit=speed, intersection=lane_inter, movement=movement,
                    allowed_movements=allowed, stop_line=lane_stop)
    stop_lines = StopLines(points=m.stop_lines.points, lanes=stop_lanes, control=control, intersection=stop_inter)
    out = m.replace(lanes=lanes, stop_lines=stop_lines, signals=signals, intersections=inters)
    # The checks every reader of a built map runs (``load_built``, the engine's ``RoadMap``): a map this
    # function returns, and so every ``.tzb`` that ``maps build`` and ``build-dataset`` write, passes them.
    validate_built(out, config)
    return out
