"""Log scenes (TerraZero algorithm 1 steps 7-9, appendix D.2, D.5): every logged agent takes a role per
episode from its class's mix (``InitConfig.log_roles``): replayed agents follow their track exactly and
leave when it ends, IDM and planner vehicles start from their logged state on a lane (planner vehicles
then replan and drive as planner traffic does), and policy-controlled agents get their logged goal only
when it is reachable along the lane graph."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest
from conftest import _line
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order

from terrazero_env import engine as core
from terrazero_env.config import EngineConfig, InitConfig, LogRoles
from terrazero_env.config.io import apply_overrides, config_from_dict, config_to_dict
from terrazero_env.maps import AgentType, Handedness, Intersections, Lanes, MapData, Polylines, Tracks, build

ROLE = {n: i for i, n in enumerate(core.ROLES)}
CARS = lambda r: (r,) + (None,) * 4  # noqa: E731  (a mix for cars, the default for the other classes)


def _tracks(ends: list[tuple[tuple, tuple]], steps: int = 20, cls=AgentType.CAR) -> Tracks:
    """Cars moving in a straight line from (x, y, heading) to (x, y) over ``steps`` samples."""
    state = np.zeros((len(ends), steps, 6))
    for j, ((x0, y0, h), (x1, y1)) in enumerate(ends):
        f = np.linspace(0.0, 1.0, steps)
        state[j, :, 0] = x0 + f * (x1 - x0)
        state[j, :, 1] = y0 + f * (y1 - y0)
        state[j, :, 3] = h
        state[j, :, 4] = (x1 - x0) / ((steps - 1) * 0.1)
        state[j, :, 5] = (y1 - y0) / ((steps - 1) * 0.1)
    size = np.tile(np.array([[4.5, 2.0, 1.5]], np.float32), (len(ends), 1))
    return Tracks(agent_type=np.full(len(ends), cls, np.uint8), size=size, state=state,
                  valid=np.ones((len(ends), steps), bool))


def dead_end_road(tracks: Tracks) -> MapData:
    """Two opposing lanes along x with no successors: lane 0 runs east at y = -1.75, lane 1 west at
    y = +1.75, and nothing leads from one to the other."""
    east, west = _line([0, -1.75], [200, -1.75]), _line([200, 1.75], [0, 1.75])
    edges = [np.array([[-20.0, -3.5], [220.0, -3.5]]), np.array([[-20.0, 3.5], [220.0, 3.5]])]
    return build(MapData(lanes=Lanes.create([east, west], width=3.5, successors=[[], []]),
                         road_edges=Polylines(edges), intersections=Intersections.create([]),
                         handedness=Handedness.RIGHT, tracks=tracks, name="dead_end_road"))


# Track 0 ends on the opposite lane, track 2 behind its start on its own lane: neither logged goal can
# be reached by driving forward. Track 1 ends ahead on its own lane.
UNREACHABLE_ENDS = [((20.0, -1.75, 0.0), (100.0, 1.75)), ((40.0, -1.75, 0.0), (130.0, -1.75)),
                    ((150.0, -1.75, 0.0), (60.0, -1.75))]


def _reference_reachable(rm, m: MapData, max_dist: float = 8.0, z_gate: float = 2.5) -> np.ndarray:
    """Slow reference of ``RoadMap.track_goal_reachable``: scipy's breadth-first search over
    (lane, successor edge taken) nodes, then the 'ahead' rule for goals reached by lane changes alone."""
    n = rm.num_lanes
    left, right = rm.lane_neighbors
    succ = m.lanes.successors
    rows, cols = [], []
    for lane in range(n):
        for via in (0, 1):
            for s in succ.values[succ.offsets[lane]:succ.offsets[lane + 1]]:
                rows.append(2 * lane + via)
                cols.append(2 * int(s) + 1)
            for nb in (left[lane], right[lane]):
                if nb >= 0:
                    rows.append(2 * lane + via)
                    cols.append(2 * int(nb) + via)
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(2 * n, 2 * n))
    t = m.tracks
    out = np.zeros(len(t), np.uint8)
    for j in range(len(t)):
        idx = np.flatnonzero(t.valid[j])
        a, b = t.state[j, idx[0]], t.state[j, idx[-1]]
        q = rm.project_to_lanes(np.array([a[:3], b[:3]]), max_dist, z_gate)
        (l0, l1), (s0, s1) = q["row"], q["s"]
        if l0 < 0 or l1 < 0:
            continue
        seen = set(breadth_first_order(graph, 2 * l0, return_predecessors=False).tolist())
        ahead = (b[0] - a[0]) * np.cos(a[3]) + (b[1] - a[1]) * np.sin(a[3]) > 0
        lateral_ok = (s1 >= s0) if l1 == l0 else ahead
        out[j] = (2 * l1 + 1) in seen or ((2 * l1) in seen and lateral_ok)
    return out


def _log_engine(m, worlds: int = 16, slots: int = 4, max_agents: int = 64, **init) -> core.Engine:
    cfg = EngineConfig(num_worlds=worlds, slots_per_world=slots, max_agents_per_world=max_agents, episode_length=400,
                       init=InitConfig(mode=1, **init))
    return core.Engine(cfg, maps=m)


# ------------------------------------------------------------------------------------------- D.5


def test_goal_reachability_flags_the_opposite_lane_and_a_goal_behind():
    # Track 3 starts 30 m off the road, track 4 ends there: off the lane graph, not reachable.
    off_road = [((50.0, -30.0, 0.0), (120.0, -1.75)), ((50.0, -1.75, 0.0), (120.0, 30.0))]
    rm = core.road_map(dead_end_road(_tracks(UNREACHABLE_ENDS + off_road)))
    assert rm.track_goal_reachable().tolist() == [0, 1, 0, 0, 0]
    # Within 40 m the off-road points have a nearest lane: the lane ahead, and the opposite lane.
    assert rm.track_goal_reachable(40.0).tolist() == [0, 1, 0, 1, 0]
    assert not rm.track_goal_reachable().flags.writeable


def test_goal_reachability_matches_a_scipy_breadth_first_search_on_random_tracks():
    # Lankershim Boulevard: lanes with neighbours and a lane graph that is not strongly connected.
    m = core.load_built("usa_lanker")
    rm0 = core.road_map(m)
    left, _ = rm0.lane_neighbors
    rng = np.random.default_rng(0)
    cl = m.lanes.centerline

    def point(lane: int, f: float) -> tuple[float, float, float]:
        p = cl.values[cl.offsets[lane]:cl.offsets[lane + 1]]
        d = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(p[:, :2], axis=0), axis=1))]
        s = f * d[-1]
        k = min(int(np.searchsorted(d, s, side="right")) - 1, len(p) - 2)
        u = (s - d[k]) / max(d[k + 1] - d[k], 1e-12)
        xy = p[k, :2] + u * (p[k + 1, :2] - p[k, :2])
        return float(xy[0]), float(xy[1]), float(np.arctan2(*(p[k + 1, 1::-1] - p[k, 1::-1])))

    ends = []
    for i in range(240):
        a = int(rng.integers(len(m.lanes)))
        x0, y0, h0 = point(a, rng.uniform(0.1, 0.9))
        kind = i % 3  # the same lane (ahead or behind), its left neighbour, any lane
        b = a if kind == 0 else (left[a] if kind == 1 and left[a] >= 0 else int(rng.integers(len(m.lanes))))
        x1, y1, _ = point(b, rng.uniform(0.05, 0.95))
        ends.append(((x0, y0, h0), (x1, y1)))
    mt = replace(m, tracks=_tracks(ends, steps=3))
    rm = core.road_map(mt)
    got = rm.track_goal_reachable()
    ref = _reference_reachable(rm, mt)
    assert 0.1 < got.mean() < 0.9  # both outcomes occur
    np.testing.assert_array_equal(got, ref)


def test_an_unreachable_logged_goal_is_never_assigned():
    m = dead_end_road(_tracks(UNREACHABLE_ENDS))
    e = _log_engine(m, worlds=24, goal_distance=(20.0, 120.0))
    e.reset(seeds=np.arange(24) + 5)
    ends = m.tracks.state[:, -1, :2]
    resampled = 0
    for w in range(24):
        s = e.agent_states(w)
        assert s["log_index"].tolist() == [0, 1, 2] and (s["role"] == ROLE["CONTROLLED"]).all()
        goals = np.stack([s["goal_x"], s["goal_y"]], axis=1)
        # The reachable logged goal is used as it is; the others never, and their goals lie ahead on lane 0.
        np.testing.assert_allclose(goals[1], ends[1], atol=1e-9)
        for j in (0, 2):
            assert np.linalg.norm(goals[j] - ends[j]) > 1.0
            assert goals[j, 1] == pytest.approx(-1.75) and goals[j, 0] >= s["x"][j] + 5.0
            resampled += 1
    assert resampled == 48


def test_random_tracks_get_their_logged_goal_exactly_when_it_is_reachable():
    m = core.load_built("usa_lanker")
    rng = np.random.default_rng(1)
    lanes = rng.integers(len(m.lanes), size=(40, 2))
    cl = m.lanes.centerline
    ends = []
    for a, b in lanes:
        pa, pb = cl.values[cl.offsets[a]:cl.offsets[a + 1]], cl.values[cl.offsets[b]:cl.offsets[b + 1]]
        h = np.arctan2(pa[1, 1] - pa[0, 1], pa[1, 0] - pa[0, 0])
        ends.append(((pa[0, 0], pa[0, 1], h), (pb[-1, 0], pb[-1, 1])))
    mt = build(replace(m, tracks=_tracks(ends, steps=4)))
    reach = core.road_map(mt).track_goal_reachable()
    e = _log_engine(mt, worlds=8, slots=40)
    e.reset(seeds=np.arange(8))
    logged_end = mt.tracks.state[:, -1, :2]
    kept = dropped = 0
    for w in range(8):
        s = e.agent_states(w)
        for i in np.flatnonzero(s["role"] == ROLE["CONTROLLED"]):
            j = s["log_index"][i]
            same = np.linalg.norm([s["goal_x"][i] - logged_end[j, 0], s["goal_y"][i] - logged_end[j, 1]]) < 1e-9
            assert same == bool(reach[j]), f"track {j}: reachable={reach[j]}, logged goal used={same}"
            kept += same
            dropped += not same
    assert kept > 0 and dropped > 0


# ------------------------------------------------------------------------------------------- roles


@pytest.mark.parametrize("map_name", ["usa_us101", "usa_lanker"])
def test_a_replayed_agent_follows_its_log_exactly_and_vanishes_when_it_ends(map_name):
    mix = LogRoles(replay=2.0, idm=1.0, policy=1.0)
    e = _log_engine(map_name, worlds=4, slots=8, log_roles=CARS(mix))
    m = e.road_maps[0].map_data
    state, valid, T = m.tracks.state, m.tracks.valid, m.tracks.state.shape[1]
    e.reset(seeds=np.arange(4) + 11)
    replayed = [np.flatnonzero(e.agent_states(w)["role"] == ROLE["LOG"]) for w in range(4)]
    assert sum(len(r) for r in replayed) > 10
    rng = np.random.default_rng(0)
    checked = 0
    for t in range(T + 3):
        for w in range(4):
            s = e.agent_states(w)
            for i in replayed[w]:
                j = s["log_index"][i]
                live = t < T and valid[j, :t + 1].all()
                assert s["alive"][i] == live, f"world {w} agent {i} (track {j}) at step {t}"
                if live:
                    x, y, z, h, vx, vy = state[j, t]
                    np.testing.assert_allclose([s["x"][i], s["y"][i], s["z"][i]], [x, y, z], atol=1e-4)
                    assert abs(np.angle(np.exp(1j * (s["heading"][i] - h)))) < 1e-4
                    assert s["speed"][i] == pytest.approx(vx * np.cos(h) + vy * np.sin(h), abs=1e-4)
                    checked += 1
        nact = np.maximum(np.array([e.num_actions(int(c)) if c >= 0 else 1 for c in e.agent_type]), 1)
        e.step((rng.integers(0, 1 << 20, nact.shape) % nact).astype(np.int32))
    assert checked > 100


def test_an_agent_handed_to_idm_starts_at_its_logged_state_on_a_lane_and_then_drives():
    e = _log_engine("usa_us101", worlds=2, slots=4, log_roles=CARS(LogRoles(idm=1.0)))
    m = e.road_maps[0].map_data
    e.reset(seeds=np.array([1, 2]))
    s = e.agent_states(0)
    idm = np.flatnonzero(s["role"] == ROLE["IDM"])
    # Every track starts on a lane, in its direction, on this highway: every car is handed over.
    assert len(idm) == len(m.tracks) and (s["slot"] == -1).all()
    j = s["log_index"][idm]
    st = m.tracks.state[j, 0]
    np.testing.assert_array_equal(s["x"][idm], st[:, 0])
    np.testing.assert_array_equal(s["y"][idm], st[:, 1])
    np.testing.assert_array_equal(s["heading"][idm], st[:, 3])
    np.testing.assert_allclose(s["speed"][idm], st[:, 4] * np.cos(st[:, 3]) + st[:, 5] * np.sin(st[:, 3]), atol=1e-12)
    on_lane = e.road_maps[0].project_to_lanes(st[:, :3], 8.0)["row"]
    np.testing.assert_array_equal(s["lane"][idm], on_lane)
    for _ in range(30):
        e.step(np.zeros(e.agent_type.shape, np.int32))
    s = e.agent_states(0)
    assert (s["alive"][idm] == 1).all() and (s["role"][idm] == ROLE["IDM"]).all()
    moved = np.hypot(s["x"][idm] - m.tracks.state[j, 0, 0], s["y"][idm] - m.tracks.state[j, 0, 1])
    assert (moved > 1.0).mean() > 0.5  # driving on its own, not parked and not replaying step 30
    off_log = np.hypot(s["x"][idm] - m.tracks.state[j, 30, 0], s["y"][idm] - m.tracks.state[j, 30, 1])
    assert (off_log > 1e-3).all()


def test_role_mix_shares_follow_the_weights_and_policy_falls_back_to_replay_without_slots():
    e = _log_engine("usa_us101", worlds=32, slots=2, log_roles=CARS(LogRoles(replay=1.0, idm=3.0, policy=1.0)))
    e.reset(seeds=np.arange(32))
    roles = np.concatenate([e.agent_states(w)["role"] for w in range(32)])
    counts = {k: int((roles == ROLE[k]).sum()) for k in ("LOG", "IDM", "CONTROLLED")}
    assert counts["CONTROLLED"] == 2 * 32  # two slots per world, all filled
    assert counts["IDM"] / roles.size == pytest.approx(0.6, abs=0.06)
    assert counts["LOG"] + counts["IDM"] + counts["CONTROLLED"] == roles.size


def test_role_mix_shares_follow_the_weights_including_the_planner():
    e = _log_engine("usa_us101", worlds=32, slots=2,
                    log_roles=CARS(LogRoles(replay=1.0, idm=1.0, policy=1.0, planner=2.0)))
    e.reset(seeds=np.arange(32))
    roles = np.concatenate([e.agent_states(w)["role"] for w in range(32)])
    planner = np.concatenate([e.planner_state(w)["planner"] for w in range(32)])
    assert (roles[planner] == ROLE["IDM"]).all()  # a planner vehicle is an IDM vehicle with a plan
    counts = {"LOG": int((roles == ROLE["LOG"]).sum()), "IDM": int(((roles == ROLE["IDM"]) & ~planner).sum()),
              "PLANNER": int(planner.sum()), "CONTROLLED": int((roles == ROLE["CONTROLLED"]).sum())}
    assert counts["CONTROLLED"] == 2 * 32  # two slots per world, all filled; the rest of that share replays
    assert counts["PLANNER"] / roles.size == pytest.approx(0.4, abs=0.05)
    assert counts["IDM"] / roles.size == pytest.approx(0.2, abs=0.05)
    assert sum(counts.values()) == roles.size


def test_an_agent_handed_to_the_planner_starts_at_its_logged_state_then_replans_and_drives():
    e = _log_engine("usa_us101", worlds=2, slots=4, log_roles=CARS(LogRoles(planner=1.0)))
    m = e.road_maps[0].map_data
    e.reset(seeds=np.array([1, 2]))
    s, ps = e.agent_states(0), e.planner_state(0)
    # Every track starts on a lane, in its direction, on this highway: every car is a planner vehicle.
    assert len(s["role"]) == len(m.tracks) and (s["role"] == ROLE["IDM"]).all() and (s["slot"] == -1).all()
    assert ps["planner"].all() and (ps["replans"] == 0).all() and (ps["choice"] == -1).all()
    j = s["log_index"]
    st = m.tracks.state[j, 0]
    np.testing.assert_array_equal(s["x"], st[:, 0])
    np.testing.assert_array_equal(s["y"], st[:, 1])
    np.testing.assert_array_equal(s["heading"], st[:, 3])
    np.testing.assert_allclose(s["speed"], st[:, 4] * np.cos(st[:, 3]) + st[:, 5] * np.sin(st[:, 3]), atol=1e-12)
    np.testing.assert_array_equal(s["lane"], e.road_maps[0].project_to_lanes(st[:, :3], 8.0)["row"])
    for t in range(50):
        e.step(np.zeros(e.agent_type.shape, np.int32))
        hit = np.flatnonzero(e.agents[0, : e.num_agents(0)]["collided"])
        assert hit.size == 0, f"step {t}: planner vehicles {hit.tolist()} collided"
    s, ps = e.agent_states(0), e.planner_state(0)
    assert (s["alive"] == 1).all() and (s["role"] == ROLE["IDM"]).all() and ps["planner"].all()
    assert (ps["replans"] >= 5).all() and (ps["choice"] >= 0).all()  # a plan a second over 5 s
    ahead = (s["x"] - st[:, 0]) * np.cos(st[:, 3]) + (s["y"] - st[:, 1]) * np.sin(st[:, 3])
    assert (ahead > 5.0).all()  # driving forward along the highway, not parked
    assert (s["lane"] >= 0).all() and (np.abs(s["lane_lat"]) < 1.75).all()  # on a lane, within its width
    off_log = np.hypot(s["x"] - m.tracks.state[j, 50, 0], s["y"] - m.tracks.state[j, 50, 1])
    assert (off_log > 1e-3).all()  # not replaying step 50


def test_log_roles_positional_order_keeps_planner_last():
    assert LogRoles(1, 2, 3) == LogRoles(replay=1, idm=2, policy=3)
    assert LogRoles(1, 2, 3, 4) == LogRoles(replay=1, idm=2, policy=3, planner=4)
    assert core.VOCABULARY["log_roles"] == ("REPLAY", "IDM", "POLICY", "PLANNER")


def test_default_roles_draw_nothing_new_from_the_generator():
    """The default mix written out (policy for controlled classes, replay for the rest) is the default:
    the same scene bit for bit, and a mixed class changes it."""
    base = _log_engine("usa_lanker", worlds=3, slots=4)
    same = _log_engine("usa_lanker", worlds=3, slots=4,
                       log_roles=(LogRoles(policy=1), LogRoles(policy=2), LogRoles(policy=1), LogRoles(replay=1),
                                  LogRoles(replay=3)))
    mixed = _log_engine("usa_lanker", worlds=3, slots=4, log_roles=CARS(LogRoles(policy=1, replay=1)))
    for e in (base, same, mixed):
        e.reset(seeds=np.array([4, 5, 6]))
        for _ in range(3):
            e.step(np.zeros(e.agent_type.shape, np.int32))
    assert base.agents.tobytes() == same.agents.tobytes()
    assert base.agents.tobytes() != mixed.agents.tobytes()


# ------------------------------------------------------------------------------------------- config


def test_log_roles_config_defaults_and_table():
    init = InitConfig()
    assert init.log_roles is None
    np.testing.assert_array_equal(init.log_role_table(), [[0, 0, 1, 0]] * 3 + [[1, 0, 0, 0]] * 2)
    mixed = InitConfig(log_roles=({"replay": 1, "idm": 2}, {"planner": 3, "policy": 1}, LogRoles(policy=1), None,
                                  LogRoles(replay=1)))
    assert mixed.log_roles[:2] == (LogRoles(replay=1, idm=2), LogRoles(policy=1, planner=3))
    np.testing.assert_array_equal(mixed.log_role_table()[[0, 1, 4]], [[1, 2, 0, 0], [0, 0, 1, 3], [1, 0, 0, 0]])
    assert InitConfig(log_roles=(None,) * 5).log_roles is None


@pytest.mark.parametrize("log_roles, field", [
    (CARS(LogRoles(replay=1))[:4], "InitConfig.log_roles"),
    ((None, None, None, None, LogRoles(idm=1)), "InitConfig.log_roles[4] (cyclist).idm"),
    ((None, None, None, {"idm": 0.5, "replay": 1}, None), "InitConfig.log_roles[3] (pedestrian).idm"),
    ((None, None, None, None, LogRoles(policy=1)), "InitConfig.log_roles[4] (cyclist).policy"),
    ((None, None, None, {"planner": 1}, None), "InitConfig.log_roles[3] (pedestrian).planner"),
    ((None, None, None, None, {"replay": 1, "planner": 0.5}), "InitConfig.log_roles[4] (cyclist).planner"),
    (CARS({"pilot": 1}), "InitConfig.log_roles[0] (car): unknown roles"),
    (CARS({"planner": -1}), "InitConfig.log_roles[0] (car).planner"),
    (CARS({"replay": 0}), "InitConfig.log_roles[0] (car): role weights"),
    (CARS({"idm": -1}), "InitConfig.log_roles[0] (car).idm"),
    (CARS("replay"), "InitConfig.log_roles[0] (car)"),
])
def test_bad_log_roles_raise_naming_the_field(log_roles, field):
    with pytest.raises(ValueError, match=re.escape(field)):
        InitConfig(log_roles=log_roles)


@pytest.mark.parametrize("roles, field", [(dict(replay=-1.0), "LogRoles.replay"),
                                          (dict(idm=float("nan")), "LogRoles.idm"),
                                          (dict(planner=float("inf")), "LogRoles.planner"), (dict(), "LogRoles")])
def test_bad_log_role_weights_raise_naming_the_field(roles, field):
    with pytest.raises(ValueError, match=field):
        LogRoles(**roles)


def test_log_roles_round_trip_through_plain_data_and_overrides():
    cfg = EngineConfig(init=InitConfig(log_roles=CARS(LogRoles(replay=1, idm=1))))
    d = config_to_dict(cfg)
    assert d["init"]["log_roles"]["car"] == {"replay": 1, "idm": 1, "policy": 0.0, "planner": 0.0}
    assert config_from_dict(d) == cfg
    assert config_to_dict(EngineConfig())["init"]["log_roles"] is None
    over = apply_overrides(cfg, {"init.log_roles.truck.idm": 1.0, "init.log_roles.bus": {"replay": 1, "policy": 1}})
    assert over.init.log_roles[:3] == (LogRoles(replay=1, idm=1), LogRoles(idm=1), LogRoles(replay=1, policy=1))
    over = apply_overrides(cfg, {"init.log_roles.car": {"idm": 1, "planner": 2}})
    assert over.init.log_roles[0] == LogRoles(idm=1, planner=2)
    with pytest.raises(ValueError, match="init.log_roles"):
        apply_overrides(cfg, {"init.log_roles.bicycle.idm": 1.0})
