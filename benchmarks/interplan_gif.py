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
    p.add_argument("--scenes", type=int, default=10, help="scenes per family in the suite run shown (its --scenes)")
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
    scenes = interplan.build_scenes(fam, max(args.scenes, args.scene + 1), args.seed)
    sc = scenes[args.scene]
    # the worlds run_scenes puts this scene among (same map, batches of up to 16, in order), so the
    # policy sees the batch the suite gives it and the scene plays as it does there
    idx = [j for j, other in enumerate(scenes) if other.map == sc.map]
    W = min(16, len(idx))
    lo = (idx.index(args.scene) // W) * W
    chunk = idx[lo:lo + W]
    ecfg = interplan.scene_config(cfg, sc.map, W)
    e = Engine(ecfg)
    for w in range(W):
        j = chunk[w] if w < len(chunk) else chunk[0]
        e.set_scene(w, scenes[j].agents, seed=zlib.crc32(f"{scenes[j].family}/{chunk[min(w, len(chunk) - 1)]}".encode()))
    world = chunk.index(args.scene)
    actor = as_actor(model, deterministic=True)
    actor.begin(e, np.arange(len(chunk)), np.zeros(len(chunk), np.int64))
    rec = RolloutRecorder(e, world, zoom=args.zoom, dpi=args.dpi)
    rec.capture()
    live = np.zeros(W, bool)
    live[:len(chunk)] = True
    watch = np.zeros(W, bool)
    watch[world] = True
    steps = 0
    for step in drive(actor, e, live, watch=watch, limit=ecfg.episode_length + 2):
        if not step.before[world]:
            break
        steps += 1
        if steps % args.every == 0 or step.ended[world]:
            rec.capture()
    events = [k for c, k in enumerate(COUNTER_NAMES) if e.counters[world, c] > 0]
    out = rec.save(args.output, fps=args.fps)
    print(f"{args.family} scene {args.scene} ({sc.map}): {steps} steps, events {events or 'none'}; wrote {out}")


if __name__ == "__main__":
    main()
