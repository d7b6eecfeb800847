"""Planner-driven traffic in the style of PDM-Closed (TerraZero section 4.4, "reactive vehicles";
cyext/planner.pxd): on a straight road with two same-direction lanes a planner vehicle passes a
stopped vehicle in its lane when the next lane is free, and stops behind it when the next lane is
occupied (a row of parked cars, or a vehicle alongside until it has gone by); with half-lane offsets
it nudges past cones at the edge of its lane; 50 mixed planner and IDM vehicles run 1,000 steps on a
procedural town with static actors and pedestrians without a collision between vehicles; the share is
drawn per world from its range; the configuration rejects bad values naming the field, and with the
share at 0 the other planner settings change nothing."""

from __future__ import annotations

import numpy as np
import pytest
from scene_run import run_checked

from terrazero_env import engine as core
from terrazero_env import load_config
from terrazero_env.config import (
    Consequence,
    EngineConfig,
    InitConfig,
    PedestrianConfig,
    RoadUsersConfig,
)
from terrazero_env.maps import Handedness, build, procedural
from terrazero_env.maps.jsonmap import from_dict

NONE = {k: Consequence.NONE for k in ("collision", "offroad", "wrong_way")}
W = 3.5           # lane width (m)
STOPPED_X = 150.0


def _road(n_lanes: int = 2, length: float = 600.0) -> object:
    """A straight road along +x with ``n_lanes`` lanes one way (lane k's centre at y = k W)."""
    lanes = [{"centerline": [[0, k * W], [length, k * W]], "width": W, "speed_limit": 13.4,
              "left_neighbor": k + 1 if k + 1 < n_lanes else -1, "right_neighbor": k - 1}
             for k in range(n_lanes)]
    edges = [[[0, -0.5 * W], [length, -0.5 * W]], [[0, (n_lanes - 0.5) * W], [length, (n_lanes - 0.5) * W]]]
    return build(from_dict({"name": "straight", "lanes": lanes, "road_edges": edges}))


def _engine(m: object, **road_users) -> core.Engine:
    # The rule-based lane change is off: whatever changes lane here is the planner.
    road_users.setdefault("lane_change", False)
    cfg = EngineConfig(num_worlds=1, slots_per_world=1, max_agents_per_world=32, consequences=NONE,
                       init=InitConfig(num_agents=(1, 1)), road_users=RoadUsersConfig(**road_users))
    return core.Engine(cfg, maps=m)


def _car(x: float, y: float, speed: float = 0.0, **kw) -> dict:
    return {"cls": 0, "x": x, "y": y, "heading": 0.0, "speed": speed, "length": 4.5, "width": 1.9,
            "controlled": False, **kw}


def _planner(x: float, y: float, speed: float) -> dict:
    return _car(x, y, speed, idm=True, planner=True)




def test_planner_passes_a_stopped_vehicle_when_the_next_lane_is_free() -> None:
    """Behind a vehicle at rest in its lane with the left lane free, the planner vehicle moves over,
    passes it without stopping and keeps the new lane; the same vehicle without the planner (and no
    rule-based lane change) stops behind it."""
    m = _road()
    spec = [_car(STOPPED_X, 0.0), _planner(100.0, 0.0, 8.0)]
    e = _engine(m)
    car = run_checked(e, spec, 250)[:, 1]
    st = e.planner_state(0)
    assert st["planner"].tolist() == [False, True]
    assert car["x"][-1] > STOPPED_X + 100.0 and abs(car["y"][-1] - W) < 0.1
    assert car["speed"].min() > 5.0, "it slowed to a stop instead of going around"
    assert np.abs(car["heading"]).max() < 0.3, "the change was not gradual"
    assert st["lane_changes"][1] == 1
    assert 24 <= st["replans"][1] <= 26, "one plan per second (interval 1 s) over 25 s"
    spec_idm = [_car(STOPPED_X, 0.0), _car(100.0, 0.0, 8.0, idm=True)]
    idm = run_checked(_engine(m), spec_idm, 200)[:, 1]
    assert abs(idm["y"][-1]) < 0.05 and abs(idm["speed"][-1]) < 0.1


@pytest.mark.parametrize("handedness", [Handedness.RIGHT, Handedness.LEFT])
def test_planner_overtakes_on_the_side_of_its_traffic(handedness: Handedness) -> None:
    """In the middle of three lanes with both neighbours free, the planner vehicle overtakes on the
    left in right-hand traffic and on the right in left-hand traffic (the tie-break of equal scores)."""
    lanes = [{"centerline": [[0, k * W], [600, k * W]], "width": W, "speed_limit": 13.4,
              "left_neighbor": k + 1 if k < 2 else -1, "right_neighbor": k - 1} for k in range(3)]
    edges = [[[0, -0.5 * W], [600, -0.5 * W]], [[0, 2.5 * W], [600, 2.5 * W]]]
    m = build(from_dict({"name": "three", "handedness": handedness.name.lower(), "lanes": lanes, "road_edges": edges}))
    car = run_checked(_engine(m), [_car(STOPPED_X, W), _planner(100.0, W, 8.0)], 200)[:, 1]
    assert car["x"][-1] > STOPPED_X + 50.0
    want = 2 * W if handedness == Handedness.RIGHT else 0.0
    assert abs(car["y"][-1] - want) < 0.1


def test_planner_stops_behind_when_the_next_lane_is_occupied() -> None:
    """With a row of parked cars alongside in the next lane, every move over is vetoed: the planner
    vehicle stays in its lane and comes to rest behind the stopped vehicle."""
    m = _road()
    row = [_car(STOPPED_X - 40.0 + 7.0 * k, W) for k in range(10)]
    spec = [_car(STOPPED_X, 0.0)] + row + [_planner(100.0, 0.0, 8.0)]
    e = _engine(m)
    car = run_checked(e, spec, 200)[:, -1]
    assert np.abs(car["y"]).max() < 0.05 and abs(car["speed"][-1]) < 0.1
    assert 2.0 < STOPPED_X - 4.5 - car["x"][-1] + 4.5 < 12.0
    assert e.planner_state(0)["lane_changes"][-1] == 0


def test_planner_waits_for_a_neighbour_alongside_then_passes() -> None:
    """A vehicle driving beside the planner vehicle in the free lane keeps it in its lane until it is
    clear ahead; then the planner vehicle moves over and passes the stopped vehicle."""
    m = _road()
    spec = [_car(STOPPED_X, 0.0), _planner(110.0, 0.0, 8.0), _car(108.0, W, 8.0, idm=True)]
    traj = run_checked(_engine(m), spec, 300)
    car, nb = traj[:, 1], traj[:, 2]
    moved = np.nonzero(car["y"] > 0.3)[0]
    assert moved.size, "the planner vehicle never went around"
    t = moved[0]
    assert nb["x"][t] - car["x"][t] > 4.5, "it moved over while the neighbour was alongside"
    assert car["x"][-1] > STOPPED_X + 10.0


def test_planner_nudges_past_cones_at_the_edge_of_its_lane() -> None:
    """Cones along the right edge of the lane leave too little room in the lane; with half-lane
    offsets the planner vehicle drives over the line, keeps the offset past the cones, returns to
    its lane's centre and never stops or touches a cone."""
    m = _road()
    cones = [{"cls": 0, "x": STOPPED_X + 3.0 * k, "y": -1.2, "heading": 0.0, "length": 0.4, "width": 0.4,
              "height": 0.7, "controlled": False} for k in range(8)]
    e = _engine(m, planner_offsets=(-0.5, 0.0, 0.5))
    car = run_checked(e, cones + [_planner(100.0, 0.0, 8.0)], 250)[:, -1]
    # While its body is level with the cones (x 149.8 to 171.2) it keeps the margin (0.3 m) from them.
    beside = (car["x"] + 2.25 > STOPPED_X - 0.2) & (car["x"] - 2.25 < STOPPED_X + 21.2)
    assert beside.sum() > 10 and (car["y"][beside] - 0.95 - (-1.2 + 0.2)).min() > 0.3, "it passed too close"
    assert car["y"].max() > 1.5, "it did not nudge over"
    assert car["y"].max() < 0.5 * W + 0.3, "a nudge, not a lane change"
    assert car["speed"].min() > 4.0 and abs(car["y"][-1]) < 0.1
    assert e.planner_state(0)["lane_changes"][-1] == 0


@pytest.mark.parametrize("handedness", [Handedness.RIGHT, Handedness.LEFT])
def test_fifty_mixed_vehicles_run_a_town_without_collisions(handedness: Handedness) -> None:
    """50 background vehicles, about half planner-driven and half IDM, on a procedural town with
    parked rows, a crash chain, cone zones, debris and crossing and jaywalking pedestrians: over 1,000
    steps no vehicle touches anything, the planners replan once a second, change lane and keep moving."""
    m = build(procedural.grid_town(seed=12, lanes_per_direction=2, handedness=handedness))
    ru = RoadUsersConfig(idm_fraction=1.0, planner_fraction=0.5, parked=(2, 2), crash_chain=1, cone_taper=1,
                         lane_block=1, debris=2, worker_prob=0.5,
                         pedestrians=PedestrianConfig(crossing_rate=0.05, jaywalk_rate=0.02))
    cfg = EngineConfig(num_worlds=1, slots_per_world=1, max_agents_per_world=128, consequences=NONE,
                       init=InitConfig(num_agents=(50, 50), controlled=(False,) * 5, class_weights=(1, 0, 0, 0, 0)),
                       road_users=ru)
    e = core.Engine(cfg, maps=m)
    e.reset(seeds=np.array([3]))
    a = e.agents[0, : e.num_agents(0)]
    planner = e.planner_state(0)["planner"]
    rows = np.nonzero(planner)[0]
    vehicles = np.nonzero(a["role"] == 3)[0]
    assert vehicles.size == 50 and 15 <= planner.sum() <= 35 and (a["role"] == 1).sum() >= 8
    travelled = np.zeros(e.num_agents(0))
    for t in range(1000):
        e.step()
        a = e.agents[0, : e.num_agents(0)]
        hit = vehicles[a["collided"][vehicles] == 1]
        assert hit.size == 0, f"step {t}: vehicle {hit[0]} (planner: {bool(planner[hit[0]])}) collided"
        travelled += np.abs(a["speed"][: travelled.size]) * cfg.dt
    st = e.planner_state(0)
    assert e.pedestrian_stats[0].sum() > 0, "no pedestrian came"
    assert (st["replans"][rows] >= 100).all() and (st["replans"][rows] <= 101).all()
    assert st["lane_changes"].sum() > 0
    assert np.median(travelled[rows]) > 50.0 and np.median(travelled[vehicles[~planner[vehicles]]]) > 50.0


def test_planner_share_is_drawn_per_world_from_its_range() -> None:
    """A ``(min, max)`` planner share is drawn per world at reset (``episode_mix`` column 2) and
    decides which IDM vehicles are planners; a fixed share of 0 makes none."""
    cfg = load_config("quick", num_worlds=16, maps=["grid_town"], max_agents_per_world=48, **{
        "init.num_agents": [30, 30], "road_users.idm_fraction": 1.0, "road_users.planner_fraction": [0.2, 0.8]})
    e = core.Engine(cfg)
    e.reset(seeds=np.arange(16))
    share = e.episode_mix[:, 2]
    assert ((share >= 0.2) & (share <= 0.8)).all() and share.std() > 0.05
    got = []
    for w in range(16):
        idm = e.agents[w, : e.num_agents(w)]["role"] == 3
        got.append(e.planner_state(w)["planner"][idm].mean())
        assert not e.planner_state(w)["planner"][~idm].any()
    assert np.corrcoef(share, got)[0, 1] > 0.5
    off = core.Engine(load_config("quick", num_worlds=2, maps=["grid_town"], **{"road_users.idm_fraction": 1.0}))
    off.reset(seeds=np.arange(2))
    assert (off.episode_mix[:, 2] == 0).all() and not off.planner_state(0)["planner"].any()


def test_planner_settings_change_nothing_while_the_share_is_zero() -> None:
    """With ``planner_fraction`` 0 the other planner settings are not read on the step path: two
    engines differing only in them roll out identically."""
    def rollout(**planner) -> bytes:
        # the planner preset draws its share per world from [0, 0.5]: held at 0 here
        cfg = load_config("planner", num_worlds=2, maps=["grid_town"],
                          **{"road_users.idm_fraction": 0.7, "road_users.planner_fraction": 0.0, **planner})
        e = core.Engine(cfg)
        e.reset(seeds=np.array([4, 5]))
        assert not e.planner_state(0)["planner"].any() and not e.planner_state(1)["planner"].any()
        out = []
        for _ in range(40):
            e.step()
            out.append(np.ascontiguousarray(e.agents).tobytes() + e.observations.tobytes())
        return b"".join(out)
    assert rollout() == rollout(**{"road_users.planner_weights": [1.0, 0.0, 0.0, 9.0],
                                   "road_users.planner_offsets": [0.0, 0.5], "road_users.planner_interval": 0.3})


@pytest.mark.parametrize("field, value, match", [
    ("planner_fraction", 1.5, "planner_fraction"),
    ("planner_fraction", (0.6, 0.2), "planner_fraction"),
    ("planner_interval", 0.0, "planner_interval"),
    ("planner_horizon", 20.0, "planner_horizon"),
    ("planner_resolution", 0.05, "planner_horizon"),          # 4 s / 0.05 s = 80 steps > 60
    ("planner_offsets", (-1.0, 1.0), "planner_offsets"),      # no 0
    ("planner_offsets", (0.0, 0.5, 0.5), "planner_offsets"),
    ("planner_offsets", (-2.0, 0.0), r"planner_offsets\[0\]"),
    ("planner_speeds", (), "planner_speeds"),
    ("planner_speeds", (0.0,), "planner_speeds"),
    ("planner_speeds", tuple(0.1 * k for k in range(1, 10)), "planner_speeds"),
    ("planner_weights", (1.0, 1.0, 1.0), "planner_weights"),
    ("planner_weights", (1.0, -1.0, 1.0, 1.0), r"planner_weights\[1\] \(ttc\)"),
    ("planner_weights", (0.0, 0.0, 0.0, 0.0), "planner_weights"),
    ("planner_margin", -0.1, "planner_margin"),
    ("planner_lateral_time", 0.1, "planner_lateral_time"),
])
def test_bad_planner_settings_name_the_field(field: str, value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RoadUsersConfig(**{field: value})


def test_scene_planner_flag_needs_an_idm_vehicle() -> None:
    e = _engine(_road())
    with pytest.raises(ValueError, match=r"agents\[0\]\.planner"):
        e.set_scene(0, [_car(100.0, 0.0, 5.0, planner=True)], seed=0)
