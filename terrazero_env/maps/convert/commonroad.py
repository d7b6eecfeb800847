"""CommonRoad scenario (``.xml``) -> ``MapData``.

Reads the XML with the standard library only. What maps to what:

* ``lanelet`` -> one lane each; the centerline is the mean of the left and right bounds after both are
  resampled at the union of their normalised arc-length break points, the width the mean distance
  between them; ``successor``/``predecessor`` -> the lane graph; ``adjacentLeft``/``adjacentRight``
  with ``drivingDir="same"`` -> neighbours; ``laneletType`` -> :class:`LaneType`; a max-speed
  traffic sign referenced by the lanelet -> speed limit;
* bounds -> road lines (``lineMarking`` solid/dashed, white) where they carry a marking, and road
  edges where no lanelet lies on that side, except inside junctions (the intersection lanelets and
  the lanelets continuing them inside their convex hull); a bound shared by two adjacent lanelets
  is emitted once;
* ``stopLine`` (child of a lanelet) -> a stop line tied to that lanelet (at the lanelet's end when it
  gives no points); traffic lights it references -> one signal per (stop line, movement), their
  cycles (durations and offset in time steps) kept in ``metadata["traffic_lights"]``; stop signs it references (DE 206, US R1-1, ES r2)
  -> stop signs (a stop line with both lights and a stop sign is signal-controlled);
* ``intersection`` -> one intersection of the successor lanelets of its incomings; the movement the
  file states per successor is kept in ``metadata["intersection_movements"]``; a file without
  intersections leaves ``intersections`` as None (the builder infers them);
* ``dynamicObstacle`` -> tracks (``dt`` = ``timeStepSize``), heading from ``orientation``, vx/vy from
  ``velocity`` along the heading, valid where the file has a state for that time step.

Coordinates are metres; everything is shifted by ``metadata["offset"]`` so the map is centred at the
origin. Lane ends joined by successor edges are snapped to their common point (CommonRoad lanelets
share bound end points, so this moves them by at most rounding noise). Malformed input raises
:class:`~terrazero_env.maps.MapValidationError` naming the element; what is dropped (stop signs under
signals, lights or stop signs without a stop line, lanelets listed in two intersections) is counted
in ``metadata["warnings"]``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from ..builder import MapValidationError
from ..polyline import convex_hull, dedupe, normalized_arc, resample_at
from ..schema import (
    AgentType,
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

__all__ = ["convert", "STOP_SIGN_IDS", "MAX_SPEED_SIGN_IDS"]

#: Traffic sign ids meaning "stop" (Germany / ZAM, USA, Spain).
STOP_SIGN_IDS = frozenset({"206", "R1-1", "r2", "R2"})
#: Traffic sign ids meaning "maximum speed" (value in m/s in ``additionalValue``).
MAX_SPEED_SIGN_IDS = frozenset({"274", "R2-1", "r301", "3.24", "R15", "C43", "B14", "Ρ-32", "B31"})

_MIN_SEGMENT = 1e-2
"""Centerline / line points closer than this (m) are merged."""
_SNAP_RADIUS = 2.0
"""Lane ends joined by successor edges are snapped together when they lie within this radius (m)."""

_LANE_TYPES = {"bicycleLane": LaneType.BIKE, "busLane": LaneType.BUS, "busStop": LaneType.BUS}
_AGENT_TYPES = {
    "car": AgentType.CAR, "taxi": AgentType.CAR, "priorityVehicle": AgentType.CAR,
    "parkedVehicle": AgentType.CAR, "motorcycle": AgentType.CAR, "unknown": AgentType.CAR,
    "truck": AgentType.TRUCK, "bus": AgentType.BUS, "pedestrian": AgentType.PEDESTRIAN,
    "bicycle": AgentType.CYCLIST,
}
_HEIGHTS = {AgentType.CAR: 1.5, AgentType.TRUCK: 3.5, AgentType.BUS: 3.2, AgentType.PEDESTRIAN: 1.75,
            AgentType.CYCLIST: 1.7}
_LIGHT_MOVEMENTS = {
    "left": (Movement.LEFT,), "straight": (Movement.STRAIGHT,), "right": (Movement.RIGHT,),
    "leftStraight": (Movement.LEFT, Movement.STRAIGHT), "straightRight": (Movement.STRAIGHT, Movement.RIGHT),
    "leftRight": (Movement.LEFT, Movement.RIGHT),
    "all": (Movement.LEFT, Movement.STRAIGHT, Movement.RIGHT),
}
_CONNECTORS = {
    "successorsRight": Movement.RIGHT, "successorsStraight": Movement.STRAIGHT, "successorsLeft": Movement.LEFT,
    "outgoingRight": Movement.RIGHT, "outgoingStraight": Movement.STRAIGHT, "outgoingLeft": Movement.LEFT,
}


def _fail(msg: str) -> NoReturn:
    raise MapValidationError(msg)


def _count(warnings: dict[str, int], key: str) -> None:
    warnings[key] = warnings.get(key, 0) + 1


def _float(el: ET.Element | None, what: str) -> float:
    if el is None or el.text is None:
        _fail(f"{what}: missing value")
    try:
        v = float(el.text)
    except ValueError:
        _fail(f"{what}: {el.text!r} is not a number")
    if not np.isfinite(v):
        _fail(f"{what}: {el.text!r} is not finite")
    return v


def _point(el: ET.Element, what: str) -> tuple[float, float, float]:
    z = el.find("z")
    return (_float(el.find("x"), f"{what}.x"), _float(el.find("y"), f"{what}.y"),
            _float(z, f"{what}.z") if z is not None else 0.0)


def _int_attr(el: ET.Element, attr: str, what: str) -> int:
    v = el.get(attr)
    if v is None:
        _fail(f"{what}: has no {attr}")
    try:
        return int(v)
    except ValueError:
        _fail(f"{what}: {attr} {v!r} is not an integer id")


def _ref(el: ET.Element, what: str) -> int:
    return _int_attr(el, "ref", what)


def _exact(state: ET.Element, tag: str, what: str) -> float | None:
    """``<tag><exact>v</exact></tag>`` (or the midpoint of ``intervalStart``/``intervalEnd``)."""
    el = state.find(tag)
    if el is None:
        return None
    ex = el.find("exact")
    if ex is not None:
        return _float(ex, f"{what}.{tag}")
    lo, hi = el.find("intervalStart"), el.find("intervalEnd")
    if lo is not None and hi is not None:
        return 0.5 * (_float(lo, f"{what}.{tag}") + _float(hi, f"{what}.{tag}"))
    if el.text is not None and el.text.strip():
        return _float(el, f"{what}.{tag}")
    return None


def _centerline(left: np.ndarray, right: np.ndarray) -> tuple[np.ndarray, float]:
    """Mean of the two bounds at the union of their arc-length break points, and the mean width."""
    u = np.unique(np.concatenate([normalized_arc(left), normalized_arc(right)]))
    lu, ru = resample_at(left, u), resample_at(right, u)
    width = float(np.mean(np.linalg.norm(lu[:, :2] - ru[:, :2], axis=1)))
    return 0.5 * (lu + ru), width


class _Lanelet:
    __slots__ = ("id", "left", "right", "left_marking", "right_marking", "successors", "predecessors",
                 "adj_left", "adj_left_same", "adj_right", "adj_right_same", "types", "users", "sign_refs",
                 "light_refs", "stop_line")

    def __init__(self, el: ET.Element) -> None:
        self.id = _int_attr(el, "id", "lanelet")
        what = f"lanelet {self.id}"
        lb, rb = el.find("leftBound"), el.find("rightBound")
        if lb is None or rb is None:
            _fail(f"{what}: has no {'leftBound' if lb is None else 'rightBound'}")
        self.left = self._bound(lb, f"{what}.leftBound")
        self.right = self._bound(rb, f"{what}.rightBound")
        self.left_marking = (lb.findtext("lineMarking") or "unknown").strip()
        self.right_marking = (rb.findtext("lineMarking") or "unknown").strip()
        self.successors = [_ref(s, f"{what}.successor") for s in el.findall("successor")]
        self.predecessors = [_ref(s, f"{what}.predecessor") for s in el.findall("predecessor")]
        self.adj_left = self.adj_right = None
        self.adj_left_same = self.adj_right_same = False
        al, ar = el.find("adjacentLeft"), el.find("adjacentRight")
        if al is not None:
            self.adj_left = _ref(al, f"{what}.adjacentLeft")
            self.adj_left_same = al.get("drivingDir") == "same"
        if ar is not None:
            self.adj_right = _ref(ar, f"{what}.adjacentRight")
            self.adj_right_same = ar.get("drivingDir") == "same"
        self.types = [(t.text or "").strip() for t in el.findall("laneletType")]
        self.users = [(t.text or "").strip() for t in el.findall("userOneWay")]
        self.sign_refs = [_ref(s, f"{what}.trafficSignRef") for s in el.findall("trafficSignRef")]
        self.light_refs = [_ref(s, f"{what}.trafficLightRef") for s in el.findall("trafficLightRef")]
        self.stop_line = el.find("stopLine")

    @staticmethod
    def _bound(b: ET.Element, what: str) -> np.ndarray:
        pts = [_point(p, f"{what}.point[{i}]") for i, p in enumerate(b.findall("point"))]
        if len(pts) < 2:
            _fail(f"{what}: has {len(pts)} point(s), a bound needs at least 2")
        return np.asarray(pts, np.float64)

    def lane_type(self) -> LaneType:
        for t in self.types:
            if t in _LANE_TYPES:
                return _LANE_TYPES[t]
        if self.users and set(self.users) <= {"bicycle"}:
            return LaneType.BIKE
        if self.users and set(self.users) <= {"bus"}:
            return LaneType.BUS
        return LaneType.VEHICLE


def _marking_type(marking: str) -> RoadLineType | None:
    if "dashed" in marking:
        return RoadLineType.DASHED_WHITE
    if "solid" in marking:
        return RoadLineType.SOLID_WHITE
    return None


def _snap_ends(centers: list[np.ndarray], succ: list[list[int]]) -> tuple[int, float]:
    """Move lane ends joined by successor edges onto their common mean point; returns how many
    junction points moved and the largest move (m). Nodes are (lane, 0 = start / 1 = end)."""
    n = len(centers)
    parent = list(range(2 * n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, row in enumerate(succ):
        for b in row:
            ra, rb = root(2 * a + 1), root(2 * b)
            if ra != rb:
                parent[ra] = rb
    groups: dict[int, list[int]] = {}
    for node in range(2 * n):
        groups.setdefault(root(node), []).append(node)
    moved, largest = 0, 0.0
    for nodes in groups.values():
        if len(nodes) < 2:
            continue
        pts = np.array([centers[v // 2][-1 if v % 2 else 0] for v in nodes])
        mean = pts.mean(axis=0)
        spread = float(np.linalg.norm(pts[:, :2] - mean[:2], axis=1).max())
        if spread == 0.0 or spread > _SNAP_RADIUS:
            continue
        moved += 1
        largest = max(largest, spread)
        for v in nodes:
            centers[v // 2][-1 if v % 2 else 0] = mean
    return moved, largest


def _clean_line(p: np.ndarray) -> np.ndarray:
    """Drop interior points within the minimum segment length of a neighbour, keeping both ends."""
    if len(p) <= 2:
        return p
    keep = [0]
    for i in range(1, len(p) - 1):
        if np.linalg.norm(p[i, :2] - p[keep[-1], :2]) >= _MIN_SEGMENT and \
                np.linalg.norm(p[i, :2] - p[-1, :2]) >= _MIN_SEGMENT:
            keep.append(i)
    keep.append(len(p) - 1)
    return p[keep]


def _parse(path: Path) -> ET.Element:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise MapValidationError(f"{path.name}: not a well-formed XML file ({e})") from None
    if root.tag != "commonRoad":
        _fail(f"{path.name}: root element is <{root.tag}>, expected <commonRoad>")
    return root


def convert(path: str | Path, *, tracks: bool = True) -> MapData:
    """Convert a CommonRoad scenario file into a raw ``MapData`` (pass it to ``maps.build``).

    ``tracks``: also convert the recorded dynamic obstacles into :class:`Tracks`.
    """
    path = Path(path)
    root = _parse(path)
    warnings: dict[str, int] = {}

    lanelets = [_Lanelet(el) for el in root.findall("lanelet")]
    if not lanelets:
        _fail(f"{path.name}: the scenario has no lanelets")
    index: dict[int, int] = {}
    for i, ll in enumerate(lanelets):
        if ll.id in index:
            _fail(f"lanelet {ll.id}: id is used twice")
        index[ll.id] = i

    def lane_of(ref: int, what: str) -> int:
        if ref not in index:
            _fail(f"{what}: lanelet {ref} does not exist")
        return index[ref]

    def by_id(tag: str) -> dict[int, ET.Element]:
        out: dict[int, ET.Element] = {}
        for el in root.findall(tag):
            k = _int_attr(el, "id", tag)
            if k in out:
                _fail(f"{tag} {k}: id is used twice")
            out[k] = el
        return out

    signs = by_id("trafficSign")
    lights = by_id("trafficLight")

    # Recentre at the middle of the lanelet bounds' bounding box.
    allpts = np.concatenate([np.concatenate([ll.left, ll.right]) for ll in lanelets])
    offset = np.zeros(3)
    offset[:2] = 0.5 * (allpts[:, :2].min(axis=0) + allpts[:, :2].max(axis=0))

    centers: list[np.ndarray] = []
    widths: list[float] = []
    succ: list[list[int]] = []
    pred: list[list[int]] = []
    speed = np.full(len(lanelets), np.nan, np.float32)
    for i, ll in enumerate(lanelets):
        ll.left = ll.left - offset
        ll.right = ll.right - offset
        c, w = _centerline(ll.left, ll.right)
        c = dedupe(c)
        if len(c) < 2:
            _fail(f"lanelet {ll.id}: degenerate, its centerline has no length (bounds collapse to a point)")
        if not w > 0:
            _fail(f"lanelet {ll.id}: degenerate, its left and right bounds coincide (zero width)")
        centers.append(c)
        widths.append(w)
        succ.append([lane_of(r, f"lanelet {ll.id}.successor") for r in ll.successors])
        pred.append([lane_of(r, f"lanelet {ll.id}.predecessor") for r in ll.predecessors])
        for r in ll.sign_refs:
            sign = signs.get(r)
            if sign is None:
                _fail(f"lanelet {ll.id}.trafficSignRef: traffic sign {r} does not exist")
            for elem in sign.findall("trafficSignElement"):
                sign_id = (elem.findtext("trafficSignID") or "").strip()
                if sign_id in MAX_SPEED_SIGN_IDS:
                    v = elem.find("additionalValue")
                    if v is not None:
                        speed[i] = _float(v, f"trafficSign {r}.additionalValue")
                elif sign_id in STOP_SIGN_IDS and ll.stop_line is None:
                    _count(warnings, "stop_sign_without_stop_line")
        for r in ll.light_refs:
            if r not in lights:
                _fail(f"lanelet {ll.id}.trafficLightRef: traffic light {r} does not exist")
            if ll.stop_line is None:
                _count(warnings, "traffic_light_without_stop_line")
    for ll in lanelets:
        for attr in ("adj_left", "adj_right"):
            ref = getattr(ll, attr)
            if ref is not None:
                lane_of(ref, f"lanelet {ll.id}.{'adjacentLeft' if attr == 'adj_left' else 'adjacentRight'}")
    # Both directions of the graph, so snapping sees every edge the builder will check.
    full_succ = [list(s) for s in succ]
    for b, row in enumerate(pred):
        for a in row:
            if b not in full_succ[a]:
                full_succ[a].append(b)
    snapped, snap_max = _snap_ends(centers, full_succ)
    centers = [_clean_line(c) for c in centers]
    for i, c in enumerate(centers):
        if len(c) < 2 or np.linalg.norm(c[-1, :2] - c[0, :2]) < _MIN_SEGMENT and len(c) == 2:
            _fail(f"lanelet {lanelets[i].id}: degenerate, no length left after snapping its ends")

    left_n = np.array([index[ll.adj_left] if ll.adj_left is not None and ll.adj_left_same else -1
                       for ll in lanelets], np.int32)
    right_n = np.array([index[ll.adj_right] if ll.adj_right is not None and ll.adj_right_same else -1
                        for ll in lanelets], np.int32)
    lanes = Lanes.create(centers, lane_type=[ll.lane_type() for ll in lanelets], width=widths,
                         speed_limit=speed, successors=succ, predecessors=pred,
                         left_neighbor=left_n, right_neighbor=right_n)

    # Intersections and the movements the file states for their lanes.
    inter_rows: list[list[int]] = []
    inter_mv: dict[str, str] = {}
    seen: set[int] = set()
    for el in root.findall("intersection"):
        iid = el.get("id")
        row: list[int] = []
        for inc in el.findall("incoming"):
            for r in inc.findall("incomingLanelet"):
                lane_of(_ref(r, f"intersection {iid}.incomingLanelet"), f"intersection {iid}.incomingLanelet")
            for tag, mv in _CONNECTORS.items():
                for r in inc.findall(tag):
                    lane = lane_of(_ref(r, f"intersection {iid}.{tag}"), f"intersection {iid}.{tag}")
                    if lane in seen:
                        if lane not in row:
                            _count(warnings, "intersection_lane_in_two_intersections")
                        continue
                    seen.add(lane)
                    row.append(lane)
                    inter_mv[str(lanelets[lane].id)] = mv.name
        inter_rows.append(sorted(row))
    in_inter = _junction_interior(lanelets, inter_rows, succ)
    road_lines, line_types, edges = _lines(lanelets, index, in_inter)

    stop_pts, stop_lanes, sig, stop_sign_rows, light_meta = _controls(lanelets, offset, lights, signs, warnings)

    meta: dict[str, Any] = {
        "source": "commonroad",
        "benchmark_id": root.get("benchmarkID", ""),
        "location": _location(root),
        "commonroad_version": root.get("commonRoadVersion", ""),
        "offset": offset.tolist(),
        "lanelet_ids": [ll.id for ll in lanelets],
        "traffic_lights": light_meta,
        "intersection_movements": inter_mv,
        "snapped_junctions": snapped,
        "snap_max_m": round(snap_max, 4),
        "warnings": warnings,
    }
    trk = None
    if tracks:
        trk, obstacle_types = _tracks(root, offset, path.name)
        meta["obstacle_types"] = obstacle_types
    stop_lines = StopLines.create(np.asarray(stop_pts, np.float64).reshape(-1, 2, 3), stop_lanes)
    signals = Signals.create([s[0] for s in sig], [s[1] for s in sig],
                             np.asarray([s[2] for s in sig], np.float64).reshape(-1, 3))
    stop_signs = StopSigns.create(np.asarray([s[1] for s in stop_sign_rows], np.float64).reshape(-1, 3),
                                  [s[0] for s in stop_sign_rows])
    return MapData(
        lanes=lanes,
        road_lines=RoadLines.create(road_lines, line_types),
        road_edges=Polylines(edges),
        stop_lines=stop_lines,
        signals=signals,
        stop_signs=stop_signs,
        intersections=Intersections.create(inter_rows) if inter_rows else None,
        tracks=trk,
        name=root.get("benchmarkID", path.stem),
        metadata=meta,
    )


def _location(root: ET.Element) -> dict[str, str]:
    loc = root.find("location")
    if loc is None:
        return {}
    return {c.tag: (c.text or "").strip() for c in loc if len(c) == 0 and (c.text or "").strip()}


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """z component of the cross product of 2-D vectors (broadcasting over leading axes)."""
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def _inside(hull: np.ndarray, p: np.ndarray) -> bool:
    if len(hull) < 3:
        return False
    edges = np.roll(hull, -1, axis=0) - hull
    return bool(np.all(_cross(edges, p - hull) >= -1e-9))


def _junction_interior(lanelets: list[_Lanelet], inter_rows: list[list[int]], succ: list[list[int]]) -> np.ndarray:
    """Lanelets that lie inside a junction and so draw no road edges: the connectors the file lists,
    and lanelets downstream of them whose middle lies inside the connectors' convex hull."""
    inside = np.zeros(len(lanelets), bool)
    for row in inter_rows:
        if not row:
            continue
        inside[row] = True
        hull = convex_hull(np.concatenate([np.concatenate([lanelets[i].left, lanelets[i].right])[:, :2]
                                            for i in row]))
        frontier = list(row)
        while frontier:
            nxt = []
            for i in frontier:
                for j in succ[i]:
                    ll = lanelets[j]
                    mid = 0.5 * (ll.left[len(ll.left) // 2, :2] + ll.right[len(ll.right) // 2, :2])
                    if not inside[j] and _inside(hull, mid):
                        inside[j] = True
                        nxt.append(j)
            frontier = nxt
    return inside


def _lines(lanelets: list[_Lanelet], index: dict[int, int],
           in_inter: np.ndarray) -> tuple[list[np.ndarray], list[int], list[np.ndarray]]:
    """Painted bounds (each shared bound once) and road edges (bounds with no lanelet beside them)."""
    lines: list[np.ndarray] = []
    types: list[int] = []
    edges: list[np.ndarray] = []
    for i, ll in enumerate(lanelets):
        for pts, marking, adj in ((ll.left, ll.left_marking, ll.adj_left),
                                  (ll.right, ll.right_marking, ll.adj_right)):
            pts = dedupe(pts)
            if len(pts) < 2:
                continue
            if adj is not None and adj in index and index[adj] < i:
                continue  # the neighbour with the lower index emits the shared bound
            kind = _marking_type(marking)
            if kind is not None:
                lines.append(pts)
                types.append(int(kind))
            if adj is None and not in_inter[i]:
                edges.append(pts)
    return lines, types, edges


def _controls(lanelets: list[_Lanelet], offset: np.ndarray, lights: dict[int, ET.Element],
              signs: dict[int, ET.Element], warnings: dict[str, int]) -> tuple[
                  list[np.ndarray], list[list[int]], list[tuple[int, int, np.ndarray]],
                  list[tuple[int, np.ndarray]], dict[str, Any]]:
    """Stop lines, signals (one per stop line and movement), stop signs and the traffic-light table."""
    stop_pts: list[np.ndarray] = []
    stop_lanes: list[list[int]] = []
    sig: list[tuple[int, int, np.ndarray]] = []
    stops: list[tuple[int, np.ndarray]] = []
    light_stops: dict[int, list[int]] = {r: [] for r in lights}
    for i, ll in enumerate(lanelets):
        el = ll.stop_line
        if el is None:
            continue
        what = f"lanelet {ll.id}.stopLine"
        pts = [_point(p, f"{what}.point[{k}]") for k, p in enumerate(el.findall("point"))]
        if len(pts) not in (0, 2):
            _fail(f"{what}: has {len(pts)} points, expected 2 (or none for the lanelet's end)")
        if pts:
            bar = np.asarray(pts) - offset
        else:
            bar = np.stack([ll.left[-1], ll.right[-1]])
        if np.linalg.norm(bar[1, :2] - bar[0, :2]) < 1e-3:
            bar = np.stack([ll.left[-1], ll.right[-1]])
            _count(warnings, "stop_line_zero_length_moved_to_lanelet_end")
        s = len(stop_pts)
        stop_pts.append(bar)
        stop_lanes.append([i])
        mid = bar.mean(axis=0)
        light_refs = [_ref(r, f"{what}.trafficLightRef") for r in el.findall("trafficLightRef")]
        movements: set[int] = set()
        for r in light_refs:
            light = lights.get(r)
            if light is None:
                _fail(f"{what}.trafficLightRef: traffic light {r} does not exist")
            light_stops[r].append(s)
            direction = (light.findtext("direction") or "all").strip()
            pos = light.find("position/point")
            where = np.asarray(_point(pos, f"trafficLight {r}.position")) - offset if pos is not None else mid
            for mv in _LIGHT_MOVEMENTS.get(direction, _LIGHT_MOVEMENTS["all"]):
                if int(mv) not in movements:
                    movements.add(int(mv))
                    sig.append((s, int(mv), where))
        for r in (_ref(x, f"{what}.trafficSignRef") for x in el.findall("trafficSignRef")):
            sign = signs.get(r)
            if sign is None:
                _fail(f"{what}.trafficSignRef: traffic sign {r} does not exist")
            ids = {(e.findtext("trafficSignID") or "").strip() for e in sign.findall("trafficSignElement")}
            if not ids & STOP_SIGN_IDS:
                continue
            if light_refs:
                _count(warnings, "stop_sign_under_signal")
                continue
            pos = sign.find("position/point")
            where = np.asarray(_point(pos, f"trafficSign {r}.position")) - offset if pos is not None else mid
            stops.append((s, where))
            break
    table: dict[str, Any] = {}
    for r, light in lights.items():
        cyc = light.find("cycle")
        elements = []
        offset_steps = 0
        if cyc is not None:
            for ce in cyc.findall("cycleElement"):
                elements.append({"color": (ce.findtext("color") or "").strip(),
                                 "duration": int(_float(ce.find("duration"), f"trafficLight {r}.duration"))})
            if cyc.find("timeOffset") is not None:
                offset_steps = int(_float(cyc.find("timeOffset"), f"trafficLight {r}.timeOffset"))
        table[str(r)] = {
            "cycle": elements,
            "time_offset": offset_steps,
            "direction": (light.findtext("direction") or "all").strip(),
            "active": (light.findtext("active") or "true").strip() == "true",
            "stop_lines": light_stops[r],
        }
    return stop_pts, stop_lanes, sig, stops, table


def _tracks(root: ET.Element, offset: np.ndarray, name: str) -> tuple[Tracks | None, dict[str, int]]:
    obstacles = root.findall("dynamicObstacle")
    if not obstacles:
        return None, {}
    dt = float(root.get("timeStepSize", "0.1"))
    if not (np.isfinite(dt) and dt > 0):
        _fail(f"{name}: timeStepSize {root.get('timeStepSize')!r} is not a positive number of seconds")
    rows = []
    type_counts: dict[str, int] = {}
    for ob in obstacles:
        what = f"dynamicObstacle {ob.get('id')}"
        tname = (ob.findtext("type") or "unknown").strip()
        type_counts[tname] = type_counts.get(tname, 0) + 1
        atype = _AGENT_TYPES.get(tname, AgentType.CAR)
        shape = ob.find("shape")
        rect = shape.find("rectangle") if shape is not None else None
        circ = shape.find("circle") if shape is not None else None
        if rect is not None:
            length = _float(rect.find("length"), f"{what}.shape.length")
            width = _float(rect.find("width"), f"{what}.shape.width")
        elif circ is not None:
            length = width = 2.0 * _float(circ.find("radius"), f"{what}.shape.radius")
        else:
            _fail(f"{what}: has no rectangle or circle shape")
        if not (length > 0 and width > 0):
            _fail(f"{what}: shape has non-positive size ({length} x {width})")
        states = []
        init = ob.find("initialState")
        if init is None:
            _fail(f"{what}: has no initialState")
        for k, st in enumerate([init, *ob.findall("trajectory/state")]):
            swhat = f"{what}.state[{k}]"
            step = _exact(st, "time", swhat)
            pt = st.find("position/point")
            if step is None or pt is None:
                continue
            x, y, z = _point(pt, f"{swhat}.position")
            h = _exact(st, "orientation", swhat) or 0.0
            v = _exact(st, "velocity", swhat) or 0.0
            states.append((int(round(step)), x - offset[0], y - offset[1], z, h, v * np.cos(h), v * np.sin(h)))
        if not states:
            _fail(f"{what}: has no state with a time step and a position")
        rows.append((atype, (length, width, _HEIGHTS[atype]), states))
    steps = max(s[0] for r in rows for s in r[2]) + 1
    if min(s[0] for r in rows for s in r[2]) < 0:
        _fail(f"{name}: a dynamic obstacle has a negative time step")
    a = len(rows)
    state = np.zeros((a, steps, 6))
    valid = np.zeros((a, steps), bool)
    for j, (_, _, states) in enumerate(rows):
        arr = np.asarray(states)
        t = arr[:, 0].astype(np.int64)
        state[j, t] = arr[:, 1:]
        valid[j, t] = True
    return Tracks(agent_type=np.array([r[0] for r in rows], np.uint8),
                  size=np.array([r[1] for r in rows], np.float32), state=state, valid=valid, dt=dt), type_counts
