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
two 15 s reds is out of reach of a lawful driver in 25.6 s. Targets as in the class table. The
rule counts a pass over the centre line of a one-lane road as wrong-way (TerraZero section 3.3: the
heading against the lane the car is on; nuPlan's driving-direction compliance counts it too), so
every table adds the wrong-way the road codes leave unexcused: its last column (``ObstructionWatch``) counts
the episodes with a wrong-way step when no obstruction stood by the car's path at that step or in
the ``PASS_WINDOW`` steps before (California Vehicle Code 21650(b), Uniform Vehicle Code 11-301(a)(2):
driving left of the centre is allowed "when an obstruction exists making it necessary"). An
obstruction is a static actor (parked vehicle, crash, cone, debris, worker) or a vehicle standing
(under 0.5 m/s) and heading within 90 degrees of the car's heading, whose centre lies between
``OBSTRUCTION_AHEAD`` m ahead of the car's centre and half the two lengths plus ``OBSTRUCTION_BEHIND``
m behind it, within ``OBSTRUCTION_SIDE`` m to either side: the engine's state, not the driver's
intent.

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
from terrazero_env.drivers import DRIVERS, make_driver
from terrazero_env.engine import EPISODE_METRIC_NAMES, ROLES
from terrazero_env.evaluation.metrics import episodes_where, summarize, wilson_interval
from terrazero_env.evaluation.rollout import Actor, as_actor

#: ``init.class_weights`` putting every agent of the worlds in one vehicle class.
CLASS_WEIGHTS = {"car": (1.0, 0.0, 0.0, 0.0, 0.0), "truck": (0.0, 1.0, 0.0, 0.0, 0.0), "bus": (0.0, 0.0, 1.0, 0.0, 0.0)}

COLUMNS = (("goal_reach_rate", "goal"), ("offroad_rate", "off-road"), ("wrong_way_rate", "wrong-way"),
           ("red_light_rate", "red light"), ("collision_rate", "collision"), ("at_fault", "at fault"),
           ("comfort_violation_rate", "comfort viol."))

#: The last column of every table: wrong-way away from obstructions (``ObstructionWatch``).
AWAY = "wrong-way away from obstructions"

#: Steps (4 s at the presets' 0.1 s) after an obstruction was by the car's path in which its wrong-way
#: step is a pass's.
PASS_WINDOW = 40
#: The reach of an obstruction (m): ahead of the car's centre, behind it (past half the two lengths),
#: and to either side.
OBSTRUCTION_AHEAD, OBSTRUCTION_BEHIND, OBSTRUCTION_SIDE = 30.0, 5.0, 5.5


def obstructed(ag, world: np.ndarray, agent: np.ndarray) -> np.ndarray:
    """Whether an obstruction stands by each given agent's path (``ag``: ``Engine.agents``, one row of
    ``world``, ``agent`` per query): a static actor, or a standing vehicle heading within 90 degrees of
    the agent's heading, centred within ``OBSTRUCTION_AHEAD`` m ahead, half the two lengths plus
    ``OBSTRUCTION_BEHIND`` m behind and ``OBSTRUCTION_SIDE`` m to either side of the agent's centre."""
    if agent.size == 0:
        return np.zeros(0, bool)
    x, y, h, ln = (ag[k][world, agent][:, None] for k in ("x", "y", "heading", "length"))
    ox, oy, oh, ol = (ag[k][world] for k in ("x", "y", "heading", "length"))
    dx, dy = ox - x, oy - y
    c, s = np.cos(h), np.sin(h)
    along, side = dx * c + dy * s, dy * c - dx * s
    static = ag["role"][world] == ROLES.index("STATIC")
    standing = ((np.abs(ag["speed"][world]) < 0.5) & (ag["cls"][world] != int(AgentType.PEDESTRIAN))
                & (np.cos(oh - h) > 0.0))
    near = ((along <= OBSTRUCTION_AHEAD) & (along >= -(0.5 * (ln + ol) + OBSTRUCTION_BEHIND))
            & (np.abs(side) <= OBSTRUCTION_SIDE))
    near &= (ag["alive"][world] != 0) & (static | standing)
    near[np.arange(agent.size), agent] = False
    return near.any(axis=1)


class ObstructionWatch(Actor):
    """Drives as ``subject`` does (a driver, a model, any :class:`Actor`), noting per episode whether
    its agent drove the wrong way away from obstructions: a wrong-way step more than ``PASS_WINDOW``
    steps after the last step with an obstruction by its path (:func:`obstructed`). ``marks`` maps
    ``(round, world, agent)`` (``per_episode["episode_id"]``) to that flag, rounds counted by ``begin``."""

    def __init__(self, subject, deterministic: bool = False) -> None:
        self.inner = as_actor(subject, deterministic)
        self.name = self.inner.name
        self.marks: dict[tuple[int, int, int], bool] = {}
        self.round = -1

    def begin(self, engine, worlds, slots) -> None:
        self.round += 1
        self.since = np.full(engine.num_worlds * engine.slots_per_world, 10 ** 6, np.int64)
        self.inner.begin(engine, worlds, slots)

    def act(self, engine, obs) -> np.ndarray:
        K = engine.slots_per_world
        agent = np.asarray(engine.slot_agent)
        world = np.arange(agent.size) // K
        ag = np.asarray(engine.agents)
        on = np.flatnonzero(agent >= 0)
        near = np.zeros(agent.size, bool)
        near[on] = obstructed(ag, world[on], agent[on])
        self.since = np.where(near, 0, self.since + 1)
        flag = np.zeros(agent.size, bool)
        flag[on] = (ag["wrong_way"][world[on], agent[on]] != 0) & (ag["alive"][world[on], agent[on]] != 0)
        for r in np.flatnonzero(flag & (self.since > PASS_WINDOW)):
            self.marks[(self.round, int(world[r]), int(agent[r]))] = True
        return self.inner.act(engine, obs)

    def seeded(self, seed: int):
        return self.inner.seeded(seed)

    def forked(self):
        return self.inner.forked()

    def unexcused(self, per: dict) -> np.ndarray:
        """Per episode of ``per`` (an evaluation's ``per_episode``): whether it drove the wrong way
        away from obstructions."""
        return np.array([self.marks.get(tuple(int(v) for v in i), False) for i in per["episode_id"]], bool)


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
        print("| driver | map | " + " | ".join(label for _, label in COLUMNS) + f" | {AWAY} | s |")
        print("|---|---|" + "---|" * (len(COLUMNS) + 2))
        for name in args.drivers:
            for m in args.maps:
                _row(f"| {name} | {m} | ", make_driver(name), load_config(args.preset, maps=[m]), args)
    if args.classes:
        print()
        who = "driver | " if args.policy else ""
        print("| class | map | " + who + " | ".join(label for _, label in COLUMNS) + f" | {AWAY} | s |")
        print("|---|---|" + ("---|" if args.policy else "") + "---|" * (len(COLUMNS) + 2))
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
        print("| map | class | episodes | " + " | ".join(label for _, label in COLUMNS) + f" | {AWAY} |")
        print("|---|---|---:|" + "---|" * (len(COLUMNS) + 1))
        goals = MIXED_GOALS if args.mixed_goals == "class-table" else {}
        for m in args.mixed:
            cfg = load_config("planner", maps=_maps(m), **goals)
            t0 = time.perf_counter()
            watch = ObstructionWatch(make_driver("reference"))
            res = evaluate(watch, cfg, episodes=args.mixed_episodes, seed=args.seed, progress_reference="limit")
            per = res["per_episode"]
            kinds = np.asarray(per["agent_class"])
            outside = watch.unexcused(per)
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
    watch = ObstructionWatch(driver, deterministic)
    res = evaluate(watch, cfg, episodes=args.episodes, seed=args.seed, deterministic=deterministic,
                   progress_reference="limit")
    per = res["per_episode"]
    away = _cell(int(watch.unexcused(per).sum()), len(per["return"]))
    print(head + " | ".join(_cells(per)) + f" | {away} | {time.perf_counter() - t0:.1f} |", flush=True)


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
