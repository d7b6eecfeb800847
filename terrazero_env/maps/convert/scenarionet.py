"""Import ScenarioNet / MetaDrive scenario files (``.pkl``) into ``MapData``.

For users who already converted Waymo, nuPlan, Argoverse or other logs with ScenarioNet. Written from
the format's documentation (MetaDrive's scenario description): a pickled dict with

* ``map_features``: ``{id: {"type": ..., "polyline" | "polygon" | "position": ...}}`` where lane
  types start with ``LANE_`` (``entry_lanes``, ``exit_lanes``, ``left_neighbor``,
  ``right_neighbor``, ``speed_limit_mph``, optional ``width``), painted lines with ``ROAD_LINE_``,
  boundaries with ``ROAD_EDGE_``, and ``CROSSWALK``, ``STOP_SIGN`` (``position``, ``lane``);
* ``dynamic_map_states``: traffic lights ``{"type": "TRAFFIC_LIGHT", "lane": id, "stop_point": xyz,
  "state": {"object_state": [...]}}``;
* ``tracks``: ``{id: {"type": "VEHICLE" | "PEDESTRIAN" | "CYCLIST", "state": {"position" [T, 3],
  "heading" [T], "velocity" [T, 2], "valid" [T], "length", "width", "height"}}}``;
* ``metadata``: ``ts`` (seconds per step), ``dataset``, ``scenario_id``, ``sdc_id``.

Tested on files constructed from that description, not on real Waymo or nuPlan data.
"""

from __future__ import annotations

import pickle
from pathlib import Path
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

__all__ = ["convert", "from_scenario"]

_MPH = 0.44704
_LINE_TYPES = {
    "ROAD_LINE_BROKEN_SINGLE_WHITE": RoadLineType.DASHED_WHITE,
    "ROAD_LINE_SOLID_SINGLE_WHITE": RoadLineType.SOLID_WHITE,
    "ROAD_LINE_SOLID_DOUBLE_WHITE": RoadLineType.SOLID_WHITE,
    "ROAD_LINE_BROKEN_SINGLE_YELLOW": RoadLineType.DASHED_YELLOW,
    "ROAD_LINE_BROKEN_DOUBLE_YELLOW": RoadLineType.DASHED_YELLOW,
    "ROAD_LINE_SOLID_SINGLE_YELLOW": RoadLineType.SOLID_YELLOW,
    "ROAD_LINE_SOLID_DOUBLE_YELLOW": RoadLineType.DOUBLE_SOLID_YELLOW,
    "ROAD_LINE_PASSING_DOUBLE_YELLOW": RoadLineType.DOUBLE_SOLID_YELLOW,
}
_TRACK_TYPES = {"VEHICLE": AgentType.CAR, "PEDESTRIAN": AgentType.PEDESTRIAN, "CYCLIST": AgentType.CYCLIST}


def _points(v: Any, where: str, min_points: int) -> np.ndarray:
    a = np.asarray(v, np.float64)
    if a.ndim != 2 or a.shape[1] not in (2, 3) or a.shape[0] < min_points:
        raise MapValidationError(f"{where}: expected at least {min_points} points of [x, y(, z)], got shape {a.shape}")
    if a.shape[1] == 2:
        a = np.concatenate([a, np.zeros((a.shape[0], 1))], axis=1)
    # Logged polylines repeat points; the builder rejects zero-length segments.
    keep = np.r_[True, np.linalg.norm(np.diff(a[:, :2], axis=0), axis=1) > 1e-3]
    return a[keep]


def _ids(v: Any) -> list[Any]:
    """Neighbour/entry/exit lists hold ids or dicts with a ``feature_id``."""
    out = []
    for x in v or []:
        out.append(x.get("feature_id", x.get("id")) if isinstance(x, dict) else x)
    return out


def from_scenario(sc: dict[str, Any], *, name: str = "", handedness: str | None = None) -> MapData:
    """``MapData`` (raw, with logged tracks) from one ScenarioNet scenario dict. ``handedness``:
    "right" or "left"; by default it is inferred from where opposing lanes lie."""
    if not isinstance(sc, dict) or "map_features" not in sc:
        raise MapValidationError("scenario: not a ScenarioNet scenario dict (no 'map_features')")
    feats: dict[Any, dict[str, Any]] = sc["map_features"]
    lane_ids = [k for k, f in feats.items() if str(f.get("type", "")).startswith("LANE_")]
    index = {k: i for i, k in enumerate(lane_ids)}
    centerlines, types, speed, widths, succ, left, right = [], [], [], [], [], [], []
    for k in lane_ids:
        f = feats[k]
        pts = _points(f.get("polyline"), f"map_features[{k!r}].polyline", 2)
        if pts.shape[0] < 2:
            raise MapValidationError(f"map_features[{k!r}].polyline: a lane needs two distinct points")
        centerlines.append(pts)
        t = str(f["type"])
        types.append(LaneType.BIKE if "BIKE" in t else (LaneType.BUS if "BUS" in t else LaneType.VEHICLE))
        mph = f.get("speed_limit_mph")
        speed.append(float(mph) * _MPH if mph else np.nan)
        widths.append(float(f.get("width", 3.5) if np.isscalar(f.get("width", 3.5)) else np.mean(f["width"])))
        bad = [x for x in _ids(f.get("exit_lanes")) if x not in index]
        if bad:
            raise MapValidationError(f"map_features[{k!r}].exit_lanes: unknown lane ids {bad}")
        succ.append([index[x] for x in _ids(f.get("exit_lanes"))])
        ln = [index[x] for x in _ids(f.get("left_neighbor")) if x in index]
        rn = [index[x] for x in _ids(f.get("right_neighbor")) if x in index]
        left.append(ln[0] if ln else -1)
        right.append(rn[0] if rn else -1)
    if not lane_ids:
        raise MapValidationError("map_features: the scenario has no lanes")
    lanes = Lanes.create(centerlines, lane_type=types, width=widths, speed_limit=speed, successors=succ,
                         left_neighbor=left, right_neighbor=right)

    lines, line_types, edges, crosswalks = [], [], [], []
    for k, f in feats.items():
        t = str(f.get("type", ""))
        if t in _LINE_TYPES:
            lines.append(_points(f["polyline"], f"map_features[{k!r}].polyline", 2))
            line_types.append(_LINE_TYPES[t])
        elif t.startswith("ROAD_EDGE"):
            edges.append(_points(f["polyline"], f"map_features[{k!r}].polyline", 2))
        elif t == "CROSSWALK":
            crosswalks.append(_points(f["polygon"], f"map_features[{k!r}].polygon", 3))
    lines = [p for p in lines if p.shape[0] >= 2]
    line_types = line_types[: len(lines)]
    edges = [p for p in edges if p.shape[0] >= 2]

    # Stop lines: one per controlled lane end (signals and stop signs), a bar across the lane there.
    bars, bar_lanes, bar_of_lane = [], [], {}

    def bar_for(lane: int) -> int:
        if lane not in bar_of_lane:
            p = centerlines[lane]
            d = p[-1, :2] - p[-2, :2]
            d /= np.linalg.norm(d)
            n = np.array([-d[1], d[0]]) * widths[lane] / 2
            bars.append([np.r_[p[-1, :2] + n, p[-1, 2]], np.r_[p[-1, :2] - n, p[-1, 2]]])
            bar_lanes.append([lane])
            bar_of_lane[lane] = len(bars) - 1
        return bar_of_lane[lane]

    sig_line, sig_pos = [], []
    for s in (sc.get("dynamic_map_states") or {}).values():
        if s.get("type", "TRAFFIC_LIGHT") != "TRAFFIC_LIGHT" or s.get("lane") not in index:
            continue
        sig_line.append(bar_for(index[s["lane"]]))
        pos = np.asarray(s.get("stop_point", centerlines[index[s["lane"]]][-1]), np.float64).reshape(-1)
        sig_pos.append(np.r_[pos[:2], pos[2] if pos.shape[0] > 2 else 0.0])
    stop_line_ids, stop_pos = [], []
    for f in feats.values():
        if f.get("type") == "STOP_SIGN":
            for lane in _ids(f.get("lane")):
                if lane in index:
                    b = bar_for(index[lane])
                    if b not in stop_line_ids and b not in sig_line:
                        stop_line_ids.append(b)
                        pos = np.asarray(f.get("position", centerlines[index[lane]][-1]), np.float64).reshape(-1)
                        stop_pos.append(np.r_[pos[:2], pos[2] if pos.shape[0] > 2 else 0.0])

    tracks = _tracks(sc)
    meta = sc.get("metadata", {}) or {}
    m = MapData(
        lanes=lanes,
        road_lines=RoadLines.create(lines, line_types),
        road_edges=Polylines(edges),
        crosswalks=Polygons(crosswalks),
        stop_lines=StopLines.create(np.array(bars).reshape(-1, 2, 3), bar_lanes),
        signals=Signals.create(sig_line, [Movement.STRAIGHT] * len(sig_line), np.array(sig_pos).reshape(-1, 3)),
        stop_signs=StopSigns.create(np.array(stop_pos).reshape(-1, 3), stop_line_ids),
        intersections=None,
        handedness=Handedness.RIGHT,
        tracks=tracks,
        name=name or str(sc.get("id", meta.get("scenario_id", ""))),
        metadata={"source": "scenarionet", "dataset": str(meta.get("dataset", "")),
                  "scenario_id": str(meta.get("scenario_id", sc.get("id", "")))},
    )
    if handedness is not None:
        return m.replace(handedness=Handedness[str(handedness).upper()])
    return m.replace(handedness=infer_handedness(m))


def _tracks(sc: dict[str, Any]) -> Tracks | None:
    tr = sc.get("tracks") or {}
    if not tr:
        return None
    length = int(sc.get("length", 0)) or max(len(np.asarray(t["state"]["position"])) for t in tr.values())
    types, sizes, states, valids = [], [], [], []
    for k, t in tr.items():
        st = t["state"]
        pos = np.asarray(st["position"], np.float64)
        if pos.shape[0] != length:
            raise MapValidationError(f"tracks[{k!r}].state.position: {pos.shape[0]} steps, the scenario has {length}")
        if pos.shape[1] == 2:
            pos = np.concatenate([pos, np.zeros((length, 1))], axis=1)
        heading = np.asarray(st.get("heading", np.zeros(length)), np.float64).reshape(length)
        vel = np.asarray(st.get("velocity", np.zeros((length, 2))), np.float64).reshape(length, 2)
        valid = np.asarray(st.get("valid", np.ones(length)), bool).reshape(length)
        size = [float(np.max(np.atleast_1d(st.get(d, default)))) for d, default in
                (("length", 4.5), ("width", 2.0), ("height", 1.5))]
        types.append(_TRACK_TYPES.get(str(t.get("type", "VEHICLE")), AgentType.CAR))
        sizes.append([max(s, 0.1) for s in size])
        states.append(np.column_stack([pos, heading, vel]))
        valids.append(valid)
    ts = np.asarray((sc.get("metadata") or {}).get("ts", [0.0, 0.1]), np.float64)
    dt = float(np.median(np.diff(ts))) if ts.shape[0] > 1 else 0.1
    return Tracks(agent_type=np.array(types, np.uint8), size=np.array(sizes, np.float32),
                  state=np.stack(states), valid=np.stack(valids), dt=dt)


def convert(path: str | Path, *, trust_pickle: bool = False, **options: Any) -> MapData:
    """Read a ScenarioNet ``.pkl`` scenario file. The format is a pickle, and unpickling runs any code
    the file contains, so the file is read only when the caller vouches for it with
    ``trust_pickle=True`` (``--trust-pickle`` on the command line); otherwise ``MapValidationError``."""
    path = Path(path)
    if not trust_pickle:
        raise MapValidationError(
            f"{path}: a ScenarioNet scenario is a Python pickle, and unpickling runs any code the file contains; "
            "it is not read unless you trust where it came from: pass --trust-pickle (trust_pickle=True in Python)")
    try:
        with open(path, "rb") as f:
            sc = pickle.load(f)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as e:
        raise MapValidationError(f"{path}: not a readable ScenarioNet pickle ({e})") from None
    return from_scenario(sc, name=options.get("name", path.stem), handedness=options.get("handedness"))
