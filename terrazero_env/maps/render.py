"""Top-down pictures of a :class:`~terrazero_env.maps.schema.MapData` with matplotlib (no display needed).

Everything is drawn with a handful of collections, so even large maps render in a second or two.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure

from .polyline import convex_hull
from .schema import MapData, Ragged, RoadLineType

__all__ = ["render_map"]

_BACKGROUND = "#d9d6cf"
_ROAD = "#4a4a4d"
_SIDEWALK = "#a8c69a"
_EDGE = "#1e1e1e"
_CENTERLINE = "#8fb3d9"
_STOP_LINE = "#f4f4f4"
_SIGNAL_COLOURS = np.array([[0.86, 0.1, 0.1, 1.0], [0.95, 0.8, 0.1, 1.0], [0.15, 0.75, 0.2, 1.0]])
_SIGNAL_UNKNOWN = np.array([0.6, 0.6, 0.6, 1.0])
_LINE_STYLES = {
    RoadLineType.SOLID_WHITE: ("#f2f2f2", "solid", 0.9),
    RoadLineType.DASHED_WHITE: ("#f2f2f2", (0, (4, 4)), 0.8),
    RoadLineType.SOLID_YELLOW: ("#f2c31b", "solid", 0.9),
    RoadLineType.DASHED_YELLOW: ("#f2c31b", (0, (4, 4)), 0.9),
    RoadLineType.DOUBLE_SOLID_YELLOW: ("#f2c31b", "solid", 1.8),
}
#: Spacing (m) of the direction arrows along lane centerlines.
ARROW_SPACING = 20.0


def _rows_xy(r: Ragged) -> list[np.ndarray]:
    """The rows of a point ``Ragged`` as ``[k, 2]`` arrays (views, split in one call)."""
    if len(r) == 0:
        return []
    return np.split(r.values[:, :2], r.offsets[1:-1])


def _lane_surfaces(m: MapData) -> list[np.ndarray]:
    """One quadrilateral strip polygon per lane, ``width`` wide around its centerline."""
    cl = m.lanes.centerline
    if len(cl) == 0:
        return []
    xy = cl.values[:, :2]
    rid = cl.row_ids()
    fwd = np.zeros_like(xy)
    d = np.diff(xy, axis=0)
    same = rid[1:] == rid[:-1]
    d[~same] = 0.0
    fwd[:-1] += d
    fwd[1:] += d
    norm = np.linalg.norm(fwd, axis=1, keepdims=True)
    fwd = np.divide(fwd, norm, out=np.zeros_like(fwd), where=norm > 0)
    half = (m.lanes.width.astype(np.float64) / 2.0)[rid][:, None]
    side = np.stack([-fwd[:, 1], fwd[:, 0]], axis=1) * half
    left, right = np.split(xy + side, cl.offsets[1:-1]), np.split(xy - side, cl.offsets[1:-1])
    return [np.concatenate([a, b[::-1]]) for a, b in zip(left, right, strict=True)]


def _junction_floors(m: MapData) -> list[np.ndarray]:
    """For each intersection whose lanes all lead straight out of it (not a roundabout ring), the convex
    hull of where its lanes start and end, to pave the gaps between diverging junction lanes."""
    if m.intersections is None or len(m.intersections) == 0:
        return []
    inter = np.full(len(m.lanes), -1, np.int64)
    inter[m.intersections.lanes.values] = m.intersections.lanes.row_ids()
    succ = m.lanes.successors
    src = succ.row_ids()
    chained = np.zeros(len(m.intersections), bool)
    inside = (inter[src] >= 0) & (inter[src] == inter[succ.values])
    chained[inter[src[inside]]] = True
    cl = m.lanes.centerline
    ends = np.concatenate([cl.values[cl.offsets[:-1], :2], cl.values[cl.offsets[1:] - 1, :2]])
    owner = np.concatenate([inter, inter])
    floors = []
    for k in np.nonzero(~chained)[0]:
        hull = convex_hull(ends[owner == k])
        if hull.shape[0] >= 3:
            floors.append(hull)
    return floors


def _arrows(m: MapData) -> tuple[np.ndarray, np.ndarray]:
    """Positions ``[k, 2]`` and unit directions ``[k, 2]`` of arrows every ``ARROW_SPACING`` m along lanes
    (the first one half a spacing from each lane's start)."""
    cl = m.lanes.centerline
    if cl.values.shape[0] < 2:
        return np.zeros((0, 2)), np.zeros((0, 2))
    xy = cl.values[:, :2]
    rid = cl.row_ids()
    seg = np.linalg.norm(np.diff(xy, axis=0), axis=1)
    seg[rid[1:] != rid[:-1]] = 0.0
    s = np.concatenate([[0.0], np.cumsum(seg)])
    s -= s[cl.offsets[:-1]][rid]  # arc length from each lane's start
    bucket = np.floor((s + ARROW_SPACING / 2.0) / ARROW_SPACING)
    pick = np.nonzero((bucket[1:] > bucket[:-1]) & (rid[1:] == rid[:-1]))[0]
    d = xy[pick + 1] - xy[pick]
    return 0.5 * (xy[pick] + xy[pick + 1]), d / np.linalg.norm(d, axis=1, keepdims=True)


#: Resolution bounds of a rendered map: the figure is 10 inches on its long side, so MAX_DPI makes
#: a picture of at most 6,000 x 6,000 pixels (about 140 MB while drawn).
MIN_DPI, MAX_DPI = 10, 600


def render_map(
    map_data: MapData,
    path: str | Path | None = None,
    *,
    ax: Axes | None = None,
    signal_states: np.ndarray | None = None,
    title: str | None = None,
    dpi: int = 150,
) -> Figure:
    """Draw ``map_data`` top-down and return the figure (saved to ``path`` when given).

    Road surface (lane strips) on a dark grey, sidewalks in green, crosswalks hatched white, road
    lines by type (white or yellow, solid or dashed, double yellow thicker), road edges in black,
    lane centerlines thin with direction arrows every 20 m, stop lines as thick white bars, signal
    heads as dots (coloured by ``signal_states``, one per signal: 0 red, 1 yellow, 2 green; grey
    when not given) and stop signs as red octagons. Axes are in metres with equal aspect. Draws into
    ``ax`` when given, else into a new figure.
    """
    m = map_data
    if isinstance(dpi, bool) or not isinstance(dpi, (int, np.integer)) or not MIN_DPI <= dpi <= MAX_DPI:
        raise ValueError(f"dpi must be an integer in [{MIN_DPI}, {MAX_DPI}] (the figure is 10 inches wide), got {dpi!r}")
    state = None if signal_states is None else np.asarray(signal_states).reshape(-1)
    if state is not None and state.shape[0] != len(m.signals):
        raise ValueError(f"signal_states has {state.shape[0]} entries for {len(m.signals)} signals")
    has_geometry = any(r.values.shape[0] for r in (m.lanes.centerline, m.road_edges, m.sidewalks, m.crosswalks,
                                                     m.road_lines.geometry))
    x0, y0, x1, y1 = m.bounds() if has_geometry else (0.0, 0.0, 1.0, 1.0)
    if ax is None:
        aspect = float(np.clip((y1 - y0 + 1.0) / (x1 - x0 + 1.0), 0.25, 2.0))
        fig = Figure(figsize=(10, 10 * aspect) if aspect <= 1.0 else (10 / aspect, 10), dpi=dpi)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
    else:
        fig = ax.figure  # type: ignore[assignment]
    ax.set_facecolor(_BACKGROUND)

    ax.add_collection(PolyCollection(_lane_surfaces(m) + _junction_floors(m), facecolors=_ROAD, edgecolors=_ROAD,
                                     linewidths=1.0, zorder=1))
    if len(m.sidewalks):
        ax.add_collection(PolyCollection(_rows_xy(m.sidewalks), facecolors=_SIDEWALK, edgecolors="none", zorder=2))
    if len(m.crosswalks):
        ax.add_collection(PolyCollection(_rows_xy(m.crosswalks), facecolors=_ROAD, edgecolors="#f4f4f4",
                                         hatch="////", linewidths=0.4, zorder=3))
    if len(m.road_edges):
        ax.add_collection(LineCollection(_rows_xy(m.road_edges), colors=_EDGE, linewidths=1.0, zorder=4))
    lines = _rows_xy(m.road_lines.geometry)
    for kind, (colour, style, width) in _LINE_STYLES.items():
        sel = np.nonzero(m.road_lines.line_type == kind)[0]
        if sel.size:
            ax.add_collection(LineCollection([lines[i] for i in sel], colors=colour, linestyles=style,
                                             linewidths=width, zorder=5))
    if len(m.lanes):
        ax.add_collection(LineCollection(_rows_xy(m.lanes.centerline), colors=_CENTERLINE, linewidths=0.35,
                                         zorder=6))
        pos, d = _arrows(m)
        if pos.shape[0]:
            ax.quiver(pos[:, 0], pos[:, 1], d[:, 0], d[:, 1], color=_CENTERLINE, angles="xy", scale_units="xy",
                      scale=0.5, width=0.0012, headwidth=5, headlength=5, headaxislength=4.5, zorder=6)
    if len(m.stop_lines):
        ax.add_collection(LineCollection(m.stop_lines.points[:, :, :2], colors=_STOP_LINE, linewidths=2.5,
                                         zorder=7))
    if len(m.signals):
        colours = np.tile(_SIGNAL_UNKNOWN, (len(m.signals), 1))
        if state is not None:
            known = (state >= 0) & (state <= 2)
            colours[known] = _SIGNAL_COLOURS[state[known].astype(np.int64)]
        ax.scatter(m.signals.position[:, 0], m.signals.position[:, 1], s=9, c=colours, edgecolors="black",
                   linewidths=0.3, zorder=8)
    if len(m.stop_signs):
        ax.scatter(m.stop_signs.position[:, 0], m.stop_signs.position[:, 1], s=22, marker="8", c="#d01c1c",
                   edgecolors="white", linewidths=0.5, zorder=8)

    if has_geometry:
        pad = 0.03 * max(x1 - x0, y1 - y0, 1.0)
        ax.set_xlim(x0 - pad, x1 + pad)
        ax.set_ylim(y0 - pad, y1 + pad)
    ax.set_aspect("equal", adjustable="box")
    c = m.counts()
    ax.set_title(title if title is not None else
                 f"{m.name or 'map'}: {c['lanes']} lanes ({c['lane_points']} pts), {c['intersections']} "
                 f"intersections, {c['signals']} signals, {c['stop_signs']} stop signs", fontsize=9)
    ax.set_xlabel("x (m)", fontsize=8)
    ax.set_ylabel("y (m)", fontsize=8)
    ax.tick_params(labelsize=7)
    if path is not None:
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return fig
