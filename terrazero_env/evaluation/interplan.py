"""The InterPlan-faithful suite (``terrazero eval RUN --suite interplan``): scripted long-tail scenes
scored as InterPlan scores them.

InterPlan (Hallgarten et al. 2024; TerraZero section 6.3.2, table 3) rewrites logged nuPlan drives
into eight long-tail families, 10 scenes each in its ``interplan10`` split, 30 s long, and scores
them with nuPlan's closed-loop score plus its own terms (``interplan/planning/script/config/
simulation/metric_aggregator/benchmark_weighted_average.yaml``). We have no nuPlan logs, so every
scene here is composed on a bundled map the way InterPlan's modifier composes its own
(``agents_modifier.py``), and placed with ``Engine.set_scene``:

- the ego on a lane, at a speed from which it can stop comfortably before the obstacle, the
  obstacle 20-60 m ahead along its route (InterPlan hard-codes one pose per scene; the range is
  ours), the goal 25-40 m past the obstacle on the route;
- ``construction_zone``: 3-8 cones (0.5 m) tapering across the ego's lane and a worker behind them;
  ``accident_site``: two crashed cars (three in one scene of ten) across the lane;
  ``nudge_stopped_vehicle``: one stopped car pushed 0.9-1.4 m towards the curb, partly in the lane;
  ``overtake_oncoming``: one stopped car on the lane centre of a one-lane-each-way road with
  oncoming IDM traffic in the other lane at InterPlan's high or medium gaps, or none (3 in 10,
  InterPlan's ``a0``);
- ``jaywalker``: a non-reactive pedestrian (a scripted crossing, ``pedestrians.pxd``) that starts
  from beyond the curb once the ego is within 50 m and walks straight across the ego's lane;
- ``lane_change_{low,medium,high}``: the goal 60-120 m ahead in an adjacent same-direction lane, with
  IDM traffic in every lane of the ego's road at gaps of 10-99 / 10-49 / 10-32 m (InterPlan's
  ``randrange(10, 100 // k)``), assertive, cautious or mixed (a draw per car).

The score of one scene (``interplan_score``): the product of the multipliers no at-fault collision,
drivable area compliance, making progress, driving direction compliance (only in the jaywalker and
lane-change families; InterPlan drops it as a multiplier in the four obstacle families, where it
is averaged with weight 1 instead) and, in the obstacle and jaywalker families, ``ego_sorts``:
1 when the ego's progress along the expert route, as a fraction of it, reaches the farthest
obstacle's (``ego_sorts_obstacle.py``: the cones, the stopped vehicles, the pedestrian's path end),
else 0; times the weighted average of time to collision within bound (5), ego progress along the
expert route (5), lane changes to goal (4), speed limit compliance (4), comfort (2). The expert
route is the ego's lane-graph route to its goal, driven at its posted limit over the scene's 30 s
(InterPlan's goal-modified expert), ignoring every obstacle. Lane changes to goal is InterPlan's
``lane_changes_to_goal.py``: with ``n0`` changes needed at the start and ``n`` left at the end, 1 if
both are 0, 0.5 if only ``n0`` is, else ``max(0, 1 - n / n0)``.

Differences from InterPlan are listed in ``docs/longtail.md`` beside the calibration of the IDM and
planner egos against its published baselines.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..config import Consequence, EngineConfig, GoalBehavior, RoadUsersConfig
from .interplan_scenes import (
    INTERPLAN,
    SCENE_SECONDS,
    InterPlanFamily,
    LaneNet,
    ScriptedScene,
    build_scenes,
    get_family,
    lane_net,
    project,
)

__all__ = ["INTERPLAN", "INTERPLAN_COLUMNS", "INTERPLAN_WEIGHTS", "InterPlanFamily", "LaneNet", "SCENE_SECONDS",
           "ScriptedScene", "build_scenes", "evaluate_interplan", "format_interplan", "get_family",
           "interplan_score", "lane_changes_to_goal", "lane_net", "project", "run_scenes", "scene_config"]

#: The weighted average's terms and weights (``benchmark_weighted_average.yaml``).
INTERPLAN_WEIGHTS = {"ttc_compliance": 5.0, "ego_progress": 5.0, "lane_changes_to_goal": 4.0,
                     "speed_limit_compliance": 4.0, "comfort": 2.0}
#: Weight of driving direction compliance in the average where it is not a multiplier (InterPlan's
#: ``default`` weight for a scored metric not listed).
DIRECTION_WEIGHT = 1.0
#: nuPlan's making-progress threshold on the ego progress ratio.
MIN_PROGRESS_RATIO = 0.2


# --------------------------------------------------------------------------------------- rollouts

def scene_config(base: EngineConfig, map_name: str, worlds: int) -> EngineConfig:
    """``base`` (a run's config: observation, reward, kinematic settings) for scripted scenes on one
    map: 30 s episodes, one controlled slot per world, room for 96 agents, the goal ends the episode,
    and driving the wrong way changes nothing but the record (a pass through the oncoming lane must
    stay possible). No generated road users: every agent is the scene's."""
    consequences = dict(base.consequences)
    consequences["wrong_way"] = Consequence.NONE
    return base.with_overrides(maps=(map_name,), num_worlds=int(worlds), slots_per_world=1,
                               max_agents_per_world=max(96, base.max_agents_per_world),
                               episode_length=int(round(SCENE_SECONDS / base.dt)),
                               consequences=consequences,
                               init={"goal_behavior": GoalBehavior.HALT, "num_agents": (1, 1)},
                               road_users=RoadUsersConfig(idm_fraction=0.0, parked=(0, 0)))


def run_scenes(actor: Any, base: EngineConfig, scenes: Sequence[ScriptedScene], batch: int = 16,
               replays: dict[int, Any] | None = None) -> list[dict[str, Any]]:
    """Drive every scene's ego with ``actor`` (anything :func:`~terrazero_env.evaluation.rollout.as_actor`
    takes; its ``begin`` is called after the scenes are set) through the one step loop
    (:func:`~terrazero_env.evaluation.rollout.drive`) and return per scene: the engine's episode metric
    row at its end, the ego's final pose, steps, and whether it reached its goal. ``replays``, when
    given, receives a :class:`~terrazero_env.replay.Replay` per scene index."""
    from ..engine import COUNTER_NAMES, EPISODE_METRIC_NAMES, Engine
    from .rollout import as_actor, drive

    actor = as_actor(actor, deterministic=True)

    out: list[dict[str, Any] | None] = [None] * len(scenes)
    by_map: dict[str, list[int]] = {}
    for i, s in enumerate(scenes):
        by_map.setdefault(s.map, []).append(i)
    for map_name, idx in by_map.items():
        W = min(batch, len(idx))
        cfg = scene_config(base, map_name, W)
        e = Engine(cfg)
        for lo in range(0, len(idx), W):
            chunk = idx[lo:lo + W]
            for w in range(W):
                sc = scenes[chunk[w] if w < len(chunk) else chunk[0]]
                e.set_scene(w, sc.agents, seed=zlib.crc32(f"{sc.family}/{chunk[min(w, len(chunk) - 1)]}".encode()))
            actor.begin(e, np.arange(len(chunk)), np.zeros(len(chunk), np.int64))
            recs = {}
            if replays is not None:
                from ..replay import ReplayRecorder

                recs = {w: ReplayRecorder(e, w) for w in range(len(chunk))}
                for r in recs.values():
                    r.capture()
            live = np.zeros(W, bool)
            live[:len(chunk)] = True
            ego_row = np.asarray(e.slot_agent).copy()
            final = np.zeros((W, len(EPISODE_METRIC_NAMES)))
            pose = np.zeros((W, 3))
            steps = np.zeros(W, np.int64)
            reached = np.zeros(W, bool)
            counts = np.zeros((W, len(COUNTER_NAMES)), np.int64)
            goal_col = list(COUNTER_NAMES).index("goal_reached")
            for step in drive(actor, e, live, limit=cfg.episode_length + 2):
                for w in np.flatnonzero(step.before):
                    if w in recs:
                        recs[w].capture()
                steps[step.before] += 1
                for w in np.flatnonzero(step.ended):
                    a = e.agents[w, ego_row[w]]
                    pose[w] = (a["x"], a["y"], a["heading"])
                    final[w] = e.episode_metrics[w]
                    reached[w] = e.counters[w, goal_col] > 0
                    counts[w] = e.counters[w]
            for w, i in enumerate(chunk):
                out[i] = {"engine_metrics": final[w].copy(), "pose": pose[w].copy(), "steps": int(steps[w]),
                          "goal_reached": bool(reached[w]),
                          "events": {k: bool(counts[w, c] > 0) for c, k in enumerate(COUNTER_NAMES)}}
                if w in recs:
                    replays[i] = recs[w].replay()
    return out  # type: ignore[return-value]


# ----------------------------------------------------------------------------------------- scores

def lane_changes_to_goal(scene: ScriptedScene, pose: Sequence[float]) -> float:
    """InterPlan's ``lane_changes_to_goal`` from the ego's final pose: the lane changes ``n`` left
    between the lane it ends in (its offset from the route in lane widths, on the ego's road and
    heading its way) and the goal's lane; None (0 here) when it ends off its road's lanes or turned."""
    s, lat = project(scene.route, pose[:2])
    k = int(np.clip(np.searchsorted(np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(scene.route, axis=0).T))]),
                                    s) - 1, 0, len(scene.route) - 2))
    d = scene.route[k + 1] - scene.route[k]
    aligned = math.cos(pose[2] - math.atan2(d[1], d[0])) > 0.0
    n0 = scene.lane_changes_needed
    w = scene.lane_width
    lanes_off = round((lat - scene.goal_offset) / w)
    on_road = aligned and abs(lat) <= (scene.road_lanes - 0.5) * w + 0.5 * w
    if not on_road:
        n = None
    else:
        n = abs(int(lanes_off))
    if n0 == 0:
        return 1.0 if n == 0 else 0.5
    if n is None:
        return 0.0
    return max(0.0, 1.0 - n / n0)


def interplan_score(scene: ScriptedScene, family: InterPlanFamily, result: dict[str, Any], dt: float) -> dict[str, float]:
    """One scene's InterPlan terms and score (module docstring) from :func:`run_scenes`' result."""
    from .metrics import closed_loop_metrics

    cl = closed_loop_metrics(np.asarray([result["engine_metrics"]]), dt, reference_progress=np.array([1.0]))
    s0, _ = project(scene.route, (scene.agents[0]["x"], scene.agents[0]["y"]))
    s1, _ = project(scene.route, result["pose"][:2])
    ego = s1 - s0
    if result["goal_reached"]:
        ego = max(ego, scene.expert_progress)
    ratio = float(np.clip(ego / max(scene.expert_progress, 1e-6), 0.0, 1.0))
    route_len = float(np.hypot(*np.diff(scene.route, axis=0).T).sum())
    gate = 1.0
    if family.gate and math.isfinite(scene.obstacle_s):
        # ego_sorts_obstacle.py: the ego's progress ratio reaches the obstacle's fraction of the line
        gate = float(ratio * scene.expert_progress / max(route_len, 1e-6) >= scene.obstacle_s / max(route_len, 1e-6))
    terms = {
        "no_at_fault_collision": float(cl["no_at_fault_collision"][0]),
        "drivable_area_compliance": float(cl["drivable_area_compliance"][0]),
        "driving_direction_compliance": float(cl["driving_direction_compliance"][0]),
        "making_progress": float(ratio >= MIN_PROGRESS_RATIO),
        "ego_sorts": gate,
        "ttc_compliance": float(cl["ttc_compliance"][0]),
        "ego_progress": ratio,
        "lane_changes_to_goal": lane_changes_to_goal(scene, result["pose"]),
        "speed_limit_compliance": float(cl["speed_limit_compliance"][0]),
        "comfort": float(cl["comfort"][0]),
    }
    mult = terms["no_at_fault_collision"] * terms["drivable_area_compliance"] * terms["making_progress"] * gate
    weights = dict(INTERPLAN_WEIGHTS)
    avg_terms = dict(terms)
    if family.direction_multiplier:
        mult *= terms["driving_direction_compliance"]
    else:
        weights["driving_direction_compliance"] = DIRECTION_WEIGHT
    avg = sum(w * avg_terms[k] for k, w in weights.items()) / sum(weights.values())
    terms["score"] = 100.0 * mult * avg
    terms["goal_reached"] = float(result["goal_reached"])
    terms["passed"] = float(ratio * scene.expert_progress >= scene.obstacle_s) if math.isfinite(scene.obstacle_s) else math.nan
    return terms


# ------------------------------------------------------------------------------------ evaluation

#: Columns of the suite's table: (key, label); each the mean over a family's scenes.
INTERPLAN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("no_at_fault_collision", "no AF coll"),
    ("drivable_area_compliance", "drivable"),
    ("ego_progress", "ego prog"),
    ("ego_sorts", "passed"),
    ("lane_changes_to_goal", "lanes2goal"),
    ("driving_direction_compliance", "direction"),
    ("goal_reached", "goal"),
    ("collision", "collision"),
    ("offroad", "off-road"),
)


def evaluate_interplan(actor: Any, config: EngineConfig, scenes: int = 10, seed: int = 0, *,
                       families: Sequence[str] | None = None,
                       on_family: Callable[[dict[str, Any]], None] | None = None,
                       replay: Any = None, label: str = "") -> dict[str, Any]:
    """Every family of :data:`INTERPLAN` (or those named) on ``scenes`` composed scenes each (10 is
    InterPlan's ``interplan10`` split), driven by ``actor`` (:func:`run_scenes`) with
    ``config``'s observation, reward and kinematic settings, scored by :func:`interplan_score`.
    Returns ``{"suite", "seed", "scenes", "families": [row, ...], "mean": row, "per_scene": {family:
    [terms, ...]}}``; ``replay``: a folder receiving each scene's browser replay and an index."""
    from .metrics import mean_interval
    from .rollout import as_actor

    if isinstance(scenes, bool) or not isinstance(scenes, (int, np.integer)) or scenes < 1:
        raise ValueError(f"scenes must be a positive integer, got {scenes!r}")
    actor = as_actor(actor, deterministic=True)
    fams = INTERPLAN if families is None else tuple(get_family(f) for f in families)
    rows, per_scene, entries = [], {}, []
    for fam in fams:
        built = build_scenes(fam, int(scenes), seed)
        store: dict[int, Any] | None = {} if replay is not None else None
        results = run_scenes(actor, config, built, replays=store)
        terms = []
        for sc, res in zip(built, results):
            t = interplan_score(sc, fam, res, float(config.dt))
            t["collision"] = float(res["events"].get("collision", False))
            t["offroad"] = float(res["events"].get("offroad", False))
            terms.append(t)
        score = np.array([t["score"] for t in terms])
        m, lo, hi = mean_interval(score)
        row: dict[str, Any] = {"family": fam.name, "description": fam.description, "maps": list(fam.maps),
                               "scenes": len(built), "score": m,
                               "score_ci": [None if np.isnan(lo) else max(lo, 0.0), None if np.isnan(hi) else min(hi, 100.0)]}
        for key, _ in INTERPLAN_COLUMNS:
            row[key] = float(np.mean([t[key] for t in terms]))
        rows.append(row)
        per_scene[fam.name] = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in t.items()}
                               for t in terms]
        if store is not None:
            from ..viewer import write_episode_replays

            eps = [{"replay": store[i], "name": f"{fam.name}/scene_{i:04d}", "focus": 0,
                    "title": f"{fam.name} scene {i} ({built[i].map})", "score": float(terms[i]["score"]),
                    "group": fam.name, "episode": i, "events": [k for k, v in results[i]["events"].items() if v],
                    "length": int(results[i]["steps"]), "config": label, "driver": actor.name}
                   for i in range(len(built))]
            entries += write_episode_replays(replay, eps, title=f"InterPlan suite ({label})", index=False)
        if on_family is not None:
            on_family(row)
    mean = {"family": "mean over families", "scenes": sum(r["scenes"] for r in rows), "score": float(np.mean([r["score"] for r in rows]))}
    for key, _ in INTERPLAN_COLUMNS:
        mean[key] = float(np.mean([r[key] for r in rows]))
    out = {"suite": "interplan", "seed": int(seed), "scenes": int(scenes), "families": rows, "mean": mean,
           "per_scene": per_scene}
    if replay is not None:
        from ..viewer import write_index

        write_index(replay, entries, f"InterPlan suite ({label}): a row per family, each scene with its score")
        out["replays"] = entries
    return out


def format_interplan(rows: Sequence[dict[str, Any]], mean: dict[str, Any]) -> str:
    """The families' rows and their mean as an aligned text table (score in [0, 100], the rest in [0, 1])."""
    name_w = max(len(mean["family"]), *(len(r["family"]) for r in rows))
    head = f"{'family':<{name_w}}  {'scenes':>6}  {'score':>6}  {'95% CI':>13}"
    head += "".join(f"  {label:>10}" for _, label in INTERPLAN_COLUMNS)
    lines = [head, "-" * len(head)]
    for r in [*rows, mean]:
        ci = r.get("score_ci")
        ci_text = "" if ci is None else "n/a" if ci[0] is None else f"[{ci[0]:.1f}, {ci[1]:.1f}]"
        line = f"{r['family']:<{name_w}}  {r['scenes']:>6}  {r['score']:>6.1f}  {ci_text:>13}"
        line += "".join(f"  {r[key]:>10.2f}" for key, _ in INTERPLAN_COLUMNS)
        if r is mean:
            lines.append("-" * len(head))
        lines.append(line)
    lines.append("score: InterPlan's (terrazero_env.evaluation.interplan), mean and 95% t interval; passed: "
                 "the ego_sorts gate (1 when the ego's progress passed the farthest obstacle; 1 in families "
                 "without one); other columns: means of the terms and shares of episodes.")
    return "\n".join(lines)
