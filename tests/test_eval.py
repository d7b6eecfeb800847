"""``terrazero eval`` and ``terrazero_env.agents.evaluate``: closed-loop rollouts of an (untrained)
checkpoint, their confidence intervals, and the errors for bad inputs."""

from __future__ import annotations

import json
import math
import re
import shutil
import sys
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch
from terrazero_env.agents import PPO
from terrazero_env.agents.evaluate import (
    RATES,
    check_compatible,
    evaluate,
    load_checkpoint,
    resolve_run,
)
from terrazero_env.agents.policies import layout_from_env

import terrazero_env
from terrazero_env.cli import main
from terrazero_env.config.io import dump_config, load_config

torch.set_num_threads(1)

SMALL = {"ego_hidden": 16, "entity_hidden": 16, "trunk": (32, 32)}
LABELS = ["goal reach rate", "collision rate", "off-road rate", "red-light violation rate", "wrong-way rate",
          "comfort violation rate", "stop-line violation rate", "mean progress", "mean return"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder as ``terrazero train`` leaves it: config.yaml and an (untrained) checkpoint.zip."""
    out = tmp_path_factory.mktemp("run")
    cfg = load_config("quick")
    dump_config(cfg, out / "config.yaml")
    model = PPO("DeepSetsPolicy", terrazero_env.envs.TerraZeroVectorEnv(cfg), n_steps=16, seed=0, policy_kwargs=SMALL)
    model.save(out / "checkpoint.zip")
    return out


@pytest.fixture(scope="module")
def model(run_dir):
    return load_checkpoint(run_dir / "checkpoint.zip")


def _preset_file(tmp_path, **overrides):
    """The quick preset with ``overrides`` (``obs__max_partners=10``), as a config YAML file."""
    p = tmp_path / "preset.yaml"
    dump_config(load_config("quick", **overrides), p)
    return p


def test_cli_prints_every_row_with_an_interval_around_the_estimate(run_dir, tmp_path, capsys):
    out_json = tmp_path / "eval.json"
    assert main(["eval", str(run_dir), "--episodes", "10", "--seed", "3", "--json", str(out_json)]) == 0
    text = capsys.readouterr().out
    assert "10 episodes" in text and "seed 3" in text
    for label in LABELS:
        line = next((ln for ln in text.splitlines() if ln.startswith(label + " ")), None)
        assert line is not None, f"no row {label!r} in\n{text}"
        value, lo, hi = (float(x) for x in re.findall(r"-?\d+\.\d+", line)[:3])
        assert lo <= value <= hi, line
    data = json.loads(out_json.read_text())
    assert data["episodes"] == 10 and data["checkpoint"].endswith("checkpoint.zip")
    assert set(data["rows"]) == {k for k, _, _ in RATES} | {"mean_progress", "mean_return"}
    for key, row in data["rows"].items():
        assert row["n"] == 10
        assert row["ci_low"] <= row["value"] <= row["ci_high"], key
        if row["kind"] == "rate":
            assert 0.0 <= row["ci_low"] and row["ci_high"] <= 1.0
            assert row["value"] == row["count"] / 10
            assert row["ci_high"] > row["ci_low"]  # ten episodes never pin a rate down
    # The rows follow from the per-episode outcomes.
    per = data["per_episode"]
    assert len(per["return"]) == len(per["progress"]) == len(per["length"]) == 10
    assert math.isclose(data["rows"]["mean_return"]["value"], float(np.mean(per["return"])))
    assert data["rows"]["collision_rate"]["count"] == sum(per["events"]["collision"])


def test_exactly_n_episodes_deterministic_in_seed(model):
    cfg = load_config("quick", num_worlds=2)  # 2 worlds x 4 slots: 11 episodes end in the second round
    a = evaluate(model, cfg, episodes=11, seed=11)
    b = evaluate(model, cfg, episodes=11, seed=11)
    c = evaluate(model, cfg, episodes=11, seed=12)
    per = a["per_episode"]
    assert a["episodes"] == 11 and a["rounds"] >= 2
    assert len(per["return"]) == 11 and all(len(v) == 11 for v in per["events"].values())
    assert all(len(v) == 11 for v in per["counts"].values())
    assert all(1 <= n <= cfg.episode_length for n in per["length"])
    assert all(p <= 1.0 for p in per["progress"])
    assert a["per_episode"] == b["per_episode"] and a["rows"] == b["rows"]
    assert c["per_episode"]["return"] != per["return"]


def test_a_smaller_deterministic_sample_is_a_prefix_of_a_larger_one(model):
    cfg = load_config("quick")
    small = evaluate(model, cfg, episodes=5, seed=2, deterministic=True)["per_episode"]
    large = evaluate(model, cfg, episodes=9, seed=2, deterministic=True)["per_episode"]
    for key in ("return", "progress", "length"):
        assert large[key][:5] == small[key]
    assert len(large["return"]) == 9


def test_bad_or_missing_checkpoint_exits_2_naming_it(run_dir, tmp_path, capsys):
    missing = tmp_path / "nowhere" / "checkpoint.zip"
    assert main(["eval", str(missing)]) == 2
    err = capsys.readouterr().err
    assert str(missing) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    broken = tmp_path / "broken"
    broken.mkdir()
    shutil.copy(run_dir / "config.yaml", broken / "config.yaml")
    (broken / "checkpoint.zip").write_bytes(b"PK\x03\x04 not really a zip")
    assert main(["eval", str(broken), "--episodes", "1"]) == 2
    err = capsys.readouterr().err
    assert f"cannot load checkpoint {broken / 'checkpoint.zip'}" in err and len(err.strip().splitlines()) == 1
    assert main(["eval", str(tmp_path)]) == 2  # a folder without checkpoint.zip
    assert f"no checkpoint.zip (or model.zip) in run directory {tmp_path}" in capsys.readouterr().err


def test_config_is_found_beside_the_zip_or_one_folder_up(run_dir, tmp_path, capsys):
    nested = tmp_path / "run" / "checkpoints"
    nested.mkdir(parents=True)
    shutil.copy(run_dir / "checkpoint.zip", nested / "step_100.zip")
    lone = tmp_path / "lone.zip"
    shutil.copy(run_dir / "checkpoint.zip", lone)
    assert main(["eval", str(lone)]) == 2
    err = capsys.readouterr().err
    assert "config.yaml" in err and "--preset" in err
    shutil.copy(run_dir / "config.yaml", tmp_path / "run" / "config.yaml")
    zip_path, cfg, source = resolve_run(nested / "step_100.zip")
    assert zip_path == nested / "step_100.zip" and source == str(tmp_path / "run" / "config.yaml")
    assert cfg == load_config("quick")
    _, cfg, source = resolve_run(lone, preset="quick")
    assert source == "quick" and cfg == load_config("quick")
    iteration = tmp_path / "run" / "checkpoints" / "iter_000010"  # a training checkpoint folder
    iteration.mkdir()
    shutil.copy(run_dir / "checkpoint.zip", iteration / "model.zip")
    shutil.copy(run_dir / "config.yaml", iteration / "config.yaml")
    zip_path, _, source = resolve_run(iteration)
    assert zip_path == iteration / "model.zip" and source == str(iteration / "config.yaml")


def test_a_preset_with_another_observation_size_is_rejected(run_dir, tmp_path, capsys):
    other = _preset_file(tmp_path, obs__max_partners=10)
    size = terrazero_env.envs.TerraZeroVectorEnv(load_config(other)).single_observation_space.shape[0]
    trained = terrazero_env.envs.TerraZeroVectorEnv(load_config("quick")).single_observation_space.shape[0]
    assert size != trained
    assert main(["eval", str(run_dir), "--preset", str(other), "--episodes", "2"]) == 2
    err = capsys.readouterr().err
    assert "observation size mismatch" in err and f"takes {trained} values" in err and f"produces {size}" in err


def test_video_gif_is_written_and_mp4_needs_ffmpeg(run_dir, tmp_path, capsys, monkeypatch):
    import imageio.v3 as iio

    short = _preset_file(tmp_path, episode_length=4)
    gif = tmp_path / "eval.gif"
    assert main(["eval", str(run_dir), "--preset", str(short), "--episodes", "2", "--video", str(gif),
                 "--video-dpi", "40"]) == 0
    assert f"wrote {gif}" in capsys.readouterr().out
    frames = iio.imread(gif, index=None)
    assert gif.stat().st_size > 0 and 2 <= frames.shape[0] <= 4 + 1 and frames.shape[-1] in (3, 4)
    assert frames.std() > 0  # a drawn map, not a blank canvas
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if the video extra were not installed
    mp4 = tmp_path / "eval.mp4"
    assert main(["eval", str(run_dir), "--episodes", "1", "--video", str(mp4)]) == 2
    assert "imageio-ffmpeg" in capsys.readouterr().err and not mp4.exists()


@pytest.mark.slow
def test_video_zoom_follows_an_agent_and_a_bad_zoom_is_refused(run_dir, tmp_path, capsys):
    import imageio.v3 as iio

    short = _preset_file(tmp_path, episode_length=3)
    frames = {}
    for name, extra in (("whole", []), ("zoom", ["--video-zoom", "30"])):
        gif = tmp_path / f"{name}.gif"
        assert main(["eval", str(run_dir), "--preset", str(short), "--episodes", "1", "--video", str(gif),
                     "--video-dpi", "40", *extra]) == 0
        frames[name] = iio.imread(gif, index=None)
    assert frames["zoom"].shape == frames["whole"].shape  # same canvas, another window on the map
    assert np.abs(frames["zoom"][0].astype(int) - frames["whole"][0].astype(int)).mean() > 5
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:  # a usage error: argparse exits with status 2
        main(["eval", str(run_dir), "--episodes", "1", "--video", str(tmp_path / "x.gif"), "--video-zoom", "-5"])
    assert stop.value.code == 2
    assert "--video-zoom" in capsys.readouterr().err and not (tmp_path / "x.gif").exists()


def test_layout_agent_types_and_actions_must_match_the_policy(model):
    venv = terrazero_env.envs.TerraZeroVectorEnv(load_config("quick"))
    check_compatible(model, venv, "quick")  # the checkpoint was built on this config
    layout = layout_from_env(venv)["layout"]
    p, r = layout["partners"], layout["road"]
    moved = {**layout, "partners": [p[0], p[1] - 1, p[2]], "road": [r[0] - p[2], r[1], r[2]]}
    fake = SimpleNamespace(observation_space=model.observation_space, action_space=model.action_space,
                           policy_kwargs={"layout": moved, "agent_types": [1]})
    with pytest.raises(ValueError, match=r"layout mismatch in group\(s\) partners, road"):
        check_compatible(fake, venv, "quick")
    fake.policy_kwargs = {"layout": layout, "agent_types": [2, 3]}
    with pytest.raises(ValueError, match=r"agent type mismatch: quick controls agent type code\(s\) \[1\]"):
        check_compatible(fake, venv, "quick")
    fake.policy_kwargs = {"layout": layout, "agent_types": [1]}
    fake.action_space = gym.spaces.Discrete(9)
    with pytest.raises(ValueError, match="the checkpoint's policy has 9 actions, quick has 12"):
        check_compatible(fake, venv, "quick")


def test_vs_compares_a_policy_with_itself_on_identical_episodes(run_dir, tmp_path, capsys):
    """``--vs`` with the same checkpoint: identical seeds and scenes give identical episodes, so every
    metric's difference is 0 with an interval containing zero (none marked); the JSON table, the bar
    charts and the filmstrip of the worst episodes are written."""
    out_json, chart, film = tmp_path / "vs.json", tmp_path / "vs.png", tmp_path / "worst.png"
    assert main(["eval", str(run_dir), "--vs", str(run_dir), "--episodes", "6", "--seed", "1", "--json", str(out_json),
                 "--chart", str(chart), "--filmstrip", str(film)]) == 0
    text = capsys.readouterr().out
    assert "closed-loop score" in text and "6 paired episodes" in text
    data = json.loads(out_json.read_text())
    rows = data["comparison"]
    assert "score" in rows and "collision_severity" in rows and "speed_efficiency" in rows
    for key, row in rows.items():
        assert row["diff"] == 0.0 and row["ci_low"] <= 0.0 <= row["ci_high"] and not row["significant"], key
    assert data["closed_loop_a"] == data["closed_loop_b"]
    assert all(0.0 <= s <= 100.0 for s in data["closed_loop_a"]["score"])
    for png in (chart, film):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def test_engine_metric_rows_agree_with_the_event_counters(model):
    """Per episode, the engine's metric row and its event counters see the same steps: off-road
    steps and red-light and stop-line passages are equal, and a collision onset exists exactly when
    the collision counter is positive."""
    res = evaluate(model, load_config("quick"), episodes=12, seed=4)
    per = res["per_episode"]
    names = terrazero_env.engine.EPISODE_METRIC_NAMES
    em = np.asarray(per["engine_metrics"])
    assert em.shape == (12, len(names))
    col = {n: em[:, i] for i, n in enumerate(names)}
    np.testing.assert_array_equal(col["offroad_steps"], per["counts"]["offroad"])
    np.testing.assert_array_equal(col["red_lights"], per["counts"]["red_light"])
    np.testing.assert_array_equal(col["stop_signs"], per["counts"]["stop_line"])
    np.testing.assert_array_equal(col["collisions"] > 0, np.asarray(per["counts"]["collision"]) > 0)
    np.testing.assert_array_equal(col["steps"], per["length"])
    assert set(res["closed_loop"]) >= {"score", "ego_progress", "stall_time"}
