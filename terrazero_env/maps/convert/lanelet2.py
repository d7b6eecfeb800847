"""Lanelet2 maps (``.osm``: OSM XML of nodes, ways and relations) into
:class:`~terrazero_env.maps.schema.MapData`.

Mapping:

* node coordinates come from the ``local_x`` / ``local_y`` / ``ele`` tags when every node has them,
  otherwise ``lat`` / ``lon`` are projected with a transverse Mercator (UTM) projection relative to an
  origin (the ``lanelet_map_origin`` of a CARLA ``metadata.json`` beside the map, else the centre of
  the nodes), matching Lanelet2's ``UtmProjector``;
* every driving lanelet (``type=lanelet``) becomes a lane whose centerline is the mean of its left
  and right bounds resampled to a common arc length; the lanelet runs along its left bound (a right
  bound drawn the other way is reversed, as Lanelet2 does). Bidirectional lanelets (``one_way=no``,
  or ``play_street`` without ``one_way``) give two opposite lanes. ``crosswalk`` lanelets become
  crosswalk polygons and ``walkway`` / ``stairs`` lanelets sidewalk polygons;
* successors: lane A flows into lane B when A's left and right bound end points match B's start
  points (within ``tolerance``); neighbours: lanes sharing a bound way in the same direction;
* painted lines from ``line_thin`` / ``line_thick`` ways (``solid`` / ``dashed`` / ``solid_solid``,
  ``color``), road edges from ``road_border`` / ``curbstone`` / ``guard_rail`` ways; a map without
  such ways gets road edges from bound ways used by a single lanelet outside intersections;
* regulatory elements: ``traffic_light`` -> a stop line on its ``ref_line`` (or across the end of
  the lanelets referring to it) with one signal head per turn movement; ``right_of_way`` -> stop
  lines with stop signs for its ``yield`` lanelets when it has ``ref_line``s; ``all_way_stop`` -> stop
  lines with stop signs for all its lanelets;
* CARLA maps: ``<name>_stoplines.json`` beside the map adds stop lines for regulated lanelets that
  have none, and ``<name>_traffic_light_controller.json`` goes to ``metadata["tl_programs"]`` with
  each signal head's CARLA actor id in ``metadata["signal_actors"]``.

Intersections are left to the builder (``intersections=None``).
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ...foundation.safe_files import load_json, read_text
from ..builder import MapValidationError
from ..polyline import normalized_arc, resample_at
from ..schema import (
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
)

__all__ = ["convert", "utm_project"]

_LANE_SUBTYPES = {
    "road": LaneType.VEHICLE, "highway": LaneType.VEHICLE, "play_street": LaneType.VEHICLE,
    "emergency_lane": LaneType.VEHICLE, "exit": LaneType.VEHICLE, "bus_lane": LaneType.BUS,
    "bicycle_lane": LaneType.BIKE,
}
_SIDEWALK_SUBTYPES = {"walkway", "stairs", "shared_walkway"}
_EDGE_TYPES = {"road_border", "curbstone", "guard_rail", "wall", "fence"}
_STRAIGHT = math.radians(30.0)
_UTURN = math.radians(150.0)
#: How far (m) beyond a traffic light's ref_line a regulated lane may end and still share its stop bar.
_BAR_REACH = 30.0


def _first_repeat(ids: list[str]) -> str:
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            return i
        seen.add(i)
    return ""


def _err(msg: str) -> MapValidationError:
    return MapValidationError(msg)


def utm_project(lat: np.ndarray, lon: np.ndarray, origin: tuple[float, float]) -> tuple[np.ndarray, np.ndarray]:
    """WGS84 ``lat``/``lon`` (degrees) to metres east/north of ``origin`` (lat, lon) in the UTM zone of
    the origin (Krüger series, sub-millimetre within a zone)."""
    a, f, k0 = 6378137.0, 1 / 298.257223563, 0.9996
    n = f / (2 - f)
    big_a = a / (1 + n) * (1 + n**2 / 4 + n**4 / 64)
    alpha = (n / 2 - 2 * n**2 / 3 + 5 * n**3 / 16, 13 * n**2 / 48 - 3 * n**3 / 5, 61 * n**3 / 240)
    zone = math.floor((origin[1] + 180.0) / 6.0) + 1
    lon0 = math.radians((zone - 1) * 6 - 180 + 3)
    c = 2 * math.sqrt(n) / (1 + n)

    def fwd(la: np.ndarray, lo: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        phi, dl = np.radians(la), np.radians(lo) - lon0
        t = np.sinh(np.arctanh(np.sin(phi)) - c * np.arctanh(c * np.sin(phi)))
        xi = np.arctan2(t, np.cos(dl))
        eta = np.arctanh(np.sin(dl) / np.sqrt(1 + t**2))
        e, nn = eta.copy(), xi.copy()
        for j, al in enumerate(alpha, start=1):
            e += al * np.cos(2 * j * xi) * np.sinh(2 * j * eta)
            nn += al * np.sin(2 * j * xi) * np.cosh(2 * j * eta)
        return k0 * big_a * e, k0 * big_a * nn

    x, y = fwd(np.asarray(lat, np.float64), np.asarray(lon, np.float64))
    x0, y0 = fwd(np.array([origin[0]]), np.array([origin[1]]))
    return x - x0[0], y - y0[0]


@dataclass
class _Lanelet:
    rid: str
    left: str
    right: str
    left_pts: np.ndarray
    right_pts: np.ndarray
    tags: dict[str, str]
    regs: list[str] = field(default_factory=list)
    lanes: list[int] = field(default_factory=list)   # [forward] or [forward, backward]


def _tags(el: ET.Element) -> dict[str, str]:
    return {t.get("k", ""): t.get("v", "") for t in el.findall("tag")}


def _dedupe(p: np.ndarray, min_seg: float = 1e-2) -> np.ndarray:
    """Drop points closer than ``min_seg`` to their predecessor, keeping both end points."""
    while len(p) > 1:
        short = np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1) < min_seg
        if not short.any():
            break
        if len(p) == 2:
            return p[:1]
        drop = np.r_[False, short]
        if drop[-1]:
            drop[-1], drop[-2] = False, True
        p = p[~drop]
    return p


def _left_side(left: np.ndarray, right: np.ndarray) -> float:
    """Positive when ``left`` lies to the left of the direction both bounds run in."""
    s = np.linspace(0.1, 0.9, 9)
    mid = lambda t: (resample_at(left, t) + resample_at(right, t))[:, :2] / 2  # noqa: E731
    tangent = mid(s + 0.05) - mid(s - 0.05)
    across = (resample_at(left, s) - resample_at(right, s))[:, :2]
    return float(np.sum(tangent[:, 0] * across[:, 1] - tangent[:, 1] * across[:, 0]))


def _fit_bar(line: np.ndarray, lane_ends: list[tuple[np.ndarray, np.ndarray]],
             tie_distance: float) -> tuple[np.ndarray, list[int]]:
    """The stop bar along ``line`` (first to last point), stretched to span the end bounds of the lanes
    whose end midpoint lies within ``tie_distance`` of its line (and at most ``_BAR_REACH`` beyond its
    ends), and the indices of those lanes."""
    a, b = line[0], line[-1]
    length = float(np.linalg.norm(b[:2] - a[:2]))
    if length < 1e-3:  # a closed or collapsed ref_line has no direction to stretch along
        return np.stack([a, b]), []
    u = (b - a) / length
    lo, hi, tied = 0.0, length, []
    for k, (left, right) in enumerate(lane_ends):
        mid = (left + right)[:2] / 2 - a[:2]
        t = float(mid @ u[:2])
        if abs(mid[0] * u[1] - mid[1] * u[0]) <= tie_distance and -_BAR_REACH <= t <= length + _BAR_REACH:
            tied.append(k)
            for q in (left, right):
                tq = float((q[:2] - a[:2]) @ u[:2])
                lo, hi = min(lo, tq), max(hi, tq)
    return np.stack([a + lo * u, a + hi * u]), tied


def _length(p: np.ndarray) -> float:
    return float(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1).sum())


def _centerline(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    s = np.unique(np.r_[normalized_arc(left), normalized_arc(right)])
    c = (resample_at(left, s) + resample_at(right, s)) / 2
    c[0], c[-1] = (left[0] + right[0]) / 2, (left[-1] + right[-1]) / 2
    return _dedupe(c)


def _turn(cl: np.ndarray) -> int:
    d0, d1 = cl[1, :2] - cl[0, :2], cl[-1, :2] - cl[-2, :2]
    ang = math.remainder(math.atan2(d1[1], d1[0]) - math.atan2(d0[1], d0[0]), 2 * math.pi)
    if abs(ang) >= _UTURN:
        return int(Movement.UTURN)
    if ang >= _STRAIGHT:
        return int(Movement.LEFT)
    if ang <= -_STRAIGHT:
        return int(Movement.RIGHT)
    return int(Movement.STRAIGHT)


_SPEED = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(km/h|kmh|mph|mps|m/s)?\s*$")
_SPEED_UNITS = {None: 1 / 3.6, "km/h": 1 / 3.6, "kmh": 1 / 3.6, "mph": 0.44704, "mps": 1.0, "m/s": 1.0}


def _speed(text: str, rid: str) -> float:
    """A lanelet ``speed_limit`` (km/h unless it names mph or m/s) in m/s; NaN when absent."""
    if not text:
        return math.nan
    match = _SPEED.match(text)
    if match is None:
        raise _err(f"lanelet {rid!r}: malformed speed_limit {text!r}")
    return float(match.group(1)) * _SPEED_UNITS[match.group(2)]


def _line_type(tags: dict[str, str]) -> int | None:
    if tags.get("type") not in ("line_thin", "line_thick"):
        return None
    sub, yellow = tags.get("subtype", "solid"), tags.get("color", "white") == "yellow"
    if sub.startswith("solid_solid"):
        return int(RoadLineType.DOUBLE_SOLID_YELLOW if yellow else RoadLineType.SOLID_WHITE)
    if sub.startswith("dashed"):
        return int(RoadLineType.DASHED_YELLOW if yellow else RoadLineType.DASHED_WHITE)
    return int(RoadLineType.SOLID_YELLOW if yellow else RoadLineType.SOLID_WHITE)


def _parse(path: Path) -> ET.Element:
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise _err(f"{path.name}: not a Lanelet2 map (XML parse error: {e})") from None
    if root.tag != "osm":
        raise _err(f"{path.name}: not a Lanelet2 map (root element <{root.tag}>, expected <osm>)")
    return root


def _sidecar(p: Path) -> Any:
    if not p.exists():
        return None
    try:
        return load_json(read_text(p, 64 * 1024 * 1024, "Lanelet2 sidecar"), str(p))
    except (OSError, ValueError) as e:
        raise _err(f"{p.name}: unreadable JSON ({e})") from None


def convert(path: str | Path, *, origin: tuple[float, float] | None = None, tolerance: float = 0.1,
            tie_distance: float = 1.5,
            sidecars: bool = True, mirror_y: bool | None = None) -> MapData:
    """Convert a Lanelet2 ``.osm`` file into raw ``MapData`` (pass it to ``build``).

    ``origin`` (lat, lon) is the projection origin for maps without local coordinates (default: the
    CARLA ``metadata.json`` origin beside the map, else the centre of the nodes); ``tolerance`` (m) is
    how close bound end points must be to connect lanelets; ``tie_distance`` (m) how close a regulated
    lanelet's end must be to its regulatory element's ``ref_line`` to share that stop line (farther
    ones get a stop line across their own end); ``sidecars`` reads the CARLA JSON files
    beside the map; ``mirror_y`` flips the y axis, turning a map drawn in a left-handed frame (CARLA's,
    flagged by ``left_handed_coordinates`` in its ``metadata.json``; the default follows that flag) into
    the right-handed x-east, y-north frame, with the sidecar positions flipped alike; left and right
    bounds, and so the direction of travel, are read in the flipped frame.
    """
    path = Path(path)
    root = _parse(path)
    meta_json = _sidecar(path.parent / "metadata.json") if sidecars else None

    # ---- nodes -------------------------------------------------------------------------------------
    nodes = root.findall("node")
    if not nodes:
        raise _err(f"{path.name}: the map has no nodes")
    ids = [n.get("id", "") for n in nodes]
    all_tags = [_tags(n) for n in nodes]
    xyz = np.zeros((len(nodes), 3))
    local = all("local_x" in t and "local_y" in t for t in all_tags)
    try:
        if local:
            xyz[:, 0] = [float(t["local_x"]) for t in all_tags]
            xyz[:, 1] = [float(t["local_y"]) for t in all_tags]
        else:
            lat = np.array([float(n.get("lat", "nan")) for n in nodes])
            lon = np.array([float(n.get("lon", "nan")) for n in nodes])
        xyz[:, 2] = [float(t.get("ele", "0") or 0) for t in all_tags]
    except ValueError as e:
        raise _err(f"{path.name}: malformed node coordinate ({e})") from None
    if not local:
        bad = np.nonzero(~(np.isfinite(lat) & np.isfinite(lon)))[0]
        if bad.size:
            raise _err(f"node {ids[int(bad[0])]!r}: no local_x/local_y tags and no valid lat/lon")
        if origin is None and isinstance(meta_json, dict) and "lanelet_map_origin" in meta_json:
            lat0, lon0 = meta_json["lanelet_map_origin"][:2]
            origin = (float(lat0), float(lon0))
        if origin is None:
            origin = (float((lat.min() + lat.max()) / 2), float((lon.min() + lon.max()) / 2))
        xyz[:, 0], xyz[:, 1] = utm_project(lat, lon, origin)
    if mirror_y is None:
        mirror_y = bool(isinstance(meta_json, dict) and meta_json.get("left_handed_coordinates"))
    flip = -1.0 if mirror_y else 1.0
    xyz[:, 1] *= flip
    node_index = {nid: i for i, nid in enumerate(ids)}
    if len(node_index) != len(ids):
        raise _err(f"node {_first_repeat(ids)!r}: id is used twice")

    # ---- ways --------------------------------------------------------------------------------------
    ways: dict[str, np.ndarray] = {}
    way_tags: dict[str, dict[str, str]] = {}
    for w in root.findall("way"):
        wid = w.get("id", "")
        if wid in ways:
            raise _err(f"way {wid!r}: id is used twice")
        refs = [nd.get("ref", "") for nd in w.findall("nd")]
        missing = [r for r in refs if r not in node_index]
        if missing:
            raise _err(f"way {wid!r}: node {missing[0]!r} is not in the map")
        ways[wid] = xyz[[node_index[r] for r in refs]] if refs else np.zeros((0, 3))
        way_tags[wid] = _tags(w)

    def way(wid: str, where: str) -> np.ndarray:
        if wid not in ways:
            raise _err(f"{where}: way {wid!r} is not in the map")
        p = ways[wid]
        if len(p) < 2:
            raise _err(f"{where}: way {wid!r} has fewer than two nodes")
        return p

    # ---- relations ---------------------------------------------------------------------------------
    relations = root.findall("relation")
    rel_ids = [r.get("id", "") for r in relations]
    if len(set(rel_ids)) != len(rel_ids):
        raise _err(f"relation {_first_repeat(rel_ids)!r}: id is used twice")
    rel_tags = {r.get("id", ""): _tags(r) for r in relations}
    lanelets: list[_Lanelet] = []
    sidewalks: list[np.ndarray] = []
    crosswalks: list[np.ndarray] = []
    regs: dict[str, ET.Element] = {}
    for r in relations:
        rid, tags = r.get("id", ""), rel_tags[r.get("id", "")]
        if tags.get("type") == "regulatory_element":
            regs[rid] = r
            continue
        if tags.get("type") != "lanelet":
            continue
        members = {m.get("role", ""): m.get("ref", "") for m in r.findall("member") if m.get("type") == "way"}
        for role in ("left", "right"):
            if role not in members:
                raise _err(f"lanelet {rid!r}: no {role} bound")
        lp = way(members["left"], f"lanelet {rid!r} left bound")
        rp = way(members["right"], f"lanelet {rid!r} right bound")
        # Bounds must run the same way, and the left bound must lie left of the direction of travel:
        # a lanelet drawn the other way is reversed (as Lanelet2 does).
        same = np.linalg.norm(lp[0, :2] - rp[0, :2]) + np.linalg.norm(lp[-1, :2] - rp[-1, :2])
        flipped = np.linalg.norm(lp[0, :2] - rp[-1, :2]) + np.linalg.norm(lp[-1, :2] - rp[0, :2])
        if flipped < same:
            rp = rp[::-1]
        if _left_side(lp, rp) < 0:
            lp, rp = lp[::-1], rp[::-1]
        sub = tags.get("subtype", "road")
        if sub == "crosswalk" or sub in _SIDEWALK_SUBTYPES:
            poly = _dedupe(np.concatenate([lp, rp[::-1]]))
            if len(poly) >= 3:
                (crosswalks if sub == "crosswalk" else sidewalks).append(poly)
            continue
        if sub not in _LANE_SUBTYPES:
            continue
        ll = _Lanelet(rid, members["left"], members["right"], lp, rp, tags)
        ll.regs = [m.get("ref", "") for m in r.findall("member")
                   if m.get("type") == "relation" and m.get("role") == "regulatory_element"]
        for ref in ll.regs:
            if rel_tags.get(ref, {}).get("type") != "regulatory_element":
                raise _err(f"lanelet {rid!r}: regulatory element {ref!r} is not in the map")
        lanelets.append(ll)
    if not lanelets:
        raise _err(f"{path.name}: the map has no driving lanelets")

    # ---- lanes -------------------------------------------------------------------------------------
    centerlines = {ll.rid: _centerline(ll.left_pts, ll.right_pts) for ll in lanelets}
    skipped = [ll.rid for ll in lanelets if len(centerlines[ll.rid]) < 2]
    lanelets = [ll for ll in lanelets if ll.rid not in skipped]
    if not lanelets:
        raise _err(f"{path.name}: the map has no driving lanelets of non-zero length")
    cls: list[np.ndarray] = []
    starts: list[tuple[np.ndarray, np.ndarray]] = []   # (left, right) start points, per lane
    ends: list[tuple[np.ndarray, np.ndarray]] = []
    lane_type, width, speed = [], [], []
    for ll in lanelets:
        cl = centerlines[ll.rid]
        w = float(np.mean(np.linalg.norm(resample_at(ll.left_pts, np.linspace(0, 1, 8))[:, :2]
                                         - resample_at(ll.right_pts, np.linspace(0, 1, 8))[:, :2], axis=1)))
        v = _speed(ll.tags.get("speed_limit", ""), ll.rid)
        sub = ll.tags.get("subtype", "road")
        one_way = ll.tags.get("one_way", "no" if sub == "play_street" else "yes") != "no"
        directions = [False] if one_way else [False, True]
        for back in directions:
            ll.lanes.append(len(cls))
            if back:
                cls.append(cl[::-1].copy())
                starts.append((ll.right_pts[-1], ll.left_pts[-1]))
                ends.append((ll.right_pts[0], ll.left_pts[0]))
            else:
                cls.append(cl)
                starts.append((ll.left_pts[0], ll.right_pts[0]))
                ends.append((ll.left_pts[-1], ll.right_pts[-1]))
            lane_type.append(int(_LANE_SUBTYPES[sub]))
            width.append(max(w, 0.5))
            speed.append(v if math.isfinite(v) and v > 0 else math.nan)
    n = len(cls)
    s_l = np.array([s[0][:2] for s in starts])
    s_r = np.array([s[1][:2] for s in starts])
    e_l = np.array([e[0][:2] for e in ends])
    e_r = np.array([e[1][:2] for e in ends])
    successors: list[list[int]] = []
    for i in range(n):
        ok = (np.linalg.norm(s_l - e_l[i], axis=1) <= tolerance) & (np.linalg.norm(s_r - e_r[i], axis=1) <= tolerance)
        ok[i] = False
        successors.append(np.nonzero(ok)[0].tolist())
    # Neighbours: a lane whose right bound runs along this lane's left bound, end to end.
    left_nb = np.full(n, -1, np.int32)
    right_nb = np.full(n, -1, np.int32)
    for i in range(n):
        ok = (np.linalg.norm(s_r - s_l[i], axis=1) <= tolerance) & (np.linalg.norm(e_r - e_l[i], axis=1) <= tolerance)
        ok[i] = False
        if ok.any():
            j = int(np.argmax(ok))
            left_nb[i], right_nb[j] = j, i

    # ---- painted lines and road edges --------------------------------------------------------------
    lines, line_types, edges = [], [], []
    for wid, tags in way_tags.items():
        p = _dedupe(ways[wid]) if len(ways[wid]) else ways[wid]
        if len(p) < 2:
            continue
        lt = _line_type(tags)
        if lt is not None:
            lines.append(p)
            line_types.append(lt)
        elif tags.get("type") in _EDGE_TYPES:
            edges.append(p)
    if not edges:
        uses: dict[str, int] = {}
        for ll in lanelets:
            for wid in (ll.left, ll.right):
                uses[wid] = uses.get(wid, 0) + 1
        # A bound is a road edge when it belongs to one lanelet and no other lane runs beside it.
        samples = [(resample_at(c, np.linspace(0, 1, max(2, int(np.ceil(_length(c) / 2.0)) + 1)))[:, :2], k)
                   for k, c in enumerate(cls)]
        sample_xy = np.concatenate([xy for xy, _ in samples])
        sample_lane = np.concatenate([np.full(len(xy), k) for xy, k in samples])
        for ll in lanelets:
            if ll.tags.get("is_intersection") == "yes":
                continue
            for wid in (ll.left, ll.right):
                p = _dedupe(ways[wid])
                if uses[wid] != 1 or way_tags[wid].get("type") or len(p) < 2:
                    continue
                probe = resample_at(p, np.array([0.25, 0.5, 0.75]))[:, :2]
                reach = 0.75 * width[ll.lanes[0]]
                box = ((sample_xy >= probe.min(axis=0) - reach) & (sample_xy <= probe.max(axis=0) + reach)).all(axis=1)
                cand = np.nonzero(box)[0]
                near = (np.linalg.norm(sample_xy[cand][None] - probe[:, None], axis=2) < reach).any(axis=0)
                if not np.isin(sample_lane[cand[near]], ll.lanes, invert=True).any():
                    edges.append(p)

    # ---- regulatory elements -----------------------------------------------------------------------
    bars: list[np.ndarray] = []
    bar_lanes: list[list[int]] = []
    bar_sources: list[str] = []   # the regulatory element of each stop line
    sig_stop, sig_move, sig_pos, sig_lanes, sig_reg = [], [], [], [], []
    sign_stop, sign_pos = [], []
    by_rid = {ll.rid: ll for ll in lanelets}
    regulated: dict[str, list[int]] = {}
    for ll in lanelets:
        for ref in ll.regs:
            regulated.setdefault(ref, []).append(ll.lanes[0])

    def end_bar(lane: int) -> np.ndarray:
        return np.stack([ends[lane][0], ends[lane][1]])

    def ref_lines(rel: ET.Element, rid: str) -> list[np.ndarray]:
        return [way(m.get("ref", ""), f"regulatory element {rid!r} ref_line")
                for m in rel.findall("member") if m.get("role") == "ref_line"]

    def add_bar(points: np.ndarray, lanes: list[int]) -> int:
        bars.append(np.stack([points[0], points[-1]]))
        bar_lanes.append(lanes)
        return len(bars) - 1

    def stop_lanes(rel: ET.Element, role: str) -> list[int]:
        out = []
        for m in rel.findall("member"):
            if m.get("role") == role and m.get("type") == "relation":
                ref = m.get("ref", "")
                if ref in skipped:
                    continue
                if ref not in by_rid:
                    raise _err(f"regulatory element {rel.get('id')!r}: {role} lanelet {ref!r} is not in the map")
                out.append(by_rid[ref].lanes[0])
        return out

    json_bars = _sidecar(path.with_name(f"{path.stem}_stoplines.json")) if sidecars else None
    json_bars = [b for b in (json_bars or []) if isinstance(b, dict)
                 and all(isinstance(b.get(k), (int, float)) for k in ("x", "y"))]
    used_actors: set[int] = set()

    def nearest_actor(p: np.ndarray, kind: str) -> dict[str, Any] | None:
        best, best_d = None, 15.0
        for b in json_bars:
            if b.get("agent_type") != kind or b.get("actor_id") in used_actors:
                continue
            d = math.hypot(float(b["x"]) - p[0], flip * float(b["y"]) - p[1])
            if d < best_d:
                best, best_d = b, d
        return best

    def actor_bar(b: dict[str, Any]) -> np.ndarray:
        c = np.array([float(b["x"]), flip * float(b["y"]), 0.0])
        o = flip * float(b.get("orientation", 0.0))
        half = float(b.get("width", 4.0)) / 2
        d = np.array([-math.sin(o), math.cos(o), 0.0]) * half
        return np.stack([c - d, c + d])

    for rid in sorted(regs, key=lambda k: (len(k), k)):
        rel, sub = regs[rid], rel_tags[rid].get("subtype", "")
        if sub == "traffic_light":
            lanes = regulated.get(rid, [])
            if not lanes:
                continue
            lines_here = ref_lines(rel, rid)
            groups: list[tuple[np.ndarray, list[int]]] = []
            if lines_here:
                bar_pts, tied = _fit_bar(lines_here[0], [ends[ln] for ln in lanes], tie_distance)
                groups = [(bar_pts, [lanes[k] for k in tied])] if tied else []
                groups += [(end_bar(ln), [ln]) for k, ln in enumerate(lanes) if k not in tied]
            else:
                mid = np.mean([ends[ln][0][:2] / 2 + ends[ln][1][:2] / 2 for ln in lanes], axis=0)
                found = nearest_actor(mid, "traffic_light")
                groups = [(actor_bar(found), lanes)] if found else [(end_bar(ln), [ln]) for ln in lanes]
            actor = nearest_actor((groups[0][0][0][:2] + groups[0][0][-1][:2]) / 2, "traffic_light")
            if actor is not None:
                used_actors.add(actor["actor_id"])
            for pts, glanes in groups:
                s = add_bar(pts, glanes)
                bar_sources.append(rid)
                moves: dict[int, list[int]] = {}
                for ln in glanes:
                    for nx in successors[ln]:
                        moves.setdefault(_turn(cls[nx]), []).append(nx)
                for mv in sorted(moves or {int(Movement.STRAIGHT): []}):
                    sig_stop.append(s)
                    sig_move.append(mv)
                    sig_pos.append(bars[s][1])
                    sig_lanes.append(sorted(set(moves.get(mv, []))))
                    sig_reg.append({"regulatory_element": rid,
                                    "actor_id": actor["actor_id"] if actor is not None else None})
        elif sub in ("right_of_way", "all_way_stop"):
            lanes = stop_lanes(rel, "yield")
            lines_here = ref_lines(rel, rid)
            if sub == "right_of_way" and not lines_here:
                continue
            for k, ln in enumerate(lanes):
                pts = lines_here[k] if k < len(lines_here) else end_bar(ln)
                s = add_bar(pts, [ln])
                bar_sources.append(rid)
                sign_stop.append(s)
                sign_pos.append(bars[s][1])

    programs = _sidecar(path.with_name(f"{path.stem}_traffic_light_controller.json")) if sidecars else None
    lanes_obj = Lanes.create(cls, lane_type=lane_type, width=width, speed_limit=speed, successors=successors,
                             left_neighbor=left_nb, right_neighbor=right_nb)
    return MapData(
        lanes=lanes_obj,
        road_lines=RoadLines.create(lines, line_types),
        road_edges=Polylines(edges),
        sidewalks=Polygons(sidewalks),
        crosswalks=Polygons(crosswalks),
        stop_lines=StopLines.create(np.asarray(bars).reshape(-1, 2, 3), bar_lanes),
        signals=Signals.create(sig_stop, sig_move, np.asarray(sig_pos).reshape(-1, 3), sig_lanes),
        stop_signs=StopSigns.create(np.asarray(sign_pos).reshape(-1, 3), sign_stop),
        intersections=None,
        handedness=Handedness.RIGHT,
        name=path.stem,
        metadata={
            "source": "lanelet2",
            "file": path.name,
            "coordinates": "local" if local else "utm",
            "mirrored_y": mirror_y,
            "origin": None if local else list(origin),
            "lanelet_ids": [ll.rid for ll in lanelets for _ in ll.lanes],
            "skipped_lanelets": skipped,
            "signal_actors": sig_reg,
            "stop_line_sources": bar_sources,
            "tl_programs": programs,
        },
    )
