"""Lane bends and the goal walk that keeps long vehicles to lanes they can follow
(``terrazero_env.maps.bends``, ``InitConfig.goal_turnable``).

Oracles: a circle's radius for ``lane_min_radii``, shapely's distances for the clearances, and the
engine's own goals: with the rule on, no truck's goal lies past a lane its box cannot follow."""

from __future__ import annotations

import numpy as np
import pytest
from shapely.geometry import LineString, Point

from terrazero_env import load_config
from terrazero_env.engine import Engine
from terrazero_env.maps import Intersections, Lanes, MapData, Polylines
from terrazero_env.maps.bends import BEND_RADIUS, CLEARANCE_REACH, lane_bends, lane_min_radii
from terrazero_env.maps.schema import Handedness
from terrazero_env.maps.sources import load_built


def _arc(r: float, a0: float, a1: float, n: int = 40, cx: float = 0.0, cy: float = 0.0) -> np.ndarray:
    a = np.linspace(a0, a1, n)
    return np.stack([cx + r * np.cos(a), cy + r * np.sin(a)], axis=1)


def _ring_road(r: float = 20.0, inside: float = 2.0, outside: float = 4.0) -> MapData:
    """One counter-clockwise lane on a circle of radius ``r`` (turning left), a road edge ``inside``
    metres inside it and one ``outside`` metres outside, and a straight lane far away."""
    ring = _arc(r, 0.0, 1.5 * np.pi, 120)
    straight = np.stack([np.linspace(500.0, 600.0, 21), np.zeros(21)], axis=1)
    lanes = Lanes.create([ring, straight], width=3.5, successors=[[], []])
    edges = [_arc(r - inside, -0.2, 1.5 * np.pi + 0.2, 160), _arc(r + outside, -0.2, 1.5 * np.pi + 0.2, 160)]
    return MapData(lanes=lanes, road_edges=Polylines(edges), intersections=Intersections.create([]),
                   handedness=Handedness.RIGHT, name="ring")


@pytest.mark.parametrize("r", [6.0, 12.0, 30.0])
def test_lane_min_radii_reads_a_circle_and_a_straight_line(r: float) -> None:
    arc = np.c_[_arc(r, 0.3, 2.0, 200), np.zeros(200)]
    line = np.c_[np.linspace(0, 50, 11), np.linspace(0, 20, 11), np.zeros(11)]
    pts = np.vstack([arc, line])
    got = lane_min_radii(pts, np.array([0, 200, 211]))
    assert got[0] == pytest.approx(r, rel=0.01)  # a chord's arc length over its turn: R to within sampling
    assert np.isinf(got[1])


def test_lane_bends_side_and_clearances_match_shapely() -> None:
    m = _ring_road(20.0, inside=2.0, outside=4.0)
    b = lane_bends(m)
    assert b.shape == (2, 4) and b.dtype == np.float32
    assert b[0, 0] == pytest.approx(20.0, rel=0.01)
    assert b[0, 1] == 1.0  # counter-clockwise: a left turn, the inside on the left
    assert b[0, 2] == pytest.approx(2.0, abs=0.02) and b[0, 3] == pytest.approx(4.0, abs=0.02)
    assert np.isinf(b[1, 0]) and b[1, 1] == 0 and np.isinf(b[1, 2]) and np.isinf(b[1, 3])


def test_lane_bends_nearest_edge_matches_shapely_on_a_real_town() -> None:
    """The smaller of a bent lane's two clearances is the nearest road edge to its centreline
    (shapely, sampled as densely), capped at ``CLEARANCE_REACH``."""
    m = load_built("carla_town01")
    b = lane_bends(m)
    edges = [LineString(np.asarray(m.road_edges.row(i))[:, :2]) for i in range(len(m.road_edges))
             if len(m.road_edges.row(i)) > 1]
    bent = np.nonzero(b[:, 0] < BEND_RADIUS)[0]
    assert len(bent) > 20
    for i in bent[::3]:
        line = LineString(np.asarray(m.lanes.centerline.row(i))[:, :2])
        samples = [line.interpolate(s) for s in np.linspace(0.0, line.length, int(line.length) + 2)]
        want = min(min(e.distance(p) for e in edges) for p in samples)
        assert min(b[i, 2], b[i, 3]) == pytest.approx(min(want, CLEARANCE_REACH), abs=0.15), i


def _turnable(b: np.ndarray, lane_width: float, r_min: float, ahead: float, length: float,
              box_width: float) -> bool:
    """``scene.lane_turnable``, written again from its description."""
    r, side, left, right = (float(x) for x in b)
    if np.isinf(r):
        return True
    if r < r_min:
        return False
    rr = np.sqrt(max(r * r - ahead * ahead, 0.0))
    outward = np.hypot(rr + box_width / 2, ahead + length / 2) - r
    inward = r - (rr - box_width / 2)
    inner, outer = (left, right) if side > 0 else (right, left) if side < 0 else (min(left, right),) * 2
    spare = max(0.0, (lane_width - box_width) / 2)
    return max(outward - outer, -spare) <= min(inner - inward, spare)


def test_no_truck_goal_lies_past_a_lane_its_box_cannot_follow() -> None:
    """carla_town01, trucks only: every goal's walk, rebuilt from the lane graph, needs no lane its
    truck cannot follow; with the rule off some goals do."""
    m = load_built("carla_town01")
    b = lane_bends(m)
    cfg0 = load_config("quick", maps=["carla_town01"], init__class_weights=(0.0, 1.0, 0.0, 0.0, 0.0),
                       num_worlds=32)
    spec = cfg0.classes[1]

    def blocked(turnable: bool) -> int:
        cfg = cfg0.with_overrides(init={"goal_turnable": turnable})
        eng = Engine(cfg)
        eng.reset(seeds=np.arange(32, dtype=np.uint64) + 5)
        ag = eng.agents
        cl = m.lanes.centerline
        lines = [LineString(np.asarray(cl.row(i))[:, :2]) for i in range(len(m.lanes))]
        bad = 0
        for w in range(32):
            for k in range(eng.num_agents(w)):
                a = ag[w, k]
                if a["slot"] < 0:
                    continue
                L, W = float(a["length"]), float(a["width"])
                wb = spec.wheelbase_ratio * L
                ahead = spec.rear_axle * L
                r_min = float(np.hypot(wb / np.tan(spec.max_steer), ahead))
                g = Point(float(a["goal_x"]), float(a["goal_y"]))
                # the goal's lane, the end of its walk: the nearest centreline (connectors leaving one
                # lane end start at the same point, so any of those as near)
                dist = np.array([ln.distance(g) for ln in lines])
                near = np.nonzero(dist <= dist.min() + 0.01)[0]
                if not any(_turnable(b[i], float(m.lanes.width[i]), r_min, ahead, L, W) for i in near):
                    bad += 1
        return bad

    assert blocked(True) == 0
    assert blocked(False) > 0
