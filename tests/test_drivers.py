"""Baseline drivers (``terrazero_env.drivers``): the reference driver on the policy's own controls, the
IDM and planner egos, and ``terrazero eval --driver``.

The drivability checks here are the short version of the reference driver's benchmark
(BENCHMARKS.md, "A reference driver on the same controls"): a few dozen quick-preset episodes per
map, with bounds loose enough for that sample and tight enough that a broken steering law, speed law
or lane pick fails them (a driver holding its action at zero leaves the road in most episodes).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from terrazero_env.agents.evaluate import evaluate

from terrazero_env import load_config
from terrazero_env.drivers import DRIVERS, Driver, IdmDriver, PlannerDriver, ReferenceDriver, make_driver


def _engine(maps=("grid_town",), worlds=4, seed=3):
    cfg = load_config("quick", maps=list(maps), num_worlds=worlds)
    from terrazero_env.envs import TerraZeroVectorEnv

    venv = TerraZeroVectorEnv(cfg, autoreset_mode="Disabled")
    venv.reset(seed=[seed + w for w in range(worlds)])
    return venv


def _rate(result, key):
    return result["rows"][key]["value"]


# ----------------------------------------------------------------------------- settings


def test_make_driver_names_and_unknown():
    assert set(DRIVERS) == {"reference", "idm", "planner"}
    assert isinstance(make_driver("reference"), ReferenceDriver)
    assert isinstance(make_driver("idm"), IdmDriver)
    assert isinstance(make_driver("planner"), PlannerDriver)
    with pytest.raises(ValueError, match="unknown driver 'pdm'"):
        make_driver("pdm")


@pytest.mark.parametrize("bad", [{"preview": -0.1}, {"preview": math.nan}, {"goal_speed": math.inf},
                                 {"accel_tau": True}, {"horizon": "2"}, {"goal_decel": 0.0}])
def test_reference_settings_bad_values_raise_value_error(bad):
    name = next(iter(bad))
    with pytest.raises(ValueError, match=name):
        ReferenceDriver(**bad)


def test_reference_settings_unknown_name_raises_type_error():
    with pytest.raises(TypeError, match="gain"):
        ReferenceDriver(gain=1.0)
    venv = _engine(worlds=1)
    try:
        with pytest.raises(TypeError, match="gain"):
            venv.engine.reference_actions(gain=1.0)
    finally:
        venv.close()


# ----------------------------------------------------------------------------- the reference driver's actions


def test_reference_actions_are_grid_indices_and_leave_the_state_alone():
    venv = _engine()
    try:
        e = venv.engine
        before = np.array(e.agents).copy()
        acts = e.reference_actions()
        assert acts.dtype == np.int32 and acts.shape == (venv.num_envs,)
        assert (acts >= 0).all() and (acts < venv.single_action_space.n).all()
        np.testing.assert_array_equal(np.array(e.agents), before)  # reads the state, changes none of it
        out = np.full(venv.num_envs, -7, np.int32)
        assert e.reference_actions(out) is out
        np.testing.assert_array_equal(out, acts)
        with pytest.raises((ValueError, TypeError)):
            e.reference_actions(np.zeros(venv.num_envs, np.int64))
    finally:
        venv.close()


def test_reference_actions_are_deterministic():
    runs = []
    for _ in range(2):
        venv = _engine(seed=11)
        try:
            seq = []
            for _ in range(40):
                a = venv.engine.reference_actions().copy()
                seq.append(a)
                venv.step(a.astype(np.int64))
            runs.append(np.stack(seq))
        finally:
            venv.close()
    np.testing.assert_array_equal(runs[0], runs[1])


def test_reference_plan_reports_the_route_for_driven_slots():
    venv = _engine(worlds=1)
    try:
        e = venv.engine
        plan = e.reference_plan(0)
        K = venv.slots_per_world
        for key in ("lane", "route_lane", "accel", "steer", "v0", "gap", "action"):
            assert len(plan[key]) == K, key
        driven = np.asarray(plan["action"]) >= 0
        assert driven.any()
        assert (np.asarray(plan["lane"])[driven] >= 0).all()
        assert np.isfinite(np.asarray(plan["v0"])[driven]).all()
        np.testing.assert_array_equal(np.asarray(plan["action"])[driven], e.reference_actions()[:K][driven])
        with pytest.raises(ValueError, match="world"):
            e.reference_plan(1)
        with pytest.raises(ValueError, match="world"):
            e.reference_plan(-1)
    finally:
        venv.close()


# ----------------------------------------------------------------------------- drivability (short version)


class _Hold(Driver):
    """The zero action on every slot: keeps speed and steering, a driver that cannot follow a road."""

    def act(self, engine):
        return np.zeros(engine.num_worlds * engine.slots_per_world, np.int32)


@pytest.mark.parametrize("map_name", ["grid_town", "carla_town01", "highway"])
def test_reference_driver_keeps_to_the_road(map_name):
    cfg = load_config("quick", maps=[map_name])
    res = evaluate(make_driver("reference"), cfg, episodes=48, seed=5, progress_reference="limit")
    assert _rate(res, "offroad_rate") <= 0.05, res["rows"]["offroad_rate"]
    assert _rate(res, "wrong_way_rate") <= 0.05
    assert _rate(res, "red_light_rate") <= 0.05
    assert _rate(res, "collision_rate") <= 0.05
    assert _rate(res, "goal_reach_rate") >= 0.7, res["rows"]["goal_reach_rate"]


def test_a_driver_that_cannot_steer_fails_the_same_bounds():
    """The bounds above can fail: the zero action leaves grid_town's roads far more often."""
    res = evaluate(_Hold(), load_config("quick", maps=["grid_town"]), episodes=48, seed=5, progress_reference="limit")
    assert _rate(res, "offroad_rate") > 0.05 or _rate(res, "goal_reach_rate") < 0.7


@pytest.mark.parametrize("name", ["idm", "planner"])
def test_rule_based_egos_keep_to_the_road(name):
    res = evaluate(make_driver(name), load_config("quick", maps=["grid_town"]), episodes=48, seed=5,
                   progress_reference="limit")
    assert _rate(res, "offroad_rate") <= 0.03
    assert _rate(res, "wrong_way_rate") <= 0.03
    assert _rate(res, "goal_reach_rate") >= 0.8


# ----------------------------------------------------------------------------- the CLI


def _cli(*argv, timeout=600):
    return subprocess.run([sys.executable, "-m", "terrazero_env.cli", *argv], capture_output=True, text=True,
                          timeout=timeout)


def test_cli_eval_driver_table_and_json(tmp_path):
    out = tmp_path / "ref.json"
    p = _cli("eval", "--driver", "reference", "--preset", "quick", "--maps", "grid_town", "--episodes", "8",
             "--progress-reference", "limit", "--json", str(out))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("the reference driver on grid_town (config quick): 8 episodes")
    assert "closed-loop score" in p.stdout and "off-road" in p.stdout
    doc = json.loads(out.read_text())
    assert doc["driver"] == "reference" and doc["episodes"] == 8 and "checkpoint" not in doc


def test_cli_eval_driver_vs_driver():
    p = _cli("eval", "--driver", "reference", "--vs", "idm", "--maps", "grid_town", "--episodes", "6",
             "--progress-reference", "limit")
    assert p.returncode == 0, p.stderr
    assert "A = the reference driver\nB = the idm driver" in p.stdout
    assert "the drivers' actions" in p.stdout and "A - B" in p.stdout


@pytest.mark.parametrize("argv, message", [
    ((), "name what to evaluate"),
    (("runs/x", "--driver", "idm"), "not both"),
    (("--driver", "pdm"), "invalid choice: 'pdm'"),
    (("--driver", "idm", "--vs", "no/such/run"), "checkpoint not found: no/such/run"),
])
def test_cli_eval_driver_errors_are_one_line(argv, message):
    p = _cli("eval", *argv)
    assert p.returncode == 2
    assert message in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_suite_runs_a_driver():
    from terrazero_env.agents.suite_eval import evaluate_suite

    out = evaluate_suite(make_driver("idm"), load_config("quick"), "longtail", scenes=2, seed=0,
                         families=["accident_site"], progress_reference="limit")
    (row,) = out["families"]
    assert row["family"] == "accident_site" and row["scenes"] == 2
    assert 0.0 <= row["score"] <= 100.0
