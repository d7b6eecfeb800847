"""Read Waymo Open Motion Dataset ``Scenario`` TFRecords into ``MapData`` with logged tracks, without
TensorFlow: :mod:`.tfrecord` checks the framing, :mod:`.womd_proto` parses each record with protobuf,
and :mod:`.womd_scene` maps the scenario (see there for what becomes what).

One file holds many scenarios::

    convert("training.tfrecord-00000-of-01000", index=3)          # the fourth record
    convert("training.tfrecord-00000-of-01000", scenario="a1b2")  # by scenario_id
    for sid, m in iter_maps(path): ...                            # all of them

``to_scenario`` writes a ``Scene`` back as a ``Scenario`` proto (tests and ``tools/`` use it to make
TFRecords from scenes read in other formats).

A record is user input (docs/hardening.md, third pass). Before protobuf parses it, :func:`census` walks
its wire bytes without building a message and counts what the parse and the conversion will allocate:
protobuf elements (each becomes an object, about 400-500 bytes in the pure-Python runtime), map
features, lanes, points, named lane ids, tracks and states per track, signal lane states and signalled
lanes, timestamps; each is checked against :data:`MAX_PROTO_ELEMENTS`, :data:`MAX_PROTO_FIELDS` or
``womd_scene.LIMITS``. Unknown groups are skipped iteratively and refused past
:data:`MAX_GROUP_DEPTH` levels (protobuf's pure-Python parser recurses into them). :func:`to_scene`
checks the message's own counts again before it sizes an array, and the ``scenario_id`` must be text
that can name a file (``womd_scene.check_scenario_id``).
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
from .womd_scene import LIMITS, Scene, SceneLane, check_counts, check_scenario_id, to_map_data

__all__ = ["MAX_GROUP_DEPTH", "MAX_PROTO_ELEMENTS", "MAX_PROTO_FIELDS", "census", "convert", "from_scenario", "iter_maps",
           "parse", "scenario_ids", "to_scenario", "to_scene", "write_tfrecord"]

#: Most protobuf elements in one record: submessages, unknown fields and repeated scalar values (each
#: becomes an object when parsed: about 400-500 bytes in protobuf's pure-Python runtime). Real scenarios
#: hold a few 100,000; the limit sits above ``LIMITS["points"]`` so a scene of many points is refused
#: naming its points.
MAX_PROTO_ELEMENTS = 2_500_000
#: Most wire fields in one record (bounds the time of the census and of protobuf's parse).
MAX_PROTO_FIELDS = 10_000_000
#: Deepest nesting of unknown groups (wire types 3/4) in a record; Waymo's schema has none.
MAX_GROUP_DEPTH = 16

_VARINT, _FIXED64, _LEN, _START, _END, _FIXED32 = 0, 1, 2, 3, 4, 5
_WIRE = {"double": _FIXED64, "float": _FIXED32, "int64": _VARINT, "int32": _VARINT, "bool": _VARINT, "string": _LEN}
# (message, field) -> the census counter its elements add to
_COUNTER = {("Scenario", "map_features"): "features", ("MapFeature", "lane"): "lanes",
            ("LaneCenter", "entry_lanes"): "links", ("LaneCenter", "exit_lanes"): "links",
            ("LaneCenter", "left_neighbors"): "links", ("LaneCenter", "right_neighbors"): "links",
            ("LaneCenter", "left_boundaries"): "links", ("LaneCenter", "right_boundaries"): "links",
            ("LaneNeighbor", "boundaries"): "links", ("StopSign", "lane"): "links",
            ("Scenario", "tracks"): "tracks", ("Scenario", "timestamps_seconds"): "timestamps",
            ("Scenario", "dynamic_map_states"): "signal_steps", ("DynamicMapState", "lane_states"): "signal_states",
            ("Scenario", "tracks_to_predict"): "tracks_to_predict",
            ("Scenario", "objects_of_interest"): "objects_of_interest"}


def _schema() -> dict[str, dict[int, tuple]]:
    """message -> field number -> (wire type, child message or None, repeated, counter or None, packable)."""
    out: dict[str, dict[int, tuple]] = {}
    for name, fields, _enums, _oneof in pb._MESSAGES:
        spec = {}
        for fname, number, label, ftype in fields:
            child = ftype[4:] if ftype.startswith("msg:") else None
            wire = _LEN if child else _VARINT if ftype.startswith("enum:") else _WIRE[ftype]
            counter = "points" if child == "MapPoint" else _COUNTER.get((name, fname))
            repeated = label == pb._REP
            spec[number] = (wire, child, repeated, counter, repeated and wire != _LEN)
        out[name] = spec
    return out


_SCHEMA = _schema()
_HIGH = bytes(range(0x80, 0x100))


class _Malformed(Exception):
    """Raised inside the raw-byte census when a record's wire format does not parse."""


def _varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= end:
            raise _Malformed(f"a varint runs past its message at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _Malformed(f"a varint longer than 10 bytes ends at byte {pos}")


def census(data: bytes, where: str = "record") -> dict[str, int]:
    """What parsing the ``Scenario`` record ``data`` and converting it will allocate, counted from its
    wire bytes without building a message; raises ``MapValidationError`` naming ``where`` when a count
    is over its limit (checked as the walk goes, so a hostile record stops early), when the bytes are
    not protobuf wire format, or when unknown groups nest deeper than :data:`MAX_GROUP_DEPTH`. Iterative:
    no recursion whatever the nesting."""
    try:
        return _census(data, where)
    except _Malformed as e:
        raise MapValidationError(f"{where}: not a WOMD Scenario proto (malformed wire data: {e})") from None


def _census(buf: bytes, where: str) -> dict[str, int]:
    counts = dict.fromkeys(("features", "lanes", "points", "links", "tracks", "timestamps", "signal_steps",
                            "signal_states", "tracks_to_predict", "objects_of_interest"), 0)
    limits = {"features": LIMITS["features"], "lanes": LIMITS["lanes"], "points": LIMITS["points"],
              "links": LIMITS["links"], "tracks": LIMITS["tracks"], "timestamps": LIMITS["steps"],
              "signal_steps": LIMITS["steps"], "signal_states": LIMITS["signal_states"],
              "tracks_to_predict": LIMITS["tracks"], "objects_of_interest": LIMITS["tracks"]}
    elements = fields = 0
    states = max_states = 0
    signal_lanes: set[int] = set()
    stack: list[tuple[str, int]] = []
    msg, end, pos = "Scenario", len(buf), 0
    spec = _SCHEMA[msg]

    def over(what: str, n: int, limit: int) -> MapValidationError:
        return MapValidationError(f"{where}: {n} {what}, over the limit of {limit} (counted before parsing)")

    while True:
        if pos >= end:
            if pos > end:
                raise _Malformed(f"a field runs past the end of its message ({msg}) at byte {end}")
            if not stack:
                break
            if msg == "Track":
                max_states = max(max_states, states)
            msg, end = stack.pop()
            spec = _SCHEMA[msg]
            continue
        b = buf[pos]
        if b < 0x80:
            tag, pos = b, pos + 1
        else:
            tag, pos = _varint(buf, pos, end)
        wt, num = tag & 7, tag >> 3
        fields += 1
        if fields > MAX_PROTO_FIELDS:
            raise over("wire fields", fields, MAX_PROTO_FIELDS)
        if num == 0:
            raise _Malformed(f"field number 0 at byte {pos}")
        f = spec.get(num)
        if f is not None and wt == f[0]:
            counter = f[3]
            if counter is not None:
                n = counts[counter] + 1
                counts[counter] = n
                if n > limits[counter]:
                    raise over(counter.replace("_", " "), n, limits[counter])
            if f[1] is not None:  # a submessage: walk into it
                length, pos = _varint(buf, pos, end)
                elements += 1
                if elements > MAX_PROTO_ELEMENTS:
                    raise over("protobuf elements", elements, MAX_PROTO_ELEMENTS)
                if pos + length > end:
                    raise _Malformed(f"a {f[1]} of {length} bytes runs past its message at byte {pos}")
                if msg == "Track":
                    states += 1
                    if states > LIMITS["steps"]:
                        raise over("states in one track", states, LIMITS["steps"])
                elif f[1] == "Track":
                    states = 0
                stack.append((msg, end))
                msg, end = f[1], pos + length
                spec = _SCHEMA[msg]
                continue
            if f[2]:
                elements += 1
                if elements > MAX_PROTO_ELEMENTS:
                    raise over("protobuf elements", elements, MAX_PROTO_ELEMENTS)
            if wt == _VARINT:
                value, pos = _varint(buf, pos, end)
                if msg == "TrafficSignalLaneState" and num == 1:
                    signal_lanes.add(value)
            elif wt == _FIXED64:
                pos += 8
            elif wt == _FIXED32:
                pos += 4
            else:
                length, pos = _varint(buf, pos, end)
                pos += length
            continue
        if f is not None and f[4] and wt == _LEN:  # a packed repeated scalar
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise _Malformed(f"a packed field of {length} bytes runs past its message at byte {pos}")
            n = length // 8 if f[0] == _FIXED64 else length // 4 if f[0] == _FIXED32 else                 len(buf[pos:pos + length].translate(None, _HIGH))
            pos += length
            elements += n
            if elements > MAX_PROTO_ELEMENTS:
                raise over("protobuf elements", elements, MAX_PROTO_ELEMENTS)
            if f[3] is not None:
                counts[f[3]] += n
                if counts[f[3]] > limits[f[3]]:
                    raise over(f[3].replace("_", " "), counts[f[3]], limits[f[3]])
            continue
        # An unknown field (or a known one with another wire type, which protobuf keeps as unknown).
        elements += 1
        if elements > MAX_PROTO_ELEMENTS:
            raise over("protobuf elements", elements, MAX_PROTO_ELEMENTS)
        depth = 0
        while True:
            if wt == _VARINT:
                _, pos = _varint(buf, pos, end)
            elif wt == _FIXED64:
                pos += 8
            elif wt == _FIXED32:
                pos += 4
            elif wt == _LEN:
                length, pos = _varint(buf, pos, end)
                pos += length
            elif wt == _START:
                depth += 1
                if depth > MAX_GROUP_DEPTH:
                    raise MapValidationError(f"{where}: unknown protobuf groups nested deeper than {MAX_GROUP_DEPTH} "
                                             f"levels at byte {pos} (refused)")
            elif wt == _END:
                depth -= 1
                if depth < 0:
                    raise _Malformed(f"an end-group tag without its start at byte {pos}")
            else:
                raise _Malformed(f"wire type {wt} at byte {pos}")
            if pos > end:
                raise _Malformed(f"a field runs past the end of its message ({msg}) at byte {end}")
            if depth == 0:
                break
            if pos >= end:
                raise _Malformed(f"a group is not closed by the end of its message ({msg})")
            tag, pos = _varint(buf, pos, end)
            wt = tag & 7
            fields += 1
            elements += 1
            if fields > MAX_PROTO_FIELDS or elements > MAX_PROTO_ELEMENTS:
                raise over("protobuf elements in unknown groups", elements, MAX_PROTO_ELEMENTS)
    steps = max(max_states, counts["timestamps"], counts["signal_steps"])
    out = {**counts, "elements": elements, "fields": fields, "steps": steps,
           "track_states": counts["tracks"] * max_states, "signal_cells": len(signal_lanes) * counts["signal_steps"]}
    check_counts({k: out[k] for k in ("steps", "track_states", "signal_cells")}, f"{where}")
    return out


def parse(data: bytes, where: str = "record") -> Any:
    """A ``Scenario`` message from a record's bytes, counted by :func:`census` before protobuf parses
    it; ``MapValidationError`` if they are not one, ask for more than the limits allow, or hold a
    ``scenario_id`` that is not UTF-8 text naming no file."""
    census(data, where)
    try:
        sc = pb.Scenario.FromString(data)
        sid = sc.scenario_id
    except DecodeError as e:
        raise MapValidationError(f"{where}: not a WOMD Scenario proto ({' '.join(str(e).split())[:200]})") from None
    except UnicodeDecodeError:
        raise MapValidationError(f"{where}: scenario_id is not UTF-8 text") from None
    except RecursionError:  # the census refuses deep groups first; a backstop for other runtimes' parsers
        raise MapValidationError(f"{where}: not a WOMD Scenario proto (nested too deeply)") from None
    check_scenario_id(sid, where)
    if not sid and not sc.map_features and not sc.tracks:
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
    n_sig = len(sc.dynamic_map_states)
    sig_lanes = {int(ls.lane) for dms in sc.dynamic_map_states for ls in dms.lane_states}
    check_counts({"tracks": a, "steps": max(n_steps, n_sig), "track_states": a * n_steps,
                  "signal_states": sum(len(dms.lane_states) for dms in sc.dynamic_map_states),
                  "signal_cells": len(sig_lanes) * n_sig}, f"scenario {sc.scenario_id}")
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


def iter_maps(path: str | os.PathLike[str], **options: Any) -> Iterator[tuple[int, str, MapData | Exception]]:
    """``(index, scenario_id, MapData or the error that rejected it)`` for every record of a file (an
    error in one record, expected or not, is that record's). A framing error (bad CRC, truncation) ends
    the file: it raises, as nothing after it can be trusted."""
    p = os.fspath(path)
    for i, data in enumerate(iter_records(p)):
        where = f"{p}: record {i}"
        try:
            sc = parse(data, where)
        except Exception as e:  # MapValidationError, or anything unexpected: this record only
            yield i, "", e
            continue
        try:
            m: MapData | Exception = from_scenario(sc, handedness=options.get("handedness"))
        except MapValidationError as e:
            m = MapValidationError(f"{where} (scenario {sc.scenario_id}): {e}")
        except Exception as e:
            m = e
        yield i, sc.scenario_id, m


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
