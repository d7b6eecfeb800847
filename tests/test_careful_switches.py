"""The opt-in switches toward a careful driver: the table-8 velocity-alignment form, the
speed-limit term against the lane's posted limit, the optional ego features of appendix C (lateral
velocity, yaw rate, road curvature ahead) and the traffic-light entities of table 12. Each is checked
on a constructed case against a hand computation, and each is shown to leave the observation layout
alone while it is off."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from conftest import straight_road, tiny_junction

from terrazero_env import engine as core
from terrazero_env.config import (
    REWARD_PARAMS,
    AgentType,
    Consequence,
    EngineConfig,
    GoalProgressForm,
    InitConfig,
    ObsConfig,
    ProgressShaping,
    RewardForms,
    SpeedLimitSource,
    VelAlignForm,
)
from terrazero_env.config.io import config_from_dict, config_to_dict
from terrazero_env.maps import Handedness, Intersections, Lanes, MapData, Polylines, build

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE}
DT = 0.1
ROAD_LIMIT = 13.4  # the straight road's posted limit (m/s), the builder's default


def _engine(m, **over):
    cfg = EngineConfig(num_worlds=1, slots_per_world=4, max_agents_per_world=8, consequences=NONE,
                       init=InitConfig(num_agents=(1, 4), randomize_kinematics=False))
    return core.Engine(cfg.with_overrides(**over) if over else cfg, maps=m)


def _zero_action(e, cls=AgentType.CAR):
    vals = e.action_values(cls)
    return int(np.nonzero((vals == 0).all(axis=1))[0][0])


def _one_step_reward(e, agent, **weights):
    rw = {k: 0.0 for k in REWARD_PARAMS}
    rw.update(delta_goal=2.0, v_goal=3.0, gamma_col=0.0)
    rw.update(weights)
    e.set_scene(0, [dict(agent, rw=rw, kin=(1, 1, 1, 1))])
    act = np.full(4, _zero_action(e, agent["cls"]), np.int32)
    e.step(act)
    return float(e.rewards[0])


@pytest.fixture(scope="module")
def road():
    return build(straight_road())


# ------------------------------------------------------------------------------------------- rewards

CAR_10 = {"cls": AgentType.CAR, "x": 60.0, "y": -1.75, "heading": 0.0, "speed": 10.0, "goal": (190.0, -1.75)}


def test_velocity_alignment_table8_form_is_alpha_dt_dv_without_the_vmax_divisor(road):
    """A car at 10 m/s on a 13.4 m/s lane (v_max = 20 m/s, zero-jerk action keeps its speed):
    NORMALIZED pays -alpha dt |dv| / v_max, TABLE8 pays -alpha dt |dv|, 20 times more."""
    normalized = _one_step_reward(_engine(road), CAR_10, vel_align=0.5)
    table8 = _one_step_reward(_engine(road, reward_forms={"vel_align": VelAlignForm.TABLE8}), CAR_10, vel_align=0.5)
    assert normalized == pytest.approx(-0.5 * DT * (ROAD_LIMIT - 10.0) / 20.0, rel=1e-5)
    assert table8 == pytest.approx(-0.5 * DT * (ROAD_LIMIT - 10.0), rel=1e-5)


def test_velocity_alignment_table8_form_uses_a_positive_target_speed_over_the_lane_limit(road):
    e = _engine(road, reward_forms={"vel_align": "table8"})
    assert _one_step_reward(e, CAR_10, vel_align=1.0, target_speed=6.0) == pytest.approx(-DT * 4.0, rel=1e-5)


def test_speed_limit_term_uses_the_lanes_posted_limit_only_when_switched_on(road):
    """A car at 16 m/s on the 13.4 m/s lane with v_speed_lim = 1.5: the sampled cap charges the whole
    14.5 m/s excess, the lane's cap only the 2.6 m/s over the posted limit."""
    car = dict(CAR_10, speed=16.0)
    sampled = _one_step_reward(_engine(road), car, speed_limit=1.0, v_speed_lim=1.5)
    lane = _one_step_reward(_engine(road, reward_forms={"speed_limit": SpeedLimitSource.LANE}), car,
                            speed_limit=1.0, v_speed_lim=1.5)
    assert sampled == pytest.approx(-DT * (16.0 - 1.5) / 20.0, rel=1e-5)
    assert lane == pytest.approx(-DT * (16.0 - ROAD_LIMIT) / 20.0, rel=1e-5)
    below = _one_step_reward(_engine(road, reward_forms={"speed_limit": "lane"}), dict(CAR_10, speed=12.0),
                             speed_limit=1.0, v_speed_lim=1.5)
    assert below == 0.0


def test_speed_limit_lane_source_falls_back_to_the_sampled_cap_off_every_lane(road):
    """A pedestrian 10 m from every lane centre has no lane: both sources use v_speed_lim."""
    ped = {"cls": AgentType.PEDESTRIAN, "x": 60.0, "y": -12.0, "heading": 0.0, "speed": 2.5, "controlled": True,
           "goal": (90.0, -12.0)}
    over = {"init": {"num_agents": (1, 4), "randomize_kinematics": False, "controlled": (True,) * 5}}
    a = _one_step_reward(_engine(road, **over), ped, speed_limit=1.0, v_speed_lim=1.5)
    b = _one_step_reward(_engine(road, reward_forms={"speed_limit": "lane"}, **over), ped, speed_limit=1.0,
                         v_speed_lim=1.5)
    assert a == b == pytest.approx(-DT * (2.5 - 1.5) / 3.0, rel=1e-5)


# ---------------------------------------------------------------------------------- ego features

EXTRA = {"lateral_velocity": True, "yaw_rate": True, "road_curvature": True, "topology_goal_distance": True}


def _arc_map(radius: float, left: bool) -> MapData:
    """One lane along a circle of ``radius`` around the origin: counter-clockwise (a left turn) from
    angle -90 deg to 180 deg, or the mirror image (a right turn)."""
    ang = np.linspace(-np.pi / 2, np.pi, 271)
    pts = radius * np.stack([np.cos(ang), np.sin(ang)], axis=1)
    if not left:
        pts[:, 1] = -pts[:, 1]
    lanes = Lanes.create([pts], width=3.5, successors=[[]])
    return build(MapData(lanes=lanes, road_edges=Polylines([]), intersections=Intersections.create([]),
                         handedness=Handedness.RIGHT, name="arc"))


def _heading_at(pts: np.ndarray, s: float) -> float:
    """Direction of the polyline segment holding arc length ``s`` (a point on a vertex belongs to the
    segment it starts), as the engine reads a lane's heading."""
    seg = np.diff(pts[:, :2], axis=0)
    starts = np.concatenate([[0.0], np.cumsum(np.hypot(seg[:, 0], seg[:, 1]))])[:-1]
    k = min(int(np.searchsorted(starts, s, side="right")) - 1, len(seg) - 1)
    return float(np.arctan2(seg[k, 1], seg[k, 0]))


def test_optional_ego_features_grow_the_ego_vector_only_when_on(road):
    base = _engine(road)
    on = _engine(road, obs=EXTRA)
    lane = _engine(road, obs={"lane_state": True, **EXTRA})
    assert on.obs_dim == base.obs_dim + 4
    assert lane.obs_dim == base.obs_dim + 6
    names = [n for n, _, _ in on.obs_layout.groups["ego"].features]
    assert names[-4:] == ["lateral_velocity", "yaw_rate", "road_curvature", "topology_goal_distance"]
    assert "lateral_velocity" not in [n for n, _, _ in base.obs_layout.groups["ego"].features]


def test_lateral_velocity_is_the_velocity_across_the_lane(road):
    """8 m/s at 0.2 rad to the lane, 0.5 m left of its centre: 8 sin(0.2) m/s toward the lane's
    left, read / 5."""
    e = _engine(road, obs=EXTRA)
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 60.0, "y": -1.25, "heading": 0.2, "speed": 8.0,
                     "goal": (190.0, -1.75)}])
    ego = e.obs_layout.groups["ego"]
    row = e.observations[0]
    assert row[ego.feature("lateral_velocity")][0] == pytest.approx(8.0 * np.sin(0.2) / 5.0, rel=1e-5)
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 60.0, "y": -1.75, "heading": -0.2, "speed": 8.0,
                     "goal": (190.0, -1.75)}])
    assert e.observations[0][ego.feature("lateral_velocity")][0] == pytest.approx(-8.0 * np.sin(0.2) / 5.0, rel=1e-5)


def test_yaw_rate_feature_reads_the_agents_yaw_rate(road):
    """After a step of lateral jerk the car turns; the feature is its yaw rate (rad/s) / 1."""
    e = _engine(road, obs=EXTRA)
    e.set_scene(0, [dict(CAR_10, kin=(1, 1, 1, 1))])
    vals = e.action_values(AgentType.CAR)
    left = int(np.nonzero((vals[:, 0] == 0) & (vals[:, 1] > 0))[0][0])
    act = np.full(4, _zero_action(e), np.int32)
    act[0] = left
    for _ in range(3):
        e.step(act)
    yaw = e.agent_states(0)["yaw_rate"][0]
    assert yaw > 0.01
    feat = e.observations[0][e.obs_layout.groups["ego"].feature("yaw_rate")][0]
    assert feat == pytest.approx(yaw, rel=1e-5)


@pytest.mark.parametrize("left", [True, False])
def test_road_curvature_ahead_is_one_over_the_radius_with_the_turn_sign(left):
    radius = 20.0
    m = _arc_map(radius, left)
    e = _engine(m, obs=EXTRA)
    sign = 1.0 if left else -1.0
    # On the circle at angle 0, driving along the lane.
    e.set_scene(0, [{"cls": AgentType.CAR, "x": radius, "y": 0.0, "heading": sign * np.pi / 2, "speed": 5.0,
                     "goal": (0.0, sign * radius)}])
    feat = e.observations[0][e.obs_layout.groups["ego"].feature("road_curvature")][0]
    # The lane is a polyline of 1-degree chords: the heading it holds changes in 1-degree steps.
    pts = m.lanes.centerline.row(0)
    s0 = radius * np.pi / 2
    exact = (_heading_at(pts, s0 + 10.0) - _heading_at(pts, s0)) / 10.0 / 0.1
    assert feat == pytest.approx(exact, rel=1e-4)
    assert feat == pytest.approx(sign * (1.0 / radius) / 0.1, abs=np.radians(1.0) / 10.0 / 0.1)


def test_road_curvature_is_zero_on_a_straight_lane_and_follows_a_single_successor(road):
    """Lane 0 of the straight road ends at x = 200 in a U-turn of radius 1.75 m (its only successor).
    5 m before the end with a 10 m lookahead, the heading change is that of the U-turn's first 5 m."""
    e = _engine(road, obs=EXTRA)
    e.set_scene(0, [dict(CAR_10, x=60.0)])
    sl = e.obs_layout.groups["ego"].feature("road_curvature")
    assert e.observations[0][sl][0] == 0.0
    e.set_scene(0, [dict(CAR_10, x=195.0, goal=(20.0, 1.75))])
    want = _heading_at(road.lanes.centerline.row(2), 5.0) / 10.0 / 0.1
    assert e.observations[0][sl][0] == pytest.approx(want, rel=1e-4)


def test_optional_ego_features_are_zero_off_every_lane(road):
    e = _engine(road, obs=EXTRA)
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 60.0, "y": -20.0, "heading": 0.3, "speed": 5.0,
                     "goal": (190.0, -1.75)}])
    ego = e.obs_layout.groups["ego"]
    assert e.agent_states(0)["lane"][0] == -1
    assert e.observations[0][ego.feature("lateral_velocity")][0] == 0.0
    assert e.observations[0][ego.feature("road_curvature")][0] == 0.0


# ------------------------------------------------------------------------------------ traffic lights


def test_traffic_lights_add_slots_only_when_on():
    m = build(tiny_junction())
    off = _engine(m)
    on = _engine(m, obs={"traffic_lights": True, "max_traffic_lights": 5})
    assert on.obs_dim == off.obs_dim + 5 * 12
    assert on.obs_layout.groups["traffic"].count == off.obs_layout.groups["traffic"].count + 5


def test_traffic_light_entities_carry_head_position_state_and_stop_line():
    """A car on incoming lane 0 of the junction (driving west at y = 1.75): the traffic group holds
    the stop lines first (type 0), then every signal head in range (type 1), nearest first, each with
    its own state and its stop line's endpoints, in the ego frame."""
    m = build(tiny_junction())
    e = _engine(m, obs={"traffic_lights": True, "max_traffic_lights": 8})
    x, y, h = 25.0, 1.75, np.pi
    e.set_scene(0, [{"cls": AgentType.CAR, "x": x, "y": y, "heading": h, "speed": 3.0, "goal": (-20.0, -1.75)}])
    tr = e.obs_layout.split(e.observations)["traffic"][0]
    kinds = tr[:, 0]
    n_sl = len(m.stop_lines)
    assert (kinds[:n_sl] == 0).all()
    heads = np.asarray(m.signals.position, float)
    assert (kinds[n_sl:n_sl + len(heads)] == 1).all()
    assert not tr[n_sl + len(heads):].any()
    c, s = np.cos(h), np.sin(h)

    def ego(px, py):
        dx, dy = px - x, py - y
        return np.array([dx * c + dy * s, -dx * s + dy * c]) * 0.02

    order = np.argsort(np.hypot(heads[:, 0] - x, heads[:, 1] - y), kind="stable")
    states = e.signal_states(0)
    sl_pts = np.asarray(m.stop_lines.points, float).reshape(-1, 2, 3)
    for j, g in enumerate(order):
        row = tr[n_sl + j]
        np.testing.assert_allclose(row[1:3], ego(*heads[g, :2]), rtol=1e-5, atol=1e-6)
        p = sl_pts[m.signals.stop_line[g]]
        np.testing.assert_allclose(row[8:10], ego(*p[0, :2]), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(row[10:12], ego(*p[1, :2]), rtol=1e-5, atol=1e-6)
        assert row[4:8].sum() == 1.0 and row[4 + min(int(states[g]), 3)] == 1.0
        assert row[3] == pytest.approx((heads[g, 2] - 0.0) * 0.1, abs=1e-6)


def test_traffic_light_state_follows_a_scripted_stop_line():
    """Scripting stop line 0 red, then green, shows in its heads' one-hot (red, yellow, green, off)."""
    m = build(tiny_junction())
    e = _engine(m, obs={"traffic_lights": True, "max_traffic_lights": 8})
    e.set_scene(0, [{"cls": AgentType.CAR, "x": 25.0, "y": 1.75, "heading": np.pi, "speed": 0.0,
                     "goal": (-20.0, -1.75)}])
    n_sl = len(m.stop_lines)
    heads_of_0 = set(np.nonzero(np.asarray(m.signals.stop_line) == 0)[0].tolist())
    heads = np.asarray(m.signals.position, float)
    order = np.argsort(np.hypot(heads[:, 0] - 25.0, heads[:, 1] - 1.75), kind="stable")
    for state in (0, 2):
        e.set_stop_line_state(0, 0, state, 30.0)
        e.step(np.full(4, _zero_action(e), np.int32))
        tr = e.obs_layout.split(e.observations)["traffic"][0]
        for j, g in enumerate(order):
            if g in heads_of_0:
                assert tr[n_sl + j, 4 + state] == 1.0 and tr[n_sl + j, 4:8].sum() == 1.0


# --------------------------------------------------------------------------------- config and APIs


def test_switches_default_off_and_round_trip_through_the_config_dict():
    cfg = EngineConfig()
    assert cfg.reward_forms == RewardForms(VelAlignForm.NORMALIZED, SpeedLimitSource.SAMPLED,
                                           GoalProgressForm.EUCLIDEAN)
    assert not (cfg.obs.lateral_velocity or cfg.obs.yaw_rate or cfg.obs.road_curvature or cfg.obs.traffic_lights
                or cfg.obs.stop_line_ahead)
    on = config_from_dict({"reward_forms": {"vel_align": "table8", "speed_limit": "lane", "goal_progress": "route",
                                            "route_max_distance": 150.0},
                           "obs": {"road_curvature": True, "traffic_lights": True}})
    assert on.reward_forms == RewardForms(VelAlignForm.TABLE8, SpeedLimitSource.LANE, GoalProgressForm.ROUTE, 150.0)
    assert config_from_dict(config_to_dict(on)) == on


@pytest.mark.parametrize("data, where", [
    ({"reward_forms": {"vel_align": "gigaflow"}}, "reward_forms.vel_align"),
    ({"reward_forms": {"speed_limit": 3}}, "reward_forms.speed_limit"),
    ({"reward_forms": {"alpha": 1}}, "reward_forms"),
    ({"reward_forms": {"goal_progress": "manhattan"}}, "reward_forms.goal_progress"),
    ({"reward_forms": {"route_max_distance": 0.0}}, "RewardForms.route_max_distance"),
    ({"obs": {"curvature_lookahead": -1.0}}, "ObsConfig.curvature_lookahead"),
    ({"obs": {"max_traffic_lights": -2}}, "ObsConfig.max_traffic_lights"),
    ({"obs": {"yaw_rate": "yes"}}, "ObsConfig.yaw_rate"),
    ({"obs": {"stop_line_ahead": 1}}, "ObsConfig.stop_line_ahead"),
])
def test_bad_switch_values_name_the_field(data, where):
    with pytest.raises(ValueError, match=where.replace(".", r"\.")):
        config_from_dict(data)


def test_reward_forms_rejects_a_bad_value_by_name():
    with pytest.raises(ValueError, match=r"RewardForms\.vel_align"):
        RewardForms(vel_align=7)
    with pytest.raises(ValueError, match=r"EngineConfig\.reward_forms"):
        EngineConfig(reward_forms={"vel_align": 1})


def test_gymnasium_check_env_passes_with_every_switch_on():
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    env = gym.make("TerraZero/Drive-v0", preset="quick",
                   reward_forms={"vel_align": "table8", "speed_limit": "lane", "goal_progress": "route"},
                   consequences={"red_light": "remove"},
                   obs={"goal_scale": 0.1, "speed_scale": 0.1, "lane_state": True, "traffic_lights": True,
                        "stop_line_ahead": True, **EXTRA})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)
    # The quick preset turns the ego features on itself: the base turns them off again.
    base = gym.make("TerraZero/Drive-v0", preset="quick",
                    obs={"lane_state": False, "stop_line_ahead": False, **{k: False for k in EXTRA}})
    assert env.observation_space.shape[0] == base.observation_space.shape[0] + 6 + 5 + 8 * 12
    assert ObsConfig().max_traffic_lights == 8


# ------------------------------------------------------------------------------ topology distance


def _reference_route_length(rm, lane0: int, s0: float, goal: int, gs: float) -> float:
    """Slow reference: Dijkstra over (lane, arc where it was entered) states. Driving along a lane
    costs the arc length covered; at any arc one may change to an adjacent same-direction lane (same
    arc, free) or, at the lane's end, enter a successor at arc 0. inf when unreachable."""
    import heapq

    m = rm.map_data
    length = {i: float(np.sum(np.hypot(*np.diff(m.lanes.centerline.row(i)[:, :2], axis=0).T)))
              for i in range(len(m.lanes))}
    left, right = rm.lane_neighbors
    best = np.inf
    heap = [(0.0, lane0, s0)]
    seen = set()
    while heap:
        cost, lane, entry = heapq.heappop(heap)
        if cost >= best:
            break
        if (lane, entry) in seen:
            continue
        seen.add((lane, entry))
        if lane == goal and gs >= entry:
            best = min(best, cost + gs - entry)
        for nb in (left[lane], right[lane]):
            if nb >= 0:
                heapq.heappush(heap, (cost, int(nb), entry))
        for nxt in m.lanes.successors.row(lane):
            heapq.heappush(heap, (cost + length[lane] - entry, int(nxt), 0.0))
    return best


def test_topology_goal_distance_matches_a_slow_reference_on_a_town():
    """Random placements on a two-lanes-per-direction town: the feature is the reference's
    shortest route (successors and lane changes) to the goal's nearest lane point, x goal_scale."""
    from terrazero_env.maps import procedural

    town = build(procedural.grid_town(seed=0, rows=2, cols=2, lanes_per_direction=2))
    cfg = EngineConfig(num_worlds=1, slots_per_world=8, max_agents_per_world=8, consequences=NONE,
                       init=InitConfig(num_agents=(8, 8), goal_dropout=(0.0,) * 5, goal_distance=(10.0, 150.0)),
                       obs=ObsConfig(topology_goal_distance=True, goal_scale=0.01, topology_max_distance=400.0))
    e = core.Engine(cfg, maps=town)
    rm = e.road_maps[0]
    col = e.obs_layout.groups["ego"].feature("topology_goal_distance")
    checked = 0
    for seed in range(12):
        e.reset(seeds=[seed])
        st = e.agent_states(0)
        for k in range(8):
            i = int(np.nonzero(st["slot"] == k)[0][0]) if (st["slot"] == k).any() else -1
            if i < 0 or st["lane"][i] < 0:
                continue
            here = rm.project_to_lanes(np.array([[st["x"][i], st["y"][i]]]), 8.0)
            there = rm.project_to_lanes(np.array([[st["goal_x"][i], st["goal_y"][i]]]), 8.0)
            assert here["row"][0] == st["lane"][i]
            want = _reference_route_length(rm, int(here["row"][0]), float(here["s"][0]), int(there["row"][0]),
                                           float(there["s"][0]))
            want = min(want, 400.0)
            got = float(e.observations[k][col][0]) / 0.01
            assert got == pytest.approx(want, rel=1e-4, abs=1e-3), (seed, k)
            checked += 1
    assert checked >= 60


def test_topology_goal_distance_on_the_straight_road_and_its_cap(road):
    """Goal 130 m ahead on the same lane reads 130 m; a goal on the opposite lane needs the U-turn at
    the far end, beyond a 200 m cap (reads the cap) but inside a 400 m one; a hidden goal reads 0."""
    e = _engine(road, obs={"topology_goal_distance": True, "goal_scale": 0.01})
    col = e.obs_layout.groups["ego"].feature("topology_goal_distance")
    e.set_scene(0, [dict(CAR_10, goal=(190.0, -1.75))])
    assert e.observations[0][col][0] == pytest.approx(1.30, rel=1e-5)
    e.set_scene(0, [dict(CAR_10, goal=(20.0, 1.75))])
    assert e.observations[0][col][0] == pytest.approx(2.00, rel=1e-6)
    e.set_scene(0, [dict(CAR_10, goal=(20.0, 1.75), goal_hidden=True)])
    assert e.observations[0][col][0] == 0.0
    far = _engine(road, obs={"topology_goal_distance": True, "goal_scale": 0.01, "topology_max_distance": 400.0})
    far.set_scene(0, [dict(CAR_10, goal=(20.0, 1.75))])
    turn = float(np.sum(np.hypot(*np.diff(road.lanes.centerline.row(2)[:, :2], axis=0).T)))
    assert far.observations[0][col][0] == pytest.approx((140.0 + turn + 180.0) * 0.01, rel=1e-5)


# ------------------------------------------------------------------ goal progress along the lane graph

def _progress_rewards(e, agent, steps):
    """Rewards of ``steps`` zero-jerk steps with only the goal-progress term on (weight 1 per metre)."""
    rw = {k: 0.0 for k in REWARD_PARAMS}
    rw.update(delta_goal=2.0, v_goal=3.0, gamma_col=0.0, goal_progress=1.0)
    e.set_scene(0, [dict(agent, rw=rw, kin=(1, 1, 1, 1))])
    act = np.full(4, _zero_action(e, agent["cls"]), np.int32)
    out = []
    for _ in range(steps):
        e.step(act)
        out.append(float(e.rewards[0]))
    return np.array(out)


def test_route_progress_pays_the_metres_driven_along_the_lane_toward_the_goal(road):
    """On a straight lane toward a goal ahead, both forms pay the 1 m a 10 m/s car drives per step."""
    euclid = _progress_rewards(_engine(road), CAR_10, 5)
    route = _progress_rewards(_engine(road, reward_forms={"goal_progress": "route"}), CAR_10, 5)
    np.testing.assert_allclose(euclid, 1.0, rtol=1e-4)
    np.testing.assert_allclose(route, 1.0, rtol=1e-4)


def test_route_progress_pays_nothing_for_closing_in_against_the_lane(road):
    """A car on the eastbound lane driving west toward a goal 50 m west of it on that lane: the
    straight-line form pays 1 m per step, the route form nothing (driving forward along the lanes,
    the goal lies beyond both U-turns, out of the search's 200 m)."""
    against = {"cls": AgentType.CAR, "x": 150.0, "y": -1.75, "heading": np.pi, "speed": 10.0, "goal": (100.0, -1.75)}
    euclid = _progress_rewards(_engine(road), against, 4)
    route = _progress_rewards(_engine(road, reward_forms={"goal_progress": "route"}), against, 4)
    np.testing.assert_allclose(euclid, 1.0, rtol=1e-4)
    assert np.all(route == 0.0)


def test_route_progress_caps_a_jump_of_the_route_distance_at_one_step_at_top_speed(road):
    """A car starting on the westbound lane's centreline and heading east crosses to the eastbound
    lane, where its goal lies 90 m ahead. While it is nearest the westbound lane the route to that goal
    runs through the U-turn behind it (about 215 m); the switch shortens it by some 125 m, and that
    step pays no more than one step at the car's top speed (20 m/s x 0.1 s = 2 m)."""
    e = _engine(road, reward_forms={"goal_progress": "route", "route_max_distance": 500.0})
    rw = {k: 0.0 for k in REWARD_PARAMS}
    rw.update(delta_goal=2.0, v_goal=3.0, gamma_col=0.0, goal_progress=1.0)
    car = {"cls": AgentType.CAR, "x": 60.0, "y": 1.75, "heading": -0.35, "speed": 10.0, "goal": (150.0, -1.75),
           "rw": rw, "kin": (1, 1, 1, 1)}
    e.set_scene(0, [car])
    act = np.full(4, _zero_action(e), np.int32)
    rewards = []
    for _ in range(6):
        e.step(act)
        rewards.append(float(e.rewards[0]))
    rewards = np.array(rewards)
    assert np.all(np.abs(rewards) <= 2.0 + 1e-6)
    assert np.isclose(rewards, 2.0, rtol=1e-6).any()


def test_route_progress_config_reaches_the_engine_and_stays_off_by_default(road):
    assert _engine(road).config.reward_forms.goal_progress == GoalProgressForm.EUCLIDEAN
    e = _engine(road, reward_forms={"goal_progress": GoalProgressForm.ROUTE, "route_max_distance": 120.0})
    assert e.config.reward_forms.route_max_distance == 120.0


def _goal_distance(e):
    a = e.agents[0, 0]
    return float(np.hypot(a["goal_x"] - a["x"], a["goal_y"] - a["y"]))


@pytest.mark.parametrize("form", ["euclidean", "route"])
def test_potential_progress_pays_the_previous_distance_minus_gamma_times_the_new(road, form):
    """A 10 m/s car 130 m behind its goal on a straight lane drives 1 m per step: POTENTIAL pays
    ``d_prev - gamma * d`` (here 131 - t - 0.9 * (130 - t)), DIFFERENCE the 1 m alone."""
    pot = _progress_rewards(_engine(road, reward_forms={"goal_progress": form, "goal_progress_shaping": "potential",
                                                        "goal_progress_gamma": 0.9}), CAR_10, 5)
    t = np.arange(1, 6)
    np.testing.assert_allclose(pot, (131.0 - t) - 0.9 * (130.0 - t), rtol=1e-4)
    diff = _progress_rewards(_engine(road, reward_forms={"goal_progress": form}), CAR_10, 5)
    np.testing.assert_allclose(diff, 1.0, rtol=1e-4)


def test_potential_progress_telescopes_over_goal_changes(road):
    """Over a run that reaches several goals (a goal counts as reached within 2 m at any speed, and the
    next is drawn along the lanes), the discounted sum of the POTENTIAL rewards is the first distance
    minus gamma^T times the last: each new goal's distance is charged back on the step that draws it.
    DIFFERENCE pays every goal's metres afresh, without the charge, so its sum is larger."""
    gamma, steps = 0.95, 60
    rw = {k: 0.0 for k in REWARD_PARAMS}
    rw.update(delta_goal=2.0, v_goal=50.0, gamma_col=0.0, goal_progress=1.0)
    car = dict(CAR_10, goal=(75.0, -1.75), rw=rw, kin=(1, 1, 1, 1))
    sums = {}
    for shaping in ("potential", "difference"):
        e = _engine(road, reward_forms={"goal_progress_shaping": shaping, "goal_progress_gamma": gamma},
                    init={"goal_distance": (8.0, 12.0), "num_agents": (1, 1), "randomize_kinematics": False})
        e.set_scene(0, [car], seed=3)
        d0 = _goal_distance(e)
        act = np.full(4, _zero_action(e), np.int32)
        total, goals = 0.0, 0
        for t in range(steps):
            e.step(act)
            assert e.valid[0] and not e.terminated[0]
            total += gamma ** t * float(e.rewards[0])
            goals += int(e.agents[0, 0]["goal_reached"])
        sums[shaping] = (total, goals)
        if shaping == "potential":
            assert goals >= 2
            assert total == pytest.approx(d0 - gamma ** steps * _goal_distance(e), abs=1e-3)
    assert sums["difference"][1] == sums["potential"][1]
    assert sums["difference"][0] > sums["potential"][0] + 2.0


def test_potential_progress_config_round_trips_and_rejects_bad_values(road):
    cfg = EngineConfig(reward_forms=RewardForms(goal_progress_shaping="potential", goal_progress_gamma=0.97))
    assert config_from_dict(config_to_dict(cfg)).reward_forms == cfg.reward_forms
    assert EngineConfig().reward_forms.goal_progress_shaping == ProgressShaping.DIFFERENCE
    with pytest.raises(ValueError, match="goal_progress_gamma"):
        RewardForms(goal_progress_gamma=1.5)
    with pytest.raises(ValueError, match="goal_progress_shaping"):
        RewardForms(goal_progress_shaping="discounted")


def test_the_quick_preset_is_the_ablation_baseline_plus_the_kept_changes():
    """BENCHMARKS.md's careful-driver ablation runs from ``benchmarks/quick_before_careful.yaml``; the
    bundled quick preset must stay that baseline plus the six changes it kept, lane tracking, and the three
    the drivable car's runs kept (and the larger training budget), or the table no longer describes the
    preset."""
    import importlib.util
    from pathlib import Path

    from terrazero_env.config.io import apply_overrides, load_config, load_train_section

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location("ablate_careful", root / "benchmarks" / "ablate_careful.py")
    ablate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ablate)
    before = root / "benchmarks" / "quick_before_careful.yaml"
    kept = ablate.variant_overrides("ego_features+route_progress+gentle_grid+comfort_range+stop_line_ahead"
                                    "+route_curvature+lane_tracking+red_light_ends+short_red+comfort_weights")
    assert apply_overrides(load_config(before), kept) == load_config("quick")
    assert load_config(before) != load_config("quick")
    # The one difference in training: the budget grew from 1M to 1.4M agent steps with the faster learner.
    assert {**load_train_section(before), "total_steps": 1_400_000} == load_train_section("quick")


# ------------------------------------------------------------------------ the stop line ahead (ours)


def _stop_line_ahead(e):
    return e.observations[0][e.obs_layout.groups["ego"].feature("stop_line_ahead")]


def test_stop_line_ahead_reads_the_distance_to_the_own_lines_and_its_state():
    """A car on incoming lane 0 of the junction (driving west at y = 1.75): the feature holds the arc
    length to the lane's end, where its stop line lies, x 0.02, and that line's state one-hot (red,
    yellow, green, off), following the scripted signal; the other lines' states do not leak in."""
    m = build(tiny_junction())
    e = _engine(m, obs={"stop_line_ahead": True})
    assert e.obs_dim == _engine(m).obs_dim + 5
    own = int(np.asarray(m.lanes.stop_line)[0])
    assert own >= 0
    lane0 = np.asarray(m.lanes.centerline.row(0), float)
    end = lane0[-1, :2]
    x = 25.0
    e.set_scene(0, [{"cls": AgentType.CAR, "x": x, "y": 1.75, "heading": np.pi, "speed": 0.0,
                     "goal": (-20.0, -1.75)}])
    control = np.asarray(m.stop_lines.control)
    other = [s for s in range(len(control)) if s != own and control[s] == 1]
    assert other
    for state in (0, 1, 2):
        e.set_stop_line_state(0, own, state, 30.0)
        for s in other:
            e.set_stop_line_state(0, s, (state + 1) % 3, 30.0)
        e.step(np.full(4, _zero_action(e), np.int32))
        f = _stop_line_ahead(e)
        assert f[0] == pytest.approx((x - end[0]) * 0.02, abs=1e-4)
        assert f[1:].tolist() == [1.0 if k == state else 0.0 for k in range(4)]


def test_stop_line_ahead_reads_a_stop_signs_line_as_off_at_its_distance():
    """Lane 1 (from the north, driving south at x = -1.75) ends in a stop sign's line: its distance,
    and off/unknown for the state (``stop_sign_state`` is the stop sign's channel)."""
    m = build(tiny_junction())
    assert np.asarray(m.stop_lines.control)[int(np.asarray(m.lanes.stop_line)[1])] == 2
    e = _engine(m, obs={"stop_line_ahead": True})
    end = np.asarray(m.lanes.centerline.row(1), float)[-1, :2]
    e.set_scene(0, [{"cls": AgentType.CAR, "x": -1.75, "y": 25.0, "heading": -np.pi / 2, "speed": 0.0,
                     "goal": (-20.0, -1.75)}])
    assert _stop_line_ahead(e).tolist() == pytest.approx([(25.0 - end[1]) * 0.02, 0.0, 0.0, 0.0, 1.0], abs=1e-4)


def test_stop_line_ahead_reads_none_inside_the_junction_and_beyond_the_radius():
    m = build(tiny_junction())
    e = _engine(m, obs={"stop_line_ahead": True})
    conn = np.asarray(m.lanes.centerline.row(8 + 1), float)  # lane 0's straight connector, in the junction
    mid = conn[len(conn) // 2]
    e.set_scene(0, [{"cls": AgentType.CAR, "x": float(mid[0]), "y": float(mid[1]), "heading": np.pi,
                     "speed": 0.0, "goal": (-20.0, -1.75)}])
    assert _stop_line_ahead(e).tolist() == pytest.approx([100.0 * 0.02, 0.0, 0.0, 0.0, 1.0])
    near = _engine(m, obs={"stop_line_ahead": True, "traffic_radius": 5.0})
    near.set_scene(0, [{"cls": AgentType.CAR, "x": 25.0, "y": 1.75, "heading": np.pi, "speed": 0.0,
                        "goal": (-20.0, -1.75)}])
    assert _stop_line_ahead(near).tolist() == pytest.approx([5.0 * 0.02, 0.0, 0.0, 0.0, 1.0])
