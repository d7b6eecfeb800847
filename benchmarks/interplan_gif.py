"""A GIF of one InterPlan scene driven by a trained policy or a baseline driver (docs/longtail.md).

    python benchmarks/interplan_gif.py runs/longtail3 --family nudge_stopped_vehicle --scene 0 -o nudge.gif
    python benchmarks/interplan_gif.py --driver reference --family overtake_oncoming --scene 2 -o overtake.gif

The scene is composed as ``terrazero eval --suite interplan`` composes it (same family, scene index
and seed: ``--scene 0`` is the first scene of the suite's row), driven on the policy's most likely
actions through the suite's own step loop (:func:`terrazero_env.evaluation.rollout.drive`), and drawn
each step in a window following the ego (:class:`terrazero_env.render.RolloutRecorder`). Prints the
scene's outcome (steps, goal reached, the events of its episode).
"""

from __future__ import annotations

import argparse
import zlib

import numpy as np

from terrazero_env.config.io import load_config
from terrazero_env.drivers import DRIVERS, make_driver
from terrazero_env.engine import COUNTER_NAMES, Engine
from terrazero_env.evaluation import interplan
from terrazero_env.evaluation.rollout import as_actor, drive
from terrazero_env.render import RolloutRecorder


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", nargs="?", default=None, help="a terrazero train folder or checkpoint zip")
    p.add_argument("--driver", choices=list(DRIVERS), default=None, help="a baseline driver instead of a run")
    p.add_argument("--family", required=True, choices=[f.name for f in interplan.INTERPLAN])
    p.add_argument("--scene", type=int, default=0, help="scene index within the family (the suite's order)")
    p.add_argument("--seed", type=int, default=0, help="the suite's seed")
    p.add_argument("--zoom", type=float, default=25.0, help="half-width (m) of the window on the ego")
    p.add_argument("--dpi", type=int, default=60)
    p.add_argument("--fps", type=int, default=10)
    p.add_argument("--every", type=int, default=2, help="keep every n-th step's frame")
    p.add_argument("-o", "--output", required=True, help=".gif (or .mp4 with imageio-ffmpeg)")
    args = p.parse_args()
    if (args.run is None) == (args.driver is None):
        p.error("name a run or a --driver (one of them)")
    if args.driver is not None:
        model, cfg = make_driver(args.driver), load_config("quick")
    else:
        from terrazero_env.agents.evaluate import load_checkpoint
        from terrazero_env.evaluation.evaluate import resolve_run

        zip_path, cfg, _ = resolve_run(args.run)
        model = load_checkpoint(zip_path)
    fam = interplan.get_family(args.family)
    scenes = interplan.build_scenes(fam, args.scene + 1, args.seed)
    sc = scenes[args.scene]
    ecfg = interplan.scene_config(cfg, sc.map, 1)
    e = Engine(ecfg)
    # the seed run_scenes gives the scene's world (its index in the family)
    e.set_scene(0, sc.agents, seed=zlib.crc32(f"{sc.family}/{args.scene}".encode()))
    actor = as_actor(model, deterministic=True)
    actor.begin(e, np.arange(1), np.zeros(1, np.int64))
    rec = RolloutRecorder(e, 0, zoom=args.zoom, dpi=args.dpi)
    rec.capture()
    live = np.zeros(e.num_worlds * e.slots_per_world, bool)
    live[0] = True
    steps = 0
    for step in drive(actor, e, live, limit=ecfg.episode_length + 2):
        steps += 1
        if steps % args.every == 0 or not step.live.any():
            rec.capture()
    events = [k for c, k in enumerate(COUNTER_NAMES) if e.counters[0, c] > 0]
    out = rec.save(args.output, fps=args.fps)
    print(f"{args.family} scene {args.scene} ({sc.map}): {steps} steps, events {events or 'none'}; wrote {out}")


if __name__ == "__main__":
    main()
