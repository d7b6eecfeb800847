"""ASAM OpenDRIVE (``.xodr``) to :class:`~terrazero_env.maps.schema.MapData`.

Parsed with :mod:`xml.etree.ElementTree` from the standard library. What is converted:

* reference lines (line, arc, spiral, poly3, paramPoly3; see :mod:`._opendrive_geometry`), the
  elevation profile (z of every point), lane offsets, lane sections and lane widths;
* lanes of type ``driving`` (vehicle), ``biking`` (bike) and ``bus`` (bus): one lane per OpenDRIVE
  lane per lane section, its centerline midway between the lane's borders, sampled every
  ``spacing`` metres of reference line (plus the section ends and geometry / width breakpoints).
  The direction of travel follows the lane side and the traffic rule: with right-hand traffic
  (the default, or ``rule="RHT"`` on the road) right lanes (negative ids) run along the reference
  line and left lanes against it; left-hand traffic mirrors that;
* the lane graph from lane links between sections, road predecessor / successor links and junction
  connections (``connectingRoad`` + ``laneLink``). Links are oriented by direction of travel, so a
  link whose lanes would meet head-on is ignored. Where linked lanes meet, the end points are
  snapped together (gaps up to ``snap`` metres) so successors are continuous;
* junctions as :class:`~terrazero_env.maps.schema.Intersections` (the lanes of their connecting roads);
* road edges: per lane section outside junctions, the outer border of the outermost drivable lane on
  each side (the lane-offset line where a side has none);
* road lines from ``roadMark`` (solid / broken, white / yellow, double solid yellow) along the outer
  border of the marked lane;
* sidewalks (lane type ``sidewalk``) as polygons, crosswalks (objects of type ``crosswalk``, from their
  outline or a width x length rectangle);
* traffic lights (signal type ``1000001``) and stop signs (``206``, German StVO codes as used by
  CARLA) with stop lines. A signal (or ``signalReference``) on a junction's connecting road controls
  the connecting lanes in its validity range; a signal on an ordinary road controls the lanes facing
  it (``orientation``) at the road end that enters a junction. The stop line is placed across the
  end of the incoming lanes that feed the controlled lanes, one bar per signal and incoming road.
  Other signal types are ignored.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..builder import MAX_MAP_EXTENT, BuildConfig, MapValidationError, lane_movements
from ..schema import (
    Handedness,
    Intersections,
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
)
from ._opendrive_geometry import MIN_STEP, Cubic, Geometry, at, bar, dedupe, plan_view, samples

__all__ = ["convert", "LANE_TYPES"]

#: OpenDRIVE lane types converted into lanes.
LANE_TYPES = {"driving": LaneType.VEHICLE, "biking": LaneType.BIKE, "bus": LaneType.BUS}
#: Lane types a road edge encloses.
_DRIVABLE = {"driving", "biking", "bus", "bidirectional", "parking", "entry", "exit", "onRamp", "offRamp",
             "connectingRamp", "stop"}
#: Longest road (m) and most road length per file (m) the converter samples. Geometry is sampled every
#: few centimetres to a few metres, so one attribute (``length="1e7"``) would otherwise cost gigabytes;
#: the map itself must also fit MAX_MAP_EXTENT, so a longer road is corrupt, not a big map.
MAX_ROAD_LENGTH = 4 * MAX_MAP_EXTENT
MAX_TOTAL_ROAD_LENGTH = 2_000_000.0
_SPEED_UNITS = {"m/s": 1.0, "km/h": 1 / 3.6, "mph": 0.44704}
_TRAFFIC_LIGHT = "1000001"
_STOP_SIGN = "206"


# --------------------------------------------------------------------------------------------------
# parsing


def _where(el: ET.Element, ctx: str) -> str:
    return f"{ctx} <{el.tag}>"


def _num(el: ET.Element, name: str, ctx: str, default: float | None = None) -> float:
    raw = el.get(name)
    if raw is None:
        if default is None:
            raise MapValidationError(f"{_where(el, ctx)}: attribute {name!r} is missing")
        return default
    try:
        v = float(raw)
    except ValueError:
        raise MapValidationError(f"{_where(el, ctx)}: attribute {name}={raw!r} is not a number") from None
    if not np.isfinite(v):
        raise MapValidationError(f"{_where(el, ctx)}: attribute {name}={raw!r} is not finite")
    return v


def _cubic(elements: list[ET.Element], key: str, ctx: str, base: float = 0.0) -> Cubic:
    if not elements:
        return Cubic.zero()
    rows = sorted((_num(e, key, ctx) + base, *(_num(e, c, ctx, 0.0) for c in "abcd")) for e in elements)
    arr = np.array(rows)
    return Cubic(arr[:, 0], arr[:, 1:])


@dataclass
class _Lane:
    id: int
    type: str
    width: Cubic
    marks: list[tuple[float, str, str]]
    """(s where the mark starts, type, colour)."""
    pred: int | None
    succ: int | None
    speed: float


@dataclass
class _Section:
    s0: float
    s1: float
    lanes: dict[int, _Lane]
    center_marks: list[tuple[float, str, str]]


@dataclass
class _Road:
    id: str
    length: float
    junction: str
    rht: bool
    geoms: list[Geometry]
    elevation: Cubic
    offset: Cubic
    sections: list[_Section]
    pred: tuple[str, str, str] | None
    """(elementType, elementId, contactPoint)."""
    succ: tuple[str, str, str] | None
    speed: float
    element: ET.Element = field(repr=False)


def _link(el: ET.Element | None) -> tuple[str, str, str] | None:
    if el is None:
        return None
    return el.get("elementType", "road"), el.get("elementId", ""), el.get("contactPoint", "")


def _speed(el: ET.Element | None, ctx: str) -> float:
    if el is None or el.get("max") is None or el.get("max") in ("no limit", "undefined"):
        return float("nan")
    v = _num(el, "max", ctx) * _SPEED_UNITS.get(el.get("unit", "m/s"), 1.0)
    return v if v > 0 else float("nan")


def _parse_geometry(g: ET.Element, ctx: str) -> Geometry:
    length = _num(g, "length", ctx)
    if length < 0:
        raise MapValidationError(f"{_where(g, ctx)}: negative length {length}")
    if length > MAX_ROAD_LENGTH:
        raise MapValidationError(f"{_where(g, ctx)}: length {length:g} m is over the {MAX_ROAD_LENGTH:g} m limit")
    base = (_num(g, "s", ctx), _num(g, "x", ctx), _num(g, "y", ctx), _num(g, "hdg", ctx), length)
    kinds = [c for c in g if c.tag in ("line", "arc", "spiral", "poly3", "paramPoly3")]
    if len(kinds) != 1:
        raise MapValidationError(f"{_where(g, ctx)}: expected one of line/arc/spiral/poly3/paramPoly3")
    k = kinds[0]
    sub = f"{ctx} <geometry s={base[0]}>"
    if k.tag == "line":
        return Geometry(*base, "line")
    if k.tag == "arc":
        return Geometry(*base, "arc", (_num(k, "curvature", sub),))
    if k.tag == "spiral":
        return Geometry(*base, "spiral", (_num(k, "curvStart", sub), _num(k, "curvEnd", sub)))
    if k.tag == "poly3":
        return Geometry(*base, "poly3", tuple(_num(k, c, sub) for c in "abcd"))
    normalized = k.get("pRange", "normalized") != "arcLength"
    coef = tuple(_num(k, f"{c}{ax}", sub) for ax in "UV" for c in "abcd")
    return Geometry(*base, "paramPoly3", (*coef, float(normalized)))


def _parse_lane(el: ET.Element, s0: float, ctx: str, road_speed: float) -> _Lane:
    lid = int(_num(el, "id", ctx))
    sub = f"{ctx} <lane id={lid}>"
    link = el.find("link")
    pred = link.find("predecessor") if link is not None else None
    succ = link.find("successor") if link is not None else None
    marks = sorted((s0 + _num(m, "sOffset", sub, 0.0), m.get("type", "none"), m.get("color", "standard"))
                   for m in el.findall("roadMark"))
    speed = _speed(el.find("speed"), sub)
    return _Lane(lid, el.get("type", "none"), _cubic(el.findall("width"), "sOffset", sub, s0), marks,
                 int(_num(pred, "id", sub)) if pred is not None else None,
                 int(_num(succ, "id", sub)) if succ is not None else None,
                 speed if np.isfinite(speed) else road_speed)


def _parse_road(el: ET.Element, rht_default: bool) -> _Road:
    rid = el.get("id", "?")
    ctx = f"road {rid}"
    length = _num(el, "length", ctx)
    if not 0 <= length <= MAX_ROAD_LENGTH:
        raise MapValidationError(f"{ctx}: length {length:g} m is outside [0, {MAX_ROAD_LENGTH:g}] m")
    pv = el.find("planView")
    geoms = [_parse_geometry(g, ctx) for g in (pv.findall("geometry") if pv is not None else [])]
    if not geoms:
        raise MapValidationError(f"{ctx} <planView>: the road has no geometry")
    geoms.sort(key=lambda g: g.s)
    rule = el.get("rule")
    rht = rht_default if rule is None else rule.upper() != "LHT"
    t = el.find("type")
    speed = _speed(t.find("speed") if t is not None else None, ctx)
    lanes_el = el.find("lanes")
    if lanes_el is None or not lanes_el.findall("laneSection"):
        raise MapValidationError(f"{ctx} <lanes>: the road has no laneSection")
    sec_els = sorted(lanes_el.findall("laneSection"), key=lambda e: _num(e, "s", ctx))
    starts = [_num(e, "s", ctx) for e in sec_els]
    sections = []
    for i, se in enumerate(sec_els):
        s0, s1 = starts[i], (starts[i + 1] if i + 1 < len(starts) else length)
        lanes: dict[int, _Lane] = {}
        for side in ("left", "right"):
            for le in se.findall(f"{side}/lane"):
                lane = _parse_lane(le, s0, f"{ctx} <laneSection s={s0}>", speed)
                lanes[lane.id] = lane
        center = se.find("center/lane")
        cm = sorted((s0 + _num(m, "sOffset", ctx, 0.0), m.get("type", "none"), m.get("color", "standard"))
                    for m in (center.findall("roadMark") if center is not None else []))
        sections.append(_Section(s0, s1, lanes, cm))
    ep = el.find("elevationProfile")
    link = el.find("link")
    return _Road(rid, length, el.get("junction", "-1"), rht, geoms,
                 _cubic(ep.findall("elevation") if ep is not None else [], "s", ctx),
                 _cubic(lanes_el.findall("laneOffset"), "s", ctx), sections,
                 _link(link.find("predecessor") if link is not None else None),
                 _link(link.find("successor") if link is not None else None), speed, el)


# --------------------------------------------------------------------------------------------------
# sampling


def _frame(road: _Road, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Reference point (x, y, z) [n, 3], unit left normal [n, 2], heading [n] and lane offset [n]."""
    x, y, h = plan_view(road.geoms, s)
    pts = np.stack([x, y, road.elevation(s, True)], axis=1)
    normal = np.stack([-np.sin(h), np.cos(h)], axis=1)
    return pts, normal, h, road.offset(s, True)


def _borders(sec: _Section, s: np.ndarray, offset: np.ndarray) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Lateral position t of each lane's inner and outer border, keyed by lane id."""
    out = {}
    for sign in (-1, 1):
        t = offset.copy()
        for lid in sorted((k for k in sec.lanes if k * sign > 0), key=abs):
            w = np.maximum(sec.lanes[lid].width(s, True), 0.0)
            out[lid] = (t, t + sign * w)
            t = t + sign * w
    return out


_MARKS = {("solid", False): RoadLineType.SOLID_WHITE, ("broken", False): RoadLineType.DASHED_WHITE,
          ("solid", True): RoadLineType.SOLID_YELLOW, ("broken", True): RoadLineType.DASHED_YELLOW,
          ("solid solid", True): RoadLineType.DOUBLE_SOLID_YELLOW, ("solid solid", False): RoadLineType.SOLID_WHITE,
          ("solid broken", True): RoadLineType.SOLID_YELLOW, ("solid broken", False): RoadLineType.SOLID_WHITE,
          ("broken solid", True): RoadLineType.SOLID_YELLOW, ("broken solid", False): RoadLineType.SOLID_WHITE,
          ("broken broken", True): RoadLineType.DASHED_YELLOW, ("broken broken", False): RoadLineType.DASHED_WHITE}


@dataclass
class _Out:
    """Everything sampled from the roads, before the lane graph is assembled."""

    lanes: list[np.ndarray] = field(default_factory=list)
    keys: list[tuple[str, int, int]] = field(default_factory=list)
    lane_type: list[int] = field(default_factory=list)
    width: list[float] = field(default_factory=list)
    speed: list[float] = field(default_factory=list)
    along: list[bool] = field(default_factory=list)
    edges: list[np.ndarray] = field(default_factory=list)
    lines: list[np.ndarray] = field(default_factory=list)
    line_type: list[int] = field(default_factory=list)
    sidewalks: list[np.ndarray] = field(default_factory=list)


def _sample_road(road: _Road, spacing: float, out: _Out) -> None:
    geo_breaks = [g.s for g in road.geoms]
    for k, sec in enumerate(road.sections):
        if sec.s1 - sec.s0 <= MIN_STEP:
            continue
        breaks = geo_breaks + [float(v) for ln in sec.lanes.values() for v in ln.width.s]
        s = samples(sec.s0, sec.s1, spacing, breaks)
        pts, normal, _, offset = _frame(road, s)
        borders = _borders(sec, s, offset)
        for lid, lane in sorted(sec.lanes.items()):
            inner, outer = borders[lid]
            if lane.type in LANE_TYPES:
                w = np.abs(outer - inner)
                if w.max() < 0.01:
                    continue
                along = (lid < 0) == road.rht
                c = dedupe(at(pts, normal, 0.5 * (inner + outer)))
                if c.shape[0] < 2:
                    continue
                out.lanes.append(c if along else c[::-1].copy())
                out.keys.append((road.id, k, lid))
                out.lane_type.append(int(LANE_TYPES[lane.type]))
                out.width.append(float(max(w.mean(), 0.1)))
                out.speed.append(lane.speed)
                out.along.append(along)
            if lane.type == "sidewalk" and np.abs(outer - inner).max() > 0.01:
                ring = np.concatenate([at(pts, normal, inner), at(pts, normal, outer)[::-1]])
                out.sidewalks.append(ring)
        if road.junction == "-1":
            for sign in (-1, 1):
                side = [lid for lid, ln in sec.lanes.items() if lid * sign > 0 and ln.type in _DRIVABLE]
                other = [lid for lid, ln in sec.lanes.items() if lid * sign < 0 and ln.type in _DRIVABLE]
                if side:
                    t = borders[max(side, key=abs)][1]
                elif other:
                    t = offset
                else:
                    continue
                e = dedupe(at(pts, normal, t))
                if e.shape[0] >= 2:
                    out.edges.append(e)
        marks = [(0, sec.center_marks)] + [(lid, ln.marks) for lid, ln in sorted(sec.lanes.items())]
        for lid, mk in marks:
            for i, (m0, kind, colour) in enumerate(mk):
                lt = _MARKS.get((kind, colour == "yellow"))
                m1 = mk[i + 1][0] if i + 1 < len(mk) else sec.s1
                a, b = max(m0, sec.s0), min(m1, sec.s1)
                if lt is None or b - a <= 0.1:
                    continue
                ms = samples(a, b, spacing, geo_breaks)
                mp, mn, _, mo = _frame(road, ms)
                t = mo if lid == 0 else _borders(sec, ms, mo)[lid][1]
                line = dedupe(at(mp, mn, t))
                if line.shape[0] >= 2:
                    out.lines.append(line)
                    out.line_type.append(int(lt))


# --------------------------------------------------------------------------------------------------
# lane graph

_End = tuple[tuple[str, int, int], int]  # (road id, section, lane id), 0 = section start / 1 = end


def _lane_pairs(roads: dict[str, _Road], junctions: list[ET.Element]) -> set[tuple[_End, _End]]:
    """Undirected lane-end contacts from lane, road and junction links."""
    pairs: set[tuple[_End, _End]] = set()

    def road_end(link: tuple[str, str, str] | None) -> tuple[_Road, int, int] | None:
        if link is None or link[0] != "road" or link[1] not in roads:
            return None
        other = roads[link[1]]
        return (other, 0, 0) if link[2] != "end" else (other, len(other.sections) - 1, 1)

    for r in roads.values():
        last = len(r.sections) - 1
        for k, sec in enumerate(r.sections):
            for lid, lane in sec.lanes.items():
                if lane.succ is not None and lane.succ != 0:
                    tgt = (r, k + 1, 0) if k < last else road_end(r.succ)
                    if tgt is not None:
                        pairs.add((((r.id, k, lid), 1), ((tgt[0].id, tgt[1], lane.succ), tgt[2])))
                if lane.pred is not None and lane.pred != 0:
                    tgt = (r, k - 1, 1) if k > 0 else road_end(r.pred)
                    if tgt is not None:
                        pairs.add((((r.id, k, lid), 0), ((tgt[0].id, tgt[1], lane.pred), tgt[2])))
    for j in junctions:
        jid = j.get("id", "")
        for c in j.findall("connection"):
            inc, con = roads.get(c.get("incomingRoad", "")), roads.get(c.get("connectingRoad", ""))
            if inc is None or con is None:
                continue
            if inc.succ is not None and inc.succ[:2] == ("junction", jid):
                ie = (len(inc.sections) - 1, 1)
            elif inc.pred is not None and inc.pred[:2] == ("junction", jid):
                ie = (0, 0)
            else:
                continue
            ce = (0, 0) if c.get("contactPoint", "start") != "end" else (len(con.sections) - 1, 1)
            for ll in c.findall("laneLink"):
                f, t = int(_num(ll, "from", f"junction {jid}")), int(_num(ll, "to", f"junction {jid}"))
                pairs.add((((inc.id, ie[0], f), ie[1]), ((con.id, ce[0], t), ce[1])))
    return pairs


def _graph(out: _Out, pairs: set[tuple[_End, _End]], snap: float, tol: float) -> tuple[list[list[int]], int]:
    """Directed successor lists (snapping end points together) and the number of links dropped."""
    index = {k: i for i, k in enumerate(out.keys)}
    edges = set()
    for (ka, ea), (kb, eb) in pairs:
        a, b = index.get(ka), index.get(kb)
        if a is None or b is None or a == b:
            continue
        end_a, end_b = int(out.along[a]), int(out.along[b])  # which section end each lane leaves from
        if ea == end_a and eb != end_b:
            edges.add((a, b))
        elif eb == end_b and ea != end_a:
            edges.add((b, a))
    n = len(out.lanes)
    npred, nsucc = np.zeros(n, int), np.zeros(n, int)
    for a, b in edges:
        nsucc[a] += 1
        npred[b] += 1
    for a, b in sorted(edges):
        la, lb = out.lanes[a], out.lanes[b]
        gap = np.linalg.norm(la[-1, :2] - lb[0, :2])
        if 0 < gap <= snap:
            if npred[b] == 1:
                moved = dedupe(np.concatenate([la[-1:], lb[1:]]))
                if moved.shape[0] >= 2:
                    out.lanes[b] = moved
            elif nsucc[a] == 1:
                moved = dedupe(np.concatenate([la[:-1], lb[:1]]))
                if moved.shape[0] >= 2:
                    out.lanes[a] = moved
    succ: list[list[int]] = [[] for _ in range(n)]
    dropped = 0
    for a, b in sorted(edges):
        if np.linalg.norm(out.lanes[a][-1, :2] - out.lanes[b][0, :2]) <= tol:
            succ[a].append(b)
        else:
            dropped += 1
    return succ, dropped


def _neighbours(out: _Out) -> tuple[np.ndarray, np.ndarray]:
    """Adjacent same-direction lanes of the same lane section (left / right of travel)."""
    index = {k: i for i, k in enumerate(out.keys)}
    left, right = np.full(len(out.keys), -1, np.int32), np.full(len(out.keys), -1, np.int32)
    for i, (rid, k, lid) in enumerate(out.keys):
        step = 1 if out.along[i] else -1  # +normal (left of the reference line) is left of travel when along
        for arr, nid in ((left, lid + step), (right, lid - step)):
            j = index.get((rid, k, nid))
            if nid != 0 and j is not None and out.along[j] == out.along[i]:
                arr[i] = j
    return left, right


# --------------------------------------------------------------------------------------------------
# signals, stop lines, crosswalks


def _world(road: _Road, s: float, t: float) -> tuple[np.ndarray, float]:
    pts, normal, h, _ = _frame(road, np.array([min(max(s, 0.0), road.length)]))
    return at(pts, normal, np.array([t]))[0], float(h[0])


def _validity(el: ET.Element, ctx: str) -> set[int] | None:
    """Lane ids a signal applies to (None when its validity names no lane: the whole road)."""
    ids: set[int] = set()
    for v in el.findall("validity"):
        a, b = int(_num(v, "fromLane", ctx)), int(_num(v, "toLane", ctx))
        ids |= set(range(min(a, b), max(a, b) + 1)) - {0}
    return ids or None


def _controls(roads: dict[str, _Road], out: _Out, succ: list[list[int]], pred: list[list[int]]):
    """(signal type, position, incoming lanes) per signal and incoming road."""
    signals, refs = {}, []
    for r in roads.values():
        for el in r.element.findall("signals/signal"):
            ctx = f"road {r.id} <signal id={el.get('id')}>"
            pos, _ = _world(r, _num(el, "s", ctx), _num(el, "t", ctx, 0.0))
            signals[el.get("id")] = (el.get("type", ""), pos)
            refs.append((el.get("id"), r, el.get("orientation", ""), _validity(el, ctx)))
        for el in r.element.findall("signals/signalReference"):
            ctx = f"road {r.id} <signalReference id={el.get('id')}>"
            refs.append((el.get("id"), r, el.get("orientation", ""), _validity(el, ctx)))
    in_junction = np.array([roads[k[0]].junction != "-1" for k in out.keys], bool)
    referenced = {sid for sid, r, _, _ in refs if r.junction != "-1"}
    by_road: dict[str, list[int]] = {}
    for i, k in enumerate(out.keys):
        by_road.setdefault(k[0], []).append(i)
    groups: dict[tuple[str, str], set[int]] = {}
    for sid, r, orient, valid in refs:
        if sid not in signals or signals[sid][0] not in (_TRAFFIC_LIGHT, _STOP_SIGN):
            continue
        lanes = [i for i in by_road.get(r.id, []) if valid is None or out.keys[i][2] in valid]
        if valid is None and orient in ("+", "-"):
            lanes = [i for i in lanes if out.along[i] == (orient == "+")]
        incoming: set[int] = set()
        if r.junction != "-1":
            frontier, seen = list(lanes), set(lanes)
            while frontier:
                i = frontier.pop()
                for p in pred[i]:
                    if not in_junction[p]:
                        incoming.add(p)
                    elif p not in seen and out.keys[p][0] == r.id:
                        seen.add(p)
                        frontier.append(p)
        elif sid not in referenced:
            incoming = {i for i in lanes if any(in_junction[j] for j in succ[i])}
        for i in incoming:
            groups.setdefault((sid, out.keys[i][0]), set()).add(i)
    ordered = sorted(groups.items(), key=lambda kv: (signals[kv[0][0]][0] != _TRAFFIC_LIGHT, kv[0]))
    return [(signals[sid][0], signals[sid][1], lanes) for (sid, _), lanes in ordered]


def _crosswalks(roads: dict[str, _Road]) -> list[np.ndarray]:
    polys = []
    for r in roads.values():
        for el in r.element.findall("objects/object"):
            if el.get("type", "").lower() != "crosswalk":
                continue
            ctx = f"road {r.id} <object id={el.get('id')}>"
            origin, h = _world(r, _num(el, "s", ctx), _num(el, "t", ctx, 0.0))
            h += _num(el, "hdg", ctx, 0.0)
            local = [c for c in el.findall("outline/cornerLocal")]
            road_c = [c for c in el.findall("outline/cornerRoad")]
            if local:
                uv = np.array([[_num(c, "u", ctx), _num(c, "v", ctx)] for c in local])
            elif road_c:
                ring = np.array([_world(r, _num(c, "s", ctx), _num(c, "t", ctx))[0] for c in road_c])
                uv = None
            else:
                hl, hw = _num(el, "length", ctx, 0.0) / 2, _num(el, "width", ctx, 0.0) / 2
                uv = np.array([[-hl, -hw], [hl, -hw], [hl, hw], [-hl, hw]])
            if uv is not None:
                rot = np.array([[np.cos(h), -np.sin(h)], [np.sin(h), np.cos(h)]])
                ring = np.concatenate([origin[:2] + uv @ rot.T, np.full((uv.shape[0], 1), origin[2])], axis=1)
            ring = dedupe(ring)
            if ring.shape[0] > 3 and np.linalg.norm(ring[0, :2] - ring[-1, :2]) < MIN_STEP:
                ring = ring[:-1]
            if ring.shape[0] >= 3:
                polys.append(ring)
    return polys


# --------------------------------------------------------------------------------------------------
# entry point


def convert(path: str | Path, *, spacing: float = 1.0, snap: float = 1.0,
            handedness: Handedness | None = None) -> MapData:
    """Read an OpenDRIVE file into a raw :class:`MapData` (pass it to :func:`~terrazero_env.maps.build`).

    ``spacing``: metres of reference line between centerline / border samples (section ends and
    geometry and width breakpoints are always sampled). ``snap``: linked lane ends closer than this
    are moved together; links whose ends stay more than 0.5 m apart are dropped (counted in
    ``metadata["dropped_links"]``). ``handedness``: traffic rule for roads without a ``rule``
    attribute (right-hand traffic when not given). Raises :class:`MapValidationError` naming the
    element for malformed input.
    """
    if not (np.isfinite(spacing) and spacing > 0):
        raise ValueError(f"spacing must be a positive number of metres, got {spacing!r}")
    path = Path(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise MapValidationError(f"{path.name}: not a well-formed OpenDRIVE XML file ({e})") from None
    if root.tag != "OpenDRIVE":
        raise MapValidationError(f"{path.name}: root element is <{root.tag}>, expected <OpenDRIVE>")
    header = root.find("header")
    if header is None:
        raise MapValidationError(f"{path.name}: <OpenDRIVE> has no <header>")
    road_els = root.findall("road")
    if not road_els:
        raise MapValidationError(f"{path.name}: <OpenDRIVE> has no <road>")
    rht_default = handedness is None or Handedness(handedness) == Handedness.RIGHT
    roads = {}
    total = 0.0
    for el in road_els:
        r = _parse_road(el, rht_default)
        if r.id in roads:
            raise MapValidationError(f"{path.name}: two roads have the id {r.id!r}")
        total += r.length
        if total > MAX_TOTAL_ROAD_LENGTH:
            raise MapValidationError(f"{path.name}: more than {MAX_TOTAL_ROAD_LENGTH:g} m of road in one file "
                                     "(split the map)")
        roads[r.id] = r
    out = _Out()
    for r in roads.values():
        _sample_road(r, spacing, out)
    if not out.lanes:
        raise MapValidationError(f"{path.name}: no lane of type {', '.join(LANE_TYPES)}")
    junctions = root.findall("junction")
    tol = BuildConfig().successor_tolerance
    succ, dropped = _graph(out, _lane_pairs(roads, junctions), snap, tol)
    pred: list[list[int]] = [[] for _ in out.lanes]
    for a, bs in enumerate(succ):
        for b in bs:
            pred[b].append(a)
    left, right = _neighbours(out)
    lanes = Lanes.create(out.lanes, lane_type=out.lane_type, width=out.width, speed_limit=out.speed,
                         successors=succ, left_neighbor=left, right_neighbor=right)

    by_junction: dict[str, list[int]] = {}
    for i, k in enumerate(out.keys):
        if roads[k[0]].junction != "-1":
            by_junction.setdefault(roads[k[0]].junction, []).append(i)
    inter_of = np.full(len(out.lanes), -1)
    for j, ids in enumerate(by_junction.values()):
        inter_of[ids] = j
    turn = lane_movements(lanes)

    bars, bar_lanes, sig_sl, sig_mv, sig_pos, stop_pos, stop_sl = [], [], [], [], [], [], []
    claimed: set[int] = set()
    for kind, pos, group in _controls(roads, out, succ, pred):
        free = sorted(group - claimed)
        if not free:
            continue
        claimed |= set(free)
        sl = len(bars)
        bars.append(bar([out.lanes[i] for i in free], [out.width[i] for i in free]))
        bar_lanes.append(free)
        if kind == _STOP_SIGN:
            stop_sl.append(sl)
            stop_pos.append(pos)
            continue
        moves = {int(turn[j]) for i in free for j in succ[i] if inter_of[j] >= 0}
        for mv in (Movement.LEFT, Movement.STRAIGHT, Movement.RIGHT):
            if int(mv) in moves or (mv == Movement.LEFT and int(Movement.UTURN) in moves):
                sig_sl.append(sl)
                sig_mv.append(int(mv))
                sig_pos.append(pos)

    rules = [r.rht for r in roads.values()]
    name = header.get("name") or path.stem
    return MapData(
        lanes=lanes,
        road_lines=RoadLines.create(out.lines, out.line_type),
        road_edges=Polylines(out.edges),
        sidewalks=Polygons(out.sidewalks),
        crosswalks=Polygons(_crosswalks(roads)),
        stop_lines=StopLines.create(np.array(bars).reshape(-1, 2, 3), bar_lanes),
        signals=Signals.create(sig_sl, sig_mv, np.array(sig_pos).reshape(-1, 3)),
        stop_signs=StopSigns.create(np.array(stop_pos).reshape(-1, 3), stop_sl),
        intersections=Intersections.create(list(by_junction.values())),
        handedness=Handedness.RIGHT if 2 * sum(rules) >= len(rules) else Handedness.LEFT,
        name=name,
        metadata={"source": "opendrive", "file": path.name, "spacing": spacing,
                  "roads": len(roads), "junctions": len(junctions), "dropped_links": dropped,
                  "vendor": header.get("vendor", ""),
                  "revision": f"{header.get('revMajor', '1')}.{header.get('revMinor', '')}"},
    )
