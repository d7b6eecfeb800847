"""Road networks: junction nodes joined by straight two-way roads, turned into lanes and junctions.

:func:`build_network` lays out every road of a :class:`RoadNetwork` for right-hand traffic and
builds each node by its degree:

* 1 leg: a dead end closed by a balloon turnaround (U-turn lanes around a small island);
* 2 legs: a bend, whose lanes continue through curved lanes (no junction);
* 3 legs: a T-junction; the two most nearly collinear legs form the major road and the remaining
  leg's approach stops at a stop line with a stop sign;
* 4 or more legs: a signalized junction with a stop line on every approach, one signal head per
  (stop line, movement) and a crosswalk across every leg.

Junction lanes connect every approach to every other leg (no U-turns): left turns from the
innermost lane(s), right turns from the outermost lane(s), straight from every lane to the lane of
the same rank. Where a leg has no straight movement into or out of it, its turns widen to use
every lane, so that every lane has a way in and a way out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..schema import Movement, RoadLineType
from .assembly import MapAssembler
from .geometry import (
    balloon,
    curve,
    direction,
    left_normal,
    resample,
    tight_turn,
    wrap_angle,
)

__all__ = ["CROSSWALK_WIDTH", "FILLET", "RoadNetwork", "add_dead_end", "add_road", "build_network"]

#: Radius (m) of the curb fillet at junction corners.
FILLET = 8.0
#: Depth (m) of a crosswalk along the road.
CROSSWALK_WIDTH = 3.5
#: Gap (m) between where a corner's curb straightens and the crosswalk.
CROSSWALK_GAP = 0.5
#: Gap (m) between the crosswalk (or corner) and the stop line behind it.
STOP_GAP = 1.0
#: Radius (m) of the circle a dead end's turnaround loops run around half a lane out from (the
#: island's curb lies ISLAND_SETBACK inside it).
TURNAROUND_ISLAND = 9.0
#: Half width (m) of a turnaround island's blunt nose: the island's curb starts where the two flare
#: arcs have drawn this far apart from the road's axis, and a straight curb across the nose joins
#: them. A cusp there left a sliver of island a few decimetres wide for several metres inside the
#: road's mouth, which the front corner of a 12-13 m bus swinging out of the flare touched
#: (the reference driver's buses left grid_town there; BENCHMARKS.md).
ISLAND_NOSE = 1.0
ISLAND_SETBACK = 1.0
#: Shortest road lane (m) a network may leave between two junctions.
MIN_LANE_LENGTH = 8.0


@dataclass
class RoadNetwork:
    """Junction nodes (``[N, 2]`` positions in metres) and the two-way roads joining pairs of them."""

    nodes: np.ndarray
    roads: list[tuple[int, int]]


@dataclass
class _Leg:
    """One road end at a node, described in the frame pointing from the node along the road."""

    road: int
    angle: float
    """Heading (rad) from the node along the road."""
    c_left: float = 0.0
    """Distance (m) from the node to where the curb on the leg's left side straightens."""
    c_right: float = 0.0
    setback: float = 0.0
    """Distance (m) from the node to where the road's lanes end."""
    lanes_in: list[int] = field(default_factory=list)
    """Lanes arriving at the node, innermost (next to the centre line) first."""
    lanes_out: list[int] = field(default_factory=list)
    """Lanes leaving the node, innermost first."""

    @property
    def u(self) -> np.ndarray:
        return direction(self.angle)

    @property
    def n(self) -> np.ndarray:
        return left_normal(self.u)


def _centre_line_type(lanes: int) -> RoadLineType:
    return RoadLineType.DOUBLE_SOLID_YELLOW if lanes > 1 else RoadLineType.SOLID_YELLOW


def add_road(asm: MapAssembler, p0: np.ndarray, p1: np.ndarray, lanes: int, *, lane_span: tuple[float, float],
             right_span: tuple[float, float], left_span: tuple[float, float]) -> tuple[list[int], list[int]]:
    """Add a straight two-way road along ``p0 -> p1`` with ``lanes`` lanes each way (right-hand traffic).

    Each span ``(a, b)`` says the element starts ``a`` metres after ``p0`` and ends ``b`` metres before
    ``p1``: the lanes, the right curb and the left curb (each seen looking from ``p0`` to ``p1``).
    Adds the centre line and dashed lane lines along the lanes. Returns the lane ids towards ``p1``
    and towards ``p0``, innermost first.
    """
    w = asm.lane_width
    half = lanes * w
    d = (p1 - p0) / np.linalg.norm(p1 - p0)
    nd = left_normal(d)

    def span(s: tuple[float, float]) -> np.ndarray:
        return np.stack([p0 + s[0] * d, p1 - s[1] * d])

    a, b = span(lane_span)
    fwd = [asm.add_lane(resample(np.stack([a, b]) - (i + 0.5) * w * nd)) for i in range(lanes)]
    bwd = [asm.add_lane(resample(np.stack([b, a]) + (i + 0.5) * w * nd)) for i in range(lanes)]
    asm.set_neighbors(fwd)
    asm.set_neighbors(bwd)
    asm.add_road_line(resample(np.stack([a, b])), _centre_line_type(lanes))
    for k in range(1, lanes):
        for side in (-1.0, 1.0):
            asm.add_road_line(resample(np.stack([a, b]) + side * k * w * nd), RoadLineType.DASHED_WHITE)
    asm.add_curb(resample(span(right_span) - half * nd))
    asm.add_curb(resample(span(left_span)[::-1] + half * nd))
    return fwd, bwd


def add_dead_end(asm: MapAssembler, p: np.ndarray, angle: float, lanes_in: list[int], lanes_out: list[int],
                 island: float = TURNAROUND_ISLAND) -> None:
    """Close the end ``p`` of a road heading ``angle`` (rad, from ``p`` along the road) with a turnaround.

    ``lanes_in`` arrive at ``p`` and ``lanes_out`` leave it (innermost first); the lanes of equal rank
    are joined by concentric U-turn loops around an island of radius ``island`` metres. The loops
    swing out ``island`` metres beyond the road before they turn (the balloon's flare margin), so
    both bends of a loop are equally tight.
    """
    w, n = asm.lane_width, len(lanes_in)
    flare = n * w + island

    def loop(lateral: float) -> np.ndarray:
        return balloon(p, angle + np.pi, lateral, flare, island)

    for i in range(n):
        pts = loop((i + 0.5) * w)
        pts[0], pts[-1] = asm.end(lanes_in[i]), asm.start(lanes_out[i])
        lane = asm.add_lane(pts)
        asm.connect(lanes_in[i], lane)
        asm.connect(lane, lanes_out[i])
    for k in range(1, n):
        asm.add_road_line(loop(k * w), RoadLineType.DASHED_WHITE)
    asm.add_curb(loop(n * w))
    # The island: the loops' parallel ISLAND_SETBACK metres inside the innermost lane's (its two flare
    # arcs cross on the axis, sqrt(2 flare d + d^2) metres into the mouth), from where its two sides
    # stand ISLAND_NOSE metres off the axis, the nose a straight curb between them.
    island = loop(-ISLAND_SETBACK)[::-1]
    fwd = np.array([np.cos(angle + np.pi), np.sin(angle + np.pi)])
    rel = island - p
    cross = np.sqrt(2.0 * flare * ISLAND_SETBACK + ISLAND_SETBACK**2)
    wide = np.flatnonzero((rel @ fwd > cross) & (np.abs(rel @ np.array([-fwd[1], fwd[0]])) >= ISLAND_NOSE))
    island = island[wide[0]:wide[-1] + 1]
    asm.add_curb(np.concatenate([island, island[:1]]), sidewalk=False)


class _NetworkBuilder:
    """Lays out the roads of a network around its junctions and builds each junction by its degree."""

    def __init__(self, net: RoadNetwork, asm: MapAssembler, lanes: int) -> None:
        self.net = net
        self.asm = asm
        self.n = lanes
        self.w = asm.lane_width
        self.half = lanes * self.w
        self.legs: list[list[_Leg]] = [[] for _ in range(len(net.nodes))]
        self.road_legs: list[tuple[_Leg, _Leg]] = []
        for r, (a, b) in enumerate(net.roads):
            d = net.nodes[b] - net.nodes[a]
            la = _Leg(r, float(np.arctan2(d[1], d[0])))
            lb = _Leg(r, float(np.arctan2(-d[1], -d[0])))
            self.legs[a].append(la)
            self.legs[b].append(lb)
            self.road_legs.append((la, lb))
        for legs in self.legs:
            legs.sort(key=lambda g: g.angle)

    # layout ---------------------------------------------------------------------------------------

    def _corners(self, legs: list[_Leg]) -> list[tuple[_Leg, _Leg, float]]:
        """Consecutive leg pairs counter-clockwise, with the angle (rad) swept between them."""
        if len(legs) < 2:
            return []
        return [(a, b, float((b.angle - a.angle) % (2 * np.pi))) for a, b in zip(legs, legs[1:] + legs[:1], strict=True)]

    def layout(self) -> None:
        """Curb corner distances and lane setbacks of every leg."""
        for legs in self.legs:
            corners = self._corners(legs)
            for a, b, sweep in corners:
                if sweep < 0.8 * np.pi:
                    c = self.half / np.tan(sweep / 2.0) + FILLET
                    a.c_left, b.c_right = c, c
            for g in legs:
                c = max(g.c_left, g.c_right)
                if len(legs) >= 4:
                    g.setback = c + CROSSWALK_GAP + CROSSWALK_WIDTH + STOP_GAP
                elif len(legs) == 3:
                    g.setback = c + STOP_GAP
                elif len(legs) == 2:
                    g.setback = max(c, FILLET)
            for a, b, sweep in corners:
                if sweep >= 0.8 * np.pi:
                    a.c_left, b.c_right = a.setback, b.setback
        for r, (la, lb) in enumerate(self.road_legs):
            u, v = self.net.roads[r]
            length = float(np.linalg.norm(self.net.nodes[v] - self.net.nodes[u]))
            if length - la.setback - lb.setback < MIN_LANE_LENGTH:
                raise ValueError(
                    f"road {r} between nodes {u} and {v} is {length:.1f} m long, too short for its junctions "
                    f"({la.setback + lb.setback + MIN_LANE_LENGTH:.1f} m needed): use longer blocks or fewer lanes")

    # roads ----------------------------------------------------------------------------------------

    def roads(self) -> None:
        """Lanes, markings and curbs of every road between its two junctions."""
        for r, (la, lb) in enumerate(self.road_legs):
            pu, pv = self.net.nodes[self.net.roads[r][0]], self.net.nodes[self.net.roads[r][1]]
            fwd, bwd = add_road(self.asm, pu, pv, self.n, lane_span=(la.setback, lb.setback),
                                right_span=(la.c_right, lb.c_left), left_span=(la.c_left, lb.c_right))
            la.lanes_out, la.lanes_in = fwd, bwd
            lb.lanes_out, lb.lanes_in = bwd, fwd

    # junctions ------------------------------------------------------------------------------------

    def junctions(self) -> None:
        """Curb corners, then the lanes and traffic control of every node."""
        for node, legs in enumerate(self.legs):
            p = self.net.nodes[node]
            for a, b, _ in self._corners(legs):
                p0 = p + a.c_left * a.u + self.half * a.n
                p1 = p + b.c_right * b.u - self.half * b.n
                self.asm.add_curb(curve(p0, a.angle + np.pi, p1, b.angle))
            if len(legs) == 1:
                add_dead_end(self.asm, p, legs[0].angle, legs[0].lanes_in, legs[0].lanes_out)
            elif len(legs) == 2:
                self._bend(p, legs)
            else:
                self._junction(p, legs)

    def _bend(self, p: np.ndarray, legs: list[_Leg]) -> None:
        """Curved lanes (rank to rank) and lane lines through a two-leg node."""
        asm, w = self.asm, self.w
        for a, b in ((legs[0], legs[1]), (legs[1], legs[0])):
            for i in range(self.n):
                lane = asm.add_lane(curve(asm.end(a.lanes_in[i]), a.angle + np.pi, asm.start(b.lanes_out[i]), b.angle))
                asm.connect(a.lanes_in[i], lane)
                asm.connect(lane, b.lanes_out[i])
        a, b = legs
        for k in range(-(self.n - 1), self.n):
            line = curve(p + a.setback * a.u + k * w * a.n, a.angle + np.pi, p + b.setback * b.u - k * w * b.n, b.angle)
            asm.add_road_line(line, _centre_line_type(self.n) if k == 0 else RoadLineType.DASHED_WHITE)

    @staticmethod
    def _movement(a: _Leg, b: _Leg) -> Movement:
        """Turn from approach ``a`` into leg ``b`` by heading change (45 degrees separate the classes)."""
        turn = float(wrap_angle(b.angle - (a.angle + np.pi)))
        if abs(turn) < np.pi / 4:
            return Movement.STRAIGHT
        return Movement.LEFT if turn > 0 else Movement.RIGHT

    def _lane_ranks(self, moves: dict[tuple[int, int], Movement], a: int, b: int) -> range:
        """Lane ranks (0 = innermost) that turn from approach ``a`` into leg ``b``."""
        n, half = self.n, (self.n + 1) // 2
        m = moves[(a, b)]
        if m == Movement.STRAIGHT:
            return range(n)
        other = Movement.RIGHT if m == Movement.LEFT else Movement.LEFT
        share = half if m == Movement.LEFT else max(1, n - half)
        out_of_a = {v for (i, _), v in moves.items() if i == a}
        into_b = {v for (_, j), v in moves.items() if j == b}
        w_in = 1 if Movement.STRAIGHT in out_of_a else (share if other in out_of_a else n)
        w_out = 1 if Movement.STRAIGHT in into_b else (share if other in into_b else n)
        width = max(w_in, w_out)
        return range(width) if m == Movement.LEFT else range(n - width, n)

    def _junction(self, p: np.ndarray, legs: list[_Leg]) -> None:
        """Junction lanes, stop lines and signals (four or more legs) or a stop sign (three legs)."""
        asm, w, half = self.asm, self.w, self.half
        moves = {(i, j): self._movement(a, b) for i, a in enumerate(legs) for j, b in enumerate(legs) if i != j}
        connectors: list[int] = []
        ranks: dict[tuple[int, Movement], list[int]] = {}
        for (i, j), m in moves.items():
            a, b = legs[i], legs[j]
            for k in self._lane_ranks(moves, i, j):
                p0, p1 = asm.end(a.lanes_in[k]), asm.start(b.lanes_out[k])
                if m == Movement.RIGHT:
                    # Concentric with the curb fillet of the corner it turns around: straight past the
                    # crosswalk, then bend with the fillet's radius plus the lane's distance from the curb
                    # (a curve from the stop line would cut the corner over the curb).
                    theta = abs(float(wrap_angle(b.angle - (a.angle + np.pi))))
                    from_curb = self.half - (k + 0.5) * w
                    path = tight_turn(p0, a.angle + np.pi, p1, b.angle, FILLET + from_curb * np.tan(theta / 2.0))
                else:
                    path = curve(p0, a.angle + np.pi, p1, b.angle)
                lane = asm.add_lane(path)
                asm.connect(a.lanes_in[k], lane)
                asm.connect(lane, b.lanes_out[k])
                connectors.append(lane)
                ranks.setdefault((i, m), []).append(k)
        asm.add_intersection(connectors)
        if len(legs) >= 4:
            for i, g in enumerate(legs):
                d0 = max(g.c_left, g.c_right) + CROSSWALK_GAP
                corners = ((d0, -half), (d0 + CROSSWALK_WIDTH, -half), (d0 + CROSSWALK_WIDTH, half), (d0, half))
                asm.add_crosswalk(np.array([p + d * g.u + t * g.n for d, t in corners]))
                bar = p + g.setback * g.u
                stop = asm.add_stop_line(bar, bar + half * g.n, g.lanes_in)
                for m, shift in ((Movement.LEFT, -0.25), (Movement.STRAIGHT, 0.0), (Movement.RIGHT, 0.25)):
                    if (i, m) in ranks:
                        asm.add_signal(stop, m, bar + (float(np.mean(ranks[(i, m)])) + 0.5 + shift) * w * g.n)
        else:
            g = legs[self._minor_leg(legs)]
            bar = p + g.setback * g.u
            stop = asm.add_stop_line(bar, bar + half * g.n, g.lanes_in)
            asm.add_stop_sign(bar + (half + 1.0) * g.n, stop)

    @staticmethod
    def _minor_leg(legs: list[_Leg]) -> int:
        """Index of the leg off the major road: the one not in the most nearly collinear pair."""
        best, pair = np.inf, (0, 1)
        for i in range(len(legs)):
            for j in range(i + 1, len(legs)):
                dev = abs(abs(float(wrap_angle(legs[i].angle - legs[j].angle))) - np.pi)
                if dev < best:
                    best, pair = dev, (i, j)
        return next(k for k in range(len(legs)) if k not in pair)


def build_network(net: RoadNetwork, asm: MapAssembler, lanes_per_direction: int) -> None:
    """Add the lanes, markings, curbs, sidewalks and traffic control of ``net`` to ``asm``."""
    builder = _NetworkBuilder(net, asm, lanes_per_direction)
    builder.layout()
    builder.roads()
    builder.junctions()

