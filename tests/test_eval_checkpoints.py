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
