"""The ``terrazero`` command line.

    terrazero maps build SRC -o OUT.tzb      validate + derive a map source and write terrabin
    terrazero maps inspect FILE [--json]     counts, bounds, handedness, lane-graph health
    terrazero maps render FILE -o map.png    draw a map with matplotlib
    terrazero maps list                      bundled maps
    terrazero maps regenerate [--out-dir D]  rebuild the bundled maps from their YAML specs
    terrazero render --preset quick --steps 200 -o rollout.mp4   record a rollout (GIF fallback)
    terrazero train --preset quick --total-steps 50000 --out runs/quick   train PPO with DPSA
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence

from .maps import MapValidationError, TerrabinError, build
from .maps.analysis import summary
from .maps.sources import bundled_maps, load_built, load_source, regenerate

__all__ = ["main"]


def _cmd_build(args: argparse.Namespace) -> int:
    from .maps.terrabin import save

    t0 = time.perf_counter()
    m = build(load_source(args.src))
    t1 = time.perf_counter()
    path = save(m, args.output)
    c = m.counts()
    print(f"built {args.src} -> {path} in {1e3 * (t1 - t0):.1f} ms: {c['lanes']} lanes, "
          f"{c['lane_points']} lane points, {c['intersections']} intersections, {path.stat().st_size / 1024:.1f} KiB")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    info = summary(load_built(args.file))
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"map:        {info['name'] or args.file}")
    print(f"handedness: {info['handedness']}-hand traffic")
    b = info["bounds"]
    print(f"bounds:     x [{b['xmin']:.1f}, {b['xmax']:.1f}]  y [{b['ymin']:.1f}, {b['ymax']:.1f}]  "
          f"({b['width_m']:.0f} m x {b['height_m']:.0f} m)")
    for k, v in info["counts"].items():
        print(f"  {k:<14}{v}")
    print(f"lane length: {info['total_lane_length_m'] / 1000:.2f} km; lanes without predecessor: "
          f"{info['lanes_without_predecessor']}, without successor: {info['lanes_without_successor']}; "
          f"max successor gap {info['max_successor_gap_m']:.3f} m")
    return 0


def _cmd_render(args: argparse.Namespace) -> int:
    from .maps.render import render_map

    m = load_built(args.file)
    render_map(m, args.output, dpi=args.dpi)
    print(f"wrote {args.output}")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    for name in bundled_maps():
        print(name)
    return 0


def _cmd_regenerate(args: argparse.Namespace) -> int:
    for p in regenerate(args.out_dir):
        print(f"wrote {p} ({p.stat().st_size / 1024:.1f} KiB)")
    return 0


def _cmd_render_rollout(args: argparse.Namespace) -> int:
    import numpy as np

    from . import _engine
    from .config_io import load_config
    from .render import RolloutRecorder

    overrides = dict(kv.split("=", 1) for kv in args.set)
    cfg = load_config(args.preset, **{k: _yaml_value(v) for k, v in overrides.items()}).with_overrides(num_worlds=1)
    engine = _engine.Engine(cfg)
    engine.reset([0], [args.seed])
    rec = RolloutRecorder(engine, 0, zoom=args.zoom, dpi=args.dpi)
    rng = np.random.default_rng(args.seed)
    hold = np.array([int(np.nonzero((engine.action_values(c) == 0).all(axis=1))[0][0]) for c in range(5)])
    rec.capture()
    for _ in range(args.steps):
        types = engine.agent_type
        if args.policy == "random":
            nact = np.array([engine.num_actions(max(int(t), 0)) for t in types])
            acts = (rng.random(types.shape[0]) * nact).astype(np.int32)
        else:  # keep the current speed and curvature
            acts = hold[np.maximum(types, 0)].astype(np.int32)
        engine.step(acts)
        rec.capture()
    out = rec.save(args.output, fps=args.fps)
    print(f"wrote {out} ({len(rec.frames)} frames)")
    return 0


def _cmd_train(args: argparse.Namespace) -> int:
    from terrazero_env.agents.train import train  # the only command that imports torch

    overrides = {k: _yaml_value(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    train(preset=args.preset, total_steps=args.total_steps, out=args.out, seed=args.seed, threshold=args.threshold,
          num_worlds=args.worlds, n_steps=args.n_steps, full_policy=args.full_policy, device=args.device,
          torch_threads=args.torch_threads, overrides=overrides)
    return 0


def _yaml_value(text: str):
    import yaml

    return yaml.safe_load(text)


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="terrazero", description="TerraZero driving simulator tools")
    sub = p.add_subparsers(dest="group", required=True)
    maps = sub.add_parser("maps", help="build, inspect and render maps")
    ms = maps.add_subparsers(dest="command", required=True)
    b = ms.add_parser("build", help="validate a map source (.json, .yaml spec, .tzb) and write .tzb")
    b.add_argument("src")
    b.add_argument("-o", "--output", required=True)
    b.set_defaults(func=_cmd_build)
    i = ms.add_parser("inspect", help="print counts, bounds, handedness and lane-graph health")
    i.add_argument("file", help="a map source or a bundled map name")
    i.add_argument("--json", action="store_true", help="print JSON")
    i.set_defaults(func=_cmd_inspect)
    r = ms.add_parser("render", help="draw a map to an image")
    r.add_argument("file", help="a map source or a bundled map name")
    r.add_argument("-o", "--output", required=True)
    r.add_argument("--dpi", type=int, default=150)
    r.set_defaults(func=_cmd_render)
    ls = ms.add_parser("list", help="list bundled maps")
    ls.set_defaults(func=_cmd_list)
    g = ms.add_parser("regenerate", help="rebuild the bundled maps from their YAML specs")
    g.add_argument("--out-dir", default=None, help="where to write (default: the package's assets folder)")
    g.set_defaults(func=_cmd_regenerate)
    rr = sub.add_parser("render", help="record a rollout of one world to a video or GIF")
    rr.add_argument("--preset", default="quick")
    rr.add_argument("--steps", type=int, default=200)
    rr.add_argument("--seed", type=int, default=0)
    rr.add_argument("--policy", choices=["hold", "random"], default="hold",
                    help="hold: keep speed and curvature; random: uniform actions")
    rr.add_argument("--zoom", type=float, default=None, help="half-width (m) of a window on the first controlled agent")
    rr.add_argument("--dpi", type=int, default=80)
    rr.add_argument("--fps", type=int, default=10)
    rr.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="dotted config override, e.g. --set init.num_agents=[10,20]")
    rr.add_argument("-o", "--output", required=True, help=".mp4 (needs imageio-ffmpeg) or .gif")
    rr.set_defaults(func=_cmd_render_rollout)
    t = sub.add_parser("train", help="train PPO (SMPO, V-trace, PopArt, priorities) with DPSA sampling")
    t.add_argument("--preset", default="quick")
    t.add_argument("--total-steps", type=int, default=50_000, help="agent steps")
    t.add_argument("--out", default="runs/quick", help="folder for config, progress log and checkpoint")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threshold", type=float, default=0.5, help="DPSA termination-rate threshold")
    t.add_argument("--worlds", type=int, default=None, help="worlds (default: the preset's)")
    t.add_argument("--n-steps", type=int, default=64, help="rollout length per update")
    t.add_argument("--full-policy", action="store_true", help="the paper-sized Deep Sets policy (~3.4M parameters)")
    t.add_argument("--device", default="cpu")
    t.add_argument("--torch-threads", type=int, default=None)
    t.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="dotted config override, e.g. --set rewards.collision=[0,3]")
    t.set_defaults(func=_cmd_train)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (MapValidationError, TerrabinError, FileNotFoundError, ValueError) as e:
        print(f"terrazero: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
