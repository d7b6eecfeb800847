"""Every example runs as a user would run it (small budgets), and says what it did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).parents[1] / "examples"


def run(name: str, *args: str, timeout: int = 120) -> str:
    r = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


def test_random_rollout():
    out = run("random_rollout.py", "--episodes", "2")
    assert out.count("episode ") == 2 and "steps in" in out


def test_pettingzoo_loop():
    out = run("pettingzoo_loop.py", "--steps", "50")
    assert "agents: ['agent_0'" in out


def test_engine_loop():
    out = run("engine_loop.py", "--steps", "50")
    assert "live agent-steps/s" in out and "road segments seen by slot 0" in out


@pytest.mark.slow
def test_render_rollout(tmp_path):
    out = run("render_rollout.py", "--steps", "5", "--out", str(tmp_path / "r.gif"))
    assert (tmp_path / "r.gif").stat().st_size > 10_000 and "wrote" in out


@pytest.mark.slow
def test_road_users_gallery_writes_its_panels_and_animation(tmp_path):
    out = run("road_users_gallery.py", "--out", str(tmp_path / "g.png"), "--gif", str(tmp_path / "s.gif"),
              "--steps", "3", timeout=300)
    assert (tmp_path / "g.png").stat().st_size > 50_000 and (tmp_path / "s.gif").is_file()
    assert out.count("wrote") == 2


@pytest.mark.slow
def test_sb3_ppo(tmp_path):
    pytest.importorskip("stable_baselines3")
    out = run("sb3_ppo.py", "--timesteps", "512", "--save", str(tmp_path / "ppo.zip"), timeout=300)
    assert "saved" in out and (tmp_path / "ppo.zip").is_file()


def test_cli_render_writes_an_animation(tmp_path):
    exe = Path(sys.executable).with_name("terrazero")
    r = subprocess.run([str(exe), "render", "--preset", "quick", "--steps", "4", "--dpi", "40", "-o",
                        str(tmp_path / "roll.gif")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "roll.gif").is_file() and "5 frames" in r.stdout


@pytest.mark.slow
def test_cli_train_prints_progress_and_leaves_a_loadable_checkpoint(tmp_path):
    pytest.importorskip("stable_baselines3")
    import json

    exe = Path(sys.executable).with_name("terrazero")
    r = subprocess.run([str(exe), "train", "--preset", "quick", "--total-steps", "512", "--worlds", "2",
                        "--n-steps", "32", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "steps/s" in r.stdout and "saved" in r.stdout
    rows = [json.loads(line) for line in (tmp_path / "progress.jsonl").read_text().splitlines()]
    assert rows and rows[-1]["agent_steps"] >= 512 and rows[-1]["agent_steps_per_s"] > 0
    from terrazero_env.agents import PPO

    model = PPO.load(tmp_path / "checkpoint.zip")
    assert model.num_timesteps >= 512
    from terrazero_env.config_io import load_config

    assert load_config(tmp_path / "config.yaml").num_worlds == 2


def test_cli_train_reports_a_bad_config_before_any_work(tmp_path):
    exe = Path(sys.executable).with_name("terrazero")
    r = subprocess.run([str(exe), "train", "--preset", "quick", "--set", "obs.dtype=int8", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "ObsConfig.dtype" in r.stderr
    assert not (tmp_path / "checkpoint.zip").exists()
