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
lane (the oncoming one on a one-lane-each-way road)."""

from __future__ import annotations

import argparse
import math

import numpy as np

from terrazero_env import load_config
from terrazero_env.config import AgentType
from terrazero_env.maps.sources import load_built


def lane_radii(m) -> np.ndarray:
    """The smallest radius (m) along each lane's centreline (inf for a straight lane)."""
    cl = m.lanes.centerline
    out = np.full(len(m.lanes), np.inf)
    for i in range(len(m.lanes)):
        p = np.asarray(cl.row(i))[:, :2]
        if len(p) < 3:
            continue
        d = np.diff(p, axis=0)
        seg = np.linalg.norm(d, axis=1)
        keep = seg > 1e-9
        d, seg = d[keep], seg[keep]
        if len(seg) < 2:
            continue
        h = np.unwrap(np.arctan2(d[:, 1], d[:, 0]))
        s = np.r_[0.0, np.cumsum(seg)][:-1]
        j = np.searchsorted(s, s + 3.0)
        ok = j < len(h)
        dh = np.abs(h[j[ok]] - h[ok])
        ds = s[j[ok]] - s[ok]
        with np.errstate(divide="ignore"):
            r = np.where(dh > 1e-3, ds / np.maximum(dh, 1e-12), np.inf)
        out[i] = r.min() if len(r) else np.inf
    return out


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
          + " | ".join(f"lanes too tight for the longest {n}" for n in specs) + " |")
    print("|---|---:|---:|---|" + "---:|" * len(specs))
    for name in args.maps:
        m = load_built(name)
        r = lane_radii(m)
        turn = r[r < 50.0]
        cells = []
        for spec in specs.values():
            rmin, _ = turning(spec, spec.length[1], spec.width[1])
            cells.append(f"{int((r < rmin).sum())}")
        pct = np.percentile(turn, [0, 10, 50]) if len(turn) else [np.nan] * 3
        print(f"| {name} | {len(r)} | {len(turn)} | {pct[0]:.1f} / {pct[1]:.1f} / {pct[2]:.1f} m | "
              + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
