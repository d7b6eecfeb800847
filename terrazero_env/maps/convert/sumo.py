"""SUMO road networks (``.net.xml``) into :class:`~terrazero_env.maps.schema.MapData`.

Mapping:

* every lane of a normal edge becomes a lane (centerline = the lane ``shape``, which SUMO already
  draws in the direction of travel); lanes of internal edges (``:junction_k``) become connector lanes
  grouped into one :class:`Intersections` row per junction;
* ``connection`` elements give the successors: from-lane -> ``via`` internal lane, internal lane ->
  next internal lane or to-lane; a connection without ``via`` (networks written without internal
  lanes) joins the lanes directly when they touch, else through a synthesized connector lane (a
  cubic curve along both lanes' headings) placed in the junction;
* permissions (``allow`` / ``disallow``): pedestrian-only lanes become sidewalk polygons, lanes for no
  road vehicle (rail, ship) are left out, bicycle-only lanes are :attr:`LaneType.BIKE` and bus-only
  lanes :attr:`LaneType.BUS`;
* traffic-light controlled connections (``tl`` + ``linkIndex``) each become a signal head on a stop
  line across the end of their incoming lane; the ``tlLogic`` programs and each head's
  ``(tl, linkIndex)`` go to ``metadata`` so a controller can replay them;
* stop-controlled links (junction type ``allway_stop`` / ``priority_stop``, link state ``s`` / ``w``)
  give stop lines with stop signs;
* ``crossing`` lanes become crosswalk polygons and ``walkingarea`` shapes sidewalk polygons;
* the outer borders of each edge become road edges; borders between lanes of one edge dashed white
  lines and the border between an edge and its opposite edge a solid white line.

Coordinates in a ``.net.xml`` are already metres (``netOffset`` has been added by netconvert); they
are recentred on the middle of ``convBoundary`` and the shift is kept in ``metadata``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np

from ..builder import MapValidationError
from ..polyline import dedupe
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

__all__ = ["convert", "DEFAULT_LANE_WIDTH"]

#: SUMO's default lane width (m) where neither the lane nor its edge type gives one.
DEFAULT_LANE_WIDTH = 3.2

#: Every SUMO vehicle class; ``allow="all"`` and a lane without permissions mean all of them.
_ALL_CLASSES = frozenset(
    "private emergency authority army vip pedestrian passenger hov taxi bus coach delivery truck trailer "
    "motorcycle moped bicycle evehicle tram rail_urban rail rail_electric rail_fast ship custom1 custom2 "
    "scooter subway aircraft wheelchair cable_car container drone rail_slow cityrail lightrail ebicycle".split()
)
_WALKERS = frozenset({"pedestrian", "wheelchair"})
_NOT_ROAD = frozenset({"tram", "rail_urban", "rail", "rail_electric", "rail_fast", "rail_slow", "cityrail",
                       "lightrail", "ship", "subway", "aircraft", "cable_car", "container", "drone"})
_BUS_ONLY = frozenset({"bus", "coach", "taxi", "emergency", "authority", "army", "vip"})
#: Lanes whose ends are this close (m) join directly; wider gaps (no internal lanes) get a connector.
_JOIN_GAP = 0.1
_DIRS = {"s": Movement.STRAIGHT, "l": Movement.LEFT, "L": Movement.LEFT, "r": Movement.RIGHT,
         "R": Movement.RIGHT, "t": Movement.UTURN}


def _err(msg: str) -> MapValidationError:
    return MapValidationError(msg)


def _shape(text: str | None, where: str) -> np.ndarray:
    """``"x,y[,z] x,y[,z] ..."`` as float64 ``[k, 3]``."""
    if not text:
        raise _err(f"{where}: missing shape")
    pts = []
    try:
        for tok in text.split():
            v = [float(c) for c in tok.split(",")]
            if len(v) not in (2, 3):
                raise ValueError(tok)
            pts.append(v if len(v) == 3 else [*v, 0.0])
    except ValueError as e:
        raise _err(f"{where}: malformed shape point {e}") from None
    a = np.asarray(pts, np.float64)
    if a.shape[0] < 1 or not np.isfinite(a).all():
        raise _err(f"{where}: shape has no finite points")
    return a


def _lane_polyline(pts: np.ndarray) -> np.ndarray:
    """A centerline with at least two distinct points (a degenerate shape becomes a 2 cm stub)."""
    p = dedupe(pts)
    if len(p) >= 2:
        return p
    stub = p[0].copy()
    stub[0] += 0.02
    return np.stack([p[0], stub])


def _offset(pts: np.ndarray, d: float) -> np.ndarray:
    """The polyline shifted ``d`` metres to its left (negative: right), using per-vertex normals."""
    xy = pts[:, :2]
    seg = np.diff(xy, axis=0)
    seg /= np.maximum(np.linalg.norm(seg, axis=1, keepdims=True), 1e-12)
    tang = np.zeros_like(xy)
    tang[:-1] += seg
    tang[1:] += seg
    tang /= np.maximum(np.linalg.norm(tang, axis=1, keepdims=True), 1e-12)
    normal = np.stack([-tang[:, 1], tang[:, 0]], axis=1)
    out = pts.copy()
    out[:, :2] = xy + d * normal
    return out


def _permissions(el: ET.Element, default: frozenset[str] = _ALL_CLASSES) -> frozenset[str]:
    allow, disallow = el.get("allow"), el.get("disallow")
    if allow is not None:
        words = set(allow.split())
        return _ALL_CLASSES if "all" in words else frozenset(words)
    if disallow is not None:
        words = set(disallow.split())
        return frozenset() if "all" in words else _ALL_CLASSES - words
    return default


def _classify(perm: frozenset[str]) -> str:
    """``"sidewalk"``, ``"skip"`` (no road traffic) or a :class:`LaneType` name."""
    road = perm - _NOT_ROAD
    if road and road <= _WALKERS:
        return "sidewalk"
    vehicles = road - _WALKERS
    if not vehicles:
        return "skip"
    if vehicles <= {"bicycle", "ebicycle"}:
        return "BIKE"
    if vehicles <= _BUS_ONLY and vehicles & {"bus", "coach"}:
        return "BUS"
    return "VEHICLE"


def _parse(path: Path) -> ET.Element:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise _err(f"{path.name}: not a SUMO network (XML parse error: {e})") from None
    if root.tag != "net":
        raise _err(f"{path.name}: not a SUMO network (root element <{root.tag}>, expected <net>)")
    return root


def convert(path: str | Path, *, recenter: bool = True, default_width: float = DEFAULT_LANE_WIDTH) -> MapData:
    """Convert a SUMO ``.net.xml`` file into raw ``MapData`` (pass it to ``build``).

    ``recenter`` shifts the map so the middle of ``convBoundary`` is the origin; ``default_width`` is
    the lane width used where the network gives none.
    """
    path = Path(path)
    root = _parse(path)

    loc = root.find("location")
    shift = np.zeros(3)
    net_offset = [0.0, 0.0]
    if loc is not None:
        try:
            net_offset = [float(v) for v in loc.get("netOffset", "0,0").split(",")][:2]
            if recenter and loc.get("convBoundary"):
                b = [float(v) for v in loc.get("convBoundary", "").split(",")]
                shift[:2] = [(b[0] + b[2]) / 2, (b[1] + b[3]) / 2]
        except (ValueError, IndexError):
            raise _err(f"{path.name}: <location> has malformed netOffset/convBoundary") from None
    lefthand = root.get("lefthand", "false").lower() == "true"

    types: dict[str, ET.Element] = {t.get("id", ""): t for t in root.findall("type")}

    # ---- lanes -------------------------------------------------------------------------------------
    lane_pts: list[np.ndarray] = []
    lane_type: list[int] = []
    lane_width: list[float] = []
    lane_speed: list[float] = []
    lane_index: dict[str, int] = {}          # SUMO lane id -> our lane id
    lane_edge: dict[str, str] = {}           # SUMO lane id -> edge id (all lanes, kept or not)
    known_lanes: set[str] = set()
    edge_lanes: dict[str, list[tuple[int, str, np.ndarray, float]]] = {}  # normal edges: (index, id, pts, w)
    edge_ends: dict[str, tuple[str, str]] = {}
    junction_lanes: dict[str, list[int]] = {}
    sidewalks: list[np.ndarray] = []
    crosswalks: list[np.ndarray] = []
    internal_lane_ids: list[str] = []

    seen_edges: set[str] = set()
    for edge in root.findall("edge"):
        eid = edge.get("id")
        if eid is None:
            raise _err(f"{path.name}: <edge> without id")
        if eid in seen_edges:
            raise _err(f"edge {eid!r}: id is used twice")
        seen_edges.add(eid)
        func = edge.get("function", "normal")
        etype = types.get(edge.get("type", ""))
        edge_perm = _permissions(etype) if etype is not None else _ALL_CLASSES
        try:
            type_width = float(etype.get("width", default_width)) if etype is not None else default_width
        except ValueError:
            raise _err(f"type {edge.get('type')!r}: malformed width") from None
        if func == "normal":
            edge_ends[eid] = (edge.get("from", ""), edge.get("to", ""))
        for lane in edge.findall("lane"):
            lid = lane.get("id")
            where = f"edge {eid!r} lane {lid!r}"
            if lid is None:
                raise _err(f"edge {eid!r}: <lane> without id")
            if lid in known_lanes:
                raise _err(f"{where}: id is used twice")
            known_lanes.add(lid)
            lane_edge[lid] = eid
            pts = _shape(lane.get("shape"), where) - shift
            try:
                width = float(lane.get("width", type_width))
                speed = float(lane.get("speed", "nan"))
                index = int(lane.get("index", "0"))
            except ValueError:
                raise _err(f"{where}: malformed width/speed/index") from None
            if not (np.isfinite(width) and width > 0):
                width = default_width
            if func == "walkingarea":
                if len(dedupe(pts)) >= 3:
                    sidewalks.append(dedupe(pts))
                continue
            if func == "crossing":
                p = _lane_polyline(pts)
                crosswalks.append(np.concatenate([_offset(p, width / 2), _offset(p, -width / 2)[::-1]]))
                continue
            kind = _classify(_permissions(lane, edge_perm))
            if kind == "skip":
                continue
            if kind == "sidewalk":
                if func == "normal":
                    p = _lane_polyline(pts)
                    sidewalks.append(np.concatenate([_offset(p, width / 2), _offset(p, -width / 2)[::-1]]))
                continue
            if func == "normal" and len(dedupe(pts)) < 2:
                raise _err(f"{where}: the shape has fewer than two distinct points (a degenerate lane)")
            lane_index[lid] = len(lane_pts)
            lane_pts.append(_lane_polyline(pts))
            lane_type.append(int(LaneType[kind]))
            lane_width.append(width)
            lane_speed.append(speed if np.isfinite(speed) and speed > 0 else np.nan)
            if func == "internal":
                internal_lane_ids.append(lid)
            elif func == "normal":
                edge_lanes.setdefault(eid, []).append((index, lid, lane_pts[-1], width))

    if not lane_pts:
        raise _err(f"{path.name}: the network has no road lanes")

    # Internal lanes belong to the junction named in their edge id (":<junction>_<k>").
    junction_ids = {j.get("id", ""): j for j in root.findall("junction")}
    for lid in internal_lane_ids:
        eid = lane_edge[lid]
        jid = eid[1:].rsplit("_", 1)[0]
        if jid not in junction_ids:
            raise _err(f"internal lane {lid!r}: its junction {jid!r} is not in the network")
        junction_lanes.setdefault(jid, []).append(lane_index[lid])

    # ---- connections -------------------------------------------------------------------------------
    succ: list[set[int]] = [set() for _ in lane_pts]
    connector_ids: list[str] = []
    edge_to = {e.get("id", ""): e.get("to", "") for e in root.findall("edge")}
    ids_of = sorted(lane_index, key=lane_index.__getitem__)

    def connector(a: int, b: int, junction: str) -> int:
        """A lane bridging the gap from lane ``a``'s end to lane ``b``'s start (networks written
        without internal lanes): a cubic Bezier leaving and arriving along both lanes' headings."""
        p0, p3 = lane_pts[a][-1], lane_pts[b][0]
        d0 = lane_pts[a][-1] - lane_pts[a][-2]
        d1 = lane_pts[b][1] - lane_pts[b][0]
        reach = np.linalg.norm(p3[:2] - p0[:2]) / 3
        p1 = p0 + d0 / max(np.linalg.norm(d0[:2]), 1e-9) * reach
        p2 = p3 - d1 / max(np.linalg.norm(d1[:2]), 1e-9) * reach
        t = np.linspace(0.0, 1.0, 9)[:, None]
        curve = (1 - t) ** 3 * p0 + 3 * (1 - t) ** 2 * t * p1 + 3 * (1 - t) * t**2 * p2 + t**3 * p3
        k = len(lane_pts)
        lane_pts.append(_lane_polyline(curve))
        lane_type.append(lane_type[a])
        lane_width.append(lane_width[a])
        lane_speed.append(lane_speed[b])
        succ.append({b})
        connector_ids.append(f"{ids_of[a]}->{ids_of[b]}")
        if junction in junction_ids:
            junction_lanes.setdefault(junction, []).append(k)
        return k
    tl_links: dict[int, list[tuple[str, int, int, int]]] = {}  # incoming lane -> (tl, linkIndex, move, via)
    stop_links: set[int] = set()
    for c in root.findall("connection"):
        frm, to = c.get("from"), c.get("to")
        try:
            fl, tl_ = int(c.get("fromLane", "")), int(c.get("toLane", ""))
        except ValueError:
            raise _err(f"connection {frm!r}->{to!r}: malformed fromLane/toLane") from None
        a, b, via = f"{frm}_{fl}", f"{to}_{tl_}", c.get("via")
        for ref in (a, b) + ((via,) if via else ()):
            if ref not in known_lanes:
                raise _err(f"connection {frm!r}->{to!r}: lane {ref!r} is not in the network")
        if a not in lane_index or (via or b) not in lane_index:
            continue  # a link of lanes left out (pedestrian, rail)
        if via:
            nxt = lane_index[via]
        else:
            ia, ib = lane_index[a], lane_index[b]
            gap = np.linalg.norm(lane_pts[ia][-1, :2] - lane_pts[ib][0, :2])
            nxt = ib if gap <= _JOIN_GAP else connector(ia, ib, edge_to.get(frm, ""))
        succ[lane_index[a]].add(nxt)
        if frm.startswith(":"):
            continue
        if c.get("tl"):
            try:
                link = int(c.get("linkIndex", ""))
            except ValueError:
                raise _err(f"connection {frm!r}->{to!r}: controlled by {c.get('tl')!r} without a linkIndex") from None
            move = _DIRS.get(c.get("dir", "s"), Movement.STRAIGHT)
            tl_links.setdefault(lane_index[a], []).append(
                (c.get("tl", ""), link, int(move), nxt if nxt != lane_index[b] else -1))
        elif c.get("state") in ("s", "w"):
            stop_links.add(lane_index[a])
    for j in junction_ids.values():
        if j.get("type") == "allway_stop":
            for lid in (j.get("incLanes") or "").split():
                if lid in lane_index and succ[lane_index[lid]]:
                    stop_links.add(lane_index[lid])

    n = len(lane_pts)

    # ---- neighbours, road lines and road edges -----------------------------------------------------
    left = np.full(n, -1, np.int32)
    right = np.full(n, -1, np.int32)
    road_lines: list[np.ndarray] = []
    line_types: list[int] = []
    road_edges: list[np.ndarray] = []
    opposite = {(f, t): e for e, (f, t) in edge_ends.items()}
    for eid, members in edge_lanes.items():
        members.sort()
        # SUMO lane 0 is the outermost lane: rightmost in right-hand, leftmost in left-hand networks.
        for (_, la, pa, wa), (_, lb, _, _) in zip(members[:-1], members[1:]):
            ia, ib = lane_index[la], lane_index[lb]
            if lefthand:
                right[ia], left[ib] = ib, ia
            else:
                left[ia], right[ib] = ib, ia
            road_lines.append(_offset(pa, (-wa if lefthand else wa) / 2))
            line_types.append(RoadLineType.DASHED_WHITE)
        sign = -1.0 if lefthand else 1.0
        _, _, p0, w0 = members[0]
        _, _, p1, w1 = members[-1]
        road_edges.append(_offset(p0, -sign * w0 / 2))
        inner = _offset(p1, sign * w1 / 2)
        f, t = edge_ends[eid]
        twin = opposite.get((t, f))
        if twin is None or twin not in edge_lanes:
            road_edges.append(inner)
        elif eid < twin:
            road_lines.append(inner)
            line_types.append(RoadLineType.SOLID_WHITE)

    # ---- stop lines, signals, stop signs -----------------------------------------------------------
    def bar(lane: int) -> np.ndarray:
        p = lane_pts[lane]
        d = p[-1, :2] - p[-2, :2]
        d /= np.linalg.norm(d)
        nrm = np.array([-d[1], d[0], 0.0]) * lane_width[lane] / 2
        return np.stack([p[-1] + nrm, p[-1] - nrm])

    bars: list[np.ndarray] = []
    bar_lanes: list[list[int]] = []
    sig_stop, sig_move, sig_pos, sig_lanes, sig_meta = [], [], [], [], []
    for lane in sorted(tl_links):
        s = len(bars)
        bars.append(bar(lane))
        bar_lanes.append([lane])
        for tl_id, link, move, via in sorted(tl_links[lane], key=lambda x: (x[0], x[1])):
            sig_stop.append(s)
            sig_move.append(move)
            sig_pos.append(bars[s][0 if lefthand else 1])  # the kerb side of the bar
            sig_lanes.append([via] if via >= 0 else [])
            sig_meta.append({"tl": tl_id, "link_index": link})
    sign_stop, sign_pos = [], []
    for lane in sorted(stop_links - set(tl_links)):
        s = len(bars)
        bars.append(bar(lane))
        bar_lanes.append([lane])
        sign_stop.append(s)
        sign_pos.append(bars[s][0 if lefthand else 1])

    programs: dict[str, list[dict[str, Any]]] = {}
    for logic in root.findall("tlLogic"):
        tid = logic.get("id", "")
        phases = []
        for ph in logic.findall("phase"):
            try:
                phases.append({"duration": float(ph.get("duration", "")), "state": ph.get("state", "")})
            except ValueError:
                raise _err(f"tlLogic {tid!r}: phase with malformed duration") from None
        programs.setdefault(tid, []).append({"program_id": logic.get("programID", "0"),
                                             "type": logic.get("type", "static"),
                                             "offset": float(logic.get("offset", "0") or 0), "phases": phases})
    for meta in sig_meta:
        if meta["tl"] not in programs:
            raise _err(f"connection with tl={meta['tl']!r}: no tlLogic with that id")

    lanes = Lanes.create(lane_pts, lane_type=lane_type, width=lane_width, speed_limit=lane_speed,
                         successors=[sorted(s) for s in succ], left_neighbor=left, right_neighbor=right)
    ns = len(bars)
    stop_lines = StopLines.create(np.asarray(bars).reshape(ns, 2, 3), bar_lanes)
    signals = Signals.create(sig_stop, sig_move, np.asarray(sig_pos).reshape(-1, 3), sig_lanes)
    stop_signs = StopSigns.create(np.asarray(sign_pos).reshape(-1, 3), sign_stop)
    inters = Intersections.create([junction_lanes[j] for j in sorted(junction_lanes)])
    return MapData(
        lanes=lanes,
        road_lines=RoadLines.create(road_lines, line_types),
        road_edges=Polylines(road_edges),
        sidewalks=Polygons(sidewalks),
        crosswalks=Polygons(crosswalks),
        stop_lines=stop_lines,
        signals=signals,
        stop_signs=stop_signs,
        intersections=inters,
        handedness=Handedness.LEFT if lefthand else Handedness.RIGHT,
        name=path.name[: -len(".net.xml")] if path.name.endswith(".net.xml") else path.stem,
        metadata={
            "source": "sumo",
            "file": path.name,
            "net_offset": net_offset,
            "origin_shift": shift[:2].tolist(),
            "lane_ids": ids_of + connector_ids,
            "tl_programs": programs,
            "signal_links": sig_meta,
            "junctions": sorted(junction_lanes),
            "synthesized_connectors": len(connector_ids),
        },
    )
