"""Roundabouts: a one-way ring around a central island with two-way approach roads."""

from __future__ import annotations

import numpy as np

from ..schema import Handedness, MapData, RoadLineType
from .assembly import MapAssembler, check_lane_params, check_metres, parse_handedness
from .geometry import arc, curve, direction, left_normal, resample
from .network import CROSSWALK_WIDTH, TURNAROUND_ISLAND, add_dead_end, add_road

__all__ = ["roundabout"]

#: Radius (m) of the curb fillets where approach roads meet the ring (the default ``entry_radius``).
ENTRY_FILLET = 6.0
#: Largest entry fillet and turnaround island radius (m) the generator takes.
MAX_BEND_RADIUS = 100.0
#: Smallest central island radius (m).
MIN_ISLAND_RADIUS = 4.0
MAX_RADIUS = 500.0  # m


def roundabout(
    seed: int = 0,
    *,
    legs: int = 4,
    radius: float = 25.0,
    lanes_per_direction: int = 1,
    lane_width: float = 3.5,
    handedness: Handedness | str = Handedness.RIGHT,
    speed_limit: float = 11.1,
    entry_radius: float = ENTRY_FILLET,
    turnaround_radius: float = TURNAROUND_ISLAND,
) -> MapData:
    """A roundabout whose ring (``lanes_per_direction`` lanes, centre line at ``radius`` metres) is
    joined by ``legs`` two-way approach roads.

    Traffic circulates counter-clockwise in right-hand traffic and clockwise in left-hand traffic.
    Each approach ends at a yield line (a stop line without signal or stop sign) where its lanes
    merge into the ring lanes of the same rank (innermost to innermost); each ring lane diverges to
    the leaving lane of the same rank before the entry. The ring and its entry and exit lanes form one
    intersection. Approach roads, 50 to 80 m long, end in turnaround loops; crosswalks cross every
    approach just behind its yield line. The seed rotates the layout, jitters the leg angles and picks
    the approach lengths. ``lane_width`` is in metres (every lane: ring, entries, exits, approaches),
    ``speed_limit`` in m/s. ``entry_radius`` (m) is the radius of the curb fillets between an
    approach and the ring, around which the entry and exit lanes turn; ``turnaround_radius`` (m) the
    island radius of the approaches' turnaround loops (``network.add_dead_end``). The defaults draw
    a car-sized roundabout; the bundled ``roundabout`` map is drawn for 12-13 m trucks and buses
    (``assets/maps/roundabout.yaml``).
    """
    fillet = check_metres("entry_radius", entry_radius, 1.0, MAX_BEND_RADIUS)
    island = check_metres("turnaround_radius", turnaround_radius, 1.0, MAX_BEND_RADIUS)
    if int(legs) != legs or not 3 <= legs <= 6:
        raise ValueError(f"legs must be an integer from 3 to 6, got {legs!r}")
    check_lane_params(lanes_per_direction, lane_width, speed_limit)
    hand = parse_handedness(handedness)
    n, w, legs = int(lanes_per_direction), float(lane_width), int(legs)
    half = n * w
    r_in, r_out = radius - half / 2.0, radius + half / 2.0
    if not (np.isfinite(radius) and radius <= MAX_RADIUS):
        raise ValueError(f"radius must be a number of metres of at most {MAX_RADIUS}, got {radius!r}")
    if not (np.isfinite(radius) and r_in >= MIN_ISLAND_RADIUS):
        raise ValueError(f"radius must leave an island of at least {MIN_ISLAND_RADIUS} m: need radius >= "
                         f"{MIN_ISLAND_RADIUS + half / 2.0} m for {n} lane(s) of {w} m, got {radius!r}")
    rng = np.random.default_rng(seed)
    phis = rng.uniform(0.0, 2.0 * np.pi) + 2.0 * np.pi * np.arange(legs) / legs
    phis = phis + rng.uniform(-1.0, 1.0, legs) * 0.15 * np.pi / legs
    lengths = rng.uniform(50.0, 80.0, legs)

    # Where the approach curbs straighten (distance from the centre) and the half-angle of each mouth.
    curb_start = float(np.sqrt((r_out + fillet) ** 2 - (half + fillet) ** 2))
    mouth = float(np.arctan2(half + fillet, curb_start))
    yield_at = curb_start + 1.0
    merge = mouth + 3.0 / radius
    # Ring split angles: each leg's exit (before it) then its entry (after it), counter-clockwise.
    splits = np.stack([phis - merge, phis + merge], axis=1).ravel()
    gaps = np.diff(np.concatenate([splits, splits[:1] + 2.0 * np.pi]))
    if np.any(gaps <= 2.0 / radius):
        raise ValueError(f"{legs} legs do not fit around a ring of radius {radius} m: use a larger radius "
                         "or fewer legs")

    asm = MapAssembler(w, speed_limit)
    origin = np.zeros(2)
    ring_radius = r_in + (np.arange(n) + 0.5) * w
    arcs = np.zeros((n, 2 * legs), np.int64)  # arcs[k, m] starts at split m
    for k in range(n):
        pieces = [arc(origin, ring_radius[k], splits[m], splits[m] + gaps[m]) for m in range(2 * legs)]
        for m in range(2 * legs):
            pieces[(m + 1) % (2 * legs)][0] = pieces[m][-1]
        arcs[k] = [asm.add_lane(p) for p in pieces]
        for m in range(2 * legs):
            asm.connect(int(arcs[k, m]), int(arcs[k, (m + 1) % (2 * legs)]))
    for m in range(2 * legs):
        asm.set_neighbors([int(a) for a in arcs[:, m]])

    junction: list[int] = [int(a) for a in arcs.ravel()]
    for j, phi in enumerate(phis):
        u = direction(phi)
        nl = left_normal(u)
        end = (yield_at + lengths[j]) * u
        outward, inward = add_road(asm, origin, end, n, lane_span=(yield_at, 0.0),
                                   right_span=(curb_start, 0.0), left_span=(curb_start, 0.0))
        add_dead_end(asm, end, phi + np.pi, outward, inward, island)
        for k in range(n):
            before, entry_to = int(arcs[k, (2 * j - 1) % (2 * legs)]), int(arcs[k, 2 * j + 1])
            # Concentric with the curb fillets they turn around (the fillet's radius plus the lane's
            # distance from the curb): along the approach to where the curb bends, around the fillet's
            # centre, then along the ring. A single curve from the yield line cut over the curb.
            lateral, bend = (k + 0.5) * w, fillet + half - (k + 0.5) * w
            exit_c, entry_c = curb_start * u - (half + fillet) * nl, curb_start * u + (half + fillet) * nl
            exit_path = np.concatenate([
                asm.end(before)[None], arc(origin, ring_radius[k], phi - merge, phi - mouth),
                arc(exit_c, bend, phi - mouth + np.pi, phi + np.pi / 2), (curb_start * u - lateral * nl)[None],
                asm.start(outward[k])[None]])
            entry_path = np.concatenate([
                asm.end(inward[k])[None], (curb_start * u + lateral * nl)[None],
                arc(entry_c, bend, phi - np.pi / 2, phi + mouth - np.pi),
                arc(origin, ring_radius[k], phi + mouth, phi + merge), asm.start(entry_to)[None]])
            exit_lane = asm.add_lane(resample(exit_path))
            entry_lane = asm.add_lane(resample(entry_path))
            asm.connect(before, exit_lane)
            asm.connect(exit_lane, outward[k])
            asm.connect(inward[k], entry_lane)
            asm.connect(entry_lane, entry_to)
            junction += [exit_lane, entry_lane]
        bar = yield_at * u
        asm.add_stop_line(bar, bar + half * nl, inward)
        d0 = yield_at + 1.5
        asm.add_crosswalk(np.array([(d0 + a) * u + s * half * nl for a, s in
                                    ((0.0, -1), (CROSSWALK_WIDTH, -1), (CROSSWALK_WIDTH, 1), (0.0, 1))]))
        # Curb from this leg's left side around the ring to the next leg's right side.
        nxt = phis[(j + 1) % legs] + (2.0 * np.pi if j == legs - 1 else 0.0)
        a0, a1 = phi + mouth, nxt - mouth
        asm.add_curb(curve(curb_start * u + half * nl, phi + np.pi, r_out * direction(a0), a0 + np.pi / 2))
        asm.add_curb(arc(origin, r_out, a0, a1))
        un = direction(nxt)
        asm.add_curb(curve(r_out * direction(a1), a1 + np.pi / 2, curb_start * un - half * left_normal(un), nxt))
    asm.add_intersection(junction)
    asm.add_curb(arc(origin, r_in, 2.0 * np.pi, 0.0), sidewalk=False)
    for k in range(1, n):
        asm.add_road_line(arc(origin, r_in + k * w, 0.0, 2.0 * np.pi), RoadLineType.DASHED_WHITE)

    name = f"roundabout_{legs}leg_s{seed}" + ("_lht" if hand == Handedness.LEFT else "")
    params = {"legs": legs, "radius": float(radius), "lanes_per_direction": n, "lane_width": w,
              "handedness": hand.name, "speed_limit": float(speed_limit)}
    if fillet != ENTRY_FILLET or island != TURNAROUND_ISLAND:  # maps drawn before keep their metadata
        params.update(entry_radius=fillet, turnaround_radius=island)
    return asm.finish(hand, name, {"generator": "roundabout", "seed": int(seed), "params": params})
