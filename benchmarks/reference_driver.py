"""Drivability check: the baseline drivers' rates on the quick preset's worlds, one row per map.

    python benchmarks/reference_driver.py                       # reference driver, 800 episodes x 3 maps
    python benchmarks/reference_driver.py --drivers reference idm planner --episodes 400
    python benchmarks/reference_driver.py --classes car truck bus --class-maps grid_town carla_town01
    python benchmarks/reference_driver.py --maps --classes car truck bus --policy runs/planner_cpu2 \
        --class-maps grid_town carla_town01 womd_ds/ --episodes 400
    python benchmarks/reference_driver.py --maps --mixed grid_town carla_town01 --mixed-episodes 8000

With ``--classes``, a second table follows the map table: the reference driver with one vehicle class
at a time in the same worlds (``init.class_weights`` all on that class), on ``--class-maps``; the
targets there are at most 1% off-road, wrong-way, red-light and collision for cars, at most 2% for
trucks and buses, and at least 85% goal reach for each. With ``--policy RUN`` the class table is of the
worlds of that run's ``config.yaml`` (maps and class weights replaced), one row for the run's policy
(its most likely actions) and one for the reference driver on the same seeds. A class map that is a
folder stands for every ``.tzb`` scene in it (each world reset draws one).

With ``--mixed MAP ...``, a third table: the reference driver in the planner preset's own worlds (its
mixed vehicle classes, every one controlled, its IDM and planner traffic, parked rows, crash clusters,
construction zones, debris and pedestrians, its agent counts, signals and 25.6 s episodes), one row
per map and class, split from one evaluation by each episode's class (``agent_class``). Goals follow
the class table's protocol (``--mixed-goals``: 10-30 m ahead, never hidden), because the preset's own
goals measure no drivability: a hidden goal (goal dropout) names no destination, and a 120 m goal past
two 15 s reds is out of reach of a lawful driver in 25.6 s. Targets as in the class table. Its
``outside passes`` column counts the episodes with a wrong-way step more than ``PASS_WINDOW`` steps
after the driver last drove off its route lane's centre (``Engine.reference_plan``'s ``lat_off``): a
pass over the centre line of a one-lane road reads the opposing lane, which the rule counts as
wrong-way (TerraZero section 3.3), as nuPlan's driving-direction compliance does.

Each row is :func:`terrazero_env.agents.evaluate.evaluate` of a driver from
:mod:`terrazero_env.drivers` on ``load_config("quick", maps=[MAP])`` (the preset's road users, signals
and agent counts), ego progress against the posted-limit driver; rates with their Wilson 95%
intervals, as ``terrazero eval --driver NAME`` prints them. The reference driver drives on the
policy's own dynamics and action grid, so its rates are what the controls allow: the targets are at
most 1% off-road, wrong-way, red-light and collision, and at least 90% goal reach.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from terrazero_env.agents.evaluate import evaluate

from terrazero_env import load_config
from terrazero_env.config import AgentType
from terrazero_env.drivers import DRIVERS, ReferenceDriver, make_driver
from terrazero_env.engine import EPISODE_METRIC_NAMES
from terrazero_env.evaluation.metrics import episodes_where, summarize, wilson_interval

#: ``init.class_weights`` putting every agent of the worlds in one vehicle class.
CLASS_WEIGHTS = {"car": (1.0, 0.0, 0.0, 0.0, 0.0), "truck": (0.0, 1.0, 0.0, 0.0, 0.0), "bus": (0.0, 0.0, 1.0, 0.0, 0.0)}

COLUMNS = (("goal_reach_rate", "goal"), ("offroad_rate", "off-road"), ("wrong_way_rate", "wrong-way"),
           ("red_light_rate", "red light"), ("collision_rate", "collision"), ("at_fault", "at fault"),
           ("comfort_violation_rate", "comfort viol."))

#: Steps (4 s at the presets' 0.1 s) after an offset from the route lane in which wrong-way is a pass's.
PASS_WINDOW = 40


class _PassWatch(ReferenceDriver):
    """The reference driver, noting per episode whether it drove the wrong way outside a pass: a
    wrong-way step more than ``PASS_WINDOW`` steps after the plan's last lateral offset (|lat_off| >
    0.2 m). ``marks`` maps ``(round, world, agent)`` to that flag, rounds counted by ``begin``."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: dict[tuple[int, int, int], bool] = {}
        self.round = -1

    def begin(self, engine, worlds, slots) -> None:
        self.round += 1
        self.since = np.full(engine.num_worlds * engine.slots_per_world, 10 ** 6, np.int64)

    def act(self, engine) -> np.ndarray:
        K = engine.slots_per_world
        agent = np.asarray(engine.slot_agent)
        world = np.arange(agent.size) // K
        ag = np.asarray(engine.agents)
        on = agent >= 0
        flag = np.zeros(agent.size, bool)
        flag[on] = (ag["wrong_way"][world[on], agent[on]] != 0) & (ag["alive"][world[on], agent[on]] != 0)
        for r in np.flatnonzero(flag & (self.since > PASS_WINDOW)):
            self.marks[(self.round, int(world[r]), int(agent[r]))] = True
        off = np.concatenate([np.abs(engine.reference_plan(w)["lat_off"]) > 0.2 for w in range(engine.num_worlds)])
        self.since = np.where(off, 0, self.since + 1)
        return super().act(engine)


#: The class table's goals, put on the planner preset's worlds by ``--mixed``.
MIXED_GOALS = {"init__goal_distance": (10.0, 30.0), "init__goal_dropout": (0.0, 0.0, 0.0, 0.0, 0.0)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--maps", nargs="*", default=["grid_town", "carla_town01", "highway"],
                   help="maps of the per-map table (none: skip it)")
    p.add_argument("--drivers", nargs="+", default=["reference"], choices=list(DRIVERS))
    p.add_argument("--episodes", type=int, default=800)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--preset", default="quick")
    p.add_argument("--classes", nargs="*", default=[], choices=list(CLASS_WEIGHTS),
                   help="also print the reference driver's table per vehicle class (one class at a time)")
    p.add_argument("--class-maps", nargs="+", default=["grid_town", "carla_town01"],
                   help="maps of the class table; a folder: every .tzb scene in it")
    p.add_argument("--policy", default=None, metavar="RUN",
                   help="with --classes: also a run folder's policy (checkpoint.zip), in the worlds of its config.yaml")
    p.add_argument("--mixed", nargs="*", default=[], metavar="MAP",
                   help="also the reference driver per class in the planner preset's mixed worlds on these maps")
    p.add_argument("--mixed-episodes", type=int, default=8000,
                   help="episodes per map of the mixed table (all classes together; 8000 gives about 800 trucks)")
    p.add_argument("--mixed-goals", choices=("class-table", "preset"), default="class-table",
                   help="goals of the mixed table: the class table's (10-30 m, visible) or the preset's own")
    args = p.parse_args()
    if args.maps:
        print("| driver | map | " + " | ".join(label for _, label in COLUMNS) + " | s |")
        print("|---|---|" + "---|" * (len(COLUMNS) + 1))
        for name in args.drivers:
            for m in args.maps:
                _row(f"| {name} | {m} | ", make_driver(name), load_config(args.preset, maps=[m]), args)
    if args.classes:
        print()
        who = "driver | " if args.policy else ""
        print("| class | map | " + who + " | ".join(label for _, label in COLUMNS) + " | s |")
        print("|---|---|" + ("---|" if args.policy else "") + "---|" * (len(COLUMNS) + 1))
        source, model = args.preset, None
        if args.policy:
            from terrazero_env.agents.evaluate import load_checkpoint

            run = Path(args.policy)
            source, model = run / "config.yaml", load_checkpoint(run / "checkpoint.zip")
        for cls in args.classes:
            for m in args.class_maps:
                cfg = load_config(source, maps=_maps(m), init__class_weights=CLASS_WEIGHTS[cls])
                name = f"{m.rstrip('/')} ({len(cfg.maps)} scenes)" if Path(m).is_dir() else m
                if model is not None:
                    _row(f"| {cls} | {name} | policy | ", model, cfg, args, deterministic=True)
                _row(f"| {cls} | {name} | {'reference | ' if model is not None else ''}", make_driver("reference"),
                     cfg, args)
    if args.mixed:
        print()
        print("| map | class | episodes | " + " | ".join(label for _, label in COLUMNS) + " | wrong-way outside passes |")
        print("|---|---|---:|" + "---|" * (len(COLUMNS) + 1))
        goals = MIXED_GOALS if args.mixed_goals == "class-table" else {}
        for m in args.mixed:
            cfg = load_config("planner", maps=_maps(m), **goals)
            t0 = time.perf_counter()
            watch = _PassWatch()
            res = evaluate(watch, cfg, episodes=args.mixed_episodes, seed=args.seed, progress_reference="limit")
            per = res["per_episode"]
            kinds = np.asarray(per["agent_class"])
            outside = np.array([watch.marks.get(tuple(i), False) for i in per["episode_id"]])
            for cls in CLASS_WEIGHTS:
                keep = kinds == int(AgentType[cls.upper()])
                sub = episodes_where(per, keep)
                if sub["return"]:
                    n = int(keep.sum())
                    print(f"| {m} | {cls} | {n} | " + " | ".join(_cells(sub)) +
                          f" | {_cell(int(outside[keep].sum()), n)} |", flush=True)
            print(f"({m}: {time.perf_counter() - t0:.1f} s)", flush=True)


def _maps(m: str) -> list[str]:
    """A map name or file, or every ``.tzb`` scene of a folder."""
    p = Path(m)
    if p.is_dir():
        scenes = sorted(str(f) for f in p.glob("*.tzb"))
        if not scenes:
            raise SystemExit(f"--class-maps: {m} holds no .tzb scene")
        return scenes
    return [m]


def _row(head: str, driver, cfg, args: argparse.Namespace, deterministic: bool = False) -> None:
    t0 = time.perf_counter()
    res = evaluate(driver, cfg, episodes=args.episodes, seed=args.seed, deterministic=deterministic,
                   progress_reference="limit")
    print(head + " | ".join(_cells(res["per_episode"])) + f" | {time.perf_counter() - t0:.1f} |", flush=True)


def _cell(k: int, n: int) -> str:
    """A rate of ``k`` episodes in ``n`` with its Wilson 95% interval, in percent."""
    lo, hi = wilson_interval(k, n)
    return f"{100 * k / n:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def _cells(per: dict) -> list[str]:
    """The table's cells from per-episode outcomes; ``at fault``: an episode with at least one
    collision the agent caused (``at_fault_collisions``)."""
    rows = summarize(per)
    n = len(per["return"])
    col = list(EPISODE_METRIC_NAMES).index("at_fault_collisions")
    at_fault = int(np.sum(np.asarray(per["engine_metrics"], float).reshape(n, -1)[:, col] > 0))
    return [_cell(at_fault, n) if key == "at_fault" else _cell(int(rows[key]["count"]), n) for key, _ in COLUMNS]


if __name__ == "__main__":
    main()
