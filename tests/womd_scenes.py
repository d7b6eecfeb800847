"""Small synthetic WOMD scenes for the converter tests, written as GPUDrive JSON or Scenario TFRecords.

The scene: an approach lane running east into a junction, where a signal governs a straight lane and a
left-turn lane; a second eastbound lane beside the approach (a lane change); both continue past the
junction; a northbound lane ending at a stop sign; a bike lane; every road type (lines of several
paints, edges, crosswalk, stop sign, speed bump, driveway); tracks of a vehicle (the SDC), a
pedestrian, a cyclist, an "other" object and a vehicle never valid.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from terrazero_env.maps.convert.womd_scene import SIGNAL_STATES, Scene, SceneLane

T = 91


def line(x0: float, y0: float, x1: float, y1: float, step: float = 1.0) -> np.ndarray:
    n = max(int(np.hypot(x1 - x0, y1 - y0) / step), 1) + 1
    return np.column_stack([np.linspace(x0, x1, n), np.linspace(y0, y1, n), np.full(n, 1.5)])


def arc_left(x0: float, y0: float, r: float, n: int = 12) -> np.ndarray:
    """Quarter circle from (x0, y0) heading east, turning left (north)."""
    a = np.linspace(-np.pi / 2, 0.0, n)
    return np.column_stack([x0 + r * np.cos(a), y0 + r + r * np.sin(a), np.full(n, 1.5)])


def scene(with_graph: bool = True, offset: tuple[float, float] = (1200.0, -3400.0)) -> Scene:
    ox, oy = offset
    shift = np.array([ox, oy, 0.0])
    lanes = [
        SceneLane(10, line(-60, 0, 0, 0) + shift, 2, 25.0),            # approach
        SceneLane(11, line(0, 0, 20, 0) + shift, 2, 25.0),             # straight through the junction
        SceneLane(12, arc_left(0, 0, 10.0) + shift, 2, 15.0),          # left turn
        SceneLane(13, line(20, 0, 80, 0) + shift, 2, 25.0),            # exit east
        SceneLane(14, line(10, 10, 10, 60) + shift, 2, 25.0),          # exit north after the turn
        SceneLane(20, line(-60, -3.5, 0, -3.5) + shift, 1, 45.0),      # second eastbound lane (freeway type)
        SceneLane(21, line(0, -3.5, 80, -3.5) + shift, 1, 45.0),
        SceneLane(30, line(30, -60, 30, -12) + shift, 2, 0.0),         # northbound to a stop sign
        SceneLane(40, line(-60, -7.0, 80, -7.0) + shift, 3, 0.0),      # bike lane
    ]
    if with_graph:
        graph = {10: [11, 12], 11: [13], 12: [14], 20: [21]}
        for ln in lanes:
            ln.exit = list(graph.get(ln.id, []))
            ln.entry = [a for a, bs in graph.items() if ln.id in bs]
        lanes[0].right = [20]
        lanes[5].left = [10]
        lanes[1].right = [21]
        lanes[3].right = [21]
        lanes[6].left = [13]
    s = Scene(scenario_id="synthetic0001", lanes=lanes)
    s.road_lines = [(100, 1, line(-60, -1.75, 0, -1.75) + shift), (101, 7, line(-60, 1.75, 0, 1.75) + shift),
                    (102, 2, line(0, -5.25, 80, -5.25) + shift)]
    s.road_edges = [(110, 1, line(-60, -9, 80, -9) + shift), (111, 2, line(-60, 3.5, -5, 3.5) + shift)]
    s.stop_signs = [(120, [30] if with_graph else [], np.array([33.0, -13.0, 1.5]) + shift)]
    s.crosswalks = [(130, np.array([[22, -8, 1.5], [26, -8, 1.5], [26, 2, 1.5], [22, 2, 1.5]]) + shift)]
    s.speed_bumps = [(140, np.array([[40, -8, 1.5], [41, -8, 1.5], [41, 2, 1.5], [40, 2, 1.5]]) + shift)]
    s.driveways = [(150, np.array([[50, 3, 1.5], [54, 3, 1.5], [54, 8, 1.5], [50, 8, 1.5]]) + shift)]
    steps = np.arange(T)
    a = 5
    state = np.zeros((a, T, 6))
    valid = np.zeros((a, T), bool)
    state[0, :, 0] = -50 + 0.8 * steps + ox                      # SDC on the approach, 8 m/s east
    state[0, :, 1] = oy
    state[0, :, 4] = 8.0
    valid[0] = True
    state[1, :, :2] = [24 + ox, -6 + oy]                         # pedestrian standing at the crosswalk
    state[1, :, 1] += 0.1 * steps
    state[1, :, 5] = 1.0
    valid[1, 5:] = True
    state[2, :, 0] = -55 + 0.5 * steps + ox                      # cyclist in the bike lane
    state[2, :, 1] = -7 + oy
    state[2, :, 4] = 5.0
    valid[2, :60] = True
    state[3, :, :2] = [60 + ox, 6 + oy]                          # "other"
    valid[3] = True
    state[:, :, 2] = 1.5
    state[~valid] = -10000.0 if not with_graph else 0.0
    s.track_ids = np.array([7, 8, 9, 10, 11])
    s.track_types = np.array([1, 2, 3, 4, 1])
    s.track_state = state
    s.track_valid = valid
    s.track_size = np.array([[4.5, 2.0, 1.6], [0.6, 0.6, 1.8], [1.8, 0.7, 1.7], [1.0, 1.0, 1.0], [4.0, 2.0, 1.5]],
                            np.float32)
    s.timestamps = steps * 0.1
    go, stop = SIGNAL_STATES.index("go"), SIGNAL_STATES.index("stop")
    s.signals = {11: (np.where(steps < 40, stop, go).astype(np.int8), np.array([0.0, 0.0, 1.5]) + shift),
                 12: (np.full(T, SIGNAL_STATES.index("arrow_stop"), np.int8), np.array([0.0, 0.0, 1.5]) + shift)}
    s.sdc_track_index = 0
    s.tracks_to_predict = [0, 2, 3]
    s.objects_of_interest = [8]
    return s


def to_gpudrive_json(s: Scene) -> dict[str, Any]:
    """The scene as GPUDrive's converter writes it (lane connectivity dropped)."""
    def pts(a: np.ndarray) -> list[dict[str, float]]:
        return [{"x": float(x), "y": float(y), "z": float(z)} for x, y, z in np.asarray(a).reshape(-1, 3)]

    roads = [{"id": ln.id, "type": "lane", "map_element_id": ln.type, "geometry": pts(ln.polyline)} for ln in s.lanes]
    roads += [{"id": i, "type": "road_line", "map_element_id": c + 5, "geometry": pts(p)} for i, c, p in s.road_lines]
    roads += [{"id": i, "type": "road_edge", "map_element_id": c + 14, "geometry": pts(p)} for i, c, p in s.road_edges]
    roads += [{"id": i, "type": "stop_sign", "map_element_id": 17, "geometry": pts(p)} for i, _, p in s.stop_signs]
    for kind, code in (("crosswalk", 18), ("speed_bump", 19), ("driveway", 20)):
        roads += [{"id": i, "type": kind, "map_element_id": code, "geometry": pts(p)} for i, p in getattr(s, kind + "s")]
    names = {1: "vehicle", 2: "pedestrian", 3: "cyclist", 4: "other"}
    objects = []
    for k in range(s.track_state.shape[0]):
        st = s.track_state[k]
        objects.append({"id": int(s.track_ids[k]), "type": names[int(s.track_types[k])],
                        "position": pts(st[:, :3]), "heading": st[:, 3].tolist(),
                        "velocity": [{"x": float(x), "y": float(y)} for x, y in st[:, 4:6]],
                        "valid": [bool(v) for v in s.track_valid[k]],
                        "length": float(s.track_size[k, 0]), "width": float(s.track_size[k, 1]),
                        "height": float(s.track_size[k, 2]), "goalPosition": pts(st[-1:, :3])[0],
                        "mark_as_expert": False})
    tl = {}
    for lane, (states, stop) in s.signals.items():
        idx = np.nonzero(states >= 0)[0]
        tl[str(lane)] = {"state": [SIGNAL_STATES[int(states[i])] for i in idx], "x": [float(stop[0])] * len(idx),
                         "y": [float(stop[1])] * len(idx), "z": [float(stop[2])] * len(idx),
                         "time_index": idx.tolist()}
    return {"name": f"{s.scenario_id}.json", "scenario_id": s.scenario_id, "objects": objects, "roads": roads,
            "tl_states": tl, "metadata": {"sdc_track_index": s.sdc_track_index,
                                          "tracks_to_predict": [{"track_index": i, "difficulty": 0}
                                                                for i in s.tracks_to_predict],
                                          "objects_of_interest": s.objects_of_interest}}


def maps_differ(a: Any, b: Any, where: str = "map") -> str | None:
    """The first field where two MapData (or parts) differ, or None."""
    import dataclasses

    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            d = maps_differ(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
            if d:
                return d
        return None
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            return f"{where}: {a.shape} vs {b.shape}"
        return None
    if isinstance(a, dict):
        if set(a) != set(b):
            return f"{where}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            d = maps_differ(a[k], b[k], f"{where}[{k!r}]")
            if d:
                return d
        return None
    return None if a == b else f"{where}: {a!r} vs {b!r}"


# ---------------------------------------------------------------- hostile inputs (hardening tests)
# Small files asking for large allocations or deep recursion, written from the protobuf wire format
# (field numbers of Waymo's scenario.proto / map.proto, as in womd_proto) and GPUDrive's JSON layout.

def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def ld(number: int, body: bytes) -> bytes:
    """A length-delimited field (a submessage, string or packed list)."""
    return varint(number << 3 | 2) + varint(len(body)) + body


_SID = ld(5, b"hostile")                           # Scenario.scenario_id
# map_features { id: 1, lane { polyline: [(0, 0, 0), (10, 0, 0)] } }: a valid lane beside the hostile part
_LANE = ld(8, varint(1 << 3) + varint(1) + ld(3, ld(8, b"") + ld(8, b"\x09" + np.float64(10.0).tobytes())))


def hostile_records() -> dict[str, bytes]:
    """Scenario records of at most a few MB, each asking for far more than the limits allow."""
    empty_states = ld(3, b"")                      # Track.states: an empty ObjectState
    track_2000 = ld(2, ld(3, b"") * 2000)          # Scenario.tracks: one track of 2,000 states
    return {
        # 60,000 signal steps, each naming a new lane: dense rows of 60,000 x 60,000 states
        "60000 signal steps": _SID + _LANE + b"".join(ld(7, ld(1, varint(1 << 3) + varint(i))) for i in range(60_000)),
        # 2,000 steps x 100 lane states, 200,000 distinct lanes: 400 million signal cells
        "200000 signalled lanes": _SID + _LANE + b"".join(
            ld(7, b"".join(ld(1, varint(1 << 3) + varint(s * 100 + k)) for k in range(100))) for s in range(2000)),
        # one track of 2,000 states and 4,095 empty tracks: 8 million track cells
        "tracks x steps": _SID + _LANE + track_2000 + ld(2, b"") * 4095,
        # 100,000 empty tracks beside one of 2,000 states: 9.6 GB of track arrays
        "100000 tracks": _SID + _LANE + track_2000 + ld(2, b"") * 100_000,
        # one track of 100,000 states
        "100000 states": _SID + _LANE + ld(2, empty_states * 100_000),
        # 1.1 million empty left neighbours of one lane
        "empty neighbours": _SID + _LANE + ld(8, varint(1 << 3) + varint(2) + ld(3, ld(11, b"") * 1_100_000)),
        # a crosswalk of 2.1 million empty polygon points
        "polygon points": _SID + _LANE + ld(8, varint(1 << 3) + varint(2) + ld(8, ld(1, b"") * 2_100_000)),
        # 2.1 million packed exit-lane ids (one byte each)
        "packed exit lanes": _SID + _LANE + ld(8, varint(1 << 3) + varint(2) + ld(3, ld(10, b"\x01" * 2_100_000))),
        # 2.6 million unknown varint fields (field 20)
        "unknown fields": _SID + _LANE + (varint(20 << 3) + b"\x00") * 2_600_000,
        # 50,000 nested unknown groups (field 20, wire types 3 and 4)
        "nested groups": _SID + _LANE + varint(20 << 3 | 3) * 50_000 + varint(20 << 3 | 4) * 50_000,
    }


def hostile_json() -> dict[str, str]:
    """GPUDrive JSON documents of a few MB asking for far more than the limits allow, and one of
    20,000 lanes inside them (whose lane-graph inference needed a 6 GB matrix)."""
    import json

    lane = '{"id": %d, "type": "lane", "map_element_id": 2, "geometry": [{"x": %g, "y": %g}, {"x": %g, "y": %g}]}'
    lanes = [lane % (i, (i % 141) * 10.0, (i // 141) * 10.0, (i % 141) * 10.0 + 5, (i // 141) * 10.0)
             for i in range(20_000)]
    one = lane % (0, 0, 0, 5, 0)
    pos = json.dumps([{"x": 0.0, "y": 0.0, "z": 0.0}] * 2000)
    return {
        "20000 lanes": '{"scenario_id": "lanes", "objects": [], "roads": [' + ", ".join(lanes) + "]}",
        "objects x steps": '{"scenario_id": "objs", "roads": [' + one + '], "objects": [{"position": ' + pos + "}"
                           + ', {"position": []}' * 100_000 + "]}",
        "containers": '{"scenario_id": "c", "roads": [], "objects": [' + ", ".join(["[]"] * 2_100_000) + "]}",
        "polygon points": '{"scenario_id": "p", "objects": [], "roads": [' + one + ', {"type": "crosswalk", "geometry": ['
                          + ",".join(["0"] * 2_100_000) + "]}]}",
    }


# ---------------------------------------------------------------- varied junctions (builder/reader checks)

def _bend(p0: np.ndarray, d0: np.ndarray, p1: np.ndarray, d1: np.ndarray, n: int = 10) -> np.ndarray:
    """A cubic Bezier from p0 (heading d0) to p1 (heading d1): a junction connector."""
    k = 0.4 * float(np.linalg.norm(p1 - p0))
    c0, c1 = p0 + k * d0, p1 - k * d1
    t = np.linspace(0.0, 1.0, n)[:, None]
    xy = (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * c0 + 3 * (1 - t) * t ** 2 * c1 + t ** 3 * p1
    return np.column_stack([xy, np.full(n, 1.5)])


def junction_scene(seed: int, offset: tuple[float, float] = (-2300.0, 5100.0)) -> Scene:
    """A junction of three or four two-way arms drawn from ``seed``, with its true lane graph.

    Each arm has one or two inbound lanes; a second inbound lane runs beside the first at 3.5 m (its
    lane-change neighbour), or
    ends 0.0-1.2 m from it (lanes ending together at the stop line, as a turn pocket's and a through
    lane's do in WOMD), and one outbound lane. Every inbound lane connects to the outbound lane of every
    other arm through a connector; the inbound lanes are controlled by stop signs (each naming its
    lane, placed 2 m to its right), by signals (on every connector) or, arm by arm, by either. A
    vehicle track drives the first arm's approach."""
    rng = np.random.default_rng(seed)
    arms = [0, 1, 2, 3] if rng.random() < 0.6 else sorted(rng.choice(4, 3, replace=False).tolist())
    control = ("stop", "signal", "mixed")[seed % 3]
    shift = np.array([offset[0], offset[1], 0.0])
    lanes: list[SceneLane] = []
    signs: list[tuple[int, list[int], np.ndarray]] = []
    signals: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    inbound: dict[int, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    outbound: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}
    arm_control = {a: control if control != "mixed" else ("stop", "signal")[int(rng.random() < 0.5)] for a in arms}
    next_id = 100
    for a in arms:
        ang = a * np.pi / 2
        out_dir = np.array([np.cos(ang), np.sin(ang)])       # pointing away from the centre
        left = np.array([-out_dir[1], out_dir[0]])
        # inbound: driving towards the centre on the right of the arm (right-hand traffic)
        gaps = [1.75] + ([] if rng.random() < 0.4 else [1.75 + float(rng.choice([3.5, 0.0, 0.6, 1.2]))])
        inbound[a] = []
        for g in gaps:
            end = 10.0 * out_dir + g * left
            start = end + 60.0 * out_dir
            inbound[a].append((next_id, end, -out_dir))
            lanes.append(SceneLane(next_id, np.column_stack([np.linspace(start, end, 31), np.full(31, 1.5)]), 2, 25.0))
            next_id += 1
        if len(gaps) == 2 and gaps[1] - gaps[0] == 3.5:  # two lanes side by side: a lane change each way
            lanes[-2].right, lanes[-1].left = [lanes[-1].id], [lanes[-2].id]  # the second on the driver's right
        start = 10.0 * out_dir - 1.75 * left
        outbound[a] = (next_id, start, out_dir)
        lanes.append(SceneLane(next_id, np.column_stack([np.linspace(start, start + 60.0 * out_dir, 31),
                                                         np.full(31, 1.5)]), 2, 25.0))
        next_id += 1
    graph: dict[int, list[int]] = {}
    steps = np.arange(T)
    for a in arms:
        for k, (lid, end, d_in) in enumerate(inbound[a]):
            for b in arms:
                if b == a:
                    continue
                oid, ostart, d_out = outbound[b]
                cid = next_id
                next_id += 1
                lanes.append(SceneLane(cid, _bend(end, d_in, ostart, d_out), 2, 15.0))
                graph.setdefault(lid, []).append(cid)
                graph[cid] = [oid]
                if arm_control[a] == "signal":
                    phase = (steps // 30 + a) % 2
                    signals[cid] = (np.where(phase == 0, SIGNAL_STATES.index("go"),
                                             SIGNAL_STATES.index("stop")).astype(np.int8), np.r_[end, 1.5] + shift)
            if arm_control[a] == "stop":
                right = np.array([d_in[1], -d_in[0]])
                signs.append((900 + 10 * a + k, [lid], np.r_[end + 2.0 * right, 1.5] + shift))
    for ln in lanes:
        ln.polyline = ln.polyline + shift
        ln.exit = list(graph.get(ln.id, []))
        ln.entry = [x for x, ys in graph.items() if ln.id in ys]
    s = Scene(scenario_id=f"junction{seed:04d}", lanes=lanes, stop_signs=signs, signals=signals)
    a0 = arms[0]
    lid, end, d_in = inbound[a0][0]
    st = np.zeros((1, T, 6))
    st[0, :, :2] = end[None, :] - d_in[None, :] * (50.0 - 0.4 * steps[:, None]) + shift[:2]
    st[0, :, 2] = 1.5
    st[0, :, 3] = np.arctan2(d_in[1], d_in[0])
    st[0, :, 4:6] = 4.0 * d_in
    s.track_ids, s.track_types = np.array([1]), np.array([1])
    s.track_state, s.track_valid = st, np.ones((1, T), bool)
    s.track_size = np.array([[4.5, 2.0, 1.6]], np.float32)
    s.timestamps = steps * 0.1
    s.sdc_track_index = 0
    return s
