"""Every example runs as a user would run it (small budgets), and says what it did; the road-user
gallery's pedestrian panels are read back and show what their titles say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
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
    from terrazero_env.config.io import load_config

    assert load_config(tmp_path / "config.yaml").num_worlds == 2


def test_cli_train_reports_a_bad_config_before_any_work(tmp_path):
    exe = Path(sys.executable).with_name("terrazero")
    r = subprocess.run([str(exe), "train", "--preset", "quick", "--set", "obs.dtype=int8", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "ObsConfig.dtype" in r.stderr
    assert not (tmp_path / "checkpoint.zip").exists()


def _gallery():
    import importlib.util

    spec = importlib.util.spec_from_file_location("road_users_gallery", EXAMPLES / "road_users_gallery.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _drawn_walkers(ax, style):
    """Centres and roles of the pedestrian discs drawn inside an axis's window, read back from its
    collections (a disc is a polygon filled with a ``WALKER_STYLE`` colour)."""
    from matplotlib.collections import LineCollection, PolyCollection

    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    centres, roles = [], []
    for coll in ax.collections:
        if type(coll) is not PolyCollection:
            continue
        for path, face in zip(coll.get_paths(), coll.get_facecolors()):
            role = [r for r, (_, c) in style.items() if np.allclose(face, c)]
            c = (path.vertices.min(0) + path.vertices.max(0)) / 2  # a disc's centre
            if not role or not x0 < c[0] < x1 or not y0 < c[1] < y1:
                continue
            r = np.hypot(*(path.vertices - c).T)
            assert len(r) >= 12 and np.ptp(r) < 0.05 * r.max(), "a pedestrian drawn as something else than a disc"
            centres.append(c)
            roles.append(role[0])
    trails = [coll for coll in ax.collections if type(coll) is LineCollection and len(coll.get_paths()) >= 10
              and coll.get_colors()[0, 3] < coll.get_colors()[-1, 3]]
    return np.array(centres).reshape(-1, 2), np.array(roles), trails


def test_each_pedestrian_panel_of_the_gallery_shows_what_its_title_says():
    """Each pedestrian panel, read back from what it drew: the single-crosser panel shows one crosser
    on a crosswalk; the pack >= 2 crossers on one crosswalk walking the same way abreast; the
    bidirectional group crossers on one crosswalk walking both ways; the staggered sequence >= 2 on
    one crosswalk walking the same way one behind another; the jaywalker panel a jaywalker off every
    crosswalk. Every walker drawn is a live walker of the engine, moving, and trails a fading line."""
    from matplotlib.figure import Figure

    from terrazero_env.config import CrossingGroup
    from terrazero_env.engine import ROLES
    from terrazero_env.maps import load_source
    from terrazero_env.render import WALKER_STYLE

    shapely = pytest.importorskip("shapely")
    g = _gallery()
    crosser, jaywalker = ROLES.index("CROSSER"), ROLES.index("JAYWALKER")
    cw = load_source("grid_town").crosswalks
    crosswalks = [shapely.Polygon(cw.values[cw.offsets[k]:cw.offsets[k + 1], :2]) for k in range(len(cw))]
    assert [k for k, *_ in g.WALKER_PANELS] == [*CrossingGroup, None]
    for kind, title, extra, half in g.WALKER_PANELS:
        ax = Figure().subplots()
        scene = g.walker_panel(ax, kind, title, extra, half)
        xy, roles, trails = _drawn_walkers(ax, WALKER_STYLE)
        now, before = scene["history"][-1], scene["history"][-11]
        live = np.flatnonzero((now["alive"] == 1) & np.isin(now["role"], list(WALKER_STYLE)))
        eng_xy = np.stack([now["x"][live], now["y"][live]], -1)
        assert len(xy) >= 1 and len(trails) >= len(xy), title
        idx = [int(np.argmin(np.hypot(*(eng_xy - p).T))) for p in xy]  # the engine row behind each disc
        assert np.allclose(eng_xy[idx], xy, atol=1e-3), title
        rows = live[idx]
        assert (before["alive"][rows] == 1).all() and (before["role"][rows] == now["role"][rows]).all(), title
        vel = np.stack([now["x"][rows] - before["x"][rows], now["y"][rows] - before["y"][rows]], -1)
        assert (np.hypot(vel[:, 0], vel[:, 1]) > 0.3).all(), title  # everyone shown is walking
        on = np.array([[c.contains(shapely.Point(p)) for c in crosswalks] for p in xy])
        if kind is None:
            assert (roles == jaywalker).any() and not on[roles == jaywalker].any(), title
            continue
        k = int(np.argmax(on.sum(0)))  # the busiest crosswalk in view
        group = on[:, k] & (roles == crosser)
        unit = vel[group] / np.hypot(vel[group, 0], vel[group, 1])[:, None]
        cos = unit @ unit.T
        along = xy[group] @ unit[0]
        if kind == CrossingGroup.SINGLE:
            assert (roles == crosser).sum() == 1 and group.sum() == 1, title
        elif kind == CrossingGroup.PACK:
            assert group.sum() >= 2 and (cos > 0.7).all() and np.ptp(along) < 1.5, title
        elif kind == CrossingGroup.BIDIRECTIONAL:
            assert group.sum() >= 2 and (cos < -0.7).any(), title
        else:
            gaps = np.diff(np.sort(along))
            assert group.sum() >= 2 and (cos > 0.7).all() and (gaps > 1.0).all(), title


def test_record_replay(tmp_path):
    out = run("record_replay.py", "--steps", "20", "--out", str(tmp_path))
    from terrazero_env.replay import load_replay

    assert out.count("wrote") == 2
    for name in ("gym", "pettingzoo"):
        assert load_replay(tmp_path / f"{name}.tzr").num_frames >= 2 and (tmp_path / f"{name}.html").is_file()
