"""benchmarks/eval_checkpoints.py: which checkpoints a curve takes, and a curve of a tiny real run whose
rows are the ones ``evaluate`` gives each checkpoint directly, continued rather than redone on a rerun."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from terrazero_env.agents.evaluate import evaluate, load_checkpoint, resolve_run  # noqa: E402
from terrazero_env.agents.train import train  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("eval_checkpoints", ROOT / "benchmarks" / "eval_checkpoints.py")
eval_checkpoints = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(eval_checkpoints)

TINY = {"train.policy": {"ego_hidden": 32, "entity_hidden": 32, "trunk": [64, 64]}, "train.n_steps": 16}


def test_pick_takes_the_first_checkpoint_at_or_after_each_mark_and_the_last():
    cps = [(s, Path(f"iter_{i:06d}")) for i, s in enumerate((100, 200, 300, 450, 600, 650), start=1)]
    got = [s for s, _ in eval_checkpoints.pick(cps, 200)]
    assert got == [200, 450, 600, 650]  # marks 200, 400, 600; then the last
    assert [s for s, _ in eval_checkpoints.pick(cps, 1000)] == [650]  # no mark reached: the last alone
    assert [s for s, _ in eval_checkpoints.pick(cps, 325)] == [450, 650]  # 325 -> 450, 650 -> 650 once


def test_checkpoint_steps_refuses_folders_that_are_not_runs(tmp_path):
    with pytest.raises(SystemExit, match="no progress.jsonl"):
        eval_checkpoints.checkpoint_steps(tmp_path)
    (tmp_path / "progress.jsonl").write_text(json.dumps({"iteration": 1, "agent_steps": 64}) + "\n")
    with pytest.raises(SystemExit, match="no checkpoint"):
        eval_checkpoints.checkpoint_steps(tmp_path)
    (tmp_path / "checkpoints" / "iter_000002").mkdir(parents=True)
    (tmp_path / "checkpoints" / "iter_000002" / "model.zip").write_bytes(b"")
    with pytest.raises(SystemExit, match="iteration 2 is not in"):
        eval_checkpoints.checkpoint_steps(tmp_path)


def test_curve_of_a_tiny_run_matches_direct_evaluation_and_continues_on_rerun(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    run = tmp_path / "run"
    per_iter = 2 * 4 * 16
    train(total_steps=per_iter * 3, out=run, num_worlds=2, checkpoint_every=1, overrides=TINY, progress="none",
          tensorboard=False)
    cps = eval_checkpoints.checkpoint_steps(run)
    assert [s for s, _ in cps] == [per_iter, 2 * per_iter, 3 * per_iter]
    out = tmp_path / "curve.json"
    rows = eval_checkpoints.evaluate_curve(run, 2 * per_iter, 8, ["deterministic", "sampled"], [0], out)
    assert [(r["agent_steps"], r["mode"]) for r in rows] == [
        (2 * per_iter, "deterministic"), (2 * per_iter, "sampled"), (3 * per_iter, "deterministic"),
        (3 * per_iter, "sampled")]
    zip_path, cfg, _ = resolve_run(str(run / "checkpoints" / "iter_000002"))
    direct = evaluate(load_checkpoint(zip_path), cfg, episodes=8, seed=0, deterministic=True)
    for key, *_ in eval_checkpoints.RATES:
        assert rows[0][key]["count"] == direct["rows"][key]["count"]
        assert rows[0][key]["value"] == direct["rows"][key]["value"]
    assert rows[0]["score"] == pytest.approx(sum(direct["closed_loop"]["score"]) / 8)
    assert json.loads(out.read_text())["rows"] == rows

    # A rerun with one more seed evaluates only the new rows.
    calls = []
    import terrazero_env.agents.evaluate as ev  # evaluate_curve imports evaluate from here when it runs

    orig = ev.evaluate
    monkeypatch.setattr(ev, "evaluate", lambda *a, **k: calls.append(k["seed"]) or orig(*a, **k))
    rows2 = eval_checkpoints.evaluate_curve(run, 2 * per_iter, 8, ["deterministic", "sampled"], [0, 1], out)
    assert calls == [1, 1, 1, 1]
    assert len(rows2) == 8 and rows2[0] == rows[0]

    png = eval_checkpoints.plot(rows2, tmp_path / "curve.png", marks=(per_iter,))
    assert png.stat().st_size > 10_000


def _row(steps, seed, seconds, **rates):
    base = {"goal_reach_rate": 0.9, "offroad_rate": 0.0, "wrong_way_rate": 0.0, "red_light_rate": 0.0,
            "collision_rate": 0.0, "comfort_violation_rate": 0.0}
    base.update(rates)
    return {"agent_steps": steps, "seconds": seconds, "mode": "deterministic", "seed": seed, "episodes": 100,
            **{k: {"value": v, "count": round(v * 100)} for k, v in base.items()}}


def test_time_to_targets_pools_the_seeds_and_takes_the_first_mark_meeting_each():
    rows = [_row(1000, 0, 60.0, offroad_rate=0.05), _row(1000, 1, 60.0, offroad_rate=0.02),  # pooled 3.5%
            _row(2000, 0, 120.0, offroad_rate=0.03, red_light_rate=0.05), _row(2000, 1, 120.0),  # 1.5%; red 2.5%
            _row(3000, 0, 180.0), _row(3000, 1, 180.0, goal_reach_rate=0.8),  # goal 85%: met
            _row(4000, 0, 240.0)]  # one seed only: left out
    table = eval_checkpoints.time_to_targets(rows, [0, 1])
    cells = table.splitlines()[2].split(" | ")
    assert cells[0] == "| deterministic"
    goal, off, wrong, red, coll, comfort, both = cells[1:]
    assert goal == "0.0M (1 min)" and off == "0.0M (2 min)" and red == "0.0M (1 min)"
    assert both.rstrip(" |") == "0.0M (3 min)"
    assert eval_checkpoints.time_to_targets(rows, [0, 1, 2]).count("not met") == 0  # no mark has seed 2
    assert "not met" in eval_checkpoints.time_to_targets([_row(1000, 0, None, collision_rate=0.5)], [0])


def test_until_stops_the_curve_at_that_many_agent_steps(tmp_path, monkeypatch):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    lines = []
    for it in (1, 2, 3):
        (run / "checkpoints" / f"iter_{it:06d}").mkdir()
        (run / "checkpoints" / f"iter_{it:06d}" / "model.zip").write_bytes(b"")
        lines.append(json.dumps({"iteration": it, "agent_steps": 100 * it, "seconds": 10.0 * it}))
    (run / "progress.jsonl").write_text("\n".join(lines) + "\n")
    import terrazero_env.agents.evaluate as ev

    seen = []
    result = {"closed_loop": {"score": [0.0] * 8},
              "rows": {k: {"value": 0.0, "ci_low": 0.0, "ci_high": 0.0, "count": 0} for k, *_ in eval_checkpoints.RATES}}
    monkeypatch.setattr(ev, "resolve_run", lambda folder: seen.append(Path(folder).name) or (None, None, None))
    monkeypatch.setattr(ev, "load_checkpoint", lambda path: object())
    monkeypatch.setattr(ev, "evaluate", lambda *a, **k: result)
    rows = eval_checkpoints.evaluate_curve(run, 100, 8, ["deterministic"], [0], None, until=250)
    assert seen == ["iter_000001", "iter_000002"]
    assert [(r["agent_steps"], r["seconds"]) for r in rows] == [(100, 10.0), (200, 20.0)]
