"""benchmarks/bench_samplers.py: the time-to-target analysis of a run's progress
log, the cold-reset dataset it trains on, and a smoke run of the whole script on tiny settings."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

from terrazero_env.maps import Dataset

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_samplers", ROOT / "benchmarks" / "bench_samplers.py")
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _rows(goals, episodes=None, dt=2.0, steps=100):
    episodes = episodes or [10] * len(goals)
    return [{"iteration": i + 1, "agent_steps": steps * (i + 1), "seconds": dt * (i + 1), "episodes": e,
             "goal": g if e else None, "mu": 0.9, "eta": 0.5}
            for i, (g, e) in enumerate(zip(goals, episodes))]


def test_smoothed_goal_weighs_rollouts_by_their_finished_episodes():
    rows = _rows([0.0, 1.0, 0.5], episodes=[30, 10, 0])
    g = bench.smoothed_goal(rows, window=2)
    # rollout 1: 0/30; rollouts 1-2: 10/40; rollouts 2-3: 10/10 (the third finished none)
    assert g == pytest.approx([0.0, 0.25, 1.0])
    assert np.isnan(bench.smoothed_goal(_rows([0.3], episodes=[0]), window=3)[0])


def test_time_to_target_is_the_first_rollout_whose_average_reaches_it():
    rows = _rows([0.0, 0.2, 0.4, 0.6, 0.1])
    r = bench.time_to_target(rows, target=0.3, window=2)  # averages 0, .1, .3, .5, .35
    assert (r["seconds"], r["agent_steps"]) == (6.0, 300)
    assert r["final_goal"] == pytest.approx(0.35)
    never = bench.time_to_target(rows, target=0.9, window=2)
    assert never["seconds"] is None and never["agent_steps"] is None and never["run_seconds"] == 10.0


def test_table_names_a_run_that_never_reached_the_target():
    hit = bench.time_to_target(_rows([0.5, 0.5]), 0.3, 1)
    miss = bench.time_to_target(_rows([0.1, 0.1]), 0.3, 1)
    table = bench.summarize({"dpsa": {0: hit, 1: hit}, "sgr": {0: hit, 1: miss}}, 0.3)
    assert "not reached in 4 s" in table[3] and "not reached in 200" in table[3]
    assert "(1/2 reached)" in table[3]
    assert "not reached" not in table[2]


def test_manifest_holds_one_map_open_so_a_new_draw_reads_the_disk(tmp_path):
    path = bench.write_manifest(tmp_path, ["grid_town", "highway"], cache_size=1)
    ds = Dataset(path)
    assert ds.cache_size == 1 and len(ds) == 2 and len(ds.groups) == 2
    a = ds[0]
    ds[1]
    assert ds.cached == 1 and ds[0] is not a  # evicted, so read again


def test_cold_resets_cost_more_than_warm_ones(tmp_path):
    path = bench.write_manifest(tmp_path, ["grid_town", "grid_town_lht", "highway", "roundabout"])
    cost = bench.measure_reset_cost(path, worlds=2, resets=24, steps=5)
    assert cost["cold_reset_ms"] > cost["warm_reset_ms"] > 0 and cost["step_ms"] > 0


@pytest.mark.slow
def test_script_trains_every_sampler_and_writes_table_json_and_plot(tmp_path, capsys):
    out = tmp_path / "runs"
    args = ["--seeds", "0", "--total-steps", "256", "--worlds", "2", "--n-steps", "16", "--target", "0.0",
            "--window", "1", "--reset-samples", "8", "--step-samples", "4", "--out", str(out),
            "--json", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png"),
            "--set", "train.policy={ego_hidden: 16, entity_hidden: 16, trunk: [32]}"]
    bench.main(args)
    report = json.loads((tmp_path / "r.json").read_text())
    assert set(report["runs"]) == {"dpsa", "sgr", "autoreset"}
    assert (tmp_path / "p.png").stat().st_size > 0
    # --read analyses the same folders without training again
    again = bench.main([*args, "--read"])
    assert again["runs"].keys() == report["runs"].keys() and again["wall_s"] == {}
    assert "| dpsa |" in capsys.readouterr().out
