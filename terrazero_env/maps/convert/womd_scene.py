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
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis import infer_handedness
from ..builder import MapValidationError
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

__all__ = ["LIMITS", "Scene", "SceneLane", "SIGNAL_STATES", "STOP_SIGN_REACH", "to_map_data"]

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
#: Limits on what one scene may ask of the converter (a trust boundary: the file is user input).
LIMITS = {"lanes": 20_000, "features": 100_000, "points": 5_000_000, "tracks": 4_096, "steps": 2_000}
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


def check_limits(scene: Scene) -> None:
    """Raise ``MapValidationError`` when a scene exceeds :data:`LIMITS`."""
    n_feat = (len(scene.lanes) + len(scene.road_lines) + len(scene.road_edges) + len(scene.stop_signs)
              + len(scene.crosswalks) + len(scene.speed_bumps) + len(scene.driveways))
    n_pts = sum(len(ln.polyline) for ln in scene.lanes) + sum(len(x[-1]) for x in scene.road_lines + scene.road_edges)
    for what, n in (("lanes", len(scene.lanes)), ("features", n_feat), ("points", n_pts),
                    ("tracks", scene.track_state.shape[0]), ("steps", scene.track_state.shape[1])):
        if n > LIMITS[what]:
            raise MapValidationError(f"scenario {scene.scenario_id}: {n} {what}, over the limit of {LIMITS[what]}")


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
    for fid, code, pts in scene.road_lines:
        p = _clean(pts, f"scenario {sid}: road line {fid}", 2)
        if p.shape[0] >= 2:
            line_pts.append(p - origin)
            line_types.append(_LINE.get(int(code), RoadLineType.DASHED_WHITE))
    edges = shifted(scene.road_edges, "road edge", 2)
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
    for lane_id in sorted(scene.signals):
        states, stop = scene.signals[lane_id]
        if lane_id not in index:
            skipped_signals += 1
            continue
        k = index[lane_id]
        # The bar lies across the end of the lane leading in (the builder ties stop lines to lane ends);
        # heads of the lanes leaving one approach share its bar.
        gap = np.linalg.norm(ends - starts[k], axis=1)
        gap[k] = np.inf
        approach = int(np.argmin(gap))
        if gap[approach] >= 1.0:
            skipped_signals += 1
            continue
        sig_line.append(bar(approach))
        sig_move.append(_turn(polys[k]))
        sig_pos.append(np.asarray(stop, np.float64) - origin)
        sig_lanes.append([k])
        sig_states.append([int(s) for s in states])
        sig_ids.append(int(lane_id))
    stop_line_ids, stop_pos = [], []
    for _fid, ctl, pos in scene.stop_signs:
        pos = np.asarray(pos, np.float64).reshape(3) - origin
        ids = [index[x] for x in ctl if x in index]
        if not ids:
            d = np.linalg.norm(ends - pos[:2], axis=1)
            ids = [int(np.argmin(d))] if d.min() <= STOP_SIGN_REACH else []
        for k in ids:
            b = bar(k)
            if b not in stop_line_ids and b not in sig_line:
                stop_line_ids.append(b)
                stop_pos.append(pos)

    tracks, meta_tracks = _tracks(scene, origin)
    m = MapData(
        lanes=lane_data,
        road_lines=RoadLines.create(line_pts, line_types),
        road_edges=Polylines(edges),
        crosswalks=Polygons(crosswalks),
        stop_lines=StopLines.create(np.array(bars).reshape(-1, 2, 3)),
        signals=Signals.create(sig_line, sig_move, np.array(sig_pos).reshape(-1, 3), lanes=sig_lanes),
        stop_signs=StopSigns.create(np.array(stop_pos).reshape(-1, 3), stop_line_ids),
        intersections=None,
        handedness=Handedness.RIGHT,
        tracks=tracks,
        name=name or sid,
        metadata={
            "source": scene.source, "scenario_id": sid, "origin": origin.tolist(),
            "lanes_dropped": len(scene.lanes) - len(lanes), "dangling_exit_lanes": dangling,
            "signals_skipped": skipped_signals,
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
