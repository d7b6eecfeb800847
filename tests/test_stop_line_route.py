"""``ObsConfig.stop_line_route``: where the current lane ends in no stop line, the stop line ahead is
found along the lanes that follow (the only successor, or the goal's branch past a fork), its distance
the sum along them, checked against the tiny junction's own lane lengths; without it, and where the
walk cannot go on, the observation reads as before."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import ARM, HALF, OFF, tiny_junction

from terrazero_env import engine as core
from terrazero_env.config import AgentType, Consequence, EngineConfig, InitConfig
from terrazero_env.maps import MapData, StopLines, build

NONE = {"collision": Consequence.NONE, "offroad": Consequence.NONE, "wrong_way": Consequence.NONE,
        "red_light": Consequence.NONE}
SCALE = 0.02  # table 12's position scale
X = 9.0


def _engine(m, route, radius=100.0, hidden=False):
    cfg = EngineConfig(num_worlds=1, slots_per_world=1, max_agents_per_world=2, consequences=NONE,
                       init=InitConfig(num_agents=(1, 1), randomize_kinematics=False))
    return core.Engine(cfg.with_overrides(obs={"stop_line_ahead": True, "stop_line_route": route,
                                               "traffic_radius": radius}), maps=m)


def _read(e, x, y, heading, goal, hidden=False):
    agent = {"cls": AgentType.CAR, "x": x, "y": y, "heading": heading, "speed": 0.0, "goal": goal}
    if hidden:
        agent["goal_hidden"] = True
    e.set_scene(0, [agent])
    v = np.asarray(e.observations[0][e.obs_layout.groups["ego"].feature("stop_line_ahead")], float)
    return v[0] / SCALE, int(np.argmax(v[1:])), v


def _length(m, lane):
    pts = np.asarray(m.lanes.centerline.row(lane), float)[:, :2]
    return float(np.linalg.norm(np.diff(pts, axis=0), axis=1).sum())


def _state(e, line):
    return int(np.asarray(e.stop_line_states(0))[line])


def test_a_line_beyond_the_lanes_end_is_found_along_its_only_successors():
    # Outgoing lane 4 (east, y = -1.75) -> U-turn 20 -> incoming lane 0, which ends in signal line 0.
    m = build(tiny_junction())
    goal = (HALF + 20.0, OFF)  # on incoming lane 0, past the U-turn
    want = (HALF + ARM - X) + _length(m, 20) + _length(m, 0)
    assert want < 100.0
    e = _engine(m, True)
    d, state, _ = _read(e, X, -OFF, 0.0, goal)
    assert d == pytest.approx(want, abs=0.05)
    assert state == _state(e, 0) and state != 3  # a signal's state, not off/unknown
    # The switch off: lane 4 ends in no line, so it reads the cap and off/unknown, as before.
    d, state, _ = _read(_engine(m, False), X, -OFF, 0.0, goal)
    assert (d, state) == (pytest.approx(100.0), 3)
    # Beyond traffic_radius: the cap and off/unknown.
    d, state, _ = _read(_engine(m, True, radius=want - 1.0), X, -OFF, 0.0, goal)
    assert (d, state) == (pytest.approx(want - 1.0), 3)


def test_a_lane_ending_in_its_own_line_reads_the_same_with_or_without_the_switch():
    m = build(tiny_junction())
    goal = (-HALF - 15.0, -OFF)
    on = _read(_engine(m, True), X, OFF, math.pi, goal)[2]
    off = _read(_engine(m, False), X, OFF, math.pi, goal)[2]
    np.testing.assert_array_equal(on, off)
    assert on[0] / SCALE == pytest.approx(X - HALF, abs=0.05)


def _lines_on_exits() -> MapData:
    """The tiny junction with its four stop lines tied to the outgoing lanes 4..7 instead of the
    incoming ones: incoming lane 0 then ends in no line, at a fork of three connectors, each leading
    to an exit that ends in its own line (signals on lines 0 and 2, stop signs on 1 and 3)."""
    md = tiny_junction()
    bars = np.asarray(md.stop_lines.points, float).reshape(-1, 2, 3)[:, :, :2]
    return md.replace(stop_lines=StopLines.create(bars, [[4 + i] for i in range(4)]))


@pytest.mark.parametrize("branch,exit_lane", [(0, 5), (1, 6), (2, 7)])  # right, straight, left
def test_past_a_fork_the_line_is_the_one_on_the_goals_branch(branch, exit_lane):
    m = build(_lines_on_exits())
    pts = np.asarray(m.lanes.centerline.row(exit_lane), float)[:, :2]
    goal = tuple(pts[0] + 15.0 * (pts[-1] - pts[0]) / np.linalg.norm(pts[-1] - pts[0]))
    want = (X - HALF) + _length(m, 8 + branch) + _length(m, exit_lane)
    e = _engine(m, True)
    d, state, _ = _read(e, X, OFF, math.pi, goal)
    assert d == pytest.approx(want, abs=0.05)
    line = exit_lane - 4
    assert state == (_state(e, line) if line in (0, 2) else 3)  # a stop sign's line reads off/unknown
    # A hidden goal, or one off every lane, gives no branch: the walk stops at the fork.
    assert _read(e, X, OFF, math.pi, goal, hidden=True)[:2] == (pytest.approx(100.0), 3)
    assert _read(e, X, OFF, math.pi, (500.0, 500.0))[:2] == (pytest.approx(100.0), 3)
    assert _read(_engine(m, False), X, OFF, math.pi, goal)[:2] == (pytest.approx(100.0), 3)


def test_the_switch_is_validated_and_saved_with_the_config():
    with pytest.raises((TypeError, ValueError), match="stop_line_route"):
        EngineConfig().with_overrides(obs={"stop_line_route": "yes"})
    cfg = EngineConfig().with_overrides(obs={"stop_line_ahead": True, "stop_line_route": True})
    assert cfg.obs.stop_line_route is True
