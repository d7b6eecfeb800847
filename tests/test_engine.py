"""The engine against independent oracles: shapely for footprints, closed-form kinematics, hand-computed
observations, one reward term per constructed case, rejection-sampled spawns, determinism, and bad input."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import shapely
from conftest import straight_road
from shapely import STRtree, affinity
from shapely.geometry import LineString, Polygon, box

from terrazero_env import engine as core
from terrazero_env.config import (
    REWARD_PARAMS,
    AgentType,
    Consequence,
    EngineConfig,
    GoalBehavior,
    InitConfig,
    ObsConfig,
)
from terrazero_env.maps import Polylines, build, procedural

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE}


@pytest.fixture(scope="module")
def town():
    return build(procedural.grid_town(seed=0, rows=2, cols=2, lanes_per_direction=2))


@pytest.fixture(scope="module")
def road():
    """The straight road plus a short road-edge stub lying on lane 0's centerline at x in [150, 160]."""
    m = straight_road()
    edges = m.road_edges.rows() + [np.array([[150.0, -1.75, 0.0], [160.0, -1.75, 0.0]])]
    return build(m.replace(road_edges=Polylines(edges)))


def _zero_action(engine, cls):
    vals = engine.action_values(cls)
    return int(np.nonzero((vals == 0).all(axis=1))[0][0])


def _shapely_box(x, y, h, length, width):
    return affinity.translate(affinity.rotate(box(-length / 2, -width / 2, length / 2, width / 2), h,
                                              origin=(0, 0), use_radians=True), x, y)


def _boundary_geoms(m):
    geoms = [LineString(r[:, :2]) for r in m.road_edges.rows()]
    geoms += [Polygon(r[:, :2]) for r in m.sidewalks.rows()]
    return geoms


# ------------------------------------------------------------------------------------------- rules


def test_offroad_agrees_with_shapely(town):
    rm = core.RoadMap(town)
    rng = np.random.default_rng(0)
    xmin, ymin, xmax, ymax = town.bounds()
    n = 4000
    boxes = np.column_stack([rng.uniform(xmin, xmax, n), rng.uniform(ymin, ymax, n), rng.uniform(-np.pi, np.pi, n),
                             rng.uniform(0.5, 12, n), rng.uniform(0.4, 2.6, n)])
    got = core.footprint_offroad(rm, boxes)
    tree = STRtree(_boundary_geoms(town))
    polys = [_shapely_box(*b) for b in boxes]
    want = np.array([tree.query(p, predicate="intersects").size > 0 for p in polys])
    np.testing.assert_array_equal(got, want)
    assert 0.1 < got.mean() < 0.9


def test_offroad_ignores_geometry_on_another_level(road):
    rm = core.RoadMap(road)
    across_stub = np.array([[155.0, -1.75, 0.0, 4.5, 2.0]])
    assert core.footprint_offroad(rm, across_stub, z=0.0)[0]
    assert not core.footprint_offroad(rm, across_stub, z=6.0)[0]  # 6 m above: an overpass


@pytest.mark.slow
def test_sat_agrees_with_shapely_on_10000_random_box_pairs():
    rng = np.random.default_rng(5)
    n = 10_000
    a = np.column_stack([rng.uniform(-6, 6, (n, 2)), rng.uniform(-np.pi, np.pi, n), rng.uniform(0.5, 9, n),
                         rng.uniform(0.3, 3, n)])
    b = np.column_stack([rng.uniform(-6, 6, (n, 2)), rng.uniform(-np.pi, np.pi, n), rng.uniform(0.5, 9, n),
                         rng.uniform(0.3, 3, n)])
    got = core.obb_overlap_batch(a, b)
    want = shapely.intersects([_shapely_box(*r) for r in a], [_shapely_box(*r) for r in b])
    np.testing.assert_array_equal(got, want)


# ------------------------------------------------------------------------------------------- dynamics


def _engine_on(m, **over):
    cfg = EngineConfig(num_worlds=1, slots_per_world=4, max_agents_per_world=8, consequences=NONE,
                       init=InitConfig(num_agents=(1, 4), randomize_kinematics=False))
    return core.Engine(cfg.with_overrides(**over) if over else cfg, maps=m)


def _circle_radius(xy):
    """Least-squares circle through points (algebraic fit)."""
    x, y = xy[:, 0], xy[:, 1]
    A = np.column_stack([x, y, np.ones_like(x)])
    sol, *_ = np.linalg.lstsq(A, x**2 + y**2, rcond=None)
    cx, cy = sol[0] / 2, sol[1] / 2
    return np.sqrt(sol[2] + cx**2 + cy**2)


def test_bicycle_steady_turning_radius_matches_wheelbase_over_tan_delta(road):
    e = _engine_on(road)
    vals = e.action_values(AgentType.CYCLIST)
    k = int(np.nonzero((vals[:, 0] == 0) & (vals[:, 1] == 0.25))[0][0])
    e.set_scene(0, [{"cls": AgentType.CYCLIST, "x": 50, "y": -1.75, "heading": 0.0, "speed": 4.0, "length": 1.8,
                     "controlled": True, "kin": (1, 1, 1, 1)}])
    pts = []
    for _ in range(60):
        e.step(np.full(4, k, np.int32))
        s = e.agent_states(0)
        pts.append((s["x"][0], s["y"][0]))
    wheelbase = 1.8 * 0.6
    # The wheels reach 0.25 rad at the cyclist's steering rate (1 rad/s: 3 steps); from then on the
    # path is the circle.
    assert s["steer"][0] == pytest.approx(0.25)
    assert _circle_radius(np.array(pts[4:])) == pytest.approx(wheelbase / np.tan(0.25), rel=1e-6)
    assert s["speed"][0] == pytest.approx(4.0)


def test_rear_axle_turns_on_the_bicycle_circle_and_the_centre_rides_ahead_of_it(road):
    """``ClassSpec.rear_axle``: the rear axle (c = rear_axle * length behind the box centre) follows the
    circle of radius wheelbase / tan(delta); the box centre, c ahead of it along the heading, a circle
    of radius sqrt(R^2 + c^2) about the same point."""
    e = _engine_on(road, classes={"cyclist": {"rear_axle": 0.3}})
    vals = e.action_values(AgentType.CYCLIST)
    k = int(np.nonzero((vals[:, 0] == 0) & (vals[:, 1] == 0.25))[0][0])
    e.set_scene(0, [{"cls": AgentType.CYCLIST, "x": 50, "y": -1.75, "heading": 0.0, "speed": 4.0, "length": 1.8,
                     "controlled": True, "kin": (1, 1, 1, 1)}])
    centre, rear = [], []
    for _ in range(60):
        e.step(np.full(4, k, np.int32))
        s = e.agent_states(0)
        h = s["heading"][0]
        centre.append((s["x"][0], s["y"][0]))
        rear.append((s["x"][0] - 0.3 * 1.8 * np.cos(h), s["y"][0] - 0.3 * 1.8 * np.sin(h)))
    R = 1.8 * 0.6 / np.tan(0.25)
    assert _circle_radius(np.array(rear[4:])) == pytest.approx(R, rel=1e-6)
    assert _circle_radius(np.array(centre[4:])) == pytest.approx(np.hypot(R, 0.3 * 1.8), rel=1e-6)


def test_jerk_car_turns_at_curvature_a_lat_over_v_squared(road):
    e = _engine_on(road)
    vals = e.action_values(AgentType.CAR)
    k_turn = int(np.nonzero((vals[:, 0] == 0) & (vals[:, 1] == 4.0))[0][0])
    k_hold = _zero_action(e, AgentType.CAR)
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 50, "y": -1.75, "heading": 0.0, "speed": 8.0, "length": 4.5,
                     "kin": (1, 1, 1, 1)}])
    e.step(np.full(4, k_turn, np.int32))  # lateral jerk 4 m/s^3 for 0.1 s -> a_lat 0.4 m/s^2
    pts = []
    for _ in range(40):
        e.step(np.full(4, k_hold, np.int32))
        s = e.agent_states(0)
        pts.append((s["x"][0], s["y"][0]))
    assert s["a_lat"][0] == pytest.approx(0.4, rel=1e-9)
    assert _circle_radius(np.array(pts)) == pytest.approx(8.0**2 / 0.4, rel=1e-6)


def test_speed_and_acceleration_clips_scale_with_kinematic_coefficients(road):
    e = _engine_on(road)
    vals = e.action_values(AgentType.CAR)
    k_max = int(np.nonzero((vals[:, 0] == vals[:, 0].max()) & (vals[:, 1] == 0))[0][0])
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 0, "y": -1.75, "heading": 0.0, "speed": 0.0,
                     "kin": (1.0, 1.0, 0.5, 0.6)}])
    speeds, accels = [], []
    for _ in range(150):
        e.step(np.full(4, k_max, np.int32))
        s = e.agent_states(0)
        speeds.append(s["speed"][0])
        accels.append(s["a_long"][0])
    assert max(speeds) == pytest.approx(20.0 * 0.6)  # v_max = 20 * c_vel
    assert max(accels) <= 4.0 * 0.5 + 1e-9  # a_max * c_acc


def test_truck_slips_laterally_at_speed_but_not_when_slow(road):
    e = _engine_on(road)
    vals = e.action_values(AgentType.TRUCK)
    k = int(np.nonzero((vals[:, 0] == 0) & (vals[:, 1] == vals[:, 1].max()))[0][0])  # coast, steering left
    slips = {}
    for v0 in (1.0, 15.0):
        e.set_scene(0, [{"cls": AgentType.TRUCK, "x": 20, "y": -1.75, "heading": 0.0, "speed": v0, "length": 10.0,
                         "controlled": True, "kin": (1, 1, 1, 1)}])
        for _ in range(5):
            e.step(np.full(4, k, np.int32))
        slips[v0] = e.agent_states(0)["v_lat"][0]
    assert slips[1.0] == 0.0
    assert abs(slips[15.0]) > 0.05


# ------------------------------------------------------------------------------------------- observations


def test_ego_transform_is_a_rotation(road):
    e = _engine_on(road)
    rng = np.random.default_rng(1)
    L = e.obs_layout.groups["ego"].feature("rel_goal_pos")
    for _ in range(50):
        x, y, h = rng.uniform(20, 180), rng.uniform(-1.5, 1.5), rng.uniform(-np.pi, np.pi)
        gx, gy = x + rng.uniform(-60, 60), y + rng.uniform(-60, 60)
        e.set_scene(0, [{"cls": AgentType.CAR, "x": x, "y": y, "heading": h, "goal": (gx, gy)}])
        rel = e.observations[0, L] / 0.005
        assert np.linalg.norm(rel) == pytest.approx(np.hypot(gx - x, gy - y), rel=1e-5)
        # A goal straight ahead lands on +x, one to the left on +y.
        e.set_scene(0, [{"cls": AgentType.CAR, "x": x, "y": y, "heading": h, "goal": (x + 30 * np.cos(h), y + 30 * np.sin(h))}])
        np.testing.assert_allclose(e.observations[0, L] / 0.005, [30, 0], atol=1e-4)
        e.set_scene(0, [{"cls": AgentType.CAR, "x": x, "y": y, "heading": h, "goal": (x - 7 * np.sin(h), y + 7 * np.cos(h))}])
        np.testing.assert_allclose(e.observations[0, L] / 0.005, [0, 7], atol=1e-4)


def test_goal_and_speed_scales_are_configurable_and_the_goal_saturates(road):
    e = _engine_on(road, obs={"goal_scale": 0.1, "speed_scale": 0.2})
    g = e.obs_layout.groups["ego"]
    gl, sl = g.feature("rel_goal_pos"), g.feature("speed")
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 50.0, "y": -1.75, "heading": 0.0, "speed": 5.0, "goal": (62.0, 1.25)}])
    ego = e.observations[0, g.slice]
    np.testing.assert_allclose(ego[gl], [1.2, 0.3], rtol=1e-6)
    np.testing.assert_allclose(ego[sl], [1.0], rtol=1e-6)
    # A goal 1.5 km ahead would read 150: it saturates at the observation-space bound instead.
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 50.0, "y": -1.75, "heading": 0.0, "goal": (1550.0, -1.75)}])
    from terrazero_env.envs.vector import OBS_BOUND

    np.testing.assert_allclose(e.observations[0, g.slice][gl], [OBS_BOUND, 0.0])
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="ObsConfig.goal_scale"):
            ObsConfig(goal_scale=bad)
    with pytest.raises(ValueError, match="ObsConfig.speed_scale"):
        ObsConfig(speed_scale=0)


def test_hand_built_scene_observation_matches_hand_computed_values(road):
    e = _engine_on(road)
    rw = {k: 0.0 for k in REWARD_PARAMS}
    rw.update(collision=1.5, boundary=3.0, delta_goal=2.0, v_goal=3.0, gamma_col=0.1)
    e.set_scene(0, [
        {"cls": AgentType.CAR, "x": 50.0, "y": -1.75, "heading": 0.0, "speed": 5.0, "length": 4.5, "width": 1.8,
         "goal": (100.0, -1.75), "kin": (1.0, 1.0, 1.5, 0.5), "rw": rw},
        {"cls": AgentType.BUS, "x": 60.0, "y": 1.75, "heading": np.pi, "speed": 3.0, "length": 12.0, "width": 2.5,
         "controlled": False},
    ])
    lay = e.obs_layout
    row = e.observations[0]
    ego = row[lay.groups["ego"].slice]
    g = lay.groups["ego"]
    np.testing.assert_allclose(ego[g.feature("agent_type")], [1])
    np.testing.assert_allclose(ego[g.feature("rel_goal_pos")], [50 * 0.005, 0.0], atol=1e-7)
    np.testing.assert_allclose(ego[g.feature("goal_dropout_flag")], [0])
    np.testing.assert_allclose(ego[g.feature("speed")], [0.05], rtol=1e-6)
    np.testing.assert_allclose(ego[g.feature("vehicle_dims")], [1.8 / 15, 4.5 / 30], rtol=1e-6)
    np.testing.assert_allclose(ego[g.feature("collision_state")], [0])
    np.testing.assert_allclose(ego[g.feature("stop_sign_state")], [1, 0, 0])
    alpha = dict(zip(lay.alpha_names, ego[g.feature("alpha_params")]))
    assert len(alpha) == 19  # the planner's 19 of 23 parameters (appendix C)
    assert alpha["collision"] == pytest.approx(0.0)  # 1.5 in [0, 3]
    assert alpha["boundary"] == pytest.approx(1.0)  # 3.0 in [0, 3]
    assert alpha["goal"] == 0.0  # fixed parameters normalize to 0
    np.testing.assert_allclose(ego[g.feature("kinematic_params")], [0.0, 0.0, 1.0, -1.0], atol=1e-7)
    partners = lay.split(e.observations)["partners"][0]
    np.testing.assert_allclose(partners[0], [10 * 0.02, 3.5 * 0.02, 2.5 / 15, 12 / 30, -1.0, 0.0, 0.03, 1], atol=1e-6)
    assert not partners[1:].any()  # zero padding


def test_road_observation_is_local_essential_first_and_on_the_map(road):
    e = _engine_on(road)
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 100.0, "y": -1.75, "heading": 0.3}])
    roads = e.obs_layout.split(e.observations)["road"][0]
    live = roads[np.abs(roads).sum(axis=1) > 0]
    assert 0 < len(live) <= 200
    types = live[:, 6]
    assert (np.diff(types == 1) >= 0).all()  # lines never come before lanes/edges
    h = 0.3
    rel = live[:, :2] / 0.02
    world = np.column_stack([100 + rel[:, 0] * np.cos(h) - rel[:, 1] * np.sin(h),
                             -1.75 + rel[:, 0] * np.sin(h) + rel[:, 1] * np.cos(h)])
    assert (np.linalg.norm(rel, axis=1) <= 50 + 1e-3).all()
    geoms = shapely.union_all([LineString(r[:, :2]) for r in road.lanes.centerline.rows()] +
                              [LineString(r[:, :2]) for r in road.road_edges.rows()])
    # Chord midpoints of straight geometry lie on it.
    straight = np.abs(world[:, 0] - 100) < 45
    assert shapely.distance(geoms, shapely.points(world[straight])).max() < 1e-3
    np.testing.assert_allclose(np.hypot(live[:, 4], live[:, 5]), 1.0, atol=1e-6)  # (cos, sin)


def test_float16_observations_equal_float32_rounded(town):
    def run(dtype):
        cfg = EngineConfig(num_worlds=2, slots_per_world=8, max_agents_per_world=16,
                           init=InitConfig(num_agents=(6, 12)), obs=ObsConfig(dtype=dtype))
        e = core.Engine(cfg, maps=town)
        e.reset(seeds=[3, 4])
        rng = np.random.default_rng(0)
        for _ in range(5):
            e.step(np.where(e.agent_type >= 0, rng.integers(0, 12, 16), 0).astype(np.int32))
        return e.observations.copy()

    f32, f16 = run("float32"), run("float16")
    assert f16.dtype == np.float16
    np.testing.assert_array_equal(f16, f32.astype(np.float16))


# ------------------------------------------------------------------------------------------- rewards

TERM_WEIGHTS = [k for k in REWARD_PARAMS[:18] if k != "target_speed"]


def _case(e, name):
    car, ped, cyc = AgentType.CAR, AgentType.PEDESTRIAN, AgentType.CYCLIST
    far = (190.0, -1.75)
    return {
        "goal": [{"cls": car, "x": 60, "y": -1.75, "heading": 0, "goal": (60.5, -1.75)}],
        "collision": [{"cls": car, "x": 60, "y": -1.75, "heading": 0, "goal": far},
                      {"cls": car, "x": 63, "y": -1.75, "heading": 0, "controlled": False}],
        "boundary": [{"cls": car, "x": 155, "y": -1.75, "heading": 0, "goal": (20, 1.75)}],
        "comfort": [{"cls": car, "x": 60, "y": -1.75, "heading": 0, "speed": 10.0, "goal": far}],
        "lane_align": [{"cls": car, "x": 60, "y": -1.75, "heading": 0.3, "goal": far}],
        "lane_center": [{"cls": car, "x": 60, "y": -0.95, "heading": 0, "goal": far}],
        "velocity": [{"cls": car, "x": 60, "y": -1.75, "heading": 0, "speed": 10.0, "goal": far}],
        "vel_align": [{"cls": car, "x": 60, "y": -1.75, "heading": 0, "speed": 10.0, "goal": far}],
        "reverse": [{"cls": car, "x": 60, "y": -1.75, "heading": 0, "speed": -1.0, "goal": far}],
        "timestep": [{"cls": car, "x": 60, "y": -1.75, "heading": 0, "goal": far}],
        "road_incursion": [{"cls": ped, "x": 60, "y": -1.75, "heading": 0, "controlled": True, "goal": far}],
        "speed_limit": [{"cls": ped, "x": 60, "y": -12.0, "heading": 0, "speed": 2.5, "controlled": True,
                         "goal": (90, -12.0)}],
        "edge_preference": [{"cls": cyc, "x": 60, "y": -2.75, "heading": 0, "controlled": True, "goal": far}],
        "goal_progress": [{"cls": car, "x": 60, "y": -1.75, "heading": 0, "speed": 10.0, "goal": far}],
        "wrong_way": [{"cls": car, "x": 60, "y": -1.75, "heading": np.pi, "speed": 2.0, "goal": (20, -1.75)}],
    }[name]


#: Terms that fire in every case by construction: the survival bonus, and the distance to the target
#: speed (a stopped vehicle on a lane is |0 - v_limit| away from it).
ALWAYS = {"timestep", "vel_align"}
#: Terms that legitimately fire alongside another case's term (the case moves, or is misaligned).
MOVING = {"velocity", "goal_progress", "speed_limit"}  # speed_limit: faster than v_speed_lim
CO_FIRING = {
    "comfort": MOVING, "velocity": MOVING, "vel_align": MOVING, "goal_progress": MOVING,
    "reverse": MOVING, "speed_limit": MOVING, "wrong_way": MOVING | {"lane_align"},
    "edge_preference": {"lane_center"}, "lane_center": {"edge_preference"},
}


def _reward(e, name, term, weight=1.0):
    rw = {k: 0.0 for k in REWARD_PARAMS}
    rw.update(delta_goal=2.0, v_goal=3.0, v_speed_lim=1.5, gamma_col=0.0)
    rw[term] = weight
    agents = [dict(a) for a in _case(e, name)]
    agents[0]["rw"] = rw
    agents[0]["kin"] = (1, 1, 1, 1)
    e.set_scene(0, agents)
    cls = agents[0]["cls"]
    act = np.zeros(4, np.int32)
    act[0] = _zero_action(e, cls)
    if name == "comfort":  # hard braking: jerk -15 m/s^3 for one step
        vals = e.action_values(cls)
        act[0] = int(np.nonzero((vals[:, 0] == vals[:, 0].min()) & (vals[:, 1] == 0))[0][0])
    e.step(act)
    return float(e.rewards[0])


def test_each_reward_term_fires_on_its_case_and_no_other(road):
    e = _engine_on(road)
    dt = 0.1
    expected = {
        "goal": 1.0, "collision": -1.0, "boundary": -1.0, "comfort": -1.0, "lane_align": -0.3,
        "lane_center": -0.8, "velocity": dt * 10.0 / 20.0, "vel_align": -dt * abs(10.0 - 13.4) / 20.0,
        "reverse": -1.0, "timestep": 1.0, "road_incursion": -dt, "speed_limit": -dt * (2.5 - 1.5) / 3.0,
        "edge_preference": dt * 1.0 / 3.5, "goal_progress": 1.0, "wrong_way": -dt,
    }
    for case, want in expected.items():
        assert _reward(e, case, case) == pytest.approx(want, rel=1e-4, abs=1e-7), case
        for term in TERM_WEIGHTS:
            if term == case or term in ALWAYS or term in CO_FIRING.get(case, set()):
                continue
            assert _reward(e, case, term) == 0.0, f"{term} fired in the {case} case"


def test_collision_penalty_grows_with_speed(road):
    e = _engine_on(road)
    rw = {k: 0.0 for k in REWARD_PARAMS}
    rw.update(collision=1.0, gamma_col=0.1)
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 60, "y": -1.75, "heading": 0, "speed": 10.0, "rw": rw,
                     "kin": (1, 1, 1, 1)},
                    {"cls": AgentType.CAR, "x": 64, "y": -1.75, "heading": 0, "controlled": False}])
    e.step(np.full(4, _zero_action(e, AgentType.CAR), np.int32))
    assert float(e.rewards[0]) == pytest.approx(-(1.0 + 0.1 * 10.0), rel=1e-6)
    assert e.counters[0, 0] == 1


def test_null_reward_parameters_are_dropped_from_the_observation():
    cfg = EngineConfig()
    assert len(cfg.active_reward_params()) == 19
    mixed = cfg.with_overrides(init={"class_weights": (1.0, 0.0, 0.0, 1.0, 1.0)})
    assert len(mixed.active_reward_params()) == 23


# ------------------------------------------------------------------------------------------- scenes


def test_rejection_sampling_never_spawns_overlapping_or_offroad_agents(town):
    cfg = EngineConfig(num_worlds=1, slots_per_world=16, max_agents_per_world=40,
                       init=InitConfig(num_agents=(20, 40), class_weights=(4, 1, 1, 1, 1)))
    e = core.Engine(cfg, maps=town)
    tree = STRtree(_boundary_geoms(town))
    total = 0
    for seed in range(1000):
        e.reset(seeds=[seed])
        s = e.agent_states(0)
        polys = [_shapely_box(x, y, h, ln, w) for x, y, h, ln, w in
                 zip(s["x"], s["y"], s["heading"], s["length"], s["width"])]
        inter = shapely.intersects(np.array(polys)[:, None], np.array(polys)[None, :])
        np.fill_diagonal(inter, False)
        assert not inter.any(), f"seed {seed}: overlapping spawns"
        vehicles = s["cls"] != AgentType.PEDESTRIAN
        for p in np.array(polys)[vehicles]:
            assert tree.query(p, predicate="intersects").size == 0, f"seed {seed}: off-road spawn"
        total += len(polys)
    assert total > 1000 * 15


def test_controlled_agents_get_goals_ahead_and_some_are_hidden(town):
    cfg = EngineConfig(num_worlds=8, slots_per_world=16, max_agents_per_world=32)
    e = core.Engine(cfg, maps=town)
    e.reset(seeds=np.arange(8) + 100)
    hidden = 0
    n = 0
    for w in range(8):
        s = e.agent_states(w)
        c = s["role"] == 0
        ahead = (s["goal_x"] - s["x"]) * np.cos(s["heading"]) + (s["goal_y"] - s["y"]) * np.sin(s["heading"])
        assert (ahead[c] >= cfg.init.goal_min_forward - 1e-9).all()
        hidden += s["goal_hidden"][c].sum()
        n += c.sum()
    assert 0.1 < hidden / n < 0.5  # goal dropout 0.3 of vehicles


def test_log_initialization_places_agents_at_their_logged_state(town):
    from conftest import tiny_junction
    m = build(tiny_junction(tracks=True))
    cfg = EngineConfig(num_worlds=1, slots_per_world=4, max_agents_per_world=8,
                       init=InitConfig(mode=1, num_agents=(1, 8)))
    e = core.Engine(cfg, maps=m)
    e.reset()
    s = e.agent_states(0)
    assert len(s["x"]) == 1  # the second track is not valid at step 0
    assert s["x"][0] == pytest.approx(30.0) and s["heading"][0] == pytest.approx(np.pi)
    assert s["goal_x"][0] == pytest.approx(26.0)


# ------------------------------------------------------------------------------------------- episodes


def test_truncation_at_the_horizon_and_termination_on_removal(road):
    e = _engine_on(road, episode_length=5, consequences={"collision": Consequence.REMOVE,
                                                         "offroad": Consequence.NONE,
                                                         "wrong_way": Consequence.NONE})
    z = _zero_action(e, AgentType.CAR)
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 60, "y": -1.75, "heading": 0, "goal": (190, -1.75)},
                    {"cls": AgentType.CAR, "x": 20, "y": -1.75, "heading": 0, "goal": (190, -1.75)},
                    {"cls": AgentType.CAR, "x": 23, "y": -1.75, "heading": 0, "controlled": False}])
    e.step(np.full(4, z, np.int32))
    assert e.terminated[:2].tolist() == [False, True] and e.valid[:2].tolist() == [True, True]
    for _ in range(3):
        e.step(np.full(4, z, np.int32))
        assert e.valid[:2].tolist() == [True, False] and not e.truncated.any()
    e.step(np.full(4, z, np.int32))
    assert e.truncated[:2].tolist() == [True, False] and not e.terminated[0]


def test_halt_at_goal_terminates_the_slot(road):
    e = _engine_on(road, init=InitConfig(num_agents=(1, 4), goal_behavior=GoalBehavior.HALT))
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 60, "y": -1.75, "heading": 0, "goal": (60.5, -1.75)}])
    e.step(np.full(4, _zero_action(e, AgentType.CAR), np.int32))
    assert e.terminated[0] and e.counters[0, 3] == 1


def test_new_goal_on_arrival_keeps_the_agent_going(road):
    e = _engine_on(road)
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 60, "y": -1.75, "heading": 0, "goal": (60.5, -1.75)}])
    e.step(np.full(4, _zero_action(e, AgentType.CAR), np.int32))
    s = e.agent_states(0)
    assert not e.terminated[0] and e.counters[0, 3] == 1 and s["goal_x"][0] > 65


# ------------------------------------------------------------------------------------------- determinism


def _rollout(engine, seeds, steps=40, action_seed=7):
    engine.reset(seeds=seeds)
    rng = np.random.default_rng(action_seed)
    out = []
    K = engine.slots_per_world
    for _ in range(steps):
        acts = rng.integers(0, 12, K)  # the same action stream for every world
        engine.step(np.where(engine.agent_type >= 0, np.tile(acts, engine.num_worlds), 0).astype(np.int32))
        out.append((engine.observations.copy(), engine.rewards.copy(), engine.terminated.copy(), engine.valid.copy()))
    return out


def test_same_seed_gives_bit_identical_buffers_across_runs_and_batch_sizes(town):
    cfg1 = EngineConfig(num_worlds=1, slots_per_world=8, max_agents_per_world=20, init=InitConfig(num_agents=(10, 20)))
    a = _rollout(core.Engine(cfg1, maps=town), [42])
    b = _rollout(core.Engine(cfg1, maps=town), [42])
    c = _rollout(core.Engine(replace(cfg1, num_worlds=3), maps=town), [5, 42, 9])
    for (oa, ra, ta, va), (ob, rb, tb, vb), (oc, rc, tc, vc) in zip(a, b, c):
        assert oa.tobytes() == ob.tobytes() and ra.tobytes() == rb.tobytes()
        assert oa.tobytes() == oc[8:16].tobytes() and ra.tobytes() == rc[8:16].tobytes()
        assert (ta == tc[8:16]).all() and (va == vc[8:16]).all()
    assert not np.array_equal(c[-1][0][:8], c[-1][0][8:16])  # other seeds differ


def test_resetting_one_world_leaves_the_others_untouched(town):
    cfg = EngineConfig(num_worlds=2, slots_per_world=8, max_agents_per_world=20, init=InitConfig(num_agents=(10, 20)))
    e = core.Engine(cfg, maps=town)
    e.reset(seeds=[1, 2])
    before = e.observations[8:].copy(), e.agent_states(1)
    e.reset(world_ids=[0], seeds=[99])
    assert e.observations[8:].tobytes() == before[0].tobytes()
    np.testing.assert_array_equal(e.agent_states(1)["x"], before[1]["x"])


# ------------------------------------------------------------------------------------------- bad input


def test_bad_actions_are_rejected_before_anything_changes(town):
    cfg = EngineConfig(num_worlds=1, slots_per_world=8, max_agents_per_world=20, init=InitConfig(num_agents=(10, 20)))
    e = core.Engine(cfg, maps=town)
    e.reset(seeds=[0])
    state = e.agent_states(0)["x"].copy()
    obs = e.observations.copy()
    with pytest.raises(ValueError, match="actions must be integers"):
        e.step(np.full(8, np.nan))
    with pytest.raises(ValueError, match=r"actions must have shape \(8,\)"):
        e.step(np.zeros(7, np.int32))
    with pytest.raises(ValueError, match=r"action 12 out of range for slot 0 \(agent type 0 has actions 0\.\.11\)"):
        e.step(np.full(8, 12, np.int32))
    with pytest.raises(ValueError, match="action -1 out of range"):
        e.step(np.full(8, -1, np.int32))
    np.testing.assert_array_equal(e.agent_states(0)["x"], state)
    assert e.observations.tobytes() == obs.tobytes() and e.world_steps[0] == 0
    e.step(np.zeros(8, np.int32))  # still usable
    assert e.world_steps[0] == 1


def test_bad_reset_arguments_and_unknown_agent_types(town):
    e = core.Engine(EngineConfig(num_worlds=2, slots_per_world=4, max_agents_per_world=8,
                                    init=InitConfig(num_agents=(2, 8))), maps=town)
    with pytest.raises(ValueError, match=r"world_ids must lie in \[0, 2\)"):
        e.reset(world_ids=[2])
    with pytest.raises(ValueError, match="seeds must be 1 integers"):
        e.reset(world_ids=[0], seeds=[1, 2])
    with pytest.raises(ValueError, match="unknown agent type 9"):
        e.set_scene(0, [{"cls": 9, "x": 0, "y": 0, "heading": 0}])
    with pytest.raises(ValueError, match="unknown agent type"):
        e.num_actions(7)


@pytest.mark.parametrize("make,message", [
    (lambda: EngineConfig(num_worlds=0), r"EngineConfig.num_worlds: an integer in \[1, 65536\]"),
    (lambda: EngineConfig(slots_per_world=40, max_agents_per_world=32), "max_agents_per_world must be >= slots"),
    (lambda: ObsConfig(dtype="int8"), "ObsConfig.dtype"),
    (lambda: ObsConfig(partner_radius=-1.0), "ObsConfig.partner_radius"),
    (lambda: InitConfig(num_agents=(5, 2)), "InitConfig.num_agents"),
    (lambda: InitConfig(goal_dropout=(0.3, 0.3, 0.3, 0.0, 1.5)), "InitConfig.goal_dropout"),
    (lambda: EngineConfig(consequences={"speeding": Consequence.STOP}), "unknown violations"),
    (lambda: EngineConfig().with_overrides(rewards={**EngineConfig().rewards, "collision": ((3.0, 1.0), None, None)}),
     r"rewards\['collision'\]"),
    (lambda: EngineConfig().with_overrides(horizon=3), r"config: unknown keys \[.horizon.\]"),
])
def test_invalid_config_values_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_memory_per_world_is_under_a_megabyte(town):
    e = core.Engine(EngineConfig(num_worlds=4, slots_per_world=32, max_agents_per_world=64), maps=town)
    assert e.buffer_nbytes() < 1_000_000


def test_rollout_renders_agents_on_the_map(town, tmp_path):
    from matplotlib.image import imread

    from terrazero_env.render import render_world

    e = core.Engine(EngineConfig(num_worlds=1, slots_per_world=8, max_agents_per_world=16,
                                    init=InitConfig(num_agents=(12, 16))), maps=town)
    e.reset(seeds=[1])
    trails = []
    for _ in range(3):
        trails.append(e.agent_states(0))
        e.step(np.zeros(8, np.int32))
    render_world(e, 0, tmp_path / "a.png", trails=trails, zoom=40, dpi=60)
    img = imread(tmp_path / "a.png")
    # Controlled cars are drawn in the car colour (blue): some pixels must be strongly blue.
    blue = (img[..., 2] > 0.7) & (img[..., 0] < 0.35) & (img[..., 1] < 0.6)
    assert blue.sum() > 20


def test_video_frames_follow_the_requested_resolution(town):
    """``RolloutRecorder(dpi=...)`` (``terrazero eval --video-dpi``) sets the frame size: the map figure
    is 10 inches on its long side."""
    from terrazero_env.render import RolloutRecorder

    e = core.Engine(EngineConfig(num_worlds=1, slots_per_world=2, max_agents_per_world=4,
                                 init=InitConfig(num_agents=(2, 4))), maps=town)
    e.reset(seeds=[1])
    sizes = {d: RolloutRecorder(e, 0, dpi=d, zoom=30).capture().shape for d in (40, 80)}
    assert max(sizes[40][:2]) == 400 and max(sizes[80][:2]) == 800
    assert sizes[40][2] == sizes[80][2] == 3


def test_threads_do_not_change_the_rollout(town):
    cfg = EngineConfig(num_worlds=4, slots_per_world=8, max_agents_per_world=20, init=InitConfig(num_agents=(10, 20)))
    one = _rollout(core.Engine(cfg, maps=town), [1, 2, 3, 4], steps=20)
    two = _rollout(core.Engine(cfg, maps=town, num_threads=2), [1, 2, 3, 4], steps=20)
    for (oa, ra, _, _), (ob, rb, _, _) in zip(one, two):
        assert oa.tobytes() == ob.tobytes() and ra.tobytes() == rb.tobytes()


def test_observation_noise_is_clipped_gaussian_and_off_by_default(town):
    def first_obs(**obs):
        cfg = EngineConfig(num_worlds=1, slots_per_world=4, max_agents_per_world=8, init=InitConfig(num_agents=(4, 8)),
                           obs=ObsConfig(**obs))
        e = core.Engine(cfg, maps=town)
        e.reset(seeds=[11])
        return e.observations[e.valid].copy()

    clean, noisy = first_obs(), first_obs(noise_std=0.01, noise_clip=0.02)
    diff = noisy - clean
    written = clean != 0
    assert np.abs(diff).max() <= 0.02 + 1e-6
    assert 0.005 < np.abs(diff[written]).mean() < 0.02  # noise is there, at about the requested scale
    np.testing.assert_array_equal(first_obs(), clean)  # deterministic, and no noise by default


def test_slot_dropout_drops_entities_and_state_dropout_zeroes_ego_state(town):
    cfg = EngineConfig(num_worlds=1, slots_per_world=8, max_agents_per_world=24, init=InitConfig(num_agents=(20, 24)))
    full = core.Engine(cfg, maps=town)
    dropped = core.Engine(cfg.with_overrides(obs={"slot_dropout": 0.5, "state_dropout": 1.0}), maps=town)
    for e in (full, dropped):
        e.reset(seeds=[2])
    road_full = full.obs_layout.split(full.observations)["road"]
    road_drop = dropped.obs_layout.split(dropped.observations)["road"]
    n_full = (np.abs(road_full).sum(-1) > 0).sum()
    n_drop = (np.abs(road_drop).sum(-1) > 0).sum()
    assert 0.3 * n_full < n_drop < 0.8 * n_full
    g = dropped.obs_layout.groups["ego"]
    ego = dropped.observations[dropped.valid]
    assert (ego[:, g.feature("state_dropout_flag")] == 1).all() and not ego[:, g.feature("speed")].any()


def test_hybrid_initialization_draws_log_or_random_per_world():
    from conftest import tiny_junction

    m = build(tiny_junction(tracks=True))
    cfg = EngineConfig(num_worlds=40, slots_per_world=2, max_agents_per_world=8,
                       init=InitConfig(mode=2, p_random=0.5, num_agents=(3, 6)))
    e = core.Engine(cfg, maps=m)
    e.reset(seeds=np.arange(40))
    n = np.array([e.num_agents(w) for w in range(40)])
    logged = n == 1  # the log has one track valid at step 0; random worlds place 3-6 agents
    assert 8 < logged.sum() < 32
