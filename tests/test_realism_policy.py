"""``python -m terrazero_env.evaluation.realism --policy RUN``: a checkpoint drives the logged agents of an
imported WOMD scene and is scored beside the baselines."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from terrazero_env.agents import PPO  # noqa: E402
from terrazero_env.agents.realism_rollouts import policy_rollouts  # noqa: E402
from womd_scenes import scene  # noqa: E402

import terrazero_env  # noqa: E402
from terrazero_env.config.io import dump_config, load_config  # noqa: E402
from terrazero_env.evaluation.realism import WEIGHTS, main, realism_table  # noqa: E402
from terrazero_env.maps import build  # noqa: E402
from terrazero_env.maps.convert import womd  # noqa: E402
from terrazero_env.maps.terrabin import save  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def run_and_map(tmp_path_factory):
    out = tmp_path_factory.mktemp("run")
    cfg = load_config("quick")
    dump_config(cfg, out / "config.yaml")
    model = PPO("DeepSetsPolicy", terrazero_env.envs.TerraZeroVectorEnv(cfg), n_steps=16, seed=0,
                policy_kwargs={"ego_hidden": 16, "entity_hidden": 16, "trunk": (32, 32)})
    model.save(out / "checkpoint.zip")
    s = scene()
    s.track_valid[:] = True  # every agent over the whole window
    tz = save(build(womd.from_scenario(womd.to_scenario(s))), out / "scene.tzb")
    return out, tz


def test_policy_rollouts_move_the_controlled_agents_and_leave_the_others(run_and_map):
    run, tz = run_and_map
    name, fn = policy_rollouts(run)
    r = realism_table(str(tz), rollouts=2, future_steps=20, scene_policies={name: fn})
    assert set(r["policies"]) == {"log", "constant_velocity", "idm", name}
    assert r["agents"] == 4  # two cars, a pedestrian and a cyclist ("other" is dropped)
    s = r["policies"][name]
    assert set(s) == set(WEIGHTS) | {"meta"} and all(0.0 < v <= 1.0 for v in s.values())
    # the quick preset controls cars only: the pedestrian and cyclist stand, the car moves
    from terrazero_env.maps.terrabin import load

    m = load(tz)
    tr = m.tracks
    start = np.column_stack([tr.state[:, 10, 0], tr.state[:, 10, 1], tr.state[:, 10, 3],
                             np.hypot(tr.state[:, 10, 4], tr.state[:, 10, 5])])
    out = fn({"map": m, "start": start, "size": np.asarray(tr.size[:, :2], np.float64), "types": tr.agent_type,
              "goals": tr.state[:, -1, :2], "steps": 15, "rollouts": 2, "seed": 3})
    assert out.shape == (2, 4, 16, 3)
    moved = np.hypot(out[:, :, -1, 0] - out[:, :, 0, 0], out[:, :, -1, 1] - out[:, :, 0, 1])
    assert np.all(moved[:, 0] > 1.0) and np.allclose(moved[:, 1:3], 0.0, atol=1e-6)


def test_realism_cli_scores_a_policy(run_and_map, tmp_path, capsys):
    run, tz = run_and_map
    out = tmp_path / "r.json"
    assert main(["--map", str(tz), "--rollouts", "2", "--future-steps", "10", "--policy", str(run),
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "policy:" in text and "meta" in text
    assert f"policy:{run.name}" in json.loads(out.read_text())["policies"]


def test_a_policy_that_controls_none_of_the_logged_agents_is_refused(run_and_map):
    """Scoring a policy that drives nothing would print a realism row for the log's own motion."""
    run, tz = run_and_map
    from terrazero_env.maps.terrabin import load

    _, fn = policy_rollouts(run)
    m = load(tz)
    tr = m.tracks
    keep = tr.agent_type != tr.agent_type[0]  # drop the cars: the quick preset controls cars only
    start = np.column_stack([tr.state[keep, 10, 0], tr.state[keep, 10, 1], tr.state[keep, 10, 3],
                             np.hypot(tr.state[keep, 10, 4], tr.state[keep, 10, 5])])
    with pytest.raises(ValueError, match="controls none of this scene's logged agents"):
        fn({"map": m, "start": start, "size": np.asarray(tr.size[keep, :2], np.float64), "types": tr.agent_type[keep],
            "goals": tr.state[keep, -1, :2], "steps": 5, "rollouts": 1, "seed": 0})
