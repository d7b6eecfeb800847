"""Read Waymo Open Motion Dataset ``Scenario`` TFRecords into ``MapData`` with logged tracks, without
TensorFlow: :mod:`.tfrecord` checks the framing, :mod:`.womd_proto` parses each record with protobuf,
and :mod:`.womd_scene` maps the scenario (see there for what becomes what).

One file holds many scenarios::

    convert("training.tfrecord-00000-of-01000", index=3)          # the fourth record
    convert("training.tfrecord-00000-of-01000", scenario="a1b2")  # by scenario_id
    for sid, m in iter_maps(path): ...                            # all of them

``to_scenario`` writes a ``Scene`` back as a ``Scenario`` proto (tests and ``tools/`` use it to make
TFRecords from scenes read in other formats).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from ..builder import MapValidationError
from ..schema import MapData
from . import womd_proto as pb
from .tfrecord import iter_records, read_record, record_offsets, write_records
from .womd_scene import Scene, SceneLane, to_map_data

__all__ = ["convert", "from_scenario", "iter_maps", "parse", "scenario_ids", "to_scenario", "to_scene", "write_tfrecord"]


def parse(data: bytes, where: str = "record") -> Any:
    """A ``Scenario`` message from a record's bytes; ``MapValidationError`` if they are not one."""
    try:
        sc = pb.Scenario.FromString(data)
    except DecodeError as e:
        raise MapValidationError(f"{where}: not a WOMD Scenario proto ({e})") from None
    if not sc.scenario_id and not sc.map_features and not sc.tracks:
        raise MapValidationError(f"{where}: not a WOMD Scenario proto (no scenario_id, map features or tracks)")
    return sc


def _pts(points: Any) -> np.ndarray:
    return np.array([(p.x, p.y, p.z) for p in points], np.float64).reshape(-1, 3)


def to_scene(sc: Any) -> Scene:
    """A :class:`Scene` from a ``Scenario`` message."""
    scene = Scene(scenario_id=sc.scenario_id, lanes=[], source="womd_tfrecord")
    for f in sc.map_features:
        kind = f.WhichOneof("feature_data")
        if kind == "lane":
            ln = f.lane
            scene.lanes.append(SceneLane(
                id=int(f.id), polyline=_pts(ln.polyline), type=int(ln.type), speed_limit_mph=float(ln.speed_limit_mph),
                entry=list(ln.entry_lanes), exit=list(ln.exit_lanes),
                left=[int(n.feature_id) for n in ln.left_neighbors], right=[int(n.feature_id) for n in ln.right_neighbors]))
        elif kind == "road_line":
            scene.road_lines.append((int(f.id), int(f.road_line.type), _pts(f.road_line.polyline)))
        elif kind == "road_edge":
            scene.road_edges.append((int(f.id), int(f.road_edge.type), _pts(f.road_edge.polyline)))
        elif kind == "stop_sign":
            p = f.stop_sign.position
            scene.stop_signs.append((int(f.id), list(f.stop_sign.lane), np.array([p.x, p.y, p.z])))
        elif kind in ("crosswalk", "speed_bump", "driveway"):
            getattr(scene, kind + "s").append((int(f.id), _pts(getattr(f, kind).polygon)))
    n_steps = max([len(t.states) for t in sc.tracks] + [len(sc.timestamps_seconds)])
    a = len(sc.tracks)
    state = np.zeros((a, n_steps, 6))
    valid = np.zeros((a, n_steps), bool)
    size = np.zeros((a, 3), np.float32)
    for i, t in enumerate(sc.tracks):
        if len(t.states) != n_steps:
            raise MapValidationError(f"scenario {sc.scenario_id}: track {t.id} has {len(t.states)} states, "
                                     f"the scenario {n_steps} steps")
        rows = [(s.center_x, s.center_y, s.center_z, s.heading, s.velocity_x, s.velocity_y, s.valid,
                 s.length, s.width, s.height) for s in t.states]
        arr = np.array(rows, np.float64).reshape(n_steps, 10)
        state[i] = arr[:, :6]
        valid[i] = arr[:, 6] > 0
        last = np.nonzero(valid[i])[0]
        size[i] = arr[last[-1] if last.shape[0] else -1, 7:10]
    scene.track_ids = np.array([t.id for t in sc.tracks], np.int64)
    scene.track_types = np.array([t.object_type for t in sc.tracks], np.int64)
    scene.track_state, scene.track_valid, scene.track_size = state, valid, size
    scene.timestamps = np.asarray(sc.timestamps_seconds, np.float64)
    signals: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for step, dms in enumerate(sc.dynamic_map_states):
        for ls in dms.lane_states:
            lane = int(ls.lane)
            if lane not in signals:
                signals[lane] = (np.full(len(sc.dynamic_map_states), -1, np.int8),
                                 np.array([ls.stop_point.x, ls.stop_point.y, ls.stop_point.z]))
            signals[lane][0][step] = int(ls.state)
    scene.signals = signals
    scene.sdc_track_index = int(sc.sdc_track_index) if sc.HasField("sdc_track_index") else -1
    scene.tracks_to_predict = [int(r.track_index) for r in sc.tracks_to_predict]
    scene.objects_of_interest = [int(x) for x in sc.objects_of_interest]
    scene.current_time_index = int(sc.current_time_index)
    return scene


def from_scenario(sc: Any, *, name: str = "", handedness: str | None = None) -> MapData:
    """``MapData`` (raw) from a ``Scenario`` message."""
    return to_map_data(to_scene(sc), name=name, handedness=handedness)


def scenario_ids(path: str | os.PathLike[str]) -> list[str]:
    """The ``scenario_id`` of every record in a file, in order."""
    return [parse(r, f"{os.fspath(path)}: record {i}").scenario_id for i, r in enumerate(iter_records(path))]


def iter_maps(path: str | os.PathLike[str], **options: Any) -> Iterator[tuple[int, str, MapData | MapValidationError]]:
    """``(index, scenario_id, MapData or the error that rejected it)`` for every record of a file. A
    framing error (bad CRC, truncation) ends the file: it raises, as nothing after it can be trusted."""
    p = os.fspath(path)
    for i, data in enumerate(iter_records(p)):
        where = f"{p}: record {i}"
        try:
            sc = parse(data, where)
        except MapValidationError as e:
            yield i, "", e
            continue
        try:
            yield i, sc.scenario_id, from_scenario(sc, handedness=options.get("handedness"))
        except MapValidationError as e:
            yield i, sc.scenario_id, MapValidationError(f"{where} (scenario {sc.scenario_id}): {e}")


def convert(path: str | os.PathLike[str], *, index: int | None = None, scenario: str | None = None,
            name: str | None = None, handedness: str | None = None) -> MapData:
    """One scenario of a WOMD TFRecord file: record ``index`` (default 0) or the one whose
    ``scenario_id`` is ``scenario``."""
    p = os.fspath(path)
    if index is not None and scenario is not None:
        raise TypeError("convert: give index or scenario, not both")
    offsets = record_offsets(p)
    if not offsets:
        raise MapValidationError(f"{p}: the file holds no records")
    if scenario is not None:
        for i, off in enumerate(offsets):
            sc = parse(read_record(p, off, i), f"{p}: record {i}")
            if sc.scenario_id == scenario:
                break
        else:
            raise MapValidationError(f"{p}: no scenario with id {scenario!r} among its {len(offsets)} records")
    else:
        i = 0 if index is None else int(index)
        if not 0 <= i < len(offsets):
            raise MapValidationError(f"{p}: record index {i} out of range (the file holds {len(offsets)} records)")
        sc = parse(read_record(p, offsets[i], i), f"{p}: record {i}")
    try:
        return from_scenario(sc, name=name or sc.scenario_id, handedness=handedness)
    except MapValidationError as e:
        raise MapValidationError(f"{p}: record {i} (scenario {sc.scenario_id}): {e}") from None


def _set_pts(field: Any, pts: np.ndarray) -> None:
    for x, y, z in np.asarray(pts, np.float64).reshape(-1, 3):
        field.add(x=x, y=y, z=z)


def to_scenario(scene: Scene) -> Any:
    """A ``Scenario`` message holding a :class:`Scene` (ids, codes and arrays as they are)."""
    sc = pb.Scenario(scenario_id=scene.scenario_id, current_time_index=scene.current_time_index)
    sc.timestamps_seconds.extend(np.asarray(scene.timestamps, np.float64).tolist())
    for ln in scene.lanes:
        f = sc.map_features.add(id=ln.id)
        f.lane.type = ln.type
        f.lane.speed_limit_mph = ln.speed_limit_mph
        _set_pts(f.lane.polyline, ln.polyline)
        f.lane.entry_lanes.extend(ln.entry)
        f.lane.exit_lanes.extend(ln.exit)
        for x in ln.left:
            f.lane.left_neighbors.add(feature_id=x)
        for x in ln.right:
            f.lane.right_neighbors.add(feature_id=x)
    for fid, code, pts in scene.road_lines:
        f = sc.map_features.add(id=fid)
        f.road_line.type = code
        _set_pts(f.road_line.polyline, pts)
    for fid, code, pts in scene.road_edges:
        f = sc.map_features.add(id=fid)
        f.road_edge.type = code
        _set_pts(f.road_edge.polyline, pts)
    for fid, lanes, pos in scene.stop_signs:
        f = sc.map_features.add(id=fid)
        f.stop_sign.lane.extend(lanes)
        x, y, z = np.asarray(pos, np.float64).reshape(3)
        f.stop_sign.position.x, f.stop_sign.position.y, f.stop_sign.position.z = x, y, z
    for kind in ("crosswalk", "speed_bump", "driveway"):
        for fid, pts in getattr(scene, kind + "s"):
            f = sc.map_features.add(id=fid)
            _set_pts(getattr(f, kind).polygon, pts)
    for i in range(scene.track_state.shape[0]):
        t = sc.tracks.add(id=int(scene.track_ids[i]), object_type=int(scene.track_types[i]))
        ln, wd, ht = (float(v) for v in scene.track_size[i])
        for s, v in zip(scene.track_state[i], scene.track_valid[i]):
            t.states.add(center_x=s[0], center_y=s[1], center_z=s[2], heading=s[3], velocity_x=s[4], velocity_y=s[5],
                         valid=bool(v), length=ln, width=wd, height=ht)
    n_sig = max([len(v[0]) for v in scene.signals.values()] + [0])
    for step in range(n_sig):
        d = sc.dynamic_map_states.add()
        for lane, (states, stop) in sorted(scene.signals.items()):
            if step < len(states) and states[step] >= 0:
                x, y, z = np.asarray(stop, np.float64).reshape(3)
                d.lane_states.add(lane=lane, state=int(states[step]), stop_point=pb.MapPoint(x=x, y=y, z=z))
    if scene.sdc_track_index >= 0:
        sc.sdc_track_index = scene.sdc_track_index
    for k in scene.tracks_to_predict:
        sc.tracks_to_predict.add(track_index=k)
    sc.objects_of_interest.extend(scene.objects_of_interest)
    return sc


def write_tfrecord(path: str | os.PathLike[str], scenes: list[Scene]) -> Path:
    """Write scenes as a WOMD-style TFRecord of ``Scenario`` protos."""
    return write_records(path, [to_scenario(s).SerializeToString() for s in scenes])
