"""Careful-driver ablations: train the ``quick`` preset with a chosen set of the
opt-in switches for a fixed budget and several seeds, evaluate every run as ``terrazero eval`` does
(same API, same episodes and seed for every run), and print one row per run and the mean per variant.

    python benchmarks/ablate_careful.py                                  # baseline vs all-on, 3 seeds
    python benchmarks/ablate_careful.py --variants baseline,all,all-ego_features --seeds 0 1 \\
        --total-steps 400000 --episodes 200

The changes (each a set of engine-config or ``train.X`` overrides, see ``CHANGES``):

* ``vel_align_table8``: velocity alignment in table 8's form, ``-alpha_va * dt * |v - v_target|``
  (``reward_forms.vel_align: table8``) instead of also dividing by v_max.
* ``speed_limit_lane``: the speed-limit term against the current lane's posted limit
  (``reward_forms.speed_limit: lane``). Table 8 gives vehicles no speed-limit term, so on the quick
  task's cars the switch also turns the term on with the cyclist column's range [0.25, 1.0]; without
  that it would change nothing.
* ``ego_features``: appendix C's optional ego features: lane state (heading residual, lateral offset),
  lateral velocity across the lane, yaw rate, lane curvature ahead, topology distance to goal.
* ``traffic_lights``: table 12's traffic-light entities besides the stop lines.
* ``comfort_range``: the comfort weight over table 8's full vehicle range [0, 0.1] instead of the
  preset's [0, 0.02].
* ``route_progress``: the preset's goal-progress shaping measured along the lane graph
  (``reward_forms.goal_progress: route``) instead of in a straight line, so cutting a corner or
  crossing into the opposing lane toward the goal no longer pays.
* ``gentle_grid``: the car's jerk grid (-15, -3, 0, 3) longitudinal and (-3, 0, 3) lateral instead of
  (-15, -4, 0, 4) and (-4, 0, 4) (the paper gives no grid values). The kinematic coefficients scale
  jerk by up to 1.5, so on the old grid every non-zero jerk of a car drawn above 1.25 breaks table 8's
  5 m/s^3 comfort limit; with 3 m/s^3 the mildest jerks stay within it at every coefficient, and
  -15 remains for emergency braking.
* ``red_light_ends``: running a red light ends the car's episode (``consequences.red_light: remove``)
  as leaving the road does, besides table 8's fixed -3 penalty: with the quick preset's goal-progress
  shaping, a car that waits out a red gives up more reward than -3 in a 12.8 s episode.
* ``short_signals``: the Christmas controller's green and red dwells with medians of 6 s (the
  defaults: 12 s and 15 s, ours, not the paper's): in a 12.8 s episode a car that meets a 15 s red
  forfeits its goal by waiting, which costs more than table 8's -3 for running it.
* ``short_red``: the Christmas controller's red dwell alone at a median of 8 s (the default 15 s is
  longer than the whole 12.8 s episode): the reference driver reached 86.4% of its goals on
  carla_town01 with 15 s, every miss an episode that ran out behind a red line, and 91% with 8 s.
* ``comfort_weights``: the comfort weight drawn from [0.05, 0.2] instead of table 8's [0, 0.1]: at
  table 8's range some cars are nearly indifferent to comfort, and trained policies broke a comfort
  limit in 56-72% of their episodes where the reference driver on the same grid breaks one in 1-4%.
* ``stop_line_ahead``: the stop line ending the car's lane, its distance and signal state, as 5 ego
  values (``obs.stop_line_ahead``, ours). Table 12's nearest stop lines hold the same state, but the
  policy must work out which of up to 16 lines is its own; red-light runners of the 1.4M preset mostly
  never slowed, needing under 1.4 m/s^2 to stop when their line turned yellow.
* ``lane_keeping``: the lane-alignment and lane-centre weights drawn from the top of table 8's ranges,
  [0.01, 0.025] of [2.5e-4, 2.5e-2] and [2.5e-3, 7.5e-3] of [2.5e-4, 7.5e-3]: the off-road events of the
  1.4M preset are mostly a car on its lane drifting toward the curb (a median 9 degrees and 0.36 m off
  the lane's centre a step before), which these two terms price.
* ``obs_float16``: observations as float16 from the engine through the rollout buffer (section 3.1; the
  policy computes in float32): the question is whether the 16-bit data path keeps the learning unchanged.
* ``fine_lateral``: the car's lateral jerk grid (-3, -1, 0, 1, 3) m/s^3 instead of (-3, 0, 3): the
  off-road events are a car drifting toward the curb at a median 9-13 degrees off its lane a step
  before, and with three lateral values every correction is a full 3 m/s^3 jerk (0.3 m/s^2 of lateral
  acceleration per step), which overshoots at low speeds.
* ``progress_potential``: the goal-progress shaping as a potential-based term (``d_prev - gamma * d``
  with table 14's gamma 0.99, each new goal's distance charged back on the step that draws it;
  ``reward_forms.goal_progress_shaping: potential``) instead of the metres gained. With the metres
  gained, a car that waits out a red light forfeits a stream of progress income worth more than
  table 8's -3 for running it; potential-based shaping leaves every decision to the unshaped reward
  (goal bonus and penalties, the paper's economics) while still paying each step's progress.
* ``boundary_top``: the off-road (boundary) penalty drawn from [2.5, 3] instead of the preset's [1, 3],
  the top of table 8's vehicle range [0, 3]: leaving the road costs every car nearly the most the
  paper allows.
* ``hazards``: a share of the long-tail suite's obstacles in the training worlds (TerraZero trains
  among stopped vehicles, crash clusters and construction zones): up to one rear-end crash chain, one
  crash fan, one cone taper and one lane closure per world, each drawn from [0, 1].
* ``low_entropy``: PPO's entropy coefficient 0.003 instead of table 14's 0.01 (the paper's value is
  for billions of steps): aimed at the sampled policy's remaining weight on full lateral jerks and the
  -15 m/s^3 brake late in the 1.4M budget, each such pick a comfort violation or the start of a drift.
* ``min_entropy``: the entropy coefficient at 0.001.
* ``weak_progress``: the goal-progress shaping at 0.05 per metre instead of the preset's 0.1: every
  penalty of table 8 then weighs twice as much against the progress income that running a red light or
  cutting a corner earns.
* ``more_epochs``: four PPO epochs per rollout instead of table 14's two: more learning from each
  agent step, for twice the update's work.
* ``lane_align``: ``lane_align_angle`` 30 degrees: where lane centerlines overlap (intersection
  connectors, the mouth of a turning loop) the car's current lane is the one it drives along rather
  than the nearest centerline, which there can cross or oppose its travel and makes the lane-state
  features (and the stop line ahead) jump for a step.
* ``route_curvature``: ``obs.road_curvature_route``: approaching a fork (the last metres before an
  intersection), the curvature-ahead feature follows the branch on the goal's route instead of
  stopping at the lane's end, so the turn a car must make reads before it starts.
* ``lane_tracking``: ``lane_tracking``: the car's current lane kept by continuity (its previous lane,
  past its end the successor on the goal's route, then its neighbours, only then the nearest
  centerline), so inside a junction every lane feature follows the connector it drives. The quick
  preset keeps it on the evidence of ``benchmarks/lane_jumps.py`` (BENCHMARKS.md), not of a training
  run of this ablation.
* ``curvature_20m``: the curvature ahead averaged over 20 m instead of 10 m (``obs.curvature_lookahead``):
  two seconds more warning of a bend at 5 m/s, for a lateral jerk that needs about a second to build
  a turn's lateral acceleration.
* ``wrong_way``: a wrong-way penalty of 0.5-2 per second against the lane's direction
  (``rewards.wrong_way``; section 3.3 penalizes reversed travel, the weight is ours).

The bundled quick preset already holds the changes this ablation kept (ego_features, route_progress,
gentle_grid, comfort_range, stop_line_ahead, route_curvature, lane_tracking, then on the drivable car
red_light_ends, short_red and comfort_weights); ``benchmarks/quick_before_careful.yaml`` is the preset before them, the
baseline of the table in BENCHMARKS.md:

    python benchmarks/ablate_careful.py --preset benchmarks/quick_before_careful.yaml \
        --variants baseline,ego_features,ego_features+route_progress --seeds 0 1 2

A variant is ``baseline`` (the preset as it is), a change name, ``all`` (every change), ``all-NAME``
(every change but one) or names joined by ``+``. Training is ``terrazero_env.agents.train.train``
(the preset's ``train:`` section, ``--total-steps`` agent steps, the learning rate annealed over that
budget); the evaluation is ``terrazero_env.agents.evaluate.evaluate`` on each run's own config. Rates
are shares of episodes with at least one such event (the ``terrazero eval`` table). Writes
``benchmarks/results/ablate_careful.json`` (``--json``; ``--append`` adds to the records already
there, which must share the preset, budget and evaluation); runs go under ``--runs`` (a temporary
folder by default).
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from terrazero_env.agents.evaluate import evaluate, load_checkpoint, resolve_run
from terrazero_env.agents.train import train

ROOT = Path(__file__).resolve().parent.parent

#: Each change as engine-config or ``train.X`` overrides (dotted names, as ``terrazero train --set`` takes them).
CHANGES: dict[str, dict[str, Any]] = {
    "vel_align_table8": {"reward_forms.vel_align": "table8"},
    "speed_limit_lane": {"reward_forms.speed_limit": "lane", "rewards.speed_limit": {"vehicle": [0.25, 1.0]}},
    "ego_features": {"obs.lane_state": True, "obs.lateral_velocity": True, "obs.yaw_rate": True,
                     "obs.road_curvature": True, "obs.topology_goal_distance": True},
    "traffic_lights": {"obs.traffic_lights": True},
    "comfort_range": {"rewards.comfort": {"vehicle": [0.0, 0.1]}},
    "route_progress": {"reward_forms.goal_progress": "route"},
    "gentle_grid": {"classes.car.action_long": [-15.0, -3.0, 0.0, 3.0], "classes.car.action_lat": [-3.0, 0.0, 3.0]},
    "red_light_ends": {"consequences.red_light": "remove"},
    "wrong_way": {"rewards.wrong_way": {"vehicle": [0.5, 2.0]}},
    "stop_line_ahead": {"obs.stop_line_ahead": True},
    "obs_float16": {"obs.dtype": "float16"},
    "lane_keeping": {"rewards.lane_align": {"vehicle": [0.01, 0.025]}, "rewards.lane_center": {"vehicle": [0.0025, 0.0075]}},
    "short_signals": {"signals.christmas_green": [6.0, 0.3], "signals.christmas_red": [6.0, 0.4]},
    "short_red": {"signals.christmas_red": [8.0, 0.4]},
    "comfort_weights": {"rewards.comfort": {"vehicle": [0.05, 0.2]}},
    "fine_lateral": {"classes.car.action_lat": [-3.0, -1.0, 0.0, 1.0, 3.0]},
    "progress_potential": {"reward_forms.goal_progress_shaping": "potential"},
    "boundary_top": {"rewards.boundary": {"vehicle": [2.5, 3.0]}},
    "low_entropy": {"train.ent_coef": 0.003},
    "min_entropy": {"train.ent_coef": 0.001},
    "weak_progress": {"rewards.goal_progress": {"vehicle": 0.05}},
    "more_epochs": {"train.n_epochs": 4},
    "lane_align": {"lane_align_angle": 0.5235987755982988},
    "route_curvature": {"obs.road_curvature_route": True},
    "lane_tracking": {"lane_tracking": True},
    "curvature_20m": {"obs.curvature_lookahead": 20.0},
    "hazards": {"road_users.crash_chain": [0, 1], "road_users.crash_fan": [0, 1],
                "road_users.cone_taper": [0, 1], "road_users.lane_block": [0, 1]},
}
#: Table columns: (heading, evaluation row key).
COLUMNS = (("goal", "goal_reach_rate"), ("offroad", "offroad_rate"), ("wrong-way", "wrong_way_rate"),
           ("red-light", "red_light_rate"), ("collision", "collision_rate"), ("comfort", "comfort_violation_rate"))


def variant_changes(name: str) -> list[str]:
    """The change names a variant turns on (see the module docstring)."""
    if name == "baseline":
        return []
    if name == "all":
        return list(CHANGES)
    if name.startswith("all-"):
        drop = name[4:]
        if drop not in CHANGES:
            raise ValueError(f"variant {name!r}: unknown change {drop!r} (known: {sorted(CHANGES)})")
        return [c for c in CHANGES if c != drop]
    parts = name.split("+")
    unknown = [p for p in parts if p not in CHANGES]
    if unknown:
        raise ValueError(f"variant {name!r}: unknown changes {unknown} (known: {sorted(CHANGES)}, "
                         "or baseline, all, all-NAME)")
    return parts


def variant_overrides(name: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in variant_changes(name):
        out.update(CHANGES[c])
    return out


def run_one(variant: str, seed: int, total_steps: int, episodes: int, eval_seed: int, runs: Path,
            preset: str) -> dict[str, Any]:
    out = runs / f"{variant}_s{seed}"
    t0 = time.perf_counter()
    zip_path = train(preset, total_steps=total_steps, out=out, seed=seed, overrides=variant_overrides(variant),
                     progress="none", tensorboard=False)
    train_s = time.perf_counter() - t0
    _, cfg, _ = resolve_run(out)
    model = load_checkpoint(zip_path)
    t1 = time.perf_counter()
    result = evaluate(model, cfg, episodes=episodes, seed=eval_seed)
    rows = result["rows"]
    rec = {"variant": variant, "seed": seed, "train_seconds": round(train_s, 1),
           "eval_seconds": round(time.perf_counter() - t1, 1), "obs_dim": int(model.observation_space.shape[0]),
           "mean_return": rows["mean_return"]["value"]}
    for head, key in COLUMNS:
        rec[head] = rows[key]["value"]
    closed = result["closed_loop"]
    rec["speeding"] = float(np.mean(closed["speeding"]))   # share of time above the posted limit
    rec["score"] = float(np.mean(closed["score"]))         # nuPlan-style closed-loop score, 0-100
    return rec


def format_rows(records: list[dict[str, Any]], variants: list[str]) -> str:
    heads = [h for h, _ in COLUMNS]
    lines = ["| variant | seed | " + " | ".join(heads) + " | speeding | score | return |",
             "|" + "---|" * (len(heads) + 5)]
    for r in records:
        lines.append(f"| {r['variant']} | {r['seed']} | " + " | ".join(f"{r[h]:.3f}" for h in heads)
                     + f" | {r['speeding']:.3f} | {r['score']:.1f} | {r['mean_return']:.2f} |")
    for v in variants:
        rs = [r for r in records if r["variant"] == v]
        if not rs:
            continue
        means = [float(np.mean([r[h] for r in rs])) for h in heads]
        sp, sc, ret = (float(np.mean([r[k] for r in rs])) for k in ("speeding", "score", "mean_return"))
        lines.append(f"| **{v} (mean of {len(rs)})** | | " + " | ".join(f"**{m:.3f}**" for m in means)
                     + f" | **{sp:.3f}** | **{sc:.1f}** | **{ret:.2f}** |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="baseline,all",
                    help="comma-separated: baseline, all, all-NAME, NAME or NAME+NAME (names: "
                         + ", ".join(CHANGES) + ")")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--total-steps", type=int, default=1_000_000, help="agent steps per run (the ablation table's budget: 1M, the quick preset's before it grew to 1.4M)")
    ap.add_argument("--episodes", type=int, default=200, help="evaluation episodes per run")
    ap.add_argument("--eval-seed", type=int, default=0)
    ap.add_argument("--preset", default="quick", help="preset name or config YAML (the table's baseline: "
                                                      "benchmarks/quick_before_careful.yaml)")
    ap.add_argument("--runs", default=None, help="folder for the runs (default: a temporary folder)")
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "ablate_careful.json"))
    ap.add_argument("--append", action="store_true", help="keep the records already in --json")
    args = ap.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        variant_changes(v)  # unknown names stop before any training
    torch.set_num_threads(1)
    records: list[dict[str, Any]] = []
    commands = ["python benchmarks/ablate_careful.py " + " ".join(argv or [])]
    if args.append and Path(args.json).is_file():
        old = json.loads(Path(args.json).read_text(encoding="utf-8"))
        same = {k: old.get(k) for k in ("preset", "total_steps", "episodes", "eval_seed")}
        want = {"preset": args.preset, "total_steps": args.total_steps, "episodes": args.episodes,
                "eval_seed": args.eval_seed}
        if same != want:
            raise SystemExit(f"--append: {args.json} holds runs of {same}, not {want}")
        records = list(old["records"])
        commands = list(old.get("commands", [])) + commands
    shown = list(dict.fromkeys([r["variant"] for r in records] + variants))
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(args.runs) if args.runs else Path(tmp)
        # Seed-major, so a cut-short ablation still holds every variant at its first seeds.
        for seed in args.seeds:
            for v in variants:
                if any(r["variant"] == v and r["seed"] == seed for r in records):
                    continue
                rec = run_one(v, seed, args.total_steps, args.episodes, args.eval_seed, runs, args.preset)
                records.append(rec)
                print(json.dumps(rec), flush=True)
                doc = {"commands": commands,
                       "preset": args.preset, "total_steps": args.total_steps, "episodes": args.episodes,
                       "eval_seed": args.eval_seed, "changes": {v: variant_changes(v) for v in shown},
                       "overrides": CHANGES, "machine": f"{platform.processor() or platform.machine()}, "
                                                        f"{platform.python_version()}, torch {torch.__version__}",
                       "records": records}
                Path(args.json).parent.mkdir(parents=True, exist_ok=True)
                Path(args.json).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print()
    print(f"{args.preset}, {args.total_steps:,} agent steps per run, {args.episodes} evaluation episodes "
          f"(seed {args.eval_seed}, sampled actions)")
    print(format_rows(records, shown))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
