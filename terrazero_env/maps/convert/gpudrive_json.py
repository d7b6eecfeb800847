"""Read the GPUDrive / PufferDrive scenario JSON (WOMD scenarios as GPUDrive's
``data_utils/process_waymo_files.py`` writes them) into ``MapData`` with logged tracks.

The format (one scenario per file)::

    {"name": ..., "scenario_id": ...,
     "objects": [{"id", "type": "vehicle"|"pedestrian"|"cyclist"|"other", "position": [{x, y, z}] * T,
                  "heading": [T], "velocity": [{x, y}] * T, "valid": [T], "length", "width", "height",
                  "goalPosition": {x, y, z}, "mark_as_expert"}],
     "roads": [{"id", "map_element_id", "type": "lane"|"road_line"|"road_edge"|"crosswalk"|"stop_sign"|
                "speed_bump"|"driveway", "geometry": [{x, y, z}]}],
     "tl_states": {lane_id: {"state": [name], "x": [..], "y": [..], "z": [..], "time_index": [..]}},
     "metadata": {"sdc_track_index", "tracks_to_predict": [{"track_index", "difficulty"}], "objects_of_interest"}}

``map_element_id`` carries Waymo's type code (lanes 1-3 for freeway, surface street and bike lane; road
lines 6-13 for RoadLineType 1-8; road edges 15-16). The format drops lane connectivity, so it is
inferred from geometry (:func:`infer_lane_graph`): lane B succeeds lane A when A's last point lies within
``SUCCESSOR_GAP`` m of B's first and their headings there differ by less than ``SUCCESSOR_ANGLE``; B is
A's left (right) neighbour when both are bike lanes or neither is and, at A's midpoint, B runs parallel within ``NEIGHBOR_ANGLE`` at a lateral
offset between ``NEIGHBOR_OFFSET`` metres to the left (right). ``metadata["lanes_without_successor"]``
counts the lanes the inference left without a successor.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from ..builder import MapValidationError
from ..schema import MapData
from .womd_scene import SIGNAL_STATES, Scene, SceneLane, to_map_data

__all__ = ["MAX_FILE_BYTES", "SUCCESSOR_ANGLE", "SUCCESSOR_GAP", "NEIGHBOR_ANGLE", "NEIGHBOR_OFFSET", "convert",
           "from_dict", "infer_lane_graph", "is_gpudrive", "to_scene"]

#: The largest file read (bytes): the JSON is parsed whole.
MAX_FILE_BYTES = 512 * 1024 * 1024
SUCCESSOR_GAP = 0.5
SUCCESSOR_ANGLE = np.radians(45.0)
NEIGHBOR_ANGLE = np.radians(20.0)
NEIGHBOR_OFFSET = (2.0, 5.5)
_OBJECT = {"unset": 0, "vehicle": 1, "pedestrian": 2, "cyclist": 3, "other": 4}
_ROAD = ("lane", "road_line", "road_edge", "crosswalk", "stop_sign", "speed_bump", "driveway")
_STATE = {s: i for i, s in enumerate(SIGNAL_STATES)}


def is_gpudrive(d: Any) -> bool:
    """Whether a parsed JSON document is a GPUDrive scenario (it has ``objects`` and ``roads`` lists)."""
    return isinstance(d, dict) and isinstance(d.get("objects"), list) and isinstance(d.get("roads"), list)


def _xyz(v: Any, where: str) -> np.ndarray:
    if not isinstance(v, list) or not all(isinstance(p, dict) for p in v):
        raise MapValidationError(f"{where}: expected a list of {{x, y, z}} points")
    try:
        return np.array([(p["x"], p["y"], p.get("z", 0.0)) for p in v], np.float64).reshape(-1, 3)
    except (KeyError, TypeError, ValueError) as e:
        raise MapValidationError(f"{where}: a point is not {{x, y, z}} numbers ({e!r})") from None


def _dirs(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.diff(p[:, :2], axis=0)
    return d[0] / np.linalg.norm(d[0]), d[-1] / np.linalg.norm(d[-1])


def infer_lane_graph(lanes: list[SceneLane]) -> None:
    """Fill ``exit``/``entry`` and ``left``/``right`` of lanes from their polylines (in place)."""
    good = [i for i, ln in enumerate(lanes) if ln.polyline.shape[0] >= 2
            and np.all(np.linalg.norm(np.diff(ln.polyline[:, :2], axis=0), axis=1)[[0, -1]] > 1e-6)]
    if not good:
        return
    starts = np.array([lanes[i].polyline[0, :2] for i in good])
    ends = np.array([lanes[i].polyline[-1, :2] for i in good])
    d_in = np.array([_dirs(lanes[i].polyline)[0] for i in good])
    d_out = np.array([_dirs(lanes[i].polyline)[1] for i in good])
    gap = np.linalg.norm(ends[:, None, :] - starts[None, :, :], axis=2)
    cos = d_out @ d_in.T
    link = (gap <= SUCCESSOR_GAP) & (cos >= np.cos(SUCCESSOR_ANGLE))
    np.fill_diagonal(link, False)
    for a, b in zip(*np.nonzero(link)):
        lanes[good[a]].exit.append(lanes[good[b]].id)
        lanes[good[b]].entry.append(lanes[good[a]].id)
    # Neighbours: sample each lane at its arc-length midpoint, find the closest point of every other lane.
    segs = []
    for i in good:
        p = lanes[i].polyline[:, :2]
        segs.append((p[:-1], p[1:]))
    seg_a = np.concatenate([s[0] for s in segs])
    seg_b = np.concatenate([s[1] for s in segs])
    seg_lane = np.concatenate([np.full(len(s[0]), k) for k, s in enumerate(segs)])
    ab = seg_b - seg_a
    ab_len2 = np.maximum((ab ** 2).sum(1), 1e-12)
    seg_dir = ab / np.sqrt(ab_len2)[:, None]
    lo, hi = NEIGHBOR_OFFSET
    bike = np.array([lanes[i].type == 3 for i in good])
    for k, i in enumerate(good):
        p = lanes[i].polyline[:, :2]
        cum = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))]
        j = min(int(np.searchsorted(cum, cum[-1] / 2)), len(p) - 1)
        j = max(j, 1)
        mid, h = p[j - 1] + (p[j] - p[j - 1]) * 0.5, (p[j] - p[j - 1]) / np.linalg.norm(p[j] - p[j - 1])
        t = np.clip(((mid - seg_a) * ab).sum(1) / ab_len2, 0.0, 1.0)
        foot = seg_a + ab * t[:, None]
        off = foot - mid
        dist = np.linalg.norm(off, axis=1)
        lateral = h[0] * off[:, 1] - h[1] * off[:, 0]  # > 0: to the left
        along = np.abs(off @ h)
        ok = (seg_lane != k) & (bike[seg_lane] == bike[k]) & (seg_dir @ h >= np.cos(NEIGHBOR_ANGLE)) & (dist >= lo) & (dist <= hi) & \
            (along < 0.5 * dist)
        for side, sign in (("left", 1), ("right", -1)):
            cand = np.nonzero(ok & (sign * lateral > 0))[0]
            if cand.shape[0]:
                best = cand[np.argmin(dist[cand])]
                getattr(lanes[i], side).append(lanes[good[int(seg_lane[best])]].id)


def to_scene(d: dict[str, Any], where: str = "scenario") -> Scene:
    """A :class:`Scene` (lane graph inferred) from a parsed GPUDrive JSON document."""
    if not is_gpudrive(d):
        raise MapValidationError(f"{where}: not a GPUDrive scenario (needs 'objects' and 'roads' lists)")
    sid = str(d.get("scenario_id", d.get("name", "")))
    scene = Scene(scenario_id=sid, lanes=[], source="gpudrive_json")
    for k, r in enumerate(d["roads"]):
        w = f"{where}: roads[{k}]"
        if not isinstance(r, dict) or r.get("type") not in _ROAD:
            raise MapValidationError(f"{w}: 'type' must be one of {', '.join(_ROAD)}, got "
                                     f"{r.get('type') if isinstance(r, dict) else type(r).__name__!r}")
        fid, code, pts = int(r.get("id", k)), int(r.get("map_element_id", -1)), _xyz(r.get("geometry"), f"{w}.geometry")
        t = r["type"]
        if t == "lane":
            scene.lanes.append(SceneLane(id=fid, polyline=pts, type=code if code in (0, 1, 2, 3) else 2))
        elif t == "road_line":
            scene.road_lines.append((fid, code - 5 if 6 <= code <= 13 else 0, pts))
        elif t == "road_edge":
            scene.road_edges.append((fid, code - 14 if code in (15, 16) else 0, pts))
        elif t == "stop_sign":
            if pts.shape[0] < 1:
                raise MapValidationError(f"{w}.geometry: a stop sign needs its position")
            scene.stop_signs.append((fid, [], pts[0]))
        else:
            getattr(scene, t + "s").append((fid, pts))
    scene.lanes.sort(key=lambda ln: ln.id)
    infer_lane_graph(scene.lanes)
    objs = d["objects"]
    n_steps = max([len(o.get("position", [])) for o in objs if isinstance(o, dict)] + [0])
    state = np.zeros((len(objs), n_steps, 6))
    valid = np.zeros((len(objs), n_steps), bool)
    size = np.zeros((len(objs), 3), np.float32)
    ids, types = [], []
    for i, o in enumerate(objs):
        w = f"{where}: objects[{i}]"
        if not isinstance(o, dict):
            raise MapValidationError(f"{w}: expected an object")
        pos = _xyz(o.get("position"), f"{w}.position")
        try:
            heading = np.asarray(o.get("heading"), np.float32).astype(np.float64).reshape(-1)
            vel = np.array([(v["x"], v["y"]) for v in o.get("velocity")], np.float32).astype(np.float64).reshape(-1, 2)
            val = np.asarray(o.get("valid"), bool).reshape(-1)
            size[i] = [float(o.get("length", 0.0)), float(o.get("width", 0.0)), float(o.get("height", 0.0))]
        except (KeyError, TypeError, ValueError) as e:
            raise MapValidationError(f"{w}: heading, velocity, valid and sizes must be numbers ({e!r})") from None
        if not (pos.shape[0] == heading.shape[0] == vel.shape[0] == val.shape[0] == n_steps):
            raise MapValidationError(f"{w}: position, heading, velocity and valid must all have {n_steps} steps, got "
                                     f"{pos.shape[0]}, {heading.shape[0]}, {vel.shape[0]}, {val.shape[0]}")
        state[i] = np.column_stack([pos, heading, vel])
        valid[i] = val
        ids.append(int(o.get("id", i)))
        t = str(o.get("type", "")).lower()
        if t not in _OBJECT:
            raise MapValidationError(f"{w}.type: one of {', '.join(_OBJECT)}, got {o.get('type')!r}")
        types.append(_OBJECT[t])
    scene.track_ids, scene.track_types = np.array(ids, np.int64), np.array(types, np.int64)
    scene.track_state, scene.track_valid, scene.track_size = state, valid, size
    scene.timestamps = np.arange(n_steps) * 0.1
    tl = d.get("tl_states") or {}
    if not isinstance(tl, dict):
        raise MapValidationError(f"{where}: tl_states must be a mapping of lane id to states")
    for lane, s in tl.items():
        w = f"{where}: tl_states[{lane!r}]"
        try:
            steps = np.asarray(s.get("time_index", range(len(s["state"]))), np.int64)
            codes = [_STATE[str(x)] for x in s["state"]]
            stop = np.array([s["x"][0], s["y"][0], s["z"][0]], np.float64)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
            raise MapValidationError(f"{w}: needs state names and x, y, z stop points ({e!r})") from None
        if steps.shape[0] != len(codes) or np.any(steps < 0) or np.any(steps >= max(n_steps, 1)):
            raise MapValidationError(f"{w}: time_index must give a step in [0, {n_steps}) for every state")
        arr = np.full(n_steps, -1, np.int8)
        arr[steps] = codes
        scene.signals[int(lane)] = (arr, stop)
    meta = d.get("metadata") or {}
    scene.sdc_track_index = int(meta.get("sdc_track_index", -1))
    scene.tracks_to_predict = [int(x["track_index"]) if isinstance(x, dict) else int(x)
                               for x in meta.get("tracks_to_predict", [])]
    scene.objects_of_interest = [int(x) for x in meta.get("objects_of_interest", [])]
    return scene


def from_dict(d: dict[str, Any], *, name: str = "", handedness: str | None = None, where: str = "scenario") -> MapData:
    """``MapData`` (raw) from a parsed GPUDrive JSON document; ``metadata["lanes_without_successor"]``
    counts the lanes the geometric inference left without one."""
    scene = to_scene(d, where)
    m = to_map_data(scene, name=name or scene.scenario_id, handedness=handedness)
    n_none = int(np.sum(np.diff(m.lanes.successors.offsets) == 0))
    return m.replace(metadata={**m.metadata, "lanes_without_successor": n_none})


def convert(path: str | os.PathLike[str], *, name: str | None = None, handedness: str | None = None) -> MapData:
    """Read one GPUDrive/PufferDrive scenario JSON file."""
    p = Path(path)
    if p.stat().st_size > MAX_FILE_BYTES:
        raise MapValidationError(f"{p}: {p.stat().st_size} bytes, over the {MAX_FILE_BYTES}-byte limit")
    try:
        with open(p, encoding="utf-8") as f:
            d = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise MapValidationError(f"{p}: not valid JSON ({e})") from None
    return from_dict(d, name=name or str(d.get("scenario_id", p.stem)) if isinstance(d, dict) else "",
                     handedness=handedness, where=str(p))
