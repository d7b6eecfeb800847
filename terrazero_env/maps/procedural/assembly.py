"""Collects the elements of a generated map and packs them into a :class:`MapData`.

Generators lay out every map for right-hand traffic. For left-hand traffic, :meth:`MapAssembler.finish`
mirrors the whole map across the x axis: every lane keeps its direction of travel, so traffic ends
up keeping left, turns swap sides (a left turn becomes a right turn) and counter-clockwise loops
become clockwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..schema import (
    Handedness,
    Intersections,
    Lanes,
    MapData,
    Movement,
    Polygons,
    Polylines,
    RoadLines,
    RoadLineType,
    Signals,
    StopLines,
    StopSigns,
)
from .geometry import chain, strip

__all__ = ["MapAssembler", "SIDEWALK_WIDTH", "check_lane_params", "parse_handedness"]

#: Width (m) of the sidewalk band laid along curbs.
SIDEWALK_WIDTH = 2.5

_MIRROR = np.array([1.0, -1.0])


def check_lane_params(lanes_per_direction: int, lane_width: float, speed_limit: float) -> None:
    """Raise ``ValueError`` for lane parameters every generator shares."""
    if int(lanes_per_direction) != lanes_per_direction or not 1 <= lanes_per_direction <= 3:
        raise ValueError(f"lanes_per_direction must be 1, 2 or 3, got {lanes_per_direction!r}")
    if not (np.isfinite(lane_width) and 2.0 <= lane_width <= 6.0):
        raise ValueError(f"lane_width must be between 2 and 6 m, got {lane_width!r}")
    if not (np.isfinite(speed_limit) and speed_limit > 0):
        raise ValueError(f"speed_limit must be a positive number of m/s, got {speed_limit!r}")


def check_metres(name: str, value: float, lo: float, hi: float) -> float:
    """``value`` as a float when it is a number of metres in [``lo``, ``hi``]; else ``ValueError`` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise ValueError(f"{name} must be a number of metres from {lo:g} to {hi:g}, got {value!r}")
    return float(value)


def parse_handedness(value: Handedness | int | str) -> Handedness:
    """A :class:`Handedness` from itself, its value or its name (``"right"``/``"left"``, any case)."""
    if isinstance(value, str):
        try:
            return Handedness[value.strip().upper()]
        except KeyError:
            raise ValueError(f"handedness must be 'right' or 'left', got {value!r}") from None
    try:
        return Handedness(value)
    except ValueError:
        raise ValueError(f"handedness must be Handedness.RIGHT or Handedness.LEFT, got {value!r}") from None


class MapAssembler:
    """Accumulates lanes (with their graph), markings, curbs and traffic control of one map.

    All points are ``[k, 2]`` arrays in metres; lane centerlines run in the direction of travel and
    curbs are drawn with the drivable surface on their left.
    """

    def __init__(self, lane_width: float, speed_limit: float) -> None:
        self.lane_width = float(lane_width)
        self.speed_limit = float(speed_limit)
        self._lanes: list[np.ndarray] = []
        self._speed: list[float] = []
        self._succ: list[set[int]] = []
        self._left: list[int] = []
        self._right: list[int] = []
        self._lines: list[np.ndarray] = []
        self._line_types: list[int] = []
        self._curbs: list[np.ndarray] = []
        self._sidewalks: list[np.ndarray] = []
        self._crosswalks: list[np.ndarray] = []
        self._stop_points: list[np.ndarray] = []
        self._stop_lanes: list[list[int]] = []
        self._sig_stop: list[int] = []
        self._sig_move: list[int] = []
        self._sig_pos: list[np.ndarray] = []
        self._sign_pos: list[np.ndarray] = []
        self._sign_stop: list[int] = []
        self._inters: list[list[int]] = []

    # lanes ----------------------------------------------------------------------------------------

    def add_lane(self, points: np.ndarray, speed_limit: float | None = None) -> int:
        """Add a lane with centerline ``points``; returns its id."""
        self._lanes.append(np.asarray(points, np.float64))
        self._speed.append(self.speed_limit if speed_limit is None else float(speed_limit))
        self._succ.append(set())
        self._left.append(-1)
        self._right.append(-1)
        return len(self._lanes) - 1

    def connect(self, a: int, b: int) -> None:
        """Lane ``b`` follows lane ``a``."""
        self._succ[a].add(b)

    def set_neighbors(self, ids: Sequence[int]) -> None:
        """Mark ``ids`` (same-direction lanes of one road segment, ordered left to right) as neighbours."""
        for a, b in zip(ids[:-1], ids[1:], strict=True):
            self._right[a] = b
            self._left[b] = a

    def start(self, lane: int) -> np.ndarray:
        """First centerline point of ``lane``."""
        return self._lanes[lane][0]

    def end(self, lane: int) -> np.ndarray:
        """Last centerline point of ``lane``."""
        return self._lanes[lane][-1]

    # markings and surfaces ------------------------------------------------------------------------

    def add_road_line(self, points: np.ndarray, line_type: RoadLineType) -> None:
        self._lines.append(np.asarray(points, np.float64))
        self._line_types.append(int(line_type))

    def add_curb(self, points: np.ndarray, sidewalk: bool = True) -> None:
        """Add a piece of road edge (drivable surface on its left), with a sidewalk band on its right."""
        pts = np.asarray(points, np.float64)
        self._curbs.append(pts)
        if sidewalk:
            self._sidewalks.append(strip(pts, SIDEWALK_WIDTH))

    def add_crosswalk(self, polygon: np.ndarray) -> None:
        self._crosswalks.append(np.asarray(polygon, np.float64))

    # traffic control ------------------------------------------------------------------------------

    def add_stop_line(self, a: np.ndarray, b: np.ndarray, lanes: Sequence[int]) -> int:
        """Add a stop bar from ``a`` to ``b`` controlling the lanes that end on it; returns its id."""
        self._stop_points.append(np.stack([a, b]))
        self._stop_lanes.append(list(lanes))
        return len(self._stop_points) - 1

    def add_signal(self, stop_line: int, movement: Movement, position: np.ndarray) -> None:
        self._sig_stop.append(stop_line)
        self._sig_move.append(int(movement))
        self._sig_pos.append(np.asarray(position, np.float64))

    def add_stop_sign(self, position: np.ndarray, stop_line: int) -> None:
        self._sign_pos.append(np.asarray(position, np.float64))
        self._sign_stop.append(stop_line)

    def add_intersection(self, lanes: Sequence[int]) -> None:
        self._inters.append(sorted(lanes))

    # output ---------------------------------------------------------------------------------------

    def finish(self, handedness: Handedness, name: str, metadata: dict[str, Any]) -> MapData:
        """Pack everything into a raw :class:`MapData` (mirrored for left-hand traffic)."""
        lht = handedness == Handedness.LEFT
        flip = _MIRROR if lht else np.ones(2)

        def geo(rows: list[np.ndarray]) -> list[np.ndarray]:
            return [r * flip for r in rows]

        left, right = (self._right, self._left) if lht else (self._left, self._right)
        lanes = Lanes.create(
            geo(self._lanes),
            width=self.lane_width,
            speed_limit=np.asarray(self._speed, np.float32),
            successors=[sorted(s) for s in self._succ],
            predecessors=self._predecessors(),
            left_neighbor=np.asarray(left, np.int32),
            right_neighbor=np.asarray(right, np.int32),
        )
        moves = np.asarray(self._sig_move, np.uint8)
        if lht:
            swap = {int(Movement.LEFT): Movement.RIGHT, int(Movement.RIGHT): Movement.LEFT}
            moves = np.array([swap.get(int(m), m) for m in moves], np.uint8)
        stop_pts = np.asarray(geo(self._stop_points), np.float64).reshape(-1, 2, 2)
        return MapData(
            lanes=lanes,
            road_lines=RoadLines.create(geo(self._lines), np.asarray(self._line_types, np.uint8)),
            road_edges=Polylines(geo(chain(self._curbs))),
            sidewalks=Polygons(geo(self._sidewalks)),
            crosswalks=Polygons(geo(self._crosswalks)),
            stop_lines=StopLines.create(stop_pts, self._stop_lanes),
            signals=Signals.create(self._sig_stop, moves, np.asarray(geo(self._sig_pos)).reshape(-1, 2)),
            stop_signs=StopSigns.create(np.asarray(geo(self._sign_pos)).reshape(-1, 2), self._sign_stop),
            intersections=Intersections.create(self._inters),
            handedness=handedness,
            name=name,
            metadata=metadata,
        )

    def _predecessors(self) -> list[list[int]]:
        pred: list[list[int]] = [[] for _ in self._lanes]
        for a, succ in enumerate(self._succ):
            for b in succ:
                pred[b].append(a)
        return [sorted(p) for p in pred]
