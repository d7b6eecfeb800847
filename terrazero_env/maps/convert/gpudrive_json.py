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
counts the lanes the inference left without a successor. The searches hash points into a grid
(:func:`~.womd_scene.near_pairs`): their work follows the pairs of nearby points, not the square of the
lane count.

The file is a trust boundary (docs/hardening.md, third pass): at most :data:`MAX_FILE_BYTES`, at most
:data:`MAX_JSON_CONTAINERS` objects and arrays (counted in the text before it is parsed), then every
count that sizes an allocation (objects x steps, points, signal states) is checked against
``womd_scene.LIMITS`` before the arrays are made. Values are checked where they enter: numbers must be
JSON numbers, ``valid`` JSON booleans, ids integers, lane and object ids unique; a wrong one is a
one-line ``MapValidationError`` naming the file and the field (``objects[3].valid[7]``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from ...foundation import safe_files
from ..builder import MapValidationError
from ..schema import MapData
from .womd_scene import (
    LIMITS,
    SIGNAL_STATES,
    Scene,
    SceneLane,
    check_counts,
    check_extent,
    check_scenario_id,
    near_pairs,
    to_map_data,
)

__all__ = ["MAX_FILE_BYTES", "MAX_JSON_CONTAINERS", "SUCCESSOR_ANGLE", "SUCCESSOR_GAP", "NEIGHBOR_ANGLE",
           "NEIGHBOR_OFFSET", "convert", "from_dict", "infer_lane_graph", "is_gpudrive", "read_document",
           "successor_agreement", "to_scene"]

#: The largest file read (bytes): the JSON is parsed whole. Real scenes are a few MB.
MAX_FILE_BYTES = 64 * 1024 * 1024
#: Most objects and arrays (``{`` and ``[``, counted in the text before parsing; an upper bound, as
#: brackets inside strings count too). Parsed, each costs 56-250 bytes; real scenes hold a few 100,000.
MAX_JSON_CONTAINERS = 2_000_000
SUCCESSOR_GAP = 0.5
SUCCESSOR_ANGLE = np.radians(45.0)
NEIGHBOR_ANGLE = np.radians(20.0)
NEIGHBOR_OFFSET = (2.0, 5.5)
_OBJECT = {"unset": 0, "vehicle": 1, "pedestrian": 2, "cyclist": 3, "other": 4}
_ROAD = ("lane", "road_line", "road_edge", "crosswalk", "stop_sign", "speed_bump", "driveway")
_STATE = {s: i for i, s in enumerate(SIGNAL_STATES)}
_NUMBER = (int, float)
_INT_KEY = re.compile(r"-?[0-9]{1,18}")


def is_gpudrive(d: Any) -> bool:
    """Whether a parsed JSON document is a GPUDrive scenario (it has ``objects`` and ``roads`` lists)."""
    return isinstance(d, dict) and isinstance(d.get("objects"), list) and isinstance(d.get("roads"), list)


def _show(v: Any) -> str:
    text = repr(v)
    return f"{text[:40]}{'...' if len(text) > 40 else ''} (a {type(v).__name__})"


def _number(v: Any, where: str) -> float:
    if type(v) not in _NUMBER:
        raise MapValidationError(f"{where}: expected a number, got {_show(v)}")
    try:
        return float(v)
    except OverflowError:
        raise MapValidationError(f"{where}: {v} does not fit a float") from None


def _int(v: Any, where: str) -> int:
    """A JSON integer (an integral float such as ``7.0`` too; not a string or a boolean)."""
    if type(v) is int:
        return v
    if type(v) is float and v.is_integer():
        return int(v)
    raise MapValidationError(f"{where}: expected an integer, got {_show(v)}")


def _list(v: Any, where: str, limit: int | None = None, what: str = "") -> list:
    if not isinstance(v, list):
        raise MapValidationError(f"{where}: expected a list, got {_show(v)}")
    if limit is not None and len(v) > limit:
        raise MapValidationError(f"{where}: {len(v)} {what or 'entries'}, over the limit of {limit}")
    return v


def _numbers(v: Any, where: str) -> np.ndarray:
    """A list of JSON numbers as float64."""
    v = _list(v, where)
    if not {type(x) for x in v} <= {int, float}:
        k = next(i for i, x in enumerate(v) if type(x) not in _NUMBER)
        raise MapValidationError(f"{where}[{k}]: expected a number, got {_show(v[k])}")
    try:
        return np.array(v, np.float64).reshape(-1)
    except OverflowError:
        raise MapValidationError(f"{where}: a number does not fit a float") from None


def _xyz(v: Any, where: str, keys: tuple[str, ...] = ("x", "y", "z")) -> np.ndarray:
    """A list of ``{x, y[, z]}`` points (JSON numbers; ``z`` defaults to 0) as float64 ``[n, len(keys)]``."""
    v = _list(v, where)
    shape = "{" + ", ".join(keys) + "}"
    rows = []
    for k, p in enumerate(v):
        if not isinstance(p, dict):
            raise MapValidationError(f"{where}[{k}]: a point is not {shape} numbers, got {_show(p)}")
        try:
            rows.append(tuple(p[c] if c != "z" else p.get("z", 0.0) for c in keys))
        except KeyError as e:
            raise MapValidationError(f"{where}[{k}]: a point is not {shape} numbers (no {e.args[0]!r})") from None
    if not {type(x) for r in rows for x in r} <= {int, float}:
        k, c = next((k, c) for k, r in enumerate(rows) for c, x in zip(keys, r) if type(x) not in _NUMBER)
        raise MapValidationError(f"{where}[{k}].{c}: a point is not {shape} numbers, got {_show(v[k].get(c))}")
    try:
        return np.array(rows, np.float64).reshape(-1, len(keys))
    except OverflowError:
        raise MapValidationError(f"{where}: a coordinate does not fit a float") from None


def _bools(v: Any, where: str) -> np.ndarray:
    v = _list(v, where)
    if not {type(x) for x in v} <= {bool}:
        k = next(i for i, x in enumerate(v) if type(x) is not bool)
        raise MapValidationError(f"{where}[{k}]: expected true or false, got {_show(v[k])}")
    return np.array(v, bool).reshape(-1)


def _dirs(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.diff(p[:, :2], axis=0)
    return d[0] / np.linalg.norm(d[0]), d[-1] / np.linalg.norm(d[-1])


def infer_lane_graph(lanes: list[SceneLane], where: str = "scenario") -> None:
    """Fill ``exit``/``entry`` and ``left``/``right`` of lanes from their polylines (in place). Lane
    points must be finite and within the map extent limit; the inferred successor links count against
    ``LIMITS["links"]`` and each search's candidate pairs against ``LIMITS["search_pairs"]``."""
    check_extent([ln.polyline for ln in lanes], where, [f"lane {ln.id}" for ln in lanes])
    good = [i for i, ln in enumerate(lanes) if ln.polyline.shape[0] >= 2
            and np.all(np.linalg.norm(np.diff(ln.polyline[:, :2], axis=0), axis=1)[[0, -1]] > 1e-6)]
    if not good:
        return
    starts = np.array([lanes[i].polyline[0, :2] for i in good])
    ends = np.array([lanes[i].polyline[-1, :2] for i in good])
    d_in = np.array([_dirs(lanes[i].polyline)[0] for i in good])
    d_out = np.array([_dirs(lanes[i].polyline)[1] for i in good])
    # Successors: B's start within SUCCESSOR_GAP of A's end, headings within SUCCESSOR_ANGLE.
    pairs = []
    n_links = 0
    for a, b in near_pairs(ends, starts, SUCCESSOR_GAP, f"{where}: lane successors"):
        gap = np.linalg.norm(ends[a] - starts[b], axis=1)
        cos = d_out[a, 0] * d_in[b, 0] + d_out[a, 1] * d_in[b, 1]
        ok = (gap <= SUCCESSOR_GAP) & (cos >= np.cos(SUCCESSOR_ANGLE)) & (a != b)
        pairs.append((a[ok], b[ok]))
        n_links += int(ok.sum())
        check_counts({"links": n_links}, f"{where}: inferred lane successors")
    if pairs:
        a = np.concatenate([x[0] for x in pairs])
        b = np.concatenate([x[1] for x in pairs])
        o = np.lexsort((b, a))
        for x, y in zip(a[o].tolist(), b[o].tolist()):
            lanes[good[x]].exit.append(lanes[good[y]].id)
            lanes[good[y]].entry.append(lanes[good[x]].id)
    # Neighbours: sample each lane at its arc-length midpoint, find the closest segment of every other
    # lane near it (a grid over segment pieces), filter as the docstring says, keep the closest.
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
    mids, heads = np.zeros((len(good), 2)), np.zeros((len(good), 2))
    for k, i in enumerate(good):
        p = lanes[i].polyline[:, :2]
        cum = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))]
        j = min(int(np.searchsorted(cum, cum[-1] / 2)), len(p) - 1)
        j = max(j, 1)
        mids[k], heads[k] = p[j - 1] + (p[j] - p[j - 1]) * 0.5, (p[j] - p[j - 1]) / np.linalg.norm(p[j] - p[j - 1])
    # A segment within `hi` of a midpoint has a piece (at most `hi` long) whose centre lies within 1.5 hi.
    n_piece = np.maximum(np.ceil(np.sqrt(ab_len2) / hi), 1).astype(np.int64)
    check_counts({"points": int(n_piece.sum()) - seg_a.shape[0] + sum(len(lanes[i].polyline) for i in good)},
                 f"{where}: lane points, with long segments cut into {hi} m pieces")
    piece_seg = np.repeat(np.arange(seg_a.shape[0]), n_piece)
    frac = (np.arange(piece_seg.shape[0]) - np.repeat(np.cumsum(n_piece) - n_piece, n_piece) + 0.5) / n_piece[piece_seg]
    piece_mid = seg_a[piece_seg] + ab[piece_seg] * frac[:, None]
    found: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"left": [], "right": []}
    for k, pc in near_pairs(mids, piece_mid, 1.5 * hi, f"{where}: lane neighbours"):
        sg = piece_seg[pc]
        mid, h = mids[k], heads[k]
        t = np.clip(((mid - seg_a[sg]) * ab[sg]).sum(1) / ab_len2[sg], 0.0, 1.0)
        foot = seg_a[sg] + ab[sg] * t[:, None]
        off = foot - mid
        dist = np.linalg.norm(off, axis=1)
        lateral = h[:, 0] * off[:, 1] - h[:, 1] * off[:, 0]  # > 0: to the left
        along = np.abs((off * h).sum(1))
        ok = (seg_lane[sg] != k) & (bike[seg_lane[sg]] == bike[k]) & ((seg_dir[sg] * h).sum(1) >= np.cos(NEIGHBOR_ANGLE)) \
            & (dist >= lo) & (dist <= hi) & (along < 0.5 * dist)
        for side, sign in (("left", 1), ("right", -1)):
            c = np.nonzero(ok & (sign * lateral > 0))[0]
            o = c[np.lexsort((sg[c], dist[c], k[c]))]  # per lane: the closest segment, the lowest on a tie
            head = o[np.r_[True, k[o][1:] != k[o][:-1]]] if o.shape[0] else o
            found[side].append((k[head], sg[head]))  # a chunk holds whole lanes: its best is the best
    for side in ("left", "right"):
        for ks, sgs in found[side]:
            for kk, ss in zip(ks.tolist(), sgs.tolist()):
                getattr(lanes[good[kk]], side).append(lanes[good[int(seg_lane[ss])]].id)


def successor_agreement(truth: Scene, inferred: Scene) -> dict[str, int]:
    """How the lane graph inferred from geometry (``inferred``, as :func:`to_scene` reads a scene's JSON)
    compares with a scene's true one (``truth``, read from its ``Scenario`` proto, whose ``exit_lanes``
    and neighbours the JSON drops), over the lanes both hold. Successor links: ``true`` (in the proto),
    ``recovered`` (inferred and true), ``missed`` (true, not inferred), ``invented`` (inferred, not
    true). Lane changes, per lane and side: ``neighbours_true`` (the proto lists a neighbour there),
    ``neighbours_recovered`` (the inferred neighbour is one the proto lists), ``neighbours_missed`` (the
    proto lists one, none inferred), ``neighbours_invented`` (one inferred that the proto does not list
    on that side)."""
    ids = {ln.id for ln in truth.lanes} & {ln.id for ln in inferred.lanes}

    def succ(scene: Scene) -> set[tuple[int, int]]:
        return {(ln.id, b) for ln in scene.lanes if ln.id in ids for b in ln.exit if b in ids}

    def sides(scene: Scene) -> dict[tuple[int, str], set[int]]:
        return {(ln.id, side): {b for b in getattr(ln, side) if b in ids} for ln in scene.lanes if ln.id in ids
                for side in ("left", "right") if any(b in ids for b in getattr(ln, side))}

    ts, is_ = succ(truth), succ(inferred)
    tn = sides(truth)
    # the reader keeps one neighbour per side (the closest), as MapData's lane change does
    inn = {k: v for k, v in sides(inferred).items()}
    return {"lanes": len(ids), "true": len(ts), "recovered": len(ts & is_), "missed": len(ts - is_),
            "invented": len(is_ - ts), "neighbours_true": len(tn),
            "neighbours_recovered": sum(1 for k, v in inn.items() if v & tn.get(k, set())),
            "neighbours_missed": sum(1 for k in tn if k not in inn),
            "neighbours_invented": sum(1 for k, v in inn.items() if not v & tn.get(k, set()))}


def _census(d: dict[str, Any], where: str) -> tuple[int, list]:
    """Check the counts that size the arrays against ``LIMITS`` before any is made; returns the step
    count and the objects."""
    roads, objs = d["roads"], d["objects"]
    check_counts({"features": len(roads), "tracks": len(objs)}, where)
    n_lanes = n_pts = 0
    for r in roads:
        if isinstance(r, dict):
            n_lanes += r.get("type") == "lane"
            g = r.get("geometry")
            n_pts += len(g) if isinstance(g, list) else 0
    check_counts({"lanes": n_lanes, "points": n_pts}, where)
    steps = [len(o["position"]) if isinstance(o, dict) and isinstance(o.get("position"), list) else 0 for o in objs]
    n_steps = max(steps + [0])
    check_counts({"steps": n_steps, "track_states": len(objs) * n_steps}, where)
    return n_steps, objs


def to_scene(d: dict[str, Any], where: str = "scenario") -> Scene:
    """A :class:`Scene` (lane graph inferred) from a parsed GPUDrive JSON document."""
    if not is_gpudrive(d):
        raise MapValidationError(f"{where}: not a GPUDrive scenario (needs 'objects' and 'roads' lists)")
    sid = check_scenario_id(d.get("scenario_id", d.get("name", "")), where)
    meta = d.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise MapValidationError(f"{where}: metadata must be an object, got {_show(meta)}")
    n_steps, objs = _census(d, where)
    scene = Scene(scenario_id=sid, lanes=[], source="gpudrive_json")
    lane_at: dict[int, int] = {}
    for k, r in enumerate(d["roads"]):
        w = f"{where}: roads[{k}]"
        if not isinstance(r, dict) or r.get("type") not in _ROAD:
            raise MapValidationError(f"{w}: 'type' must be one of {', '.join(_ROAD)}, got "
                                     f"{_show(r.get('type')) if isinstance(r, dict) else _show(r)}")
        fid = _int(r.get("id", k), f"{w}.id")
        code = _int(r.get("map_element_id", -1), f"{w}.map_element_id")
        pts = _xyz(r.get("geometry"), f"{w}.geometry")
        t = r["type"]
        if t == "lane":
            if fid in lane_at:
                raise MapValidationError(f"{w}.id: lane id {fid} appears twice (also roads[{lane_at[fid]}]); "
                                         "lane ids must be unique")
            lane_at[fid] = k
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
    infer_lane_graph(scene.lanes, where)
    state = np.zeros((len(objs), n_steps, 6))
    valid = np.zeros((len(objs), n_steps), bool)
    size = np.zeros((len(objs), 3), np.float32)
    ids, types = [], []
    id_at: dict[int, int] = {}
    for i, o in enumerate(objs):
        w = f"{where}: objects[{i}]"
        if not isinstance(o, dict):
            raise MapValidationError(f"{w}: expected an object, got {_show(o)}")
        pos = _xyz(o.get("position"), f"{w}.position")
        heading = _numbers(o.get("heading"), f"{w}.heading").astype(np.float32).astype(np.float64)
        vel = _xyz(o.get("velocity"), f"{w}.velocity", ("x", "y")).astype(np.float32).astype(np.float64)
        val = _bools(o.get("valid"), f"{w}.valid")
        size[i] = [_number(o.get(c, 0.0), f"{w}.{c}") for c in ("length", "width", "height")]
        if not (pos.shape[0] == heading.shape[0] == vel.shape[0] == val.shape[0] == n_steps):
            raise MapValidationError(f"{w}: position, heading, velocity and valid must all have {n_steps} steps, got "
                                     f"{pos.shape[0]}, {heading.shape[0]}, {vel.shape[0]}, {val.shape[0]}")
        state[i] = np.column_stack([pos, heading, vel])
        valid[i] = val
        oid = _int(o.get("id", i), f"{w}.id")
        if oid in id_at:
            raise MapValidationError(f"{w}.id: object id {oid} appears twice (also objects[{id_at[oid]}]); "
                                     "object ids must be unique")
        id_at[oid] = i
        ids.append(oid)
        t = o.get("type", "")
        if not isinstance(t, str) or t.lower() not in _OBJECT:
            raise MapValidationError(f"{w}.type: one of {', '.join(_OBJECT)}, got {_show(t)}")
        types.append(_OBJECT[t.lower()])
    scene.track_ids, scene.track_types = np.array(ids, np.int64), np.array(types, np.int64)
    scene.track_state, scene.track_valid, scene.track_size = state, valid, size
    scene.timestamps = np.arange(n_steps) * 0.1
    tl = d.get("tl_states")
    if tl is None:
        tl = {}
    if not isinstance(tl, dict):
        raise MapValidationError(f"{where}: tl_states must be an object of lane id to states, got {_show(tl)}")
    n_states = 0
    for lane, s in tl.items():
        w = f"{where}: tl_states[{lane!r}]"
        if not isinstance(s, dict):
            raise MapValidationError(f"{w}: expected an object with state, x, y, z, got {_show(s)}")
        names = _list(s.get("state"), f"{w}.state")
        n_states += len(names)
        check_counts({"signal_states": n_states, "signal_cells": (len(scene.signals) + 1) * n_steps}, where)
        if not _INT_KEY.fullmatch(lane):
            raise MapValidationError(f"{w}: the key must be a lane id (an integer)")
        bad = next((x for x in names if not isinstance(x, str) or x not in _STATE), None)
        if bad is not None:
            raise MapValidationError(f"{w}.state: one of {', '.join(SIGNAL_STATES)}, got {_show(bad)}")
        codes = [_STATE[x] for x in names]
        if "time_index" in s:
            steps = np.array([_int(x, f"{w}.time_index") for x in _list(s["time_index"], f"{w}.time_index")],
                             np.int64)
        else:
            steps = np.arange(len(codes), dtype=np.int64)
        stop = []
        for c in ("x", "y", "z"):
            v = _numbers(s.get(c), f"{w}.{c}")
            if not v.shape[0]:
                raise MapValidationError(f"{w}.{c}: needs the stop point (at least one number)")
            stop.append(v[0])
        if steps.shape[0] != len(codes) or np.any(steps < 0) or np.any(steps >= max(n_steps, 1)):
            raise MapValidationError(f"{w}: time_index must give a step in [0, {n_steps}) for every state")
        if int(lane) in scene.signals:
            raise MapValidationError(f"{w}: lane {int(lane)} appears twice in tl_states (lane ids must be unique)")
        arr = np.full(n_steps, -1, np.int8)
        arr[steps] = codes
        scene.signals[int(lane)] = (arr, np.array(stop, np.float64))
    sdc = meta.get("sdc_track_index", -1)
    scene.sdc_track_index = _int(sdc, f"{where}: metadata.sdc_track_index")
    ttp = _list(meta.get("tracks_to_predict", []), f"{where}: metadata.tracks_to_predict", LIMITS["tracks"])
    scene.tracks_to_predict = [_int(x["track_index"] if isinstance(x, dict) and "track_index" in x else x,
                                    f"{where}: metadata.tracks_to_predict[{k}]") for k, x in enumerate(ttp)]
    ooi = _list(meta.get("objects_of_interest", []), f"{where}: metadata.objects_of_interest", LIMITS["tracks"])
    scene.objects_of_interest = [_int(x, f"{where}: metadata.objects_of_interest[{k}]") for k, x in enumerate(ooi)]
    return scene


def from_dict(d: dict[str, Any], *, name: str = "", handedness: str | None = None, where: str = "scenario") -> MapData:
    """``MapData`` (raw) from a parsed GPUDrive JSON document; ``metadata["lanes_without_successor"]``
    counts the lanes the geometric inference left without one."""
    scene = to_scene(d, where)
    m = to_map_data(scene, name=name or scene.scenario_id, handedness=handedness)
    n_none = int(np.sum(np.diff(m.lanes.successors.offsets) == 0))
    return m.replace(metadata={**m.metadata, "lanes_without_successor": n_none})


def read_document(path: str | os.PathLike[str]) -> Any:
    """The parsed JSON of a scenario file: a regular file of at most :data:`MAX_FILE_BYTES`, UTF-8, at
    most :data:`MAX_JSON_CONTAINERS` objects and arrays (counted before parsing) and nesting bounded
    (``safe_files.load_json``). Errors are ``MapValidationError`` naming the file."""
    p = os.fspath(path)
    try:
        text = safe_files.read_text(p, MAX_FILE_BYTES, "scenario JSON")
        n = text.count("{") + text.count("[")
        if n > MAX_JSON_CONTAINERS:
            raise MapValidationError(f"{p}: {n} JSON objects and arrays, over the limit of {MAX_JSON_CONTAINERS}")
        return safe_files.load_json(text, p)
    except safe_files.UnsafeFileError as e:
        raise MapValidationError(str(e)) from None


def convert(path: str | os.PathLike[str], *, name: str | None = None, handedness: str | None = None) -> MapData:
    """Read one GPUDrive/PufferDrive scenario JSON file."""
    p = Path(path)
    d = read_document(p)
    if not isinstance(d, dict):
        raise MapValidationError(f"{p}: a GPUDrive scenario is a JSON object, got a {type(d).__name__}")
    sid = d.get("scenario_id", p.stem)
    return from_dict(d, name=name or (sid if isinstance(sid, str) else ""), handedness=handedness, where=str(p))
