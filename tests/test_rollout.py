"""The one rollout (``terrazero_env.evaluation.rollout``): every actor through the same step loop, a
baseline driver's evaluation without torch, and a fixed seed's figures as they were before the
evaluations shared the loop."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from terrazero_env.config.io import load_config
from terrazero_env.drivers import make_driver
from terrazero_env.evaluation.evaluate import evaluate
from terrazero_env.evaluation.rollout import CallableActor, DriverActor, PolicyActor, as_actor

QUICK = load_config("quick")

#: ``terrazero eval --driver reference --episodes 24`` (quick preset, seed 0), recorded before the
#: evaluations moved onto the one step loop (rate counts and per-episode closed-loop scores), and
#: re-recorded when the procedural corner fillet grew from 4 m to 8 m (grid_town regenerated) and when
#: the driver learned to keep its box's sweep on the road (reference.pxd, step 3c) and goals were walked
#: from the lane an agent is placed on, and when its swept-path offset became the middle of the
#: feasible run nearest the centre instead of the smallest feasible one, and when grid_town's
#: turnaround islands were set back from their innermost lanes (one episode's score), and when the
#: driver's lateral-acceleration allowance came to fall with the radius in bends tighter than 25 m
#: (``curve_full_radius``: one off-road episode fewer; slower through the turns, two goals fewer), and
#: when a jerk-model agent far from its asked-for acceleration came to step toward it by at least one
#: grid step (reference.pxd, ``_best_action``: one goal more, one comfort violation fewer), and when its
#: swept-path boxes came to keep 0.2 m from the road edges where an offset allows it (``swept_margin``:
#: six episodes' scores), and when a car's swept-path offset came to scale with its length (a box of
#: 7 m or more takes all of ``swept_path``: one goal more, nine episodes' scores).
REFERENCE_COUNTS = {"goal_reach_rate": 22, "collision_rate": 0, "offroad_rate": 0, "red_light_rate": 0,
                    "wrong_way_rate": 0, "comfort_violation_rate": 0, "stop_line_rate": 0}
REFERENCE_SCORES = [84.110005, 92.809593, 97.642842, 81.4026, 90.292075, 76.559921, 90.210965, 89.089189, 73.724764,
                    81.823972, 80.135958, 89.241753, 79.560142, 86.2494, 98.226716, 74.644627, 85.762959, 72.097106,
                    87.42593, 99.349503, 92.349538, 98.736416, 91.937148, 100.0]


def test_a_fixed_seeds_reference_table_is_unchanged():
    out = evaluate(make_driver("reference"), QUICK, episodes=24, seed=0)
    assert {k: out["rows"][k]["count"] for k in REFERENCE_COUNTS} == REFERENCE_COUNTS
    np.testing.assert_allclose(out["closed_loop"]["score"], REFERENCE_SCORES, atol=1e-4)


class _Constant:
    """A stand-in model with SB3's ``predict``: every slot takes the same action."""

    def __init__(self, action: int) -> None:
        self.action = action
        self.calls = 0

    def predict(self, obs, deterministic=False):
        self.calls += 1
        return np.full(obs.shape[0], self.action, np.int64), None


def test_a_callable_and_a_predict_model_drive_the_same_episodes():
    model = _Constant(3)
    by_model = evaluate(model, QUICK, episodes=6, seed=2, progress_reference="limit")
    by_callable = evaluate(lambda obs: np.full(obs.shape[0], 3, np.int64), QUICK, episodes=6, seed=2,
                           progress_reference="limit")
    assert model.calls > 0
    assert by_model["per_episode"] == by_callable["per_episode"]
    other = evaluate(lambda obs: np.full(obs.shape[0], 0, np.int64), QUICK, episodes=6, seed=2,
                     progress_reference="limit")
    assert other["per_episode"]["engine_metrics"] != by_model["per_episode"]["engine_metrics"]


def test_as_actor_takes_what_a_user_hands_over_and_names_what_it_cannot():
    assert isinstance(as_actor(make_driver("idm")), DriverActor)
    assert as_actor(make_driver("planner")).name == "planner"
    actor = as_actor(_Constant(1), deterministic=True)
    assert isinstance(actor, PolicyActor) and actor.deterministic and actor.name == "policy"
    assert isinstance(as_actor(lambda obs: obs), CallableActor)
    assert as_actor(actor) is actor
    with pytest.raises(TypeError, match="cannot drive with int"):
        as_actor(3)


def test_eval_of_a_baseline_driver_runs_with_torch_blocked():
    # ``sys.modules["torch"] = None`` makes every ``import torch`` fail, as on an install without it
    code = ("import sys; sys.modules['torch'] = None\n"
            "from terrazero_env.cli import main\n"
            "rc = main(['eval', '--driver', 'reference', '--episodes', '4'])\n"
            "assert 'torch' not in sys.modules or sys.modules['torch'] is None\n"
            "rc2 = main(['eval', '--driver', 'idm', '--suite', 'interplan', '--scenes', '1'])\n"
            "sys.exit(rc or rc2)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the reference driver" in done.stdout and "goal reach rate" in done.stdout
    assert "mean over families" in done.stdout


def test_terrazero_realism_is_the_modules_table(tmp_path, capsys):
    from terrazero_env.cli import main
    from terrazero_env.evaluation import realism

    args = ["--rollouts", "2", "--future-steps", "6"]
    assert main(["realism", *args, "--json", str(tmp_path / "cli.json")]) == 0
    assert realism.main([*args, "--json", str(tmp_path / "module.json")]) == 0
    assert (tmp_path / "cli.json").read_text() == (tmp_path / "module.json").read_text()
    assert "meta" in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["realism", "--rollouts", "0"])
    assert bad.value.code == 2


def test_the_old_realism_module_name_forwards_with_a_warning():
    done = subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-m", "terrazero_env.realism", "--help"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "terrazero realism" in done.stdout
    assert "moved to terrazero_env.evaluation.realism" in done.stderr


class _ModeModel(_Constant):
    """Takes action 3 when asked for its most likely action, 0 when sampling: tells the two apart."""

    def predict(self, obs, deterministic=False):
        return np.full(obs.shape[0], 3 if deterministic else 0, np.int64), None


@pytest.mark.parametrize("suite, family", [("interplan", "nudge_stopped_vehicle"), ("longtail", "jaywalker")])
def test_a_suite_takes_sampled_actions_when_asked(suite, family, monkeypatch):
    from terrazero_env.evaluation import suite_eval

    monkeypatch.setattr(suite_eval, "actor_for", lambda model, venv, det, name: as_actor(model, det))
    kw = {"families": [family], "scenes": 1, "seed": 0}
    det = suite_eval.evaluate_suite(_ModeModel(0), QUICK, suite, **kw)
    smp = suite_eval.evaluate_suite(_ModeModel(0), QUICK, suite, sampled=True, **kw)
    assert det["deterministic"] is True and smp["deterministic"] is False
    key = "per_scene" if suite == "interplan" else "closed_loop"
    assert det[key] != smp[key]
