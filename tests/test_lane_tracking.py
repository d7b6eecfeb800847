"""The lane a car is on, kept by continuity (``EngineConfig.lane_tracking``).

A car is driven along every connector of ``tiny_junction`` (a plus junction whose twelve
connectors overlap where they leave each incoming lane and cross in the middle): it is a unicycle
whose yaw-rate grid lets a pure-pursuit controller in the test follow the connector's centerline
pose by pose. The lane state the engine reports (the observation's heading residual and lateral
offset) is compared with a numpy projection of the car onto the connector it drives."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from conftest import straight_road, tiny_junction

from terrazero_env import engine as core
from terrazero_env import load_config
from terrazero_env.config import AgentType, Consequence, EngineConfig, InitConfig
from terrazero_env.config.classes import DynamicsModel
from terrazero_env.maps import asset_path, build, load, load_source

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE}
YAW = tuple(float(v) for v in np.round(np.linspace(-1.5, 1.5, 31), 6))  # rad/s
SPEED, LOOKAHEAD = 2.0, 1.5  # m/s, m
CONNECTORS = range(8, 20)  # tiny_junction: incoming lanes 0..3, outgoing 4..7, then 12 connectors


def _engine(m, track: bool, **over) -> core.Engine:
    cfg = EngineConfig(num_worlds=1, slots_per_world=1, max_agents_per_world=2, consequences=NONE,
                       init=InitConfig(num_agents=(1, 1), randomize_kinematics=False), lane_tracking=track)
    classes = dict(cfg.classes)
    classes[AgentType.CAR] = replace(classes[AgentType.CAR], dynamics=DynamicsModel.UNICYCLE, action_long=(0.0,),
                                     action_lat=YAW)
    return core.Engine(cfg.with_overrides(obs={"lane_state": True}, classes=classes, **over), maps=m)


def _row(m, lane: int) -> np.ndarray:
    return np.asarray(m.lanes.centerline.row(lane), float)[:, :2]


def _successors(m, lane: int) -> list[int]:
    return [int(v) for v in m.lanes.successors.row(lane)]


def _project(pts: np.ndarray, p: np.ndarray) -> tuple[float, float, float, float]:
    """(arc length, direction, signed lateral offset, distance) of P's nearest point on a polyline."""
    a, b = pts[:-1], pts[1:]
    d = b - a
    L = np.linalg.norm(d, axis=1)
    t = np.clip(((p - a) * d).sum(1) / (L * L), 0.0, 1.0)
    dist = np.linalg.norm(a + t[:, None] * d - p, axis=1)
    k = int(np.argmin(dist))
    lat = (d[k, 0] * (p[1] - a[k, 1]) - d[k, 1] * (p[0] - a[k, 0])) / L[k]
    return float(np.r_[0.0, np.cumsum(L)][k] + t[k] * L[k]), math.atan2(d[k, 1], d[k, 0]), float(lat), float(dist[k])


def _wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi


def _lane_state(e) -> tuple[float, float]:
    f = e.observations[0][e.obs_layout.groups["ego"].feature("lane_state")]
    return float(f[0]) * math.pi, float(f[1]) * 2.5


def _goal_on(m, lane: int) -> tuple[float, float]:
    p = _row(m, lane)
    return tuple(p[0] + 12.0 * (p[-1] - p[0]) / np.linalg.norm(p[-1] - p[0]))


def _drive(e, m, conn: int, goal: tuple[float, float]) -> list[tuple[float, float, float, float, float, np.ndarray]]:
    """Drive from 6 m before the end of the connector's incoming lane through the connector onto its
    outgoing lane; per step after the motion: (arc along the connector, the engine's heading residual
    and offset, the reference's heading residual and offset against the connector, the car's pose
    [x, y, heading])."""
    inc = int(m.lanes.predecessors.row(conn)[0])
    out = _successors(m, conn)[0]
    path = np.concatenate([_row(m, inc), _row(m, conn)[1:], _row(m, out)[1:]])
    cum = np.r_[0.0, np.cumsum(np.linalg.norm(np.diff(path, axis=0), axis=1))]
    d_in = _row(m, inc)[-1] - _row(m, inc)[-2]
    d_in /= np.linalg.norm(d_in)
    start = _row(m, inc)[-1] - 6.0 * d_in
    e.set_scene(0, [{"cls": AgentType.CAR, "x": float(start[0]), "y": float(start[1]),
                     "heading": math.atan2(d_in[1], d_in[0]), "speed": SPEED, "goal": goal}])
    cpts = _row(m, conn)
    length = float(np.linalg.norm(np.diff(cpts, axis=0), axis=1).sum())
    rows = []
    for _ in range(int((6.0 + length + 2.0) / (SPEED * 0.1)) + 1):
        ag = e.agents[0, 0]
        p, h = np.array([ag["x"], ag["y"]]), float(ag["heading"])
        s, _, _, _ = _project(path, p)
        tgt = path[min(int(np.searchsorted(cum, s + LOOKAHEAD)), len(path) - 1)]
        alpha = _wrap(math.atan2(tgt[1] - p[1], tgt[0] - p[0]) - h)
        w = 2.0 * SPEED * math.sin(alpha) / LOOKAHEAD  # pure pursuit
        e.step(np.array([int(np.argmin(np.abs(np.asarray(YAW) - w)))], np.int32))
        ag = e.agents[0, 0]
        p, h = np.array([ag["x"], ag["y"]]), float(ag["heading"])
        arc, direction, lat, _ = _project(cpts, p)
        res, lat_e = _lane_state(e)
        rows.append((arc, res, lat_e, _wrap(h - direction), lat, np.array([p[0], p[1], h])))
    return rows


def _inside(m, conn: int, rows):
    """The steps with the car inside the connector (past its first 5 cm, before its end)."""
    length = float(np.linalg.norm(np.diff(_row(m, conn), axis=0), axis=1).sum())
    return [r for r in rows if 0.05 < r[0] < length - 1e-6]


@pytest.mark.parametrize("conn", CONNECTORS)
def test_the_lane_state_follows_the_connector_driven_at_every_pose_in_the_junction(conn):
    """Driving connector ``conn`` towards a goal on its outgoing lane, the lane state at every pose
    inside the junction is the car's heading residual and offset against that connector (numpy
    reference), the residual stays small (the car follows the centerline), and the untracked engine
    reads another, overlapping connector at some pose of the twelve connectors (``_untracked``)."""
    m = build(tiny_junction())
    rows = _inside(m, conn, _drive(_engine(m, True), m, conn, _goal_on(m, _successors(m, conn)[0])))
    assert len(rows) >= 5
    for arc, res, lat, ref_res, ref_lat, _ in rows:
        assert (res, lat) == pytest.approx((ref_res, ref_lat), abs=5e-3), f"connector {conn} at arc {arc:.2f} m"
        assert abs(res) < math.radians(15.0)


def test_without_tracking_the_nearest_overlapping_connector_is_read_somewhere():
    """The same drives through the untracked engine: at some poses the nearest centerline is another
    connector, so the property above is one tracking provides."""
    m = build(tiny_junction())
    e = _engine(m, False)
    wrong = 0
    for conn in CONNECTORS:
        for _, res, lat, ref_res, ref_lat, _ in _inside(m, conn, _drive(e, m, conn, _goal_on(m, _successors(m, conn)[0]))):
            wrong += abs(res - ref_res) > 5e-3 or abs(lat - ref_lat) > 5e-3
    assert wrong >= 12


def test_on_grid_town_every_connector_of_a_junction_is_followed():
    """The bundled town's first junction with several connectors leaving one incoming lane: the same
    drive along each of its connectors, towards a goal on its exit, reads that connector at every
    pose inside the junction."""
    m = load_source("grid_town")
    inter = np.asarray(m.lanes.intersection)
    pred = [int(m.lanes.predecessors.row(c)[0]) for c in range(len(inter))]
    j = next(int(j) for j in np.unique(inter[inter >= 0])
             if len({pred[c] for c in np.nonzero(inter == j)[0]}) < (inter == j).sum())
    e = _engine(m, True)
    for conn in np.nonzero(inter == j)[0]:
        rows = _inside(m, int(conn), _drive(e, m, int(conn), _goal_on(m, _successors(m, int(conn))[0])))
        assert len(rows) >= 5
        for arc, res, lat, ref_res, ref_lat, _ in rows:
            assert (res, lat) == pytest.approx((ref_res, ref_lat), abs=5e-3), f"connector {conn} at arc {arc:.2f} m"


@pytest.mark.parametrize("conn", CONNECTORS)
def test_off_the_goals_route_the_connector_driven_is_kept_once_it_alone_holds_the_car(conn):
    """With the goal on another branch, the car first follows the route's connector where the two
    coincide; from the first pose where no other connector from the same incoming lane holds the car
    (within half its width, heading within 60 degrees) to the end of the junction, the lane state is
    the driven connector's, also where a connector from another leg merges into the same exit."""
    m = build(tiny_junction())
    inc = int(m.lanes.predecessors.row(conn)[0])
    other = next(c for c in _successors(m, inc) if c != conn)
    rows = _inside(m, conn, _drive(_engine(m, True), m, conn, _goal_on(m, _successors(m, other)[0])))
    width = float(np.asarray(m.lanes.width, float)[conn])

    def held_by_another(pose):
        for c in _successors(m, inc):
            if c == conn:
                continue
            _, direction, _, dist = _project(_row(m, c), pose[:2])
            if dist <= 0.5 * width and math.cos(pose[2] - direction) >= 0.5:
                return True
        return False

    alone = [k for k, r in enumerate(rows) if not held_by_another(r[5])]
    assert alone, "the connector never leaves its siblings"
    for arc, res, lat, ref_res, ref_lat, _ in rows[alone[0]:]:
        assert (res, lat) == pytest.approx((ref_res, ref_lat), abs=5e-3), f"connector {conn} at arc {arc:.2f} m"


def test_a_tracked_car_that_crosses_the_centre_line_reads_the_opposing_lane_and_drives_the_wrong_way():
    """On the straight two-way road a car drifting left from its lane keeps its lane while its centre
    is inside its half width, then, past the centre line, reads the opposing lane (residual near pi)
    and counts wrong-way steps, exactly as without tracking."""
    m = build(straight_road())
    wrong = list(core.COUNTER_NAMES).index("wrong_way")
    seen = {}
    for track in (False, True):
        e = _engine(m, track)
        e.set_scene(0, [{"cls": AgentType.CAR, "x": 20.0, "y": -1.75, "heading": 0.1, "speed": 5.0, "goal": (95.0, 1.75)}])
        zero = int(np.argmin(np.abs(np.asarray(YAW))))
        trace = []
        for _ in range(60):
            e.step(np.array([zero], np.int32))
            trace.append((float(e.agents[0, 0]["y"]), *_lane_state(e), int(np.asarray(e.counters)[0, wrong])))
        seen[track] = trace
        for y, res, lat, _ in trace:
            if y < -0.05:
                assert abs(res - 0.1) < 1e-6 and lat == pytest.approx(y + 1.75, abs=2e-3)
            elif y > 0.05:
                assert abs(res) > math.pi - 0.1 - 1e-6
        assert trace[-1][0] > 0.05 and trace[-1][3] > 0
    assert seen[True] == seen[False]


def test_the_first_step_after_a_scripted_scene_and_after_a_goal_change_reads_the_connector_the_car_is_on():
    """A car set inside a connector where a crossing connector's centerline is nearer (points from
    ``test_lane_match``'s construction): with nothing to track yet, the lane heading along the car
    that holds it is read; the goal it stands on is reached at once and a new one drawn, and the next
    step still reads the same connector."""
    m = build(tiny_junction())
    e = _engine(m, True, init=InitConfig(num_agents=(1, 1), randomize_kinematics=False, goal_behavior=0))
    goal_n = list(core.COUNTER_NAMES).index("goal_reached")
    checked = 0
    for conn in CONNECTORS:
        pts = _row(m, conn)
        for k in range(1, len(pts) - 2):
            p = 0.5 * (pts[k] + pts[k + 1])
            h = math.atan2(*(pts[k + 1] - pts[k])[::-1])
            q = p + 0.5 * np.array([-math.sin(h), math.cos(h)])
            nearest = min((_project(_row(m, c), q)[3], c) for c in range(len(m.lanes)))[1]
            _, d_near, _, _ = _project(_row(m, nearest), q)
            if math.cos(h - d_near) >= 0.5:
                continue  # only where the nearest centerline crosses the car's travel
            e.set_scene(0, [{"cls": AgentType.CAR, "x": float(q[0]), "y": float(q[1]), "heading": h, "speed": 0.0,
                             "goal": (float(q[0]), float(q[1]))}])
            _, d, lat, _ = _project(pts, q)
            assert _lane_state(e) == pytest.approx((_wrap(h - d), lat), abs=2e-3)
            zero = int(np.argmin(np.abs(np.asarray(YAW))))
            e.step(np.array([zero], np.int32))
            assert int(np.asarray(e.counters)[0, goal_n]) == 1
            assert (float(e.agents[0, 0]["goal_x"]), float(e.agents[0, 0]["goal_y"])) != pytest.approx(tuple(q))
            e.step(np.array([zero], np.int32))
            assert _lane_state(e) == pytest.approx((_wrap(h - d), lat), abs=2e-3)
            checked += 1
    assert checked >= 8


def test_cars_placed_at_reset_read_the_lane_they_were_placed_on():
    """Random placement puts a car on a lane within 0.2 m and 0.05 rad of its centerline; with tracking
    every controlled car's first lane state says so, on the bundled towns and the quick preset."""
    for name in ("grid_town", "carla_town01"):
        cfg = load_config("quick", num_worlds=16, maps=[name], lane_tracking=True)
        e = core.Engine(cfg, maps=load(asset_path(name)))
        for seed in range(4):
            e.reset(seeds=np.arange(16) + 100 * seed)
            f = np.asarray(e.observations)[:, e.obs_layout.groups["ego"].feature("lane_state")]
            live = np.asarray(e.valid, bool)
            assert live.sum() > 0
            assert np.all(np.abs(f[live, 0] * math.pi) <= 0.05 + 1e-3)
            assert np.all(np.abs(f[live, 1] * 2.5) <= 0.2 + 2e-3)


@pytest.mark.parametrize("bad", [1, 0, "yes", None])
def test_a_lane_tracking_switch_that_is_not_a_bool_is_refused_by_name(bad):
    with pytest.raises(ValueError, match="lane_tracking"):
        EngineConfig(lane_tracking=bad)
