"""IDM vehicles change lane around obstacles at rest: on a straight road
with two same-direction lanes, a vehicle behind a lane-block closure moves to the free lane and passes
without touching a cone or leaving the road; it does not move over while a neighbour is alongside or
while its move would make a faster vehicle behind brake harder than the configured limit; on a
single-lane road, or with the obstacle across both lanes, it stops before the closure; a vehicle in
the free lane of a taper passes without stopping; with the switch off it stops as before. The engine
keeps a map's lane neighbours only where the geometry confirms them."""

from __future__ import annotations

import numpy as np
import pytest
from scene_run import run_checked

from terrazero_env import engine as core
from terrazero_env.config import Consequence, EngineConfig, InitConfig, RoadUsersConfig
from terrazero_env.maps import build
from terrazero_env.maps.jsonmap import from_dict

NONE = {k: Consequence.NONE for k in ("collision", "offroad", "wrong_way")}
W = 3.5          # lane width (m)
CLOSURE = 150.0  # x of the lane-block line (m)


def _road(n_lanes: int, length: float = 600.0) -> object:
    """A straight road along +x with ``n_lanes`` lanes one way; lane k's centre at y = k W (lane 0 on
    the right), each lane naming its neighbours."""
    lanes = [{"centerline": [[0, k * W], [length, k * W]], "width": W, "speed_limit": 13.4,
              "left_neighbor": k + 1 if k + 1 < n_lanes else -1, "right_neighbor": k - 1}
             for k in range(n_lanes)]
    edges = [[[0, -0.5 * W], [length, -0.5 * W]], [[0, (n_lanes - 0.5) * W], [length, (n_lanes - 0.5) * W]]]
    return build(from_dict({"name": "straight", "lanes": lanes, "road_edges": edges}))


def _engine(m: object, **road_users) -> core.Engine:
    cfg = EngineConfig(num_worlds=1, slots_per_world=1, max_agents_per_world=32, consequences=NONE,
                       init=InitConfig(num_agents=(1, 1)), road_users=RoadUsersConfig(**road_users))
    return core.Engine(cfg, maps=m)


def _cone(x: float, y: float) -> dict:
    return {"cls": 0, "x": x, "y": y, "heading": 0.0, "length": 0.4, "width": 0.4, "height": 0.7, "controlled": False}


def _closure(lane: int = 0) -> list[dict]:
    """A lane-block line of four cones across lane ``lane`` at x = CLOSURE."""
    return [_cone(CLOSURE, lane * W + y) for y in np.linspace(-1.4, 1.4, 4)]


def _idm(x: float, y: float, speed: float) -> dict:
    return {"cls": 0, "x": x, "y": y, "heading": 0.0, "speed": speed, "idm": True, "length": 4.5, "width": 1.9}




def test_vehicle_changes_lane_around_a_closure_and_passes_it() -> None:
    """Behind a closure of the right lane with the left lane free, the vehicle moves to the left lane,
    passes the closure without stopping and settles on the left lane's centre."""
    m = _road(2)
    spec = _closure(0) + [_idm(100.0, 0.0, 8.0)]
    traj = run_checked(_engine(m), spec, 250)
    car = np.array([a[-1] for a in traj])
    assert car["x"][-1] > CLOSURE + 50.0
    assert abs(car["y"][-1] - W) < 0.2 and abs(car["heading"][-1]) < 0.02
    assert car["speed"].min() > 2.0, "it stopped instead of going around"
    assert np.abs(car["heading"]).max() < 0.35, "the change was not gradual"


def test_switch_off_stops_behind_the_closure() -> None:
    """With ``lane_change=False`` the same vehicle stays in its lane and comes to rest before the line."""
    m = _road(2)
    spec = _closure(0) + [_idm(100.0, 0.0, 8.0)]
    car = run_checked(_engine(m, lane_change=False), spec, 200)[-1][-1]
    assert abs(car["y"]) < 0.05 and abs(car["speed"]) < 0.1
    assert 2.0 < CLOSURE - car["x"] < 12.0


@pytest.mark.parametrize("n_lanes", [1, 2])
def test_no_free_lane_means_a_stop_before_the_closure(n_lanes: int) -> None:
    """On a single-lane road, or with the closure spanning both lanes (the obstacle blocks the
    neighbour too), the vehicle stops in its lane before the line and never touches a cone."""
    m = _road(n_lanes)
    spec = _closure(0) + (_closure(1) if n_lanes == 2 else []) + [_idm(100.0, 0.0, 8.0)]
    car = run_checked(_engine(m), spec, 200)[-1][-1]
    assert abs(car["y"]) < 0.05 and abs(car["speed"]) < 0.1
    assert 2.0 < CLOSURE - car["x"] < 12.0


def test_vehicle_waits_while_a_neighbour_is_alongside() -> None:
    """A neighbour driving beside the vehicle in the free lane keeps it in its lane: it moves over
    only once the neighbour is clear ahead of it, then passes the closure; nothing ever overlaps."""
    m = _road(2)
    spec = _closure(0) + [_idm(110.0, 0.0, 8.0), _idm(108.0, W, 8.0)]
    traj = run_checked(_engine(m), spec, 300)
    car = np.array([a[-2] for a in traj])
    nb = np.array([a[-1] for a in traj])
    moved = np.nonzero(car["y"] > 0.3)[0]
    assert moved.size, "the vehicle never went around the closure"
    t = moved[0]
    assert nb["x"][t] - car["x"][t] > 0.5 * (4.5 + 4.5), "it moved over while the neighbour was alongside"
    assert (car["x"][: t] < nb["x"][: t] + 4.5).all()
    assert car["x"][-1] > CLOSURE + 10.0


def test_change_spares_a_faster_follower_from_hard_braking() -> None:
    """A faster vehicle approaching in the free lane from behind is not cut off: it never brakes
    harder than the configured safe deceleration plus the IDM's own reaction, and the vehicle
    behind the closure still goes around after it has passed."""
    m = _road(2)
    safe = 4.0
    spec = _closure(0) + [_idm(120.0, 0.0, 6.0), _idm(95.0, W, 13.0)]
    e = _engine(m, lane_change_safe_decel=safe)
    e.set_scene(0, spec, seed=0)
    n = len(spec)
    worst = 0.0
    first_y = None
    for _ in range(300):
        e.step()
        s = e.agent_states(0)
        worst = min(worst, s["a_long"][n - 1])
        if first_y is None and s["y"][n - 2] > 0.3:
            first_y = (s["x"][n - 2], s["x"][n - 1])
    assert first_y is not None, "the vehicle never went around the closure"
    assert first_y[1] > first_y[0], "it moved in front of the approaching follower"
    assert worst > -safe, f"the follower braked at {worst} m/s^2"


def test_taper_leaves_the_adjacent_lane_passable() -> None:
    """A diagonal taper of cones closing the right lane: a vehicle in the left lane passes it without
    slowing much, and one in the right lane goes around it; no cone is touched."""
    m = _road(2)
    taper = [_cone(CLOSURE + 4.0 * k, -1.4 + 0.7 * k) for k in range(5)] + [_cone(CLOSURE + 20.0 + 4.0 * k, 1.4)
                                                                           for k in range(4)]
    spec = taper + [_idm(100.0, W, 10.0), _idm(70.0, 0.0, 10.0)]
    traj = run_checked(_engine(m), spec, 250)
    free = np.array([a[-2] for a in traj])
    closed = np.array([a[-1] for a in traj])
    assert free["speed"].min() > 8.0 and free["x"][-1] > CLOSURE + 60.0
    assert closed["x"][-1] > CLOSURE + 40.0 and abs(closed["y"][-1] - W) < 0.3


def test_lane_neighbours_reach_the_engine_where_the_geometry_confirms_them() -> None:
    """Bundled multi-lane maps keep their neighbours (each beside its lane, running the same way); a
    neighbour named across the centre line of a two-way road is dropped."""
    e = core.Engine(EngineConfig(num_worlds=1, maps=("grid_town", "highway")))
    for rm in e.road_maps:
        left, right = rm.lane_neighbors
        assert (left >= 0).sum() > 10 and (right >= 0).sum() > 10
        assert ((left >= 0) == (np.asarray(rm.map_data.lanes.left_neighbor) >= 0)).all()
    two_way = build(from_dict({"name": "two_way", "lanes": [
        {"centerline": [[0, 0], [100, 0]], "left_neighbor": 1},
        {"centerline": [[100, W], [0, W]], "left_neighbor": 0}]}))
    rm = core.road_map(two_way)
    left, right = rm.lane_neighbors
    assert (left == -1).all() and (right == -1).all()

