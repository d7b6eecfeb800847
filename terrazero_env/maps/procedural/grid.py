"""Grid towns: ``rows x cols`` city blocks bounded by two-way streets."""

from __future__ import annotations

import numpy as np

from ..schema import Handedness, MapData
from .assembly import MapAssembler, check_lane_params, parse_handedness
from .network import CROSSWALK_WIDTH, FILLET, RoadNetwork, build_network

__all__ = ["grid_town"]

#: Probability that a border junction gets a dead-end street leading out of town (when T-junctions
#: are enabled; without them every border junction gets one).
STUB_PROBABILITY = 0.3
#: Probability that an interior street between two four-way junctions is removed.
REMOVAL_PROBABILITY = 0.25


MAX_SIDE = 40
"""Most blocks along one side of a grid town."""
MAX_BLOCKS = 400
"""Most blocks of a grid town (rows x cols): the generator's work grows with it."""
MAX_BLOCK = 1000.0
"""Longest ``block_length`` (m); a block too short for its junctions' approaches is refused as well."""

def grid_town(
    seed: int = 0,
    *,
    rows: int = 3,
    cols: int = 3,
    block_length: float = 80.0,
    lanes_per_direction: int = 2,
    lane_width: float = 3.5,
    handedness: Handedness | str = Handedness.RIGHT,
    t_junctions: bool = True,
    speed_limit: float = 13.9,
) -> MapData:
    """A town of ``rows x cols`` blocks about ``block_length`` metres on a side.

    Streets meet at ``(rows + 1) x (cols + 1)`` junctions: interior four-way junctions are
    signalized, the four corners are bends, and the junctions along the border are stop-controlled
    T-junctions (the border street is the major road). The seed jitters block lengths and junction
    positions (so streets run a few degrees off the axes). With ``t_junctions`` some border junctions
    instead get a dead-end street leading out of town (making them signalized four-way junctions)
    and some interior streets are removed, turning their junctions into T-junctions; without it every
    border junction gets such a street and no street is removed, so all junctions but the corners
    are signalized four-way junctions. Dead ends close with a turnaround loop, so every lane can be
    entered and left.

    ``lane_width`` is in metres and ``speed_limit`` in m/s (applied to every lane).
    """
    if int(rows) != rows or int(cols) != cols or not 1 <= rows <= MAX_SIDE or not 1 <= cols <= MAX_SIDE \
            or rows * cols > MAX_BLOCKS:
        raise ValueError(f"rows and cols must be integers in [1, {MAX_SIDE}] with at most {MAX_BLOCKS} blocks, "
                         f"got {rows!r} x {cols!r}")
    if not (np.isfinite(block_length) and 0 < block_length <= MAX_BLOCK):
        raise ValueError(f"block_length must be a positive number of metres, at most {MAX_BLOCK}, "
                         f"got {block_length!r}")
    check_lane_params(lanes_per_direction, lane_width, speed_limit)
    hand = parse_handedness(handedness)
    rows, cols, n = int(rows), int(cols), int(lanes_per_direction)
    rng = np.random.default_rng(seed)

    xs = np.concatenate([[0.0], np.cumsum(block_length * rng.uniform(0.9, 1.1, cols))])
    ys = np.concatenate([[0.0], np.cumsum(block_length * rng.uniform(0.9, 1.1, rows))])
    gx, gy = np.meshgrid(xs, ys)
    nodes = np.stack([gx, gy], axis=-1) + rng.uniform(-1.0, 1.0, (rows + 1, cols + 1, 2)) * 0.03 * block_length
    nodes = (nodes - nodes.reshape(-1, 2).mean(axis=0)).reshape(-1, 2)

    def nid(r: int, c: int) -> int:
        return r * (cols + 1) + c

    ring: list[tuple[int, int]] = []
    inner: list[tuple[int, int]] = []
    for r in range(rows + 1):
        for c in range(cols):
            (ring if r in (0, rows) else inner).append((nid(r, c), nid(r, c + 1)))
    for c in range(cols + 1):
        for r in range(rows):
            (ring if c in (0, cols) else inner).append((nid(r, c), nid(r + 1, c)))

    # Dead-end streets leading out of town from border junctions.
    points = [p for p in nodes]
    stubs: list[tuple[int, int]] = []
    stub_length = n * lane_width + FILLET + CROSSWALK_WIDTH + 12.0
    for r in range(rows + 1):
        for c in range(cols + 1):
            outward = np.array([(c == cols) - (c == 0), (r == rows) - (r == 0)], np.float64)
            if np.count_nonzero(outward) != 1:
                continue  # interior junction or corner
            stub = rng.random() < STUB_PROBABILITY if t_junctions else True
            turn, extra = rng.uniform(-0.08, 0.08), rng.uniform(10.0, 25.0)
            if not stub:
                continue
            rot = np.array([[np.cos(turn), -np.sin(turn)], [np.sin(turn), np.cos(turn)]])
            points.append(nodes[nid(r, c)] + (stub_length + extra) * (rot @ outward))
            stubs.append((nid(r, c), len(points) - 1))

    degree = np.bincount(np.array(ring + inner + stubs).ravel(), minlength=len(points))
    kept = []
    for k in rng.permutation(len(inner)):
        a, b = inner[k]
        if t_junctions and degree[a] == 4 and degree[b] == 4 and rng.random() < REMOVAL_PROBABILITY:
            degree[a] -= 1
            degree[b] -= 1
        else:
            kept.append(inner[k])
    kept.sort()

    asm = MapAssembler(lane_width, speed_limit)
    build_network(RoadNetwork(np.array(points), ring + kept + stubs), asm, n)
    name = f"grid_{rows}x{cols}_s{seed}" + ("_lht" if hand == Handedness.LEFT else "")
    params = {"rows": rows, "cols": cols, "block_length": float(block_length), "lanes_per_direction": n,
              "lane_width": float(lane_width), "handedness": hand.name, "t_junctions": bool(t_junctions),
              "speed_limit": float(speed_limit)}
    return asm.finish(hand, name, {"generator": "grid", "seed": int(seed), "params": params})
