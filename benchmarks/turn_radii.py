"""Which lanes of a map each vehicle class can follow at all: the tightest radius of every lane against
the smallest circle the class's box centre can drive (its steering limit at the longest length of its
range), and the width its box sweeps there.

    python benchmarks/turn_radii.py                       # grid_town, grid_town_lht, carla_town01, carla_town10hd
    python benchmarks/turn_radii.py --maps carla_town01 my_map.tzb

A lane's radius is its centreline's arc length over heading change on a 3 m window, smallest along
the lane. A class turns about its rear axle (``ClassSpec.rear_axle`` of the length behind the box
centre; 0: about the centre) with its wheelbase ``wheelbase_ratio`` of the length, so at the
steering limit the rear axle drives a circle of radius wheelbase / tan(max_steer) and the centre one
of sqrt(R_rear^2 + c^2), c the centre's distance ahead of the axle (a kinematic steering coefficient
of 1; table 13's coefficients go down to 0.5, a wider circle still). The swept width on a circle is
the outer front corner's radius less the inner side's at the rear axle: the road a lane must leave
its vehicle beside its centreline. Lanes tighter than a class's smallest circle cannot be followed
by that class by any driver; lanes whose swept width exceeds the lane's own width need the next
lane (the oncoming one on a one-lane-each-way road). "Closed" counts the lanes the engine's goal walk
keeps the class's longest box out of (``InitConfig.goal_turnable``, ``terrazero_env.maps.bends``):
too tight, or its swept band does not fit between the road edges with the box at most the lane's
spare half width off the centreline."""

from __future__ import annotations

import argparse
import math

import numpy as np

from terrazero_env import load_config
from terrazero_env.config import AgentType
from terrazero_env.maps.bends import lane_bends, turnable_lanes
from terrazero_env.maps.sources import load_built


def turning(spec, length: float, width: float) -> tuple[float, float]:
    """(smallest centre radius, swept width on it) of a box ``length`` x ``width`` of class ``spec``."""
    wb = spec.wheelbase_ratio * length
    c = spec.rear_axle * length
    r_rear = wb / math.tan(spec.max_steer)
    r_centre = math.hypot(r_rear, c)
    return r_centre, swept(spec, length, width, r_centre)


def swept(spec, length: float, width: float, r_centre: float) -> float:
    """Width (m) the box sweeps with its centre on a circle of radius ``r_centre``."""
    c = spec.rear_axle * length
    r_rear = math.sqrt(max(r_centre**2 - c**2, 1e-9))
    outer = math.hypot(r_rear + width / 2, c + length / 2)
    return outer - (r_rear - width / 2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--maps", nargs="+", default=["grid_town", "grid_town_lht", "carla_town01", "carla_town10hd"])
    p.add_argument("--classes", nargs="+", default=["car", "truck", "bus"])
    args = p.parse_args()
    classes = load_config("quick").classes
    specs = {name: classes[AgentType[name.upper()]] for name in args.classes}
    print("| class | longest box | smallest centre circle | swept width there | swept width on a 10 m circle |")
    print("|---|---|---:|---:|---:|")
    for name, spec in specs.items():
        r, w = turning(spec, spec.length[1], spec.width[1])
        print(f"| {name} | {spec.length[1]:.1f} x {spec.width[1]:.1f} m | {r:.1f} m | {w:.1f} m | "
              f"{swept(spec, spec.length[1], spec.width[1], max(10.0, r)):.1f} m |")
    print()
    print("| map | lanes | turning lanes (radius < 50 m) | radius min / 10% / median | "
          + " | ".join(f"too tight / closed for the longest {n}" for n in specs) + " |")
    print("|---|---:|---:|---|" + "---:|" * len(specs))
    for name in args.maps:
        m = load_built(name)
        bends = lane_bends(m)
        r = bends[:, 0].astype(np.float64)
        turn = r[r < 50.0]
        cells = []
        for spec in specs.values():
            rmin, _ = turning(spec, spec.length[1], spec.width[1])
            L, W = spec.length[1], spec.width[1]
            ok = turnable_lanes(bends, m.lanes.width, L, W, spec.wheelbase_ratio * L, spec.max_steer,
                                spec.rear_axle * L)
            cells.append(f"{int((r < rmin).sum())} / {int((~ok).sum())}")
        pct = np.percentile(turn, [0, 10, 50]) if len(turn) else [np.nan] * 3
        print(f"| {name} | {len(r)} | {len(turn)} | {pct[0]:.1f} / {pct[1]:.1f} / {pct[2]:.1f} m | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
