"""How much room a car has in its lane: the share of lane poses whose footprint is off the road.

    python benchmarks/lane_margins.py [--map grid_town] [--length 4.6] [--width 1.9] [--step 0.5]

Every lane centerline of the map is sampled every ``step`` metres; at each sample a car box of the
given size is placed on the centerline along the lane's direction, then shifted sideways by 0.3, 0.5
and 0.7 m (both sides) and turned by 0 or 10 degrees toward the side it is shifted to, and the
engine's own footprint test (``terrazero_env.engine.footprint_offroad``: road edges and sidewalks)
says whether it is off the road. Rows group the lanes as the engine's lane table does: lanes inside
an intersection by movement (straight, left, right, U-turn), turning loops (a lane outside
intersections that turns through more than 150 degrees: the dead-end loops), and the other road
lanes. A row with 0.0% at offset 0 says a car exactly on the centerline never leaves the road.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

from terrazero_env import engine as core
from terrazero_env.config.io import load_config

MOVEMENTS = ("none", "straight", "left", "right", "uturn")
OFFSETS = (0.0, 0.3, 0.5, 0.7)
TURNS = (0.0, 10.0)


def lane_kind(movement: int, intersection: int, heading_change: float) -> str:
    if intersection >= 0:
        return "junction " + MOVEMENTS[int(movement)]
    return "loop" if abs(heading_change) > np.radians(150.0) else "road"


def margins(rm: Any, length: float, width: float, step: float) -> dict[str, dict[str, float]]:
    """``{kind: {"lanes": count, "offset 0.3 m, 10 deg": share of poses off the road, ...}}`` for an
    engine road map ``rm`` (``Engine.road_maps[i]``)."""
    lanes = rm.map_data.lanes
    movement, inter = np.asarray(lanes.movement), np.asarray(lanes.intersection)
    counts: dict[str, dict[str, list[int]]] = {}
    n_lanes: dict[str, int] = {}
    for lane in range(len(lanes)):
        pts = np.asarray(lanes.centerline.row(lane), float)[:, :2]
        d = np.diff(pts, axis=0)
        arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(d, axis=1))])
        if arc[-1] <= 0:
            continue
        h = np.unwrap(np.arctan2(d[:, 1], d[:, 0]))
        kind = lane_kind(movement[lane], inter[lane], h[-1] - h[0])
        n_lanes[kind] = n_lanes.get(kind, 0) + 1
        s = np.arange(0.0, arc[-1], step)
        x, y = np.interp(s, arc, pts[:, 0]), np.interp(s, arc, pts[:, 1])
        hs = np.interp(s, 0.5 * (arc[1:] + arc[:-1]), h)
        for off in OFFSETS:
            for turn in TURNS:
                key = f"offset {off:.1f} m, {turn:.0f} deg"
                row = counts.setdefault(kind, {}).setdefault(key, [0, 0])
                for side in ((1,) if off == 0.0 and turn == 0.0 else (-1, 1)):
                    bx, by = x - side * off * np.sin(hs), y + side * off * np.cos(hs)
                    boxes = np.ascontiguousarray(np.stack([bx, by, hs + side * np.radians(turn),
                                                           np.full_like(bx, length), np.full_like(bx, width)], 1))
                    hit = core.footprint_offroad(rm, boxes)
                    row[0] += int(hit.sum())
                    row[1] += len(hit)
    return {kind: {"lanes": n_lanes[kind], **{k: v[0] / v[1] for k, v in rows.items()}}
            for kind, rows in sorted(counts.items())}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--map", default="grid_town")
    ap.add_argument("--length", type=float, default=4.6, help="car length (m)")
    ap.add_argument("--width", type=float, default=1.9, help="car width (m)")
    ap.add_argument("--step", type=float, default=0.5, help="sampling step along each lane (m)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if min(args.length, args.width, args.step) <= 0:
        ap.error("--length, --width and --step must be positive")
    try:
        engine = core.Engine(load_config("quick").with_overrides(num_worlds=1, maps=[args.map]))
    except (ValueError, FileNotFoundError) as e:
        ap.error(str(e))
    out = margins(engine.road_maps[0], args.length, args.width, args.step)
    keys = [k for k in next(iter(out.values())) if k != "lanes"]
    print(f"{args.map}: a {args.length} x {args.width} m car; share of lane poses off the road")
    print("| lanes | count | " + " | ".join(keys) + " |")
    print("|---|---:|" + "---:|" * len(keys))
    for kind, row in out.items():
        print(f"| {kind} | {row['lanes']} | " + " | ".join(f"{100 * row[k]:.1f}%" for k in keys) + " |")
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
