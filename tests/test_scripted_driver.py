"""benchmarks/scripted_driver.py: the hand-written reference driver reads the policy's observation the
way its docstring says (brakes for its own red line, not for green; steers back toward the lane
centre; follows the curvature ahead), violation_context.Places names the kind of place, and
lane_margins.py measures the room a car has in its lane."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from terrazero_env.config.io import load_config
from terrazero_env.envs import TerraZeroVectorEnv

ROOT = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


sd = _load("scripted_driver")
vc = _load("violation_context")


@pytest.fixture(scope="module")
def driver():
    venv = TerraZeroVectorEnv(load_config("quick").with_overrides(num_worlds=1))
    yield sd.ScriptedDriver(venv)
    venv.close()


def _obs(d, *, v=5.0, y=0.0, k=0.0, line=None, state=2, goal=40.0):
    """One observation row: speed ``v``, lateral offset ``y``, curvature ahead ``k``, the own stop
    line ``line`` m ahead of the centre in signal ``state`` (0 red, 1 yellow, 2 green), a goal far ahead."""
    o = np.zeros((1, d.observation_space.shape[0]))
    c = d.col
    o[0, c["speed"]] = v * d.speed_scale
    o[0, c["vehicle_dims"]:c["vehicle_dims"] + 2] = [1.9 / 15.0, 4.6 / 30.0]
    o[0, c["lane_state"] + 1] = y / 2.5
    o[0, c["road_curvature"]] = k / 0.1
    o[0, c["rel_goal_pos"]] = goal * d.goal_scale
    o[0, c["topology_goal_distance"]] = goal * d.goal_scale
    sl = c["stop_line_ahead"]
    o[0, sl] = (100.0 if line is None else line) * 0.02
    o[0, sl + 1 + (3 if line is None else state)] = 1.0
    return o


def _jerks(d, obs):
    a = int(d.act(obs)[0])
    return d.jl[a // len(d.jt)], d.jt[a % len(d.jt)]


def test_it_brakes_for_its_own_red_line_and_not_for_green(driver):
    assert _jerks(driver, _obs(driver, line=12.0, state=0))[0] < 0
    assert _jerks(driver, _obs(driver, line=12.0, state=2))[0] >= 0
    assert _jerks(driver, _obs(driver, line=None))[0] >= 0


def test_it_steers_back_toward_the_lane_centre_and_into_a_bend(driver):
    assert _jerks(driver, _obs(driver, y=0.6))[1] < 0     # left of centre: jerk to the right
    assert _jerks(driver, _obs(driver, y=-0.6))[1] > 0
    assert _jerks(driver, _obs(driver, k=0.1))[1] > 0      # a left bend ahead
    assert _jerks(driver, _obs(driver))[1] == 0


def test_it_refuses_an_observation_without_the_lane_features():
    venv = TerraZeroVectorEnv(load_config("quick").with_overrides(num_worlds=1, obs={"lane_state": False}))
    try:
        with pytest.raises(ValueError, match="lane_state"):
            sd.ScriptedDriver(venv)
    finally:
        venv.close()



class _Map:
    def __init__(self, lines, inter):
        rows = [np.asarray(p, float) for p in lines]

        class Lanes:
            centerline = SimpleNamespace(row=lambda i: rows[i])
            intersection = np.asarray(inter)

            def __len__(self):
                return len(rows)

        self.lanes = Lanes()


def test_places_name_junctions_loops_bends_and_straights():
    straight = [[0.0, 0.0], [100.0, 0.0]]
    ang = np.linspace(-np.pi / 2, np.pi / 2, 19)
    loop = np.stack([200.0 + 8.0 * np.cos(ang), 8.0 * np.sin(ang)], 1)           # a U-turn: 180 degrees
    quarter = np.linspace(0.0, np.pi / 2, 10)
    bend = np.stack([10.0 * np.cos(quarter), 100.0 + 10.0 * np.sin(quarter)], 1)  # radius 10 m: 0.1 rad/m
    cross = [[50.0, -300.0], [50.0, -280.0]]
    places = vc.Places(_Map([straight, loop, bend, cross], [-1, -1, -1, 3]))
    assert places(50.0, 1.0) == "straight"
    assert places(205.0, 0.0) == "loop"
    assert places(7.0, 107.0) == "bend"
    assert places(50.0, -290.0) == "junction"


def test_lane_margins_on_the_straight_road_match_a_hand_computation():
    """straight_road: 3.5 m lanes, edges at y = +-3.5. A 4.6 x 1.9 car shifted 0.7 m toward the edge
    reaches 1.75 + 0.7 + 0.95 = 3.4 m: on the road. Turned 10 degrees as well, its front corner reaches
    1.75 + 0.5 + 0.95 cos 10 + 2.3 sin 10 = 3.59 m at a 0.5 m shift (off, on the curb side only: half
    the poses) and 3.39 m at 0.3 m (on). The end loops stay inside the edges."""
    from conftest import straight_road

    from terrazero_env import engine as core
    from terrazero_env.config import EngineConfig
    from terrazero_env.maps import build

    lm = _load("lane_margins")
    e = core.Engine(EngineConfig(num_worlds=1), maps=build(straight_road()))
    out = lm.margins(e.road_maps[0], 4.6, 1.9, 0.5)
    road = out["road"]
    assert out["road"]["lanes"] == 2 and out["loop"]["lanes"] == 2
    assert road["offset 0.0 m, 0 deg"] == 0.0 and road["offset 0.7 m, 0 deg"] == 0.0
    assert road["offset 0.3 m, 10 deg"] == 0.0
    assert road["offset 0.5 m, 10 deg"] == pytest.approx(0.5, abs=0.02)
