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


def test_render_rollout(tmp_path):
    out = run("render_rollout.py", "--steps", "5", "--out", str(tmp_path / "r.gif"))
    assert (tmp_path / "r.gif").stat().st_size > 10_000 and "wrote" in out


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
