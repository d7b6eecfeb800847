"""One WOMD scenario in plain arrays (``Scene``), and its mapping into ``MapData`` with logged tracks.

Both WOMD readers fill a ``Scene``: :mod:`.womd` from ``Scenario`` protos in TFRecord files and
:mod:`.gpudrive_json` from the GPUDrive/PufferDrive JSON. The enum codes are Waymo's (``map.proto``,
``scenario.proto``), so one mapping serves both formats and a scene read either way gives the same map.

Mapping (Waymo's WOMD documentation, "Motion dataset: Scenario proto"):

* lanes (``LaneCenter``): freeway and surface-street lanes are vehicle lanes, bike lanes bike lanes;
  ``exit_lanes`` become successors (ids the scene does not hold are dropped and counted), the first
  left/right neighbour becomes the lane-change neighbour; ``speed_limit_mph`` to m/s (0 = unknown);
* road lines by paint, road edges (boundary and median), crosswalk polygons;
* a signal (``TrafficSignalLaneState``) governs the lane it names, which starts at the stop point
  inside the junction: the stop line is a bar across the end of the lane leading into it (shared by
  the heads of every lane leaving that approach), and the head's movement is the lane's turn; a
  signal whose lane has no lane leading in is skipped and counted. Per-step states go to ``metadata["logged_signals"]``;
* a stop sign controls the lanes it lists (or, when it lists none, the nearest lane end within
  ``STOP_SIGN_REACH`` m); its stop line is a bar across the end of each such lane;
* speed bumps and driveways have no counterpart in ``MapData``; their polygons go to ``metadata``;
* tracks of vehicles, pedestrians and cyclists with at least one valid step (``TYPE_OTHER`` and
  ``TYPE_UNSET`` are dropped and counted); the size is the one at the last valid step; invalid steps
  hold zeros. ``metadata`` keeps the SDC's and the tracks-to-predict's rows and the Waymo track ids.

Coordinates are shifted so the map's bounding box is centred on the origin (the engine's single
precision keeps centimetres near the origin, not 8 km out); ``metadata["origin"]`` is the shift.

A scene is user input (docs/hardening.md, third pass): every count that sizes an allocation (lanes,
points of polylines and polygons, lane ids named, tracks x steps, signal states and signalled lanes x
steps, candidate pairs of the spatial searches) is checked against :data:`LIMITS` before the allocation,
by the readers from their input and here again from the ``Scene``; lane and track ids must be unique.
The nearest-lane-end searches hash points into a uniform grid (:func:`near_pairs`), so their work
follows the pairs of nearby points, not the product of two counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis import infer_handedness
from ..builder import MAX_MAP_EXTENT, BuildConfig, MapValidationError
from ..schema import (
    AgentType,
    Handedness,
    Lanes,
    LaneType,
    MapData,
    Movement,
    Polygons,
    Polylines,
    RoadLines,
    RoadLineType,
    Signals,
    StopLines,
    StopSigns,
    Tracks,
)

__all__ = ["LIMITS", "MAX_ID_CHARS", "POLYLINE_JUMP", "Scene", "SceneLane", "SIGNAL_STATES", "STOP_SIGN_REACH",
           "check_counts", "check_extent", "check_limits", "check_scenario_id", "near_pairs", "scene_counts", "to_map_data"]

_MPH = 0.44704
#: Waymo's TrafficSignalLaneState.State names by code.
SIGNAL_STATES = ("unknown", "arrow_stop", "arrow_caution", "arrow_go", "stop", "caution", "go",
                 "flashing_stop", "flashing_caution")
#: RoadLine.RoadLineType code -> paint (unknown paints as dashed white).
_LINE = {0: RoadLineType.DASHED_WHITE, 1: RoadLineType.DASHED_WHITE, 2: RoadLineType.SOLID_WHITE,
         3: RoadLineType.SOLID_WHITE, 4: RoadLineType.DASHED_YELLOW, 5: RoadLineType.DASHED_YELLOW,
         6: RoadLineType.SOLID_YELLOW, 7: RoadLineType.DOUBLE_SOLID_YELLOW, 8: RoadLineType.DOUBLE_SOLID_YELLOW}
#: Track.ObjectType code -> agent type (TYPE_UNSET and TYPE_OTHER are dropped).
_AGENT = {1: AgentType.CAR, 2: AgentType.PEDESTRIAN, 3: AgentType.CYCLIST}
#: metres from a stop sign to the end of a lane it controls, when the scene names no lanes.
STOP_SIGN_REACH = 8.0
#: metres between consecutive points of a road edge or line above which the polyline is cut in two
#: (four times WOMD's 0.5 m sampling; ``_split_jumps``).
POLYLINE_JUMP = 2.0
#: Limits on what one scene may ask of the converters (a trust boundary: the file is user input). Each
#: reader checks the counts it is about to allocate against these before allocating (docs/hardening.md,
#: third pass, has the memory each one bounds).
LIMITS = {
    "lanes": 20_000,             # lane centres
    "features": 100_000,         # map features of every kind
    "points": 2_000_000,         # points of every polyline and polygon, stop-sign and stop-point positions
    "links": 1_000_000,          # lane ids named by lanes (entry, exit, neighbours, boundaries) and stop signs,
                                 # and the successor links the JSON reader infers
    "tracks": 4_096,
    "steps": 2_000,              # states of one track, timestamps, signal steps
    "track_states": 1_000_000,   # tracks x steps: the cells of the track arrays
    "signal_states": 200_000,    # logged signal lane states (one per head and step)
    "signal_cells": 1_000_000,   # signalled lanes x signal steps: the cells of the per-lane state rows
    "search_pairs": 20_000_000,  # candidate point pairs one spatial search compares (time; memory is in chunks)
}
_WHAT = {"track_states": "track cells (tracks x steps)", "signal_cells": "signal cells (signalled lanes x steps)",
         "search_pairs": "candidate pairs for the nearest-lane search", "signal_states": "signal lane states"}
#: Longest scenario id (characters); it names the scene's file in a dataset.
MAX_ID_CHARS = 256
_SEARCH_CHUNK = 1 << 20
_BIKE_WIDTH, _LANE_WIDTH = 1.8, 3.5


@dataclass
class SceneLane:
    """One ``LaneCenter``: ``polyline`` float64 ``[n, 3]`` metres, Waymo lane ``type`` code."""

    id: int
    polyline: np.ndarray
    type: int = 2
    speed_limit_mph: float = 0.0
    entry: list[int] = field(default_factory=list)
    exit: list[int] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)


@dataclass
class Scene:
    """A WOMD scenario: map features keyed by Waymo ids, tracks as arrays, per-step signal states."""

    scenario_id: str
    lanes: list[SceneLane]
    road_lines: list[tuple[int, int, np.ndarray]] = field(default_factory=list)
    """(id, RoadLineType code, ``[n, 3]``)"""
    road_edges: list[tuple[int, int, np.ndarray]] = field(default_factory=list)
    """(id, RoadEdgeType code, ``[n, 3]``)"""
    stop_signs: list[tuple[int, list[int], np.ndarray]] = field(default_factory=list)
    """(id, controlled lane ids, position ``[3]``)"""
    crosswalks: list[tuple[int, np.ndarray]] = field(default_factory=list)
    speed_bumps: list[tuple[int, np.ndarray]] = field(default_factory=list)
    driveways: list[tuple[int, np.ndarray]] = field(default_factory=list)
    track_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    track_types: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Waymo ObjectType codes ``[A]``."""
    track_state: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 6)))
    """float64 ``[A, T, 6]``: x, y, z, heading, vx, vy."""
    track_size: np.ndarray = field(default_factory=lambda: np.zeros((0, 3), np.float32))
    """float32 ``[A, 3]``: length, width, height."""
    track_valid: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), bool))
    timestamps: np.ndarray = field(default_factory=lambda: np.zeros(0))
    signals: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    """lane id -> (int8 ``[T]`` state codes, -1 where the log has none; stop point ``[3]``)."""
    sdc_track_index: int = -1
    tracks_to_predict: list[int] = field(default_factory=list)
    objects_of_interest: list[int] = field(default_factory=list)
    current_time_index: int = 10
    source: str = "womd"


def _clean(points: Any, where: str, min_points: int) -> np.ndarray:
    a = np.asarray(points, np.float64).reshape(-1, 3)
    if not np.all(np.isfinite(a)):
        raise MapValidationError(f"{where}: coordinates are not finite")
    if a.shape[0] > 1:
        keep = np.r_[True, np.linalg.norm(np.diff(a[:, :2], axis=0), axis=1) > 1e-3]
        a = a[keep]
    return a if a.shape[0] >= min_points else np.zeros((0, 3))


def _split_jumps(p: np.ndarray) -> list[np.ndarray]:
    """A road edge or line cut where two consecutive points lie more than :data:`POLYLINE_JUMP` apart;
    pieces of fewer than two points are dropped. WOMD's map polylines are sampled every 0.5 m: of the
    852,814 road-edge segments of 194 public scenes, 340 are longer than 1 m, and those, up to 156 m
    long, join two pieces of curb across the road (where a curb leaves the scene's crop and comes
    back, or around a parking lot; Waymo's own test Scenarios hold them too). A lane crossing one puts
    a car centred on the lane off the road."""
    seg = np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1)
    cut = np.nonzero(seg > POLYLINE_JUMP)[0]
    pieces = np.split(p, cut + 1) if cut.size else [p]
    return [q for q in pieces if q.shape[0] >= 2]


def check_counts(counts: dict[str, int], where: str) -> None:
    """Raise ``MapValidationError`` naming ``where`` when a count is over its :data:`LIMITS` entry."""
    for what, n in counts.items():
        if what in LIMITS and n > LIMITS[what]:
            raise MapValidationError(f"{where}: {n} {_WHAT.get(what, what)}, over the limit of {LIMITS[what]}")


def check_scenario_id(sid: Any, where: str) -> str:
    """``sid`` when it is text that can name a file and a line of output: a string of at most
    :data:`MAX_ID_CHARS` characters, no control characters, no lone surrogates (bytes that were not UTF-8)."""
    if not isinstance(sid, str):
        raise MapValidationError(f"{where}: scenario_id must be a string, got {type(sid).__name__}")
    if len(sid) > MAX_ID_CHARS:
        raise MapValidationError(f"{where}: scenario_id is {len(sid)} characters long, over {MAX_ID_CHARS}")
    bad = next((c for c in sid if ord(c) < 0x20 or ord(c) == 0x7F or 0xD800 <= ord(c) <= 0xDFFF), None)
    if bad is not None:
        kind = "a lone surrogate {:#06x} (not UTF-8 text)" if 0xD800 <= ord(bad) <= 0xDFFF else "a control character {:#04x}"
        raise MapValidationError(f"{where}: scenario_id {ascii(sid)[:80]} holds {kind.format(ord(bad))}")
    return sid


def scene_counts(scene: Scene) -> dict[str, int]:
    """The counts :data:`LIMITS` bounds, of a ``Scene``."""
    polys = [x[-1] for x in scene.road_lines + scene.road_edges] + [x[-1] for x in
                                                                    scene.crosswalks + scene.speed_bumps + scene.driveways]
    n_pts = (sum(len(ln.polyline) for ln in scene.lanes) + sum(len(p) for p in polys) + len(scene.stop_signs)
             + len(scene.signals))
    st = np.shape(scene.track_state)
    n_tracks, n_steps = (int(st[0]), int(st[1])) if len(st) >= 2 else (0, 0)
    sig_steps = max([len(v[0]) for v in scene.signals.values()] + [0])
    return {
        "lanes": len(scene.lanes),
        "features": (len(scene.lanes) + len(scene.road_lines) + len(scene.road_edges) + len(scene.stop_signs)
                     + len(scene.crosswalks) + len(scene.speed_bumps) + len(scene.driveways)),
        "points": n_pts,
        "links": (sum(len(ln.entry) + len(ln.exit) + len(ln.left) + len(ln.right) for ln in scene.lanes)
                  + sum(len(x[1]) for x in scene.stop_signs)),
        "tracks": n_tracks, "steps": max(n_steps, int(np.size(scene.timestamps)), sig_steps),
        "track_states": n_tracks * n_steps,
        "signal_states": sum(int(np.count_nonzero(np.asarray(v[0]) >= 0)) for v in scene.signals.values()),
        "signal_cells": len(scene.signals) * sig_steps,
    }


def check_limits(scene: Scene) -> None:
    """Raise ``MapValidationError`` when a scene exceeds :data:`LIMITS`, or repeats a lane or track id
    (a second lane with one id would take the first one's links; a track id names one agent)."""
    where = f"scenario {scene.scenario_id}"
    check_counts(scene_counts(scene), where)
    for what, ids in (("lane", [ln.id for ln in scene.lanes]), ("track", np.asarray(scene.track_ids).tolist())):
        seen: set[int] = set()
        for i in ids:
            if i in seen:
                raise MapValidationError(f"{where}: {what} id {i} appears twice ({what} ids must be unique)")
            seen.add(i)


def check_extent(points: list[np.ndarray], where: str, names: list[str] | None = None) -> None:
    """Raise when lane points are not finite or span more than the builder's ``MAX_MAP_EXTENT`` (checked
    before the spatial searches, whose grid follows the extent); ``names[k]`` names ``points[k]``."""
    parts = [np.asarray(p, np.float64).reshape(-1, 3)[:, :2] for p in points]
    xy = np.concatenate(parts + [np.zeros((0, 2))])
    if not xy.shape[0]:
        return
    if not np.all(np.isfinite(xy)):
        k = next(k for k, p in enumerate(parts) if not np.all(np.isfinite(p)))
        raise MapValidationError(f"{where}: {names[k] if names else f'polyline {k}'}: coordinates are not finite")
    lo, hi = xy.min(0), xy.max(0)
    if float(np.max(hi - lo)) > MAX_MAP_EXTENT:
        raise MapValidationError(f"{where}: lanes span {hi[0] - lo[0]:.0f} m x {hi[1] - lo[1]:.0f} m, over the "
                                 f"{MAX_MAP_EXTENT:.0f} m map extent limit")


def near_pairs(q: np.ndarray, p: np.ndarray, r: float, where: str):
    """Candidate pairs ``(query rows, point rows)`` of query points ``q [n, 2]`` and points ``p [m, 2]``
    that may lie within ``r`` of each other: every pair closer than ``r`` is among them (callers filter by
    the exact distance). A uniform grid of cell ``r`` over ``p``'s box: the work follows the points in
    the 3 x 3 cells around each query, not ``n x m``. Yields chunks of about a million pairs; raises
    ``MapValidationError`` when the candidates exceed ``LIMITS["search_pairs"]``. Non-finite queries and
    queries farther than ``r`` outside ``p``'s box have none."""
    q = np.asarray(q, np.float64).reshape(-1, 2)
    p = np.asarray(p, np.float64).reshape(-1, 2)
    keep_p = np.nonzero(np.isfinite(p).all(1))[0]
    if not q.shape[0] or not keep_p.shape[0]:
        return
    cell = float(r) * (1 + 1e-9)
    pk = p[keep_p]
    pmin, pmax = pk.min(0), pk.max(0)
    lo = pmin - 2 * cell
    n_cells = np.floor((pmax + 2 * cell - lo) / cell).astype(np.int64) + 1
    if np.any(n_cells > 1 << 30):
        raise MapValidationError(f"{where}: points span {float(np.max(pmax - pmin)):.0f} m, too wide for a "
                                 f"{r} m search grid")
    ny = int(n_cells[1])
    cp = np.floor((pk - lo) / cell).astype(np.int64)
    key_p = cp[:, 0] * ny + cp[:, 1]
    order = np.argsort(key_p, kind="stable")
    sorted_keys = key_p[order]
    with np.errstate(invalid="ignore"):
        inside = np.isfinite(q).all(1) & np.all(q >= pmin - cell, axis=1) & np.all(q <= pmax + cell, axis=1)
    rows = np.nonzero(inside)[0]
    if not rows.shape[0]:
        return
    cq = np.floor((q[rows] - lo) / cell).astype(np.int64)
    key_q = cq[:, 0] * ny + cq[:, 1]
    offsets = np.array([dx * ny + dy for dx in (-1, 0, 1) for dy in (-1, 0, 1)], np.int64)
    keys = key_q[:, None] + offsets[None, :]
    first = np.searchsorted(sorted_keys, keys, "left")
    count = np.searchsorted(sorted_keys, keys, "right") - first
    total = int(count.sum())
    check_counts({"search_pairs": total}, where)
    per_row = count.sum(1)
    cum = np.cumsum(per_row)
    i = 0
    while i < rows.shape[0]:
        done = int(cum[i - 1]) if i else 0
        j = min(max(int(np.searchsorted(cum, done + _SEARCH_CHUNK, "right")), i + 1), rows.shape[0])
        c, f = count[i:j].ravel(), first[i:j].ravel()
        n = int(c.sum())
        if n:
            qi = np.repeat(np.repeat(rows[i:j], offsets.shape[0]), c)
            pos = np.repeat(f - (np.cumsum(c) - c), c) + np.arange(n)
            yield qi, keep_p[order[pos]]
        i = j


def _nearest(q: np.ndarray, p: np.ndarray, r: float, where: str, exclude: np.ndarray | None = None,
             strict: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """For each query, the row of the nearest point within ``r`` (``<= r``, or ``< r`` with ``strict``),
    the lowest row on a tie, and its distance; -1 and inf where none. ``exclude[k]``: a row query ``k``
    must not take."""
    best = np.full(q.shape[0], -1, np.int64)
    dist = np.full(q.shape[0], np.inf)
    for qi, pi in near_pairs(q, p, r, where):
        d = np.linalg.norm(p[pi] - q[qi], axis=1)
        ok = (d < r) if strict else (d <= r)
        if exclude is not None:
            ok &= pi != exclude[qi]
        qi, pi, d = qi[ok], pi[ok], d[ok]
        if not qi.shape[0]:
            continue
        o = np.lexsort((pi, d, qi))
        qi, pi, d = qi[o], pi[o], d[o]
        head = np.r_[True, qi[1:] != qi[:-1]]
        qi, pi, d = qi[head], pi[head], d[head]
        better = (d < dist[qi]) | ((d == dist[qi]) & (pi < best[qi]))
        best[qi[better]], dist[qi[better]] = pi[better], d[better]
    return best, dist


def _turn(p: np.ndarray) -> Movement:
    d0, d1 = p[1, :2] - p[0, :2], p[-1, :2] - p[-2, :2]
    a = float(np.arctan2(d0[0] * d1[1] - d0[1] * d1[0], d0 @ d1))
    if abs(a) < np.radians(30):
        return Movement.STRAIGHT
    if abs(a) > np.radians(150):
        return Movement.UTURN
    return Movement.LEFT if a > 0 else Movement.RIGHT


def to_map_data(scene: Scene, *, name: str = "", handedness: str | None = None) -> MapData:
    """``MapData`` (raw: pass it to ``build``) with logged tracks from a ``Scene``."""
    check_limits(scene)
    sid = scene.scenario_id
    polys = [_clean(ln.polyline, f"scenario {sid}: lane {ln.id}", 2) for ln in scene.lanes]
    kept = [i for i, p in enumerate(polys) if p.shape[0] >= 2]
    if not kept:
        raise MapValidationError(f"scenario {sid}: no lane with two distinct points")
    lanes = [scene.lanes[i] for i in kept]
    polys = [polys[i] for i in kept]
    index = {ln.id: i for i, ln in enumerate(lanes)}
    check_extent(polys, f"scenario {sid}")
    allpts = np.concatenate(polys)
    lo, hi = allpts[:, :2].min(0), allpts[:, :2].max(0)
    origin = np.r_[np.round((lo + hi) / 2), 0.0]
    polys = [p - origin for p in polys]

    dangling = 0
    succ, left, right = [], [], []
    for ln in lanes:
        s = [index[x] for x in ln.exit if x in index]
        dangling += len(ln.exit) - len(s)
        succ.append(sorted(set(s)))
        lft = [index[x] for x in ln.left if x in index]
        rgt = [index[x] for x in ln.right if x in index]
        left.append(lft[0] if lft else -1)
        right.append(rgt[0] if rgt else -1)
    ltype = [LaneType.BIKE if ln.type == 3 else LaneType.VEHICLE for ln in lanes]
    width = [_BIKE_WIDTH if t == LaneType.BIKE else _LANE_WIDTH for t in ltype]
    speed = [ln.speed_limit_mph * _MPH if ln.speed_limit_mph > 0 else np.nan for ln in lanes]
    lane_data = Lanes.create(polys, lane_type=ltype, width=width, speed_limit=speed, successors=succ,
                             left_neighbor=left, right_neighbor=right)

    def shifted(items: list, where: str, min_points: int) -> list[np.ndarray]:
        out = []
        for it in items:
            p = _clean(it[-1], f"scenario {sid}: {where} {it[0]}", min_points)
            if p.shape[0] >= min_points:
                out.append(p - origin)
        return out

    line_pts, line_types = [], []
    jumps = 0
    for fid, code, pts in scene.road_lines:
        p = _clean(pts, f"scenario {sid}: road line {fid}", 2)
        pieces = _split_jumps(p - origin) if p.shape[0] >= 2 else []
        jumps += max(len(pieces) - 1, 0)
        line_pts += pieces
        line_types += [_LINE.get(int(code), RoadLineType.DASHED_WHITE)] * len(pieces)
    edges = []
    for e in shifted(scene.road_edges, "road edge", 2):
        pieces = _split_jumps(e)
        jumps += max(len(pieces) - 1, 0)
        edges += pieces
    crosswalks = shifted(scene.crosswalks, "crosswalk", 3)

    # Stop lines: bars across lane ends (signals: the entry lanes of the governed lane end at its start).
    bars: list[np.ndarray] = []
    bar_at: dict[int, int] = {}

    def bar(lane: int) -> int:
        if lane not in bar_at:
            p = polys[lane]
            d = (p[-1] - p[-2])[:2] / np.linalg.norm((p[-1] - p[-2])[:2])
            n = np.array([-d[1], d[0]]) * width[lane] / 2
            bars.append(np.array([np.r_[p[-1, :2] + n, p[-1, 2]], np.r_[p[-1, :2] - n, p[-1, 2]]]))
            bar_at[lane] = len(bars) - 1
        return bar_at[lane]

    starts = np.array([p[0, :2] for p in polys])
    ends = np.array([p[-1, :2] for p in polys])
    sig_line, sig_move, sig_pos, sig_lanes, sig_states, sig_ids = [], [], [], [], [], []
    skipped_signals = 0
    # The bar lies across the end of the lane leading in (the builder ties stop lines to lane ends): the
    # lane whose end is nearest the governed lane's start, under 1 m (the lowest row on a tie); heads of
    # the lanes leaving one approach share its bar.
    governed = np.array([index.get(lane_id, -1) for lane_id in sorted(scene.signals)], np.int64)
    approach_of, _ = _nearest(starts[np.maximum(governed, 0)], ends, 1.0, f"scenario {sid}: signals",
                              exclude=governed, strict=True)
    for n_sig, lane_id in enumerate(sorted(scene.signals)):
        states, stop = scene.signals[lane_id]
        if lane_id not in index:
            skipped_signals += 1
            continue
        k = index[lane_id]
        approach = int(approach_of[n_sig])
        if approach < 0:
            skipped_signals += 1
            continue
        sig_line.append(bar(approach))
        sig_move.append(_turn(polys[k]))
        sig_pos.append(np.asarray(stop, np.float64) - origin)
        sig_lanes.append([k])
        sig_states.append([int(s) for s in states])
        sig_ids.append(int(lane_id))
    stop_line_ids, stop_pos = [], []
    taken = set(sig_line)
    sign_pos = np.array([np.asarray(pos, np.float64).reshape(3) for _, _, pos in scene.stop_signs]).reshape(-1, 3)
    sign_pos = sign_pos - origin
    # a sign that names no lane of the scene controls the nearest lane end within reach (lowest row on a tie)
    nearest_end, _ = _nearest(sign_pos[:, :2], ends, STOP_SIGN_REACH, f"scenario {sid}: stop signs")
    for n_sign, (_fid, ctl, _pos) in enumerate(scene.stop_signs):
        pos = sign_pos[n_sign]
        ids = [index[x] for x in ctl if x in index]
        if not ids:
            ids = [int(nearest_end[n_sign])] if nearest_end[n_sign] >= 0 else []
        for k in ids:
            b = bar(k)
            if b not in taken:  # a bar is controlled once: by its signal, or by the first sign naming it
                taken.add(b)
                stop_line_ids.append(b)
                stop_pos.append(pos)

    bar_lanes = _tie_bars(bars, bar_at, ends, f"scenario {sid}: stop lines")
    tracks, meta_tracks = _tracks(scene, origin)
    m = MapData(
        lanes=lane_data,
        road_lines=RoadLines.create(line_pts, line_types),
        road_edges=Polylines(edges),
        crosswalks=Polygons(crosswalks),
        stop_lines=StopLines.create(np.array(bars).reshape(-1, 2, 3), lanes=bar_lanes),
        signals=Signals.create(sig_line, sig_move, np.array(sig_pos).reshape(-1, 3), lanes=sig_lanes),
        stop_signs=StopSigns.create(np.array(stop_pos).reshape(-1, 3), stop_line_ids),
        intersections=None,
        handedness=Handedness.RIGHT,
        tracks=tracks,
        name=name or sid,
        metadata={
            "source": scene.source, "scenario_id": sid, "origin": origin.tolist(),
            "lanes_dropped": len(scene.lanes) - len(lanes), "dangling_exit_lanes": dangling,
            "signals_skipped": skipped_signals, "polyline_jumps_split": jumps,
            "logged_signals": {"lane_ids": sig_ids, "states": sig_states, "state_names": list(SIGNAL_STATES)},
            "speed_bumps": [(np.asarray(p, np.float64).reshape(-1, 3) - origin).round(3).tolist()
                            for _, p in scene.speed_bumps],
            "driveways": [(np.asarray(p, np.float64).reshape(-1, 3) - origin).round(3).tolist()
                          for _, p in scene.driveways],
            **meta_tracks,
        },
    )
    if handedness is not None:
        return m.replace(handedness=Handedness[str(handedness).upper()])
    return m.replace(handedness=infer_handedness(m))


def _tie_bars(bars: list[np.ndarray], bar_at: dict[int, int], ends: np.ndarray, where: str) -> list[list[int]]:
    """The lanes each stop line controls, given explicitly so that no lane is tied to two: a bar ties the
    lane it was drawn across, and every lane that owns no bar and ends within the builder's
    ``stop_line_tie_distance`` of it (lanes ending together, as merging lanes do) is tied to the nearest
    such bar (the lowest index on a tie). Left to the builder's geometric tie, a lane ending where two
    bars cross (two approaches meeting at one point, each with its own sign or signal) would be tied to
    both, and a lane has one stop line."""
    rows = [[] for _ in bars]
    for lane, b in bar_at.items():
        rows[b].append(lane)
    if not bars:
        return rows
    reach = BuildConfig().stop_line_tie_distance
    pts = np.array(bars)[:, :, :2]
    a, ab = pts[:, 0], pts[:, 1] - pts[:, 0]
    half = np.linalg.norm(ab, axis=1).max() / 2
    best = np.full(ends.shape[0], -1, np.int64)
    dist = np.full(ends.shape[0], np.inf)
    for li, bi in near_pairs(ends, (pts[:, 0] + pts[:, 1]) / 2, half + reach, where):
        t = np.clip(((ends[li] - a[bi]) * ab[bi]).sum(1) / (ab[bi] ** 2).sum(1), 0.0, 1.0)
        d = np.linalg.norm(a[bi] + t[:, None] * ab[bi] - ends[li], axis=1)
        ok = d <= reach
        li, bi, d = li[ok], bi[ok], d[ok]
        o = np.lexsort((bi, d, li))  # per lane: the nearest bar, the lowest on a tie
        li, bi, d = li[o], bi[o], d[o]
        head = np.r_[True, li[1:] != li[:-1]] if li.shape[0] else np.zeros(0, bool)
        li, bi, d = li[head], bi[head], d[head]
        better = (d < dist[li]) | ((d == dist[li]) & (bi < best[li]))
        best[li[better]], dist[li[better]] = bi[better], d[better]
    for lane in np.nonzero(best >= 0)[0].tolist():
        if lane not in bar_at:
            rows[int(best[lane])].append(lane)
    return [sorted(r) for r in rows]


def _tracks(scene: Scene, origin: np.ndarray) -> tuple[Tracks | None, dict[str, Any]]:
    st, valid = np.asarray(scene.track_state, np.float64), np.asarray(scene.track_valid, bool)
    if st.ndim != 3 or st.shape[-1] != 6 or valid.shape != st.shape[:2]:
        raise MapValidationError(f"scenario {scene.scenario_id}: track arrays have shapes {st.shape} and {valid.shape}")
    keep = np.array([int(t) in _AGENT for t in scene.track_types], bool) & valid.any(axis=1) if st.shape[0] else \
        np.zeros(0, bool)
    rows = np.nonzero(keep)[0]
    new_row = {int(r): i for i, r in enumerate(rows)}
    meta = {"tracks_dropped": int(st.shape[0] - rows.shape[0]),
            "track_ids": [int(x) for x in np.asarray(scene.track_ids)[rows]],
            "sdc_track": new_row.get(int(scene.sdc_track_index), -1),
            "tracks_to_predict": [new_row[i] for i in scene.tracks_to_predict if i in new_row],
            "current_time_index": int(scene.current_time_index)}
    if rows.shape[0] == 0:
        return None, meta
    s = st[rows].copy()
    v = valid[rows]
    s[..., :3] -= origin
    s[~v] = 0.0
    if not np.all(np.isfinite(s)):
        bad = np.argwhere(~np.isfinite(s).all(axis=2))[0]
        raise MapValidationError(f"scenario {scene.scenario_id}: track {int(np.asarray(scene.track_ids)[rows][bad[0]])}"
                                 f" has a non-finite state at step {int(bad[1])}")
    size = np.asarray(scene.track_size, np.float32)[rows]
    size = np.where(np.isfinite(size) & (size > 0.1), size, np.float32(0.1)).astype(np.float32)
    ts = np.asarray(scene.timestamps, np.float64)
    dt = float(np.median(np.diff(ts))) if ts.shape[0] > 1 and np.all(np.diff(ts) > 0) else 0.1
    types = np.array([_AGENT[int(t)] for t in np.asarray(scene.track_types)[rows]], np.uint8)
    return Tracks(agent_type=types, size=size, state=s, valid=v, dt=dt), meta
