"""``ObsConfig.road_curvature_route``: approaching a fork, the curvature ahead follows the branch on
the goal's route (checked against the map's own geometry), and stays as before without it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import tiny_junction

from terrazero_env import engine as core
from terrazero_env.config import AgentType, Consequence, EngineConfig, InitConfig
from terrazero_env.maps import build

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE}
AHEAD = 10.0
X = 9.0  # the car's x on incoming lane 0 (driving west at y = 1.75); the lane ends at x = 5


def _engine(m, route):
    cfg = EngineConfig(num_worlds=1, slots_per_world=1, max_agents_per_world=2, consequences=NONE,
                       init=InitConfig(num_agents=(1, 1), randomize_kinematics=False))
    return core.Engine(cfg.with_overrides(obs={"road_curvature": True, "road_curvature_route": route,
                                               "curvature_lookahead": AHEAD}), maps=m)


def _heading_at(pts, s):
    d = np.diff(pts, axis=0)
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(d, axis=1))])
    k = min(int(np.searchsorted(arc, s, side="right")) - 1, len(d) - 1)
    return math.atan2(d[k, 1], d[k, 0])


def _curvature(e, goal):
    e.set_scene(0, [{"cls": AgentType.CAR, "x": X, "y": 1.75, "heading": math.pi, "speed": 0.0, "goal": goal}])
    return float(e.observations[0][e.obs_layout.groups["ego"].feature("road_curvature")][0]) * 0.1


@pytest.mark.parametrize("branch,exit_lane", [(0, 5), (1, 6), (2, 7)])  # right, straight, left
def test_the_curvature_ahead_follows_the_goals_branch_past_the_fork(branch, exit_lane):
    m = build(tiny_junction())
    row = lambda i: np.asarray(m.lanes.centerline.row(i), float)[:, :2]  # noqa: E731
    exit_pts = row(exit_lane)
    goal = tuple(exit_pts[0] + 15.0 * (exit_pts[-1] - exit_pts[0]) / np.linalg.norm(exit_pts[-1] - exit_pts[0]))
    lane0, conn = row(0), row(8 + branch)
    left_on_lane = X - lane0[-1, 0]
    conn_len = float(np.linalg.norm(np.diff(conn, axis=0), axis=1).sum())
    on_conn = min(AHEAD - left_on_lane, conn_len)  # the walk stops at the branch's end
    expected = (_heading_at(conn, on_conn) - math.pi + math.pi) % (2 * math.pi) - math.pi
    expected /= left_on_lane + on_conn
    assert _curvature(_engine(m, True), goal) == pytest.approx(expected, abs=2e-3)
    assert (expected < -0.02, abs(expected) < 1e-6, expected > 0.02)[branch]
    # Without the switch the walk stops at the fork: the straight approach reads no curvature.
    assert _curvature(_engine(m, False), goal) == pytest.approx(0.0, abs=1e-9)


def test_a_goal_off_every_lane_reads_as_before():
    m = build(tiny_junction())
    assert _curvature(_engine(m, True), (500.0, 500.0)) == pytest.approx(0.0, abs=1e-9)
