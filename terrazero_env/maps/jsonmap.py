"""A human-readable JSON form of ``MapData``, for hand-written maps, fixtures and interchange.

Layout (every key optional except ``lanes``; coordinates are ``[x, y]`` or ``[x, y, z]`` in metres)::

    {"name": "tiny", "handedness": "right",
     "lanes": [{"centerline": [[0, 0], [50, 0]], "type": "vehicle", "width": 3.5,
                "speed_limit": 13.4, "successors": [1], "predecessors": [],
                "left_neighbor": -1, "right_neighbor": -1}],
     "road_lines": [{"points": [[0, 1.75], [50, 1.75]], "type": "solid_yellow"}],
     "road_edges": [[[0, -1.75], [50, -1.75]]],
     "sidewalks": [[[...], [...], [...]]], "crosswalks": [[[...], [...], [...]]],
     "stop_lines": [{"points": [[50, -1.75], [50, 1.75]], "lanes": [0]}],
     "signals": [{"stop_line": 0, "movement": "straight", "position": [52, -3], "lanes": []}],
     "stop_signs": [{"position": [51, -3], "stop_line": 0}],
     "intersections": [[1, 2]],
     "tracks": {"dt": 0.1, "agents": [{"type": "car", "size": [4.5, 2.0, 1.5],
                "state": [[x, y, z, heading, vx, vy], ...], "valid": [true, ...]}]},
     "metadata": {}}
"""

from __future__ import annotations

import json
import os
from enum import IntEnum
from pathlib import Path
from typing import Any

import numpy as np

from ..foundation import safe_files
from .builder import MapValidationError
from .schema import (
    AgentType,
    Handedness,
    Intersections,
    Lanes,
    LaneType,
    MapData,
    Movement,
    Polylines,
    RoadLines,
    RoadLineType,
    Signals,
    StopLines,
    StopSigns,
    Tracks,
)

__all__ = ["MAX_JSON_BYTES", "from_dict", "to_dict", "load_json", "save_json"]

MAX_JSON_BYTES = 64 * 1024 * 1024
"""Largest JSON map file read (bytes). Python's parse of a map's nested lists takes about 9-10 times
the text in memory (measured on 16 MiB of lane polylines: 153 MiB for the parse, besides the text),
so 64 MiB bounds a read at about 0.8 GiB; 512 MiB allowed 5-9 GiB."""


def _enum(enum: type[IntEnum], value: Any, where: str) -> int:
    if isinstance(value, str):
        try:
            return int(enum[value.upper()])
        except KeyError:
            pass
    elif isinstance(value, (int, np.integer)) and int(value) in {int(e) for e in enum}:
        return int(value)
    names = ", ".join(e.name.lower() for e in enum)
    raise MapValidationError(f"{where}: {value!r} is not a valid {enum.__name__} ({names})")


def _points(value: Any, where: str) -> np.ndarray:
    try:
        a = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise MapValidationError(f"{where}: not a list of coordinates ({e})") from None
    if a.ndim != 2 or a.shape[1] not in (2, 3):
        raise MapValidationError(f"{where}: expected a list of [x, y] or [x, y, z] points, got shape {a.shape}")
    if a.shape[1] == 2:
        a = np.concatenate([a, np.zeros((a.shape[0], 1))], axis=1)
    return a


def _get(d: dict[str, Any], key: str, where: str) -> Any:
    if key not in d:
        raise MapValidationError(f"{where}: missing required key {key!r}")
    return d[key]


def from_dict(d: dict[str, Any]) -> MapData:
    """Parse the JSON layout above into a raw (unbuilt) ``MapData``; structural problems raise
    :class:`MapValidationError` naming the element."""
    if not isinstance(d, dict):
        raise MapValidationError(f"map: expected a JSON object, got {type(d).__name__}")
    lanes_in = _get(d, "lanes", "map")
    if not isinstance(lanes_in, list) or not lanes_in:
        raise MapValidationError("lanes: expected a non-empty list")
    speed = [ln.get("speed_limit") for ln in lanes_in]
    lanes = Lanes.create(
        [_points(_get(ln, "centerline", f"lanes[{i}]"), f"lanes[{i}].centerline") for i, ln in enumerate(lanes_in)],
        lane_type=[_enum(LaneType, ln.get("type", "vehicle"), f"lanes[{i}].type") for i, ln in enumerate(lanes_in)],
        width=[ln.get("width", 3.5) for ln in lanes_in],
        speed_limit=[np.nan if v is None else v for v in speed],
        successors=[ln.get("successors", []) for ln in lanes_in],
        predecessors=[ln.get("predecessors", []) for ln in lanes_in],
        left_neighbor=[ln.get("left_neighbor", -1) for ln in lanes_in],
        right_neighbor=[ln.get("right_neighbor", -1) for ln in lanes_in],
    )
    lines = d.get("road_lines", [])
    road_lines = RoadLines.create(
        [_points(_get(x, "points", f"road_lines[{i}]"), f"road_lines[{i}].points") for i, x in enumerate(lines)],
        [_enum(RoadLineType, x.get("type", "solid_white"), f"road_lines[{i}].type") for i, x in enumerate(lines)],
    )

    def polys(key: str) -> Any:
        return Polylines([_points(p, f"{key}[{i}]") for i, p in enumerate(d.get(key, []))])

    sl = d.get("stop_lines", [])
    stop_lines = StopLines.create(
        np.stack([_points(_get(x, "points", f"stop_lines[{i}]"), f"stop_lines[{i}].points") for i, x in enumerate(sl)])
        if sl else np.zeros((0, 2, 3)),
        [x.get("lanes", []) for x in sl],
    )
    if stop_lines.points.shape[1:] != (2, 3):
        raise MapValidationError("stop_lines: each stop line needs exactly two end points")
    sg = d.get("signals", [])
    signals = Signals.create(
        [_get(x, "stop_line", f"signals[{i}]") for i, x in enumerate(sg)],
        [_enum(Movement, x.get("movement", "straight"), f"signals[{i}].movement") for i, x in enumerate(sg)],
        np.array([_points([_get(x, "position", f"signals[{i}]")], f"signals[{i}].position")[0] for i, x in enumerate(sg)]).reshape(-1, 3),
        [x.get("lanes", []) for x in sg],
    )
    ss = d.get("stop_signs", [])
    stop_signs = StopSigns.create(
        np.array([_points([_get(x, "position", f"stop_signs[{i}]")], f"stop_signs[{i}].position")[0] for i, x in enumerate(ss)]).reshape(-1, 3),
        [_get(x, "stop_line", f"stop_signs[{i}]") for i, x in enumerate(ss)],
    )
    inter = d.get("intersections")
    tracks = _tracks_from(d["tracks"]) if d.get("tracks") else None
    return MapData(
        lanes=lanes, road_lines=road_lines, road_edges=polys("road_edges"), sidewalks=polys("sidewalks"),
        crosswalks=polys("crosswalks"), stop_lines=stop_lines, signals=signals, stop_signs=stop_signs,
        intersections=Intersections.create(inter) if inter is not None else None,
        handedness=Handedness(_enum(Handedness, d.get("handedness", "right"), "handedness")),
        tracks=tracks, name=str(d.get("name", "")), metadata=dict(d.get("metadata", {})),
    )


def _tracks_from(t: dict[str, Any]) -> Tracks:
    agents = _get(t, "agents", "tracks")
    if not agents:
        raise MapValidationError("tracks.agents: expected a non-empty list")
    states = [np.asarray(_get(a, "state", f"tracks[{i}]"), np.float64) for i, a in enumerate(agents)]
    valids = [np.asarray(a.get("valid", [True] * len(s)), bool) for a, s in zip(agents, states)]
    for i, (s, v) in enumerate(zip(states, valids)):
        if s.ndim != 2 or s.shape[1] != 6:
            raise MapValidationError(f"tracks[{i}].state: expected [T, 6] rows (x, y, z, heading, vx, vy), got {s.shape}")
        if v.shape != (s.shape[0],):
            raise MapValidationError(f"tracks[{i}].valid: {v.shape[0]} flags for {s.shape[0]} states")
        if s.shape[0] != states[0].shape[0]:
            raise MapValidationError(f"tracks[{i}].state: {s.shape[0]} steps, track 0 has {states[0].shape[0]}")
    return Tracks(
        agent_type=np.array([_enum(AgentType, a.get("type", "car"), f"tracks[{i}].type") for i, a in enumerate(agents)], np.uint8),
        size=np.array([a.get("size", [4.5, 2.0, 1.5]) for a in agents], np.float32).reshape(-1, 3),
        state=np.stack(states), valid=np.stack(valids), dt=float(t.get("dt", 0.1)),
    )


def to_dict(m: MapData) -> dict[str, Any]:
    """The JSON layout of ``m`` (derived fields are not written: :func:`build` recomputes them)."""
    L = m.lanes

    def pts(a: np.ndarray) -> list[list[float]]:
        return a.tolist()

    out: dict[str, Any] = {
        "name": m.name,
        "handedness": m.handedness.name.lower(),
        "lanes": [
            {"centerline": pts(L.centerline.row(i)), "type": LaneType(int(L.lane_type[i])).name.lower(),
             "width": float(L.width[i]),
             "speed_limit": None if np.isnan(L.speed_limit[i]) else float(L.speed_limit[i]),
             "successors": L.successors.row(i).tolist(), "predecessors": L.predecessors.row(i).tolist(),
             "left_neighbor": int(L.left_neighbor[i]), "right_neighbor": int(L.right_neighbor[i])}
            for i in range(len(L))
        ],
        "road_lines": [{"points": pts(m.road_lines.geometry.row(i)),
                        "type": RoadLineType(int(m.road_lines.line_type[i])).name.lower()}
                       for i in range(len(m.road_lines))],
        "road_edges": [pts(r) for r in m.road_edges.rows()],
        "sidewalks": [pts(r) for r in m.sidewalks.rows()],
        "crosswalks": [pts(r) for r in m.crosswalks.rows()],
        "stop_lines": [{"points": pts(m.stop_lines.points[i]), "lanes": m.stop_lines.lanes.row(i).tolist()}
                       for i in range(len(m.stop_lines))],
        "signals": [{"stop_line": int(m.signals.stop_line[i]),
                     "movement": Movement(int(m.signals.movement[i])).name.lower(),
                     "position": m.signals.position[i].tolist(), "lanes": m.signals.lanes.row(i).tolist()}
                    for i in range(len(m.signals))],
        "stop_signs": [{"position": m.stop_signs.position[i].tolist(), "stop_line": int(m.stop_signs.stop_line[i])}
                       for i in range(len(m.stop_signs))],
        "intersections": [r.tolist() for r in m.intersections.lanes.rows()] if m.intersections is not None else None,
        "metadata": m.metadata,
    }
    if m.tracks is not None:
        t = m.tracks
        out["tracks"] = {"dt": t.dt, "agents": [
            {"type": AgentType(int(t.agent_type[i])).name.lower(), "size": t.size[i].tolist(),
             "state": t.state[i].tolist(), "valid": t.valid[i].tolist()} for i in range(len(t))]}
    return out


def load_json(path: str | os.PathLike[str]) -> MapData:
    """Read a JSON map file (raw; pass it to :func:`~terrazero_env.maps.build`)."""
    try:
        d = safe_files.load_json(safe_files.read_text(path, MAX_JSON_BYTES, "JSON map"), os.fspath(path))
    except safe_files.UnsafeFileError as e:
        raise MapValidationError(str(e)) from None
    if not isinstance(d, dict):
        raise MapValidationError(f"{os.fspath(path)}: a JSON map is an object, got a {type(d).__name__}")
    from .convert import gpudrive_json

    if gpudrive_json.is_gpudrive(d):
        # A GPUDrive/PufferDrive scenario (WOMD converted to JSON), not this module's layout.
        return gpudrive_json.from_dict(d, name=str(d.get("scenario_id", Path(path).stem)), where=os.fspath(path))
    return from_dict(d)


def save_json(m: MapData, path: str | os.PathLike[str]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(to_dict(m), f)
