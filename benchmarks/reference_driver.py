"""Drivability check: the baseline drivers' rates on the quick preset's worlds, one row per map.

    python benchmarks/reference_driver.py                       # reference driver, 800 episodes x 3 maps
    python benchmarks/reference_driver.py --drivers reference idm planner --episodes 400
    python benchmarks/reference_driver.py --classes car truck bus --class-maps grid_town carla_town01
    python benchmarks/reference_driver.py --maps --classes car truck bus --policy runs/planner_cpu2 \
        --class-maps grid_town carla_town01 womd_ds/ --episodes 400

With ``--classes``, a second table follows the map table: the reference driver with one vehicle class
at a time in the same worlds (``init.class_weights`` all on that class), on ``--class-maps``; the
targets there are at most 1% off-road, wrong-way, red-light and collision for cars, at most 2% for
trucks and buses, and at least 85% goal reach for each. With ``--policy RUN`` the class table is of the
worlds of that run's ``config.yaml`` (maps and class weights replaced), one row for the run's policy
(its most likely actions) and one for the reference driver on the same seeds. A class map that is a
folder stands for every ``.tzb`` scene in it (each world reset draws one).

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

from terrazero_env.agents.evaluate import evaluate

from terrazero_env import load_config
from terrazero_env.drivers import DRIVERS, make_driver

#: ``init.class_weights`` putting every agent of the worlds in one vehicle class.
CLASS_WEIGHTS = {"car": (1.0, 0.0, 0.0, 0.0, 0.0), "truck": (0.0, 1.0, 0.0, 0.0, 0.0), "bus": (0.0, 0.0, 1.0, 0.0, 0.0)}

COLUMNS = (("goal_reach_rate", "goal"), ("offroad_rate", "off-road"), ("wrong_way_rate", "wrong-way"),
           ("red_light_rate", "red light"), ("collision_rate", "collision"),
           ("comfort_violation_rate", "comfort viol."))


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
    cells = []
    for key, _ in COLUMNS:
        row = res["rows"][key]
        cells.append(f"{100 * row['value']:.1f}% [{100 * row['ci_low']:.1f}, {100 * row['ci_high']:.1f}]")
    print(head + " | ".join(cells) + f" | {time.perf_counter() - t0:.1f} |", flush=True)


if __name__ == "__main__":
    main()
