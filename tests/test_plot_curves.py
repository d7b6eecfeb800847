"""benchmarks/plot_curves.py: the episode-weighted moving mean against a direct computation, and a
figure drawn from run folders holding ``progress.jsonl`` as ``terrazero train`` writes it."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("plot_curves", ROOT / "benchmarks" / "plot_curves.py")
plot_curves = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(plot_curves)


def test_smooth_is_the_episode_weighted_mean_of_the_last_window_iterations():
    rng = np.random.default_rng(0)
    v = rng.random(30)
    w = rng.integers(0, 5, 30).astype(float)
    v[w == 0] = np.nan  # no episode ended: no rate
    got = plot_curves.smooth(v, w, window=4)
    for i in range(30):
        lo = max(0, i - 3)
        ww, vv = w[lo:i + 1], np.nan_to_num(v[lo:i + 1])
        want = (ww * vv).sum() / ww.sum() if ww.sum() > 0 else np.nan
        if np.isnan(want):
            assert np.isnan(got[i])
        else:
            assert got[i] == pytest.approx(want)


def _run(folder: Path, goals: list[float | None]) -> Path:
    folder.mkdir(parents=True)
    rows = [{"iteration": i + 1, "agent_steps": 2048 * (i + 1), "episodes": 0 if g is None else 8,
             "goal": g, "offroad": None if g is None else 1 - g, "collision": None if g is None else 0.0,
             "return": None if g is None else 3 * g} for i, g in enumerate(goals)]
    (folder / "progress.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return folder


def test_plot_draws_groups_of_runs_into_a_png(tmp_path):
    for s in range(2):
        _run(tmp_path / f"a_s{s}", [None, 0.1, 0.3, 0.5 + 0.1 * s])
    _run(tmp_path / "b_s0", [0.0, 0.0, 0.2])
    groups = dict(plot_curves.parse_group(g) for g in (f"a={tmp_path}/a_s*", f"b={tmp_path}/b_s*"))
    assert [len(r) for r in groups.values()] == [2, 1]
    out = plot_curves.plot(groups, tmp_path / "curves.png", window=2)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_groups_and_logs_are_named(tmp_path):
    with pytest.raises(SystemExit, match="LABEL=GLOB"):
        plot_curves.parse_group("no-label")
    with pytest.raises(SystemExit, match="no run folder"):
        plot_curves.parse_group(f"x={tmp_path}/none_*")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "progress.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(ValueError, match="holds no iteration"):
        plot_curves.read_progress(tmp_path / "empty")
