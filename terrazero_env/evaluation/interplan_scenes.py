"""Scene composition of the InterPlan-faithful suite (:mod:`terrazero_env.evaluation.interplan`): the
eight families' builders, each placing its ego, obstacle, traffic and goal on a bundled map's lane
graph the way InterPlan's scenario modifier places them in a nuPlan log (``agents_modifier.py``), as
``Engine.set_scene`` specs with the expert route the score needs. Setup only: nothing here runs on the
step path. The module docstring of :mod:`terrazero_env.evaluation.interplan` lists what each family
holds; docs/longtail.md how it differs from InterPlan's.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import StaticKind
from ..maps.schema import AgentType, LaneType

__all__ = ["CONE_SIZE", "INTERPLAN", "InterPlanFamily", "LaneNet", "SCENE_SECONDS", "ScriptedScene", "build_scenes",
           "get_family", "lane_net", "project"]

#: InterPlan's scenes last 30 s (``modified_nuplan_scenario_builder.py``).
SCENE_SECONDS = 30.0
#: Cone footprint (m): InterPlan's 0.5 m cube.
CONE_SIZE = 0.5


# ------------------------------------------------------------------------------------- lane graph

class LaneNet:
    """A map's vehicle lanes for scene composition (setup only): points at arc lengths, the straightest
    successor and predecessor, same-direction neighbours, and the lanes of each lane's road."""

    def __init__(self, map_data: Any) -> None:
        L = map_data.lanes
        self.n = len(L)
        self.pts = [np.asarray(L.centerline.row(i))[:, :2].astype(np.float64) for i in range(self.n)]
        self.cum = []
        for p in self.pts:
            d = np.hypot(*np.diff(p, axis=0).T) if len(p) > 1 else np.zeros(0)
            self.cum.append(np.concatenate([[0.0], np.cumsum(d)]))
        self.length = np.array([c[-1] for c in self.cum])
        self.width = np.asarray(L.width, np.float64)
        self.speed = np.asarray(L.speed_limit, np.float64)
        self.succ = [list(map(int, L.successors.row(i))) for i in range(self.n)]
        self.pred = [list(map(int, L.predecessors.row(i))) for i in range(self.n)]
        self.left = np.asarray(L.left_neighbor, np.int64)
        self.right = np.asarray(L.right_neighbor, np.int64)
        self.junction = np.asarray(L.intersection, np.int64) >= 0
        self.stop_line = np.asarray(L.stop_line, np.int64)
        self.vehicle = np.asarray(L.lane_type) == int(LaneType.VEHICLE)
        self.handedness = int(getattr(map_data, "handedness", 0))

    def pose(self, lane: int, s: float) -> tuple[float, float, float]:
        """(x, y, heading) of the lane's centerline at arc length ``s`` (clamped to the lane)."""
        c, p = self.cum[lane], self.pts[lane]
        s = min(max(s, 0.0), c[-1])
        k = int(np.clip(np.searchsorted(c, s, side="right") - 1, 0, len(p) - 2))
        seg = c[k + 1] - c[k]
        t = (s - c[k]) / seg if seg > 0 else 0.0
        x, y = p[k] + t * (p[k + 1] - p[k])
        d = p[k + 1] - p[k]
        return float(x), float(y), float(math.atan2(d[1], d[0]))

    def _heading_at(self, lane: int, end: bool) -> float:
        p = self.pts[lane]
        d = p[-1] - p[-2] if end else p[1] - p[0]
        return math.atan2(d[1], d[0])

    def straight_successor(self, lane: int) -> int:
        """The successor whose start heads most nearly as the lane's end does, -1 at a dead end."""
        nxt = [j for j in self.succ[lane] if self.vehicle[j]]
        if not nxt:
            return -1
        h = self._heading_at(lane, True)
        return min(nxt, key=lambda j: abs(math.remainder(self._heading_at(j, False) - h, math.tau))
                   + abs(math.remainder(self._heading_at(j, True) - h, math.tau)))

    def straight_predecessor(self, lane: int) -> int:
        prv = [j for j in self.pred[lane] if self.vehicle[j]]
        if not prv:
            return -1
        h = self._heading_at(lane, False)
        return min(prv, key=lambda j: abs(math.remainder(self._heading_at(j, True) - h, math.tau))
                   + abs(math.remainder(self._heading_at(j, False) - h, math.tau)))

    def back(self, lane: int, s: float, d: float) -> tuple[int, float] | None:
        """The lane and arc length ``d`` metres behind (lane, s) along straightest predecessors."""
        while s < d:
            d -= s
            lane = self.straight_predecessor(lane)
            if lane < 0:
                return None
            s = float(self.length[lane])
        return lane, s - d

    def ahead(self, lane: int, s: float, d: float) -> list[tuple[int, float, float]] | None:
        """The stretch from (lane, s) ``d`` metres forward along straightest successors, as
        ``[(lane, s_from, s_to), ...]``; None at a dead end."""
        out = []
        while s + d > self.length[lane]:
            out.append((lane, s, float(self.length[lane])))
            d -= float(self.length[lane]) - s
            lane = self.straight_successor(lane)
            if lane < 0:
                return None
            s = 0.0
        out.append((lane, s, s + d))
        return out

    def polyline(self, stretch: Sequence[tuple[int, float, float]], step: float = 1.0) -> np.ndarray:
        """float64 ``[P, 2]`` points along a stretch, about ``step`` metres apart."""
        pts = []
        for lane, a, b in stretch:
            n = max(2, int(math.ceil((b - a) / step)) + 1)
            pts += [self.pose(lane, s)[:2] for s in np.linspace(a, b, n)]
        p = np.asarray(pts, np.float64)
        keep = np.concatenate([[True], np.hypot(*np.diff(p, axis=0).T) > 1e-6])
        return p[keep]

    def road_lanes(self, lane: int) -> list[int]:
        """The lane and its same-direction neighbours, right to left."""
        out = [lane]
        j = int(self.right[lane])
        while j >= 0 and j not in out:
            out.insert(0, j)
            j = int(self.right[j])
        j = int(self.left[lane])
        while j >= 0 and j not in out:
            out.append(j)
            j = int(self.left[j])
        return out


def _offset(pose: tuple[float, float, float], forward: float, left: float) -> tuple[float, float]:
    x, y, h = pose
    return x + forward * math.cos(h) - left * math.sin(h), y + forward * math.sin(h) + left * math.cos(h)


def project(route: np.ndarray, xy: Sequence[float]) -> tuple[float, float]:
    """Arc length (m) of the point of polyline ``route`` nearest ``xy``, and the signed offset of
    ``xy`` from it (+ left of the direction of travel)."""
    a, b = route[:-1], route[1:]
    d = b - a
    L2 = np.maximum((d * d).sum(1), 1e-12)
    p = np.asarray(xy, np.float64)[:2]
    t = np.clip(((p - a) * d).sum(1) / L2, 0.0, 1.0)
    foot = a + t[:, None] * d
    dist = np.hypot(*(p - foot).T)
    k = int(np.argmin(dist))
    cum = np.concatenate([[0.0], np.cumsum(np.sqrt(L2))])
    cross = d[k, 0] * (p[1] - a[k, 1]) - d[k, 1] * (p[0] - a[k, 0])
    return float(cum[k] + t[k] * math.sqrt(L2[k])), float(math.copysign(dist[k], cross) if dist[k] > 0 else 0.0)


# ---------------------------------------------------------------------------------------- scenes

@dataclass
class ScriptedScene:
    """One composed scene: ``agents`` for ``Engine.set_scene`` (the ego first), the expert route and
    what the score needs of it."""

    family: str
    map: str
    agents: list[dict[str, Any]]
    route: np.ndarray
    """float64 ``[P, 2]``: the ego's lane-graph route from its start to its goal (the expert's line)."""
    expert_progress: float
    """m: how far the expert gets along ``route`` in the scene's duration (its length, capped by the
    posted limit times the duration)."""
    obstacle_s: float = math.nan
    """m along ``route``: the farthest obstacle (the ``ego_sorts`` gate); NaN in families without one."""
    lane_width: float = 3.5
    goal_offset: float = 0.0
    """m: the goal's signed lateral offset from ``route`` at its end (an adjacent lane: +-one width)."""
    lane_changes_needed: int = 0
    """``n0`` of lane changes to goal."""
    road_lanes: int = 1
    """Same-direction lanes of the ego's road (to tell a lane of it from the oncoming side)."""
    meta: dict[str, Any] = field(default_factory=dict)


def _ego(lane_pose: tuple[float, float, float], goal: tuple[float, float], speed: float) -> dict[str, Any]:
    x, y, h = lane_pose
    return {"cls": int(AgentType.CAR), "x": x, "y": y, "heading": h, "speed": float(speed), "goal": goal,
            "controlled": True, "goal_hidden": False}


def _static(cls: AgentType, kind: StaticKind, pose: tuple[float, float, float], **dims: float) -> dict[str, Any]:
    x, y, h = pose
    return {"cls": int(cls), "x": x, "y": y, "heading": h, "kind": int(kind), "controlled": False, **dims}


def _stop_speed(d: float, limit: float) -> float:
    """A start speed from which a comfortable 2 m/s^2 stop fits well before something ``d`` m ahead."""
    return float(min(0.6 * limit, math.sqrt(max(0.0, 2.0 * 2.0 * (d - 12.0)))))


def _pick_lane(net: LaneNet, rng: np.random.Generator, ok: Callable[[int], bool]) -> int:
    cand = [i for i in range(net.n) if net.vehicle[i] and not net.junction[i] and ok(i)]
    if not cand:
        raise RuntimeError("no lane of the map suits this family")
    return int(rng.choice(cand))


def _obstacle_layout(net: LaneNet, rng: np.random.Generator, extent: float,
                     min_lane: float = 30.0) -> tuple[int, float, int, float, list, float, float] | None:
    """A lane for an obstacle ``extent`` m long, its first arc length there, the ego's start (lane, s)
    20-60 m behind it, the route from the ego past the obstacle to a goal 25-40 m beyond its end
    (stretch), that route's length and the distance from the ego to the obstacle's start."""
    # The ego starts on the obstacle's own lane (InterPlan's obstacles lie in the ego's roadblock), 20-60
    # m before it, 5 m or more from the lane's start; 20 m after it are left to come back in before
    # the lane ends (a junction).
    lane = _pick_lane(net, rng, lambda i: net.length[i] >= max(min_lane, extent + 45.0))
    d_ego = float(rng.uniform(20.0, min(60.0, net.length[lane] - 25.0 - extent)))
    s_obs = float(rng.uniform(d_ego + 5.0, net.length[lane] - 20.0 - extent))
    start = net.back(lane, s_obs, d_ego)
    if start is None or not _room_to_stop(net, start):
        return None
    d_goal = float(rng.uniform(25.0, 40.0))
    stretch = net.ahead(start[0], start[1], d_ego + extent + d_goal)
    if stretch is None:
        return None
    return lane, s_obs, start[0], start[1], stretch, d_ego + extent + d_goal, d_ego


def _room_to_stop(net: LaneNet, start: tuple[int, float]) -> bool:
    """False where the ego would start inside a junction, within 30 m of a stop line ending its lane
    (a signal it could not stop for at its start speed), or in a bend."""
    lane, s = start
    if net.junction[lane] or (net.stop_line[lane] >= 0 and net.length[lane] - s <= 30.0):
        return False
    # on a straight stretch: a car placed in a bend with straight wheels would leave it at once
    h0, h1 = net.pose(lane, s - 6.0)[2], net.pose(lane, s + 6.0)[2]
    return abs(math.remainder(h1 - h0, math.tau)) < 0.1


def _finish(family: str, map_name: str, net: LaneNet, start: tuple[int, float], stretch: list, route_len: float,
            agents_after_ego: list[dict[str, Any]], ego_speed: float, obstacle_s: float,
            goal: tuple[float, float] | None = None, goal_offset: float = 0.0, n0: int = 0,
            meta: dict[str, Any] | None = None) -> ScriptedScene:
    route = net.polyline(stretch)
    end = net.pose(stretch[-1][0], stretch[-1][2])
    if goal is None:
        goal = end[:2]
    limit = float(np.nanmin([net.speed[ln] for ln, _, _ in stretch] + [40.0]))
    expert = min(route_len, float(np.hypot(*np.diff(route, axis=0).T).sum()), limit * SCENE_SECONDS)
    ego = _ego(net.pose(*start), (float(goal[0]), float(goal[1])), ego_speed)
    return ScriptedScene(family=family, map=map_name, agents=[ego, *agents_after_ego], route=route,
                         expert_progress=float(expert), obstacle_s=obstacle_s,
                         lane_width=float(net.width[start[0]]), goal_offset=goal_offset, lane_changes_needed=n0,
                         road_lanes=len(net.road_lanes(start[0])), meta=meta or {})


def _lane_frame_pose(net: LaneNet, lane: int, s: float, left: float, dh: float = 0.0) -> tuple[float, float, float]:
    p = net.pose(lane, s)
    x, y = _offset(p, 0.0, left)
    return x, y, p[2] + dh


def _curb_sign(net: LaneNet) -> float:
    """+1 where the curb is on the left of the travel direction (left-hand traffic), else -1."""
    return 1.0 if net.handedness == 1 else -1.0


def build_construction(net: LaneNet, rng: np.random.Generator, map_name: str) -> ScriptedScene | None:
    n_cones = int(rng.integers(3, 9))
    extent = 2.5 * (n_cones - 1) + 2.0
    lay = _obstacle_layout(net, rng, extent)
    if lay is None:
        return None
    lane, s_obs, l0, s0, stretch, route_len, d_ego = lay
    hw = 0.5 * float(net.width[lane])
    # the open side: a same-direction neighbour (the overtaking side first), else the oncoming lane
    overtake = -_curb_sign(net)
    if (net.left[lane] >= 0) != (net.right[lane] >= 0):
        open_side = 1.0 if net.left[lane] >= 0 else -1.0
    else:
        open_side = overtake
    agents = []
    # a taper closing the lane: from 0.4 m inside its edge away from the open side across to 0.8 m
    # inside the open side's edge
    for k in range(n_cones):
        frac = k / max(n_cones - 1, 1)
        left = -open_side * (hw - 0.4) + frac * open_side * (2.0 * hw - 1.2)
        agents.append(_static(AgentType.CAR, StaticKind.CONE,
                              _lane_frame_pose(net, lane, s_obs + 2.5 * k, left, float(rng.uniform(-math.pi, math.pi))),
                              length=CONE_SIZE, width=CONE_SIZE, height=CONE_SIZE))
    agents.append(_static(AgentType.PEDESTRIAN, StaticKind.WORKER,
                          _lane_frame_pose(net, lane, s_obs + extent, -open_side * 0.5 * hw,
                                           float(rng.uniform(-math.pi, math.pi))),
                          length=0.5, width=0.5, height=1.75))
    # the gate counts the cones, not the worker (InterPlan's obstacle_type: cone)
    return _finish("construction_zone", map_name, net, (l0, s0), stretch, route_len, agents,
                   _stop_speed(d_ego, float(net.speed[l0])), d_ego + 2.5 * (n_cones - 1), meta={"cones": n_cones})


def build_accident(net: LaneNet, rng: np.random.Generator, map_name: str) -> ScriptedScene | None:
    n_cars = 3 if rng.uniform() < 0.1 else 2
    gaps = [0.0] + [float(rng.uniform(3.0, 6.0)) for _ in range(n_cars - 1)]
    offsets = np.cumsum(gaps)
    lay = _obstacle_layout(net, rng, float(offsets[-1]) + 2.5)
    if lay is None:
        return None
    lane, s_obs, l0, s0, stretch, route_len, d_ego = lay
    agents = []
    for ds in offsets:
        left = float(rng.uniform(-0.6, 0.6))
        dh = float(rng.uniform(-0.7, 0.7)) + (math.pi if rng.uniform() < 0.3 else 0.0)
        agents.append(_static(AgentType.CAR, StaticKind.CRASHED, _lane_frame_pose(net, lane, s_obs + float(ds), left, dh)))
    return _finish("accident_site", map_name, net, (l0, s0), stretch, route_len, agents,
                   _stop_speed(d_ego, float(net.speed[l0])), d_ego + float(offsets[-1]), meta={"crashed": n_cars})


def build_nudge(net: LaneNet, rng: np.random.Generator, map_name: str) -> ScriptedScene | None:
    lay = _obstacle_layout(net, rng, 2.5, min_lane=25.0)
    if lay is None:
        return None
    lane, s_obs, l0, s0, stretch, route_len, d_ego = lay
    left = _curb_sign(net) * float(rng.uniform(0.9, 1.4))
    car = _static(AgentType.CAR, StaticKind.NONE, _lane_frame_pose(net, lane, s_obs, left, float(rng.uniform(-0.08, 0.08))))
    return _finish("nudge_stopped_vehicle", map_name, net, (l0, s0), stretch, route_len, [car],
                   _stop_speed(d_ego, float(net.speed[l0])), d_ego, meta={"offset": left})


def _oncoming(net: LaneNet, route: np.ndarray, start_s: float, end_s: float, gap_hi: int, rng: np.random.Generator,
              limit: float, width: float, map_name: str) -> list[dict[str, Any]]:
    """IDM cars driving against the route one lane width to its passing side, from ``end_s`` back to
    ``start_s`` at gaps of randrange(10, gap_hi) m (InterPlan's spawn_agents), where a lane there
    runs against the route."""
    from ..engine import road_map

    lanes = road_map(map_name).lanes

    def opposing(x: float, y: float, h: float) -> bool:
        q = lanes.query(np.array([[x, y]]))
        return bool(q["row"][0] >= 0 and q["distance"][0] < 0.5 and math.cos(q["heading"][0] - h) < -0.95)

    cars = []
    side = -_curb_sign(net)  # the oncoming lane lies opposite the curb
    cum = np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(route, axis=0).T))])
    s = end_s
    while s > start_s:
        k = int(np.clip(np.searchsorted(cum, s) - 1, 0, len(route) - 2))
        d = route[k + 1] - route[k]
        h = math.atan2(d[1], d[0])
        t = (s - cum[k]) / max(cum[k + 1] - cum[k], 1e-9)
        x, y = route[k] + t * d
        x, y = _offset((float(x), float(y), h), 0.0, side * width)
        v = float(np.clip(limit * rng.uniform(0.6, 0.9) + rng.normal(0.0, 1.0), 0.0, limit))
        s -= float(rng.integers(10, gap_hi)) + 4.5
        if not opposing(x, y, h):
            continue  # no lane driving against the route here (a junction, a bend's inside)
        cars.append({"cls": int(AgentType.CAR), "x": x, "y": y, "heading": h + math.pi, "speed": v, "idm": True,
                     "idm_mode": int(rng.integers(0, 3)), "controlled": False})
    return cars


def build_overtake(net: LaneNet, rng: np.random.Generator, map_name: str) -> ScriptedScene | None:
    lay = _obstacle_layout(net, rng, 2.5, min_lane=25.0)
    if lay is None:
        return None
    lane, s_obs, l0, s0, stretch, route_len, d_ego = lay
    if len(net.road_lanes(lane)) != 1:
        return None
    car = _static(AgentType.CAR, StaticKind.NONE, _lane_frame_pose(net, lane, s_obs, 0.0))
    draw = rng.uniform()
    traffic = "none" if draw < 0.3 else ("high" if draw < 0.8 else "medium")  # InterPlan: 3 a0, 5 dh, 2 dm
    scene = _finish("overtake_oncoming", map_name, net, (l0, s0), stretch, route_len, [car],
                    _stop_speed(d_ego, float(net.speed[l0])), d_ego, meta={"traffic": traffic})
    if traffic != "none":
        far = net.ahead(stretch[-1][0], stretch[-1][2], 60.0)
        line = net.polyline(stretch + (far or []))
        # InterPlan spawns along the obstacle's roadblock extended by about 50 m each way
        cars = _oncoming(net, line, max(0.0, d_ego - 50.0), min(float(np.hypot(*np.diff(line, axis=0).T).sum()) - 5.0,
                                                                 d_ego + 100.0),
                         33 if traffic == "high" else 50, rng, float(net.speed[lane]), float(net.width[lane]), map_name)
        scene.agents += cars
        scene.meta["oncoming"] = len(cars)
    return scene


def build_jaywalker(net: LaneNet, rng: np.random.Generator, map_name: str) -> ScriptedScene | None:
    lay = _obstacle_layout(net, rng, 0.0, min_lane=20.0)
    if lay is None:
        return None
    lane, s_obs, l0, s0, stretch, route_len, d_ego = lay
    road = net.road_lanes(lane)
    w = float(net.width[lane])
    curb = _curb_sign(net)
    # from beyond the curb-side edge of the road, across the ego's lane to beyond the road's far side
    idx = road.index(lane)  # road: right to left
    n_curbside = idx if curb < 0 else len(road) - 1 - idx
    n_farside = len(road) - 1 - n_curbside
    start_left = curb * ((n_curbside + 0.5) * w + float(rng.uniform(1.0, 2.5)))
    # across the ego's road and an oncoming road as wide, to beyond its far edge
    end_left = -curb * ((n_farside + 0.5 + len(road)) * w + float(rng.uniform(1.0, 3.0)))
    sx, sy, h = _lane_frame_pose(net, lane, s_obs, start_left)
    gx, gy, _ = _lane_frame_pose(net, lane, s_obs, end_left)
    speed = float(rng.uniform(0.8, 1.6))
    ped = {"cls": int(AgentType.PEDESTRIAN), "x": sx, "y": sy, "heading": h, "controlled": False,
           "crossing": {"goal": (gx, gy), "speed": speed, "trigger": 0, "distance": 50.0}}
    return _finish("jaywalker", map_name, net, (l0, s0), stretch, route_len, [ped],
                   _stop_speed(d_ego, float(net.speed[l0])), d_ego, meta={"speed": speed})


def _density_builder(name: str, gap_hi: int) -> Callable[[LaneNet, np.random.Generator, str], ScriptedScene | None]:
    def build(net: LaneNet, rng: np.random.Generator, map_name: str) -> ScriptedScene | None:
        lane = _pick_lane(net, rng, lambda i: (net.left[i] >= 0 or net.right[i] >= 0) and net.length[i] >= 100.0)
        sides = [d for d, j in (("left", net.left[lane]), ("right", net.right[lane])) if j >= 0]
        side = sides[int(rng.integers(len(sides)))]
        target = int(net.left[lane] if side == "left" else net.right[lane])
        s0 = float(rng.uniform(5.0, max(5.0, net.length[lane] - 100.0)))
        d_goal = float(rng.uniform(60.0, 120.0))
        stretch = net.ahead(lane, s0, d_goal)
        if stretch is None:
            return None
        end_lane, _, end_s = stretch[-1]
        # the goal: the adjacent lane abreast of the route's end
        w = float(net.width[lane])
        sign = 1.0 if side == "left" else -1.0
        gx, gy = _offset(net.pose(end_lane, end_s), 0.0, sign * w)
        limit = float(net.speed[lane])
        behaviour = ("assertive", "cautious", "mixed")[int(rng.integers(3))]
        traffic: list[dict[str, Any]] = []
        ego_xy = net.pose(lane, s0)[:2]
        for ln in net.road_lanes(lane):
            s_ln, _ = project(net.pts[ln], ego_xy)  # abreast of the ego on that lane
            s = min(float(net.length[ln]), s_ln + d_goal + 50.0)
            first = True
            while s > max(0.0, s_ln - 50.0):
                if not (ln == lane and abs(s - s_ln) < 10.0):
                    v = limit * 0.8 if first else float(np.clip(limit * rng.uniform(0.5, 0.9) + rng.normal(0, 1), 0, limit))
                    mode = 1 if behaviour == "assertive" else 2 if behaviour == "cautious" else int(rng.integers(1, 3))
                    x, y, h = net.pose(ln, s)
                    traffic.append({"cls": int(AgentType.CAR), "x": x, "y": y, "heading": h, "speed": v, "idm": True,
                                    "idm_mode": mode, "controlled": False})
                    first = False
                s -= float(rng.integers(10, gap_hi)) + 4.5
        scene = _finish(name, map_name, net, (lane, s0), stretch, d_goal, traffic, limit * 0.6, math.nan,
                        goal=(gx, gy), goal_offset=sign * w, n0=1,
                        meta={"behaviour": behaviour, "side": side, "traffic": len(traffic)})
        scene.meta["target_lane"] = target
        return scene
    return build


@dataclass(frozen=True)
class InterPlanFamily:
    """One family of the InterPlan-faithful suite."""

    name: str
    description: str
    maps: tuple[str, ...]
    """Bundled maps its scenes are composed on, in turn."""
    build: Callable[[LaneNet, np.random.Generator, str], ScriptedScene | None]
    """Composes one scene from a generator (None: this draw failed, draw again)."""
    gate: bool
    """Multiply by ``ego_sorts`` (the obstacle or pedestrian families)."""
    direction_multiplier: bool
    """Driving direction compliance multiplies (else it is averaged with weight 1)."""


#: The eight families of InterPlan's ``interplan10`` split.
INTERPLAN: tuple[InterPlanFamily, ...] = (
    InterPlanFamily("construction_zone", "3-8 cones tapering across the ego's lane and a worker, 20-60 m ahead",
                    ("grid_town", "carla_town01"), build_construction, True, False),
    InterPlanFamily("accident_site", "two or three crashed cars across the ego's lane, 20-60 m ahead",
                    ("grid_town", "carla_town01"), build_accident, True, False),
    InterPlanFamily("jaywalker", "a non-reactive pedestrian crossing the ego's lane once the ego is within 50 m",
                    ("grid_town", "carla_town01"), build_jaywalker, True, True),
    InterPlanFamily("nudge_stopped_vehicle", "a stopped car partly in the ego's lane, 20-60 m ahead",
                    ("carla_town01", "grid_town"), build_nudge, True, False),
    InterPlanFamily("overtake_oncoming", "a stopped car on a one-lane road, oncoming traffic at high or medium "
                    "gaps or none", ("carla_town01",), build_overtake, True, False),
    InterPlanFamily("lane_change_low", "goal in an adjacent lane 60-120 m ahead, traffic gaps 10-99 m",
                    ("highway",), _density_builder("lane_change_low", 100), False, True),
    InterPlanFamily("lane_change_medium", "as low, traffic gaps 10-49 m",
                    ("highway",), _density_builder("lane_change_medium", 50), False, True),
    InterPlanFamily("lane_change_high", "as low, traffic gaps 10-32 m",
                    ("highway",), _density_builder("lane_change_high", 33), False, True),
)


def get_family(name: str) -> InterPlanFamily:
    for f in INTERPLAN:
        if f.name == name:
            return f
    raise ValueError(f"unknown interplan family {name!r}; known: {', '.join(f.name for f in INTERPLAN)}")


_NETS: dict[str, LaneNet] = {}


def lane_net(map_name: str) -> LaneNet:
    if map_name not in _NETS:
        from ..engine import road_map

        _NETS[map_name] = LaneNet(road_map(map_name).map_data)
    return _NETS[map_name]


def build_scenes(family: InterPlanFamily, count: int, seed: int = 0, max_tries: int = 200) -> list[ScriptedScene]:
    """``count`` scenes of ``family``, the i-th on ``family.maps[i % len(maps)]``, each from its own
    generator (seeded by ``seed``, the family's name and i), deterministic in ``seed``."""
    if isinstance(count, bool) or not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"count must be a positive number of scenes, got {count!r}")
    out = []
    for i in range(int(count)):
        map_name = family.maps[i % len(family.maps)]
        net = lane_net(map_name)
        rng = np.random.default_rng([int(seed), zlib.crc32(family.name.encode()), i])
        for _ in range(max_tries):
            scene = family.build(net, rng, map_name)
            if scene is not None:
                out.append(scene)
                break
        else:
            raise RuntimeError(f"interplan family {family.name}: no scene could be composed on {map_name} "
                               f"in {max_tries} draws")
    return out
