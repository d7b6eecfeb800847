"""The common map representation (``MapData``), inspired by ScenarioNet.

Every map source (procedural generator, OpenDRIVE, Lanelet2, logged datasets) converts into this one
representation; the builder (:mod:`terrazero_env.maps.builder`) validates it and derives the rest, and
:mod:`terrazero_env.maps.terrabin` stores it as a ``.tzb`` file.

Conventions (TerraZero section 3.4):

* units are metres, radians and metres per second; coordinates are a local Cartesian frame
  (x east, y north, z up), recentred near the origin by the converter;
* variable-length elements (polylines, polygons, adjacency lists) are stored as :class:`Ragged`
  arrays in CSR layout, so a whole map is a handful of flat numpy arrays and the engine consumes
  it without per-element Python work;
* a lane's centerline runs in its legal direction of travel;
* ids are row indices; ``-1`` means "none".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import numpy as np

__all__ = [
    "AgentType",
    "ControlType",
    "Handedness",
    "Intersections",
    "LaneType",
    "Lanes",
    "MapData",
    "Movement",
    "Polygons",
    "Polylines",
    "Ragged",
    "RoadLineType",
    "RoadLines",
    "Signals",
    "StopLines",
    "StopSigns",
    "Tracks",
    "STATE_FIELDS",
]


class LaneType(IntEnum):
    """What a lane carries."""

    VEHICLE = 0
    BIKE = 1
    BUS = 2


class RoadLineType(IntEnum):
    """Painted line style: solid or dashed, white or yellow."""

    SOLID_WHITE = 0
    DASHED_WHITE = 1
    SOLID_YELLOW = 2
    DASHED_YELLOW = 3
    DOUBLE_SOLID_YELLOW = 4


class Movement(IntEnum):
    """Turn movement of a lane through an intersection (NONE outside intersections)."""

    NONE = 0
    STRAIGHT = 1
    LEFT = 2
    RIGHT = 3
    UTURN = 4


class ControlType(IntEnum):
    """How a stop line is controlled."""

    NONE = 0
    SIGNAL = 1
    STOP_SIGN = 2


class Handedness(IntEnum):
    """Which side of the road traffic keeps to."""

    RIGHT = 0
    LEFT = 1


class AgentType(IntEnum):
    """Agent classes of logged tracks and of the engine (TerraZero section 3.2)."""

    CAR = 0
    TRUCK = 1
    BUS = 2
    PEDESTRIAN = 3
    CYCLIST = 4


#: Columns of :attr:`Tracks.state`.
STATE_FIELDS = ("x", "y", "z", "heading", "vx", "vy")


@dataclass(frozen=True, eq=False)
class Ragged:
    """Variable-length rows in CSR layout: row ``i`` is ``values[offsets[i]:offsets[i + 1]]``.

    ``offsets`` is int64 with ``n + 1`` entries, starting at 0 and non-decreasing;
    ``values`` has shape ``[offsets[-1], *row_shape]``.
    """

    values: np.ndarray
    offsets: np.ndarray

    def __len__(self) -> int:
        return int(self.offsets.shape[0]) - 1

    def row(self, i: int) -> np.ndarray:
        """Row ``i`` as a view into :attr:`values`."""
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    def lengths(self) -> np.ndarray:
        """Number of entries in each row, int64 ``[n]``."""
        return np.diff(self.offsets)

    def rows(self) -> list[np.ndarray]:
        """All rows as views (a Python list; not for hot paths)."""
        return [self.row(i) for i in range(len(self))]

    def row_ids(self) -> np.ndarray:
        """For each entry of :attr:`values`, the row it belongs to (int64)."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.lengths())

    @classmethod
    def from_rows(
        cls, rows: Iterable[Sequence[Any] | np.ndarray], dtype: Any, row_shape: tuple[int, ...] = ()
    ) -> Ragged:
        """Pack a sequence of rows; each row is array-like of shape ``[k, *row_shape]``."""
        arrays = [np.asarray(r, dtype=dtype).reshape((-1, *row_shape)) for r in rows]
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        if arrays:
            offsets[1:] = np.cumsum([a.shape[0] for a in arrays])
            values = np.concatenate(arrays, axis=0) if offsets[-1] else np.zeros((0, *row_shape), dtype)
        else:
            values = np.zeros((0, *row_shape), dtype=dtype)
        return cls(values=np.ascontiguousarray(values, dtype=dtype), offsets=offsets)

    @classmethod
    def empty(cls, n: int, dtype: Any, row_shape: tuple[int, ...] = ()) -> Ragged:
        """``n`` empty rows."""
        return cls(values=np.zeros((0, *row_shape), dtype=dtype), offsets=np.zeros(n + 1, np.int64))


def Polylines(rows: Iterable[Sequence[Any] | np.ndarray]) -> Ragged:  # noqa: N802 (constructor-like)
    """Pack polylines given as ``[k, 2]`` (z = 0) or ``[k, 3]`` point arrays into a float64 :class:`Ragged`."""
    packed = []
    for r in rows:
        a = np.asarray(r, dtype=np.float64)
        if a.ndim != 2 or a.shape[1] not in (2, 3):
            raise ValueError(f"a polyline must have shape [k, 2] or [k, 3], got {a.shape}")
        if a.shape[1] == 2:
            a = np.concatenate([a, np.zeros((a.shape[0], 1))], axis=1)
        packed.append(a)
    return Ragged.from_rows(packed, np.float64, (3,))


#: Polygons are stored like polylines; the ring closes implicitly (last point joins the first).
Polygons = Polylines


def _points3(position: Sequence[Any] | np.ndarray, n: int) -> np.ndarray:
    """``n`` points given as ``[n, 2]`` (z = 0) or ``[n, 3]``, as float64 ``[n, 3]``."""
    pos = np.asarray(position, np.float64)
    if pos.size == 0 and n == 0:
        return np.zeros((0, 3))
    pos = pos.reshape(n, -1)
    if pos.shape[1] == 2:
        pos = np.concatenate([pos, np.zeros((n, 1))], axis=1)
    if pos.shape[1] != 3:
        raise ValueError(f"positions must be [n, 2] or [n, 3], got {pos.shape}")
    return np.ascontiguousarray(pos)


def _ids(rows: Iterable[Sequence[int]]) -> Ragged:
    return Ragged.from_rows(rows, np.int32)


@dataclass(frozen=True, eq=False)
class Lanes:
    """Lane centerlines and their graph. ``L`` lanes, ``P`` centerline points in all."""

    centerline: Ragged
    """float64 ``[P, 3]`` (x, y, z) in metres, in the direction of travel."""
    lane_type: np.ndarray
    """uint8 ``[L]``, :class:`LaneType`."""
    width: np.ndarray
    """float32 ``[L]``, metres."""
    speed_limit: np.ndarray
    """float32 ``[L]``, m/s; NaN where the source gives none (the builder fills a per-type default)."""
    successors: Ragged
    """int32 lane ids each lane flows into."""
    predecessors: Ragged
    """int32 lane ids flowing into each lane (the builder makes this the exact inverse of successors)."""
    left_neighbor: np.ndarray
    """int32 ``[L]``: adjacent same-direction lane on the left, -1 if none."""
    right_neighbor: np.ndarray
    """int32 ``[L]``: adjacent same-direction lane on the right, -1 if none."""
    intersection: np.ndarray
    """int32 ``[L]``: intersection the lane lies in, -1 if none (derived)."""
    movement: np.ndarray
    """uint8 ``[L]``, :class:`Movement` of a lane inside an intersection (derived)."""
    allowed_movements: np.ndarray
    """uint8 ``[L]``: bit ``1 << Movement`` set for each movement reachable from the lane's end (derived)."""
    stop_line: np.ndarray
    """int32 ``[L]``: stop line at the lane's downstream end, -1 if none (derived)."""

    @classmethod
    def create(
        cls,
        centerlines: Iterable[Sequence[Any] | np.ndarray],
        *,
        lane_type: Sequence[int] | np.ndarray | None = None,
        width: Sequence[float] | np.ndarray | float = 3.5,
        speed_limit: Sequence[float] | np.ndarray | float = np.nan,
        successors: Iterable[Sequence[int]] | None = None,
        predecessors: Iterable[Sequence[int]] | None = None,
        left_neighbor: Sequence[int] | np.ndarray | None = None,
        right_neighbor: Sequence[int] | np.ndarray | None = None,
    ) -> Lanes:
        """Lanes from Python sequences; derived fields start empty (``build`` fills them)."""
        cl = Polylines(centerlines)
        n = len(cl)

        def full(v: Any, dtype: Any, default: Any) -> np.ndarray:
            if v is None:
                return np.full(n, default, dtype)
            a = np.asarray(v, dtype=dtype)
            return np.full(n, a, dtype) if a.ndim == 0 else a

        return cls(
            centerline=cl,
            lane_type=full(lane_type, np.uint8, LaneType.VEHICLE),
            width=full(width, np.float32, 3.5),
            speed_limit=full(speed_limit, np.float32, np.nan),
            successors=_ids(successors) if successors is not None else Ragged.empty(n, np.int32),
            predecessors=_ids(predecessors) if predecessors is not None else Ragged.empty(n, np.int32),
            left_neighbor=full(left_neighbor, np.int32, -1),
            right_neighbor=full(right_neighbor, np.int32, -1),
            intersection=np.full(n, -1, np.int32),
            movement=np.zeros(n, np.uint8),
            allowed_movements=np.zeros(n, np.uint8),
            stop_line=np.full(n, -1, np.int32),
        )

    def __len__(self) -> int:
        return len(self.centerline)


@dataclass(frozen=True, eq=False)
class RoadLines:
    """Painted lines."""

    geometry: Ragged
    """float64 ``[P, 3]`` polylines."""
    line_type: np.ndarray
    """uint8 ``[n]``, :class:`RoadLineType`."""

    @classmethod
    def create(cls, lines: Iterable[np.ndarray], line_type: Sequence[int] | np.ndarray) -> RoadLines:
        return cls(Polylines(lines), np.asarray(line_type, np.uint8).reshape(-1))

    def __len__(self) -> int:
        return len(self.geometry)


@dataclass(frozen=True, eq=False)
class StopLines:
    """Stop bars. ``S`` stop lines."""

    points: np.ndarray
    """float64 ``[S, 2, 3]``: the bar's two end points."""
    lanes: Ragged
    """int32: lanes that end at the bar and are controlled by it (the builder ties lanes when empty)."""
    control: np.ndarray
    """uint8 ``[S]``, :class:`ControlType` (derived from signals and stop signs)."""
    intersection: np.ndarray
    """int32 ``[S]``: the intersection the bar guards, -1 if none (derived)."""

    @classmethod
    def create(cls, segments: Sequence[Any] | np.ndarray, lanes: Iterable[Sequence[int]] | None = None) -> StopLines:
        pts = np.asarray(segments, np.float64).reshape(-1, 2, 3 if np.asarray(segments).shape[-1:] == (3,) else 2)
        if pts.shape[-1] == 2:
            pts = np.concatenate([pts, np.zeros((*pts.shape[:2], 1))], axis=2)
        s = pts.shape[0]
        return cls(
            points=np.ascontiguousarray(pts),
            lanes=_ids(lanes) if lanes is not None else Ragged.empty(s, np.int32),
            control=np.zeros(s, np.uint8),
            intersection=np.full(s, -1, np.int32),
        )

    def __len__(self) -> int:
        return int(self.points.shape[0])


@dataclass(frozen=True, eq=False)
class Signals:
    """Signal heads: one per (stop line, movement). ``G`` signals."""

    stop_line: np.ndarray
    """int32 ``[G]``: the stop line the head controls."""
    movement: np.ndarray
    """uint8 ``[G]``, :class:`Movement` (LEFT, STRAIGHT or RIGHT) the head governs."""
    lanes: Ragged
    """int32: intersection lanes the head governs (the builder ties them when empty)."""
    position: np.ndarray
    """float64 ``[G, 3]``: where the head stands (for rendering and observations)."""
    intersection: np.ndarray
    """int32 ``[G]`` (derived)."""

    @classmethod
    def create(
        cls,
        stop_line: Sequence[int] | np.ndarray,
        movement: Sequence[int] | np.ndarray,
        position: Sequence[Any] | np.ndarray,
        lanes: Iterable[Sequence[int]] | None = None,
    ) -> Signals:
        sl = np.asarray(stop_line, np.int32).reshape(-1)
        pos = _points3(position, sl.shape[0])
        return cls(
            stop_line=sl,
            movement=np.asarray(movement, np.uint8).reshape(-1),
            lanes=_ids(lanes) if lanes is not None else Ragged.empty(sl.shape[0], np.int32),
            position=pos,
            intersection=np.full(sl.shape[0], -1, np.int32),
        )

    def __len__(self) -> int:
        return int(self.stop_line.shape[0])


@dataclass(frozen=True, eq=False)
class StopSigns:
    """Stop signs, each governing one stop line."""

    position: np.ndarray
    """float64 ``[N, 3]``."""
    stop_line: np.ndarray
    """int32 ``[N]``."""

    @classmethod
    def create(cls, position: Sequence[Any] | np.ndarray, stop_line: Sequence[int] | np.ndarray) -> StopSigns:
        sl = np.asarray(stop_line, np.int32).reshape(-1)
        pos = _points3(position, sl.shape[0])
        return cls(position=pos, stop_line=sl)

    def __len__(self) -> int:
        return int(self.stop_line.shape[0])


@dataclass(frozen=True, eq=False)
class Intersections:
    """Junctions as sets of the lanes inside them."""

    lanes: Ragged
    """int32 lane ids inside each intersection."""

    @classmethod
    def create(cls, lanes: Iterable[Sequence[int]]) -> Intersections:
        return cls(_ids(lanes))

    def __len__(self) -> int:
        return len(self.lanes)


@dataclass(frozen=True, eq=False)
class Tracks:
    """Optional logged trajectories, one row per agent, sampled every ``dt`` seconds."""

    agent_type: np.ndarray
    """uint8 ``[A]``, :class:`AgentType`."""
    size: np.ndarray
    """float32 ``[A, 3]``: length, width, height in metres."""
    state: np.ndarray
    """float64 ``[A, T, 6]``: x, y, z, heading, vx, vy (see :data:`STATE_FIELDS`)."""
    valid: np.ndarray
    """bool ``[A, T]``."""
    dt: float = 0.1
    """Seconds between samples."""

    def __len__(self) -> int:
        return int(self.agent_type.shape[0])


def _empty_polylines() -> Ragged:
    return Ragged.empty(0, np.float64, (3,))


@dataclass(frozen=True, eq=False)
class MapData:
    """One map (and optionally its logged tracks) in the common representation."""

    lanes: Lanes
    road_lines: RoadLines = field(default_factory=lambda: RoadLines(_empty_polylines(), np.zeros(0, np.uint8)))
    road_edges: Ragged = field(default_factory=_empty_polylines)
    """float64 ``[P, 3]`` polylines bounding the drivable surface."""
    sidewalks: Ragged = field(default_factory=_empty_polylines)
    """float64 ``[P, 3]`` polygons."""
    crosswalks: Ragged = field(default_factory=_empty_polylines)
    """float64 ``[P, 3]`` polygons."""
    stop_lines: StopLines = field(default_factory=lambda: StopLines.create(np.zeros((0, 2, 3))))
    signals: Signals = field(default_factory=lambda: Signals.create([], [], np.zeros((0, 3))))
    stop_signs: StopSigns = field(default_factory=lambda: StopSigns.create(np.zeros((0, 3)), []))
    intersections: Intersections | None = None
    """``None`` when the source gives no junctions: the builder infers them from lane topology."""
    handedness: Handedness = Handedness.RIGHT
    tracks: Tracks | None = None
    name: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    """JSON-serialisable provenance (source, generator parameters, seed, ...)."""

    def replace(self, **changes: Any) -> MapData:
        return dataclasses.replace(self, **changes)

    def bounds(self) -> tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax) over every geometric element."""
        pts = [self.lanes.centerline.values, self.road_edges.values, self.sidewalks.values,
               self.crosswalks.values, self.road_lines.geometry.values]
        xy = np.concatenate([p[:, :2] for p in pts if p.shape[0]], axis=0)
        lo, hi = xy.min(axis=0), xy.max(axis=0)
        return float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])

    def counts(self) -> dict[str, int]:
        """Element counts, for inspection."""
        return {
            "lanes": len(self.lanes),
            "lane_points": int(self.lanes.centerline.values.shape[0]),
            "road_lines": len(self.road_lines),
            "road_edges": len(self.road_edges),
            "sidewalks": len(self.sidewalks),
            "crosswalks": len(self.crosswalks),
            "stop_lines": len(self.stop_lines),
            "signals": len(self.signals),
            "stop_signs": len(self.stop_signs),
            "intersections": len(self.intersections) if self.intersections is not None else 0,
            "tracks": len(self.tracks) if self.tracks is not None else 0,
        }
