"""Pictures of simulated worlds: the map, every agent (vehicles as boxes with a heading mark,
pedestrians as discs, static actors by kind), goals and recent trajectories.

    from terrazero_env.render import render_world
    render_world(engine, world=0, path="frame.png", trails=[states_t0, states_t1, ...])
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.collections import LineCollection, PolyCollection
from matplotlib.figure import Figure

from .engine import AGENT_CLASSES, ROLES
from .maps.render import render_map

__all__ = ["RolloutRecorder", "STATIC_STYLE", "WALKER_STYLE", "draw_agents", "draw_signals", "draw_static_actors", "frame_rgb",
           "render_world", "with_kinds"]

#: Fill colour per AgentType (car, truck, bus, pedestrian, cyclist).
_CLASS_COLOURS = np.array([[0.20, 0.45, 0.85, 1.0], [0.55, 0.35, 0.75, 1.0], [0.10, 0.60, 0.60, 1.0],
                           [0.95, 0.55, 0.10, 1.0], [0.85, 0.25, 0.55, 1.0]])
_BACKGROUND_AGENT = np.array([0.55, 0.55, 0.55, 1.0])
_PEDESTRIAN = AGENT_CLASSES.index("PEDESTRIAN")
_CONTROLLED, _IDM = ROLES.index("CONTROLLED"), ROLES.index("IDM")

#: Rule-based pedestrians by role (``engine.ROLES`` index): (label, fill colour); drawn as discs.
WALKER_STYLE: dict[int, tuple[str, tuple[float, float, float, float]]] = {
    ROLES.index("CROSSER"): ("crosswalk crosser, ORCA", (0.10, 0.68, 0.30, 1.0)),
    ROLES.index("JAYWALKER"): ("jaywalker", (0.80, 0.10, 0.80, 1.0)),
}


#: Static actors by kind (``StaticKind`` value): (label, fill colour, shape: box, disc or triangle).
STATIC_STYLE: dict[int, tuple[str, tuple[float, float, float, float], str]] = {
    1: ("parked vehicle", (0.30, 0.33, 0.40, 1.0), "box"),
    2: ("crashed vehicle", (0.80, 0.18, 0.12, 1.0), "box"),
    3: ("cone", (1.00, 0.50, 0.00, 1.0), "triangle"),
    4: ("worker", (0.98, 0.88, 0.10, 1.0), "disc"),
    5: ("debris", (0.50, 0.32, 0.14, 1.0), "box"),
}


_TRIANGLE = np.array([[0.0, 0.75], [-0.65, -0.45], [0.65, -0.45]])  # apex up, about a unit across
_DISC = 0.5 * np.stack([np.cos(np.linspace(0, 2 * np.pi, 13)), np.sin(np.linspace(0, 2 * np.pi, 13))], -1)


def with_kinds(engine: Any, world: int, states: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``states`` (``Engine.agent_states``) with the static-actor ``kind`` of each agent added."""
    n = len(states["x"])
    return {**states, "kind": np.asarray(engine.agents[world, :n]["kind"], np.int64)}


def _boxes(s: dict[str, np.ndarray]) -> np.ndarray:
    """Corners [n, 4, 2] of each agent's box (front-right, front-left, rear-left, rear-right)."""
    c, si = np.cos(s["heading"])[:, None], np.sin(s["heading"])[:, None]
    hl, hw = (s["length"] / 2)[:, None], (s["width"] / 2)[:, None]
    lx = hl * np.array([1, 1, -1, -1])
    ly = hw * np.array([-1, 1, 1, -1])
    return np.stack([s["x"][:, None] + lx * c - ly * si, s["y"][:, None] + lx * si + ly * c], axis=-1)


_SIGNAL_RGBA = np.array([[0.86, 0.1, 0.1, 1.0], [0.95, 0.8, 0.1, 1.0], [0.15, 0.75, 0.2, 1.0], [0.6, 0.6, 0.6, 1.0]])


def draw_signals(ax: Any, map_data: Any, states: np.ndarray) -> None:
    """Signal heads as dots in their current colour (0 red, 1 yellow, 2 green)."""
    if len(map_data.signals):
        pos = map_data.signals.position
        ax.scatter(pos[:, 0], pos[:, 1], s=14, c=_SIGNAL_RGBA[np.minimum(states, 3)], edgecolors="black",
                   linewidths=0.4, zorder=10)


def draw_agents(ax: Any, states: dict[str, np.ndarray], trails: Sequence[dict[str, np.ndarray]] = ()) -> None:
    """Draw agents (``Engine.agent_states`` output) on a matplotlib axis: vehicles and cyclists as
    boxes with a white heading mark, pedestrians as discs; controlled agents in their class colour,
    IDM vehicles in a paler shade of it, rule-based pedestrians in their ``WALKER_STYLE`` colour,
    static and replayed agents grey, collided or off-road ones outlined red, goals as crosses joined
    to their agent, and optional past states as thin trails."""
    alive = states["alive"].astype(bool)
    if "kind" in states:  # static actors of the generators get their own shapes
        kinds = states["kind"] > 0
        draw_static_actors(ax, {k: v[alive & kinds] for k, v in states.items()})
        alive &= ~kinds
    s = {k: v[alive] for k, v in states.items()}
    if len(s["x"]) == 0:
        return
    if trails:
        n = len(states["x"])
        xy = np.stack([np.stack([t["x"][:n], t["y"][:n]], -1) for t in trails], axis=1)[alive]
        ax.add_collection(LineCollection(list(xy), colors=(0.1, 0.1, 0.1, 0.5), linewidths=0.6, zorder=6))
    controlled = s["role"] == _CONTROLLED
    rule_based = s["role"] == _IDM  # IDM: the class colour, paler
    colours = np.where(controlled[:, None], _CLASS_COLOURS[s["cls"].astype(int)], _BACKGROUND_AGENT)
    colours = np.where(rule_based[:, None], 0.45 * _CLASS_COLOURS[s["cls"].astype(int)] + 0.55, colours)
    for role, (_, colour) in WALKER_STYLE.items():
        colours[s["role"] == role] = colour
    bad = (s["collided"] > 0) | (s["offroad"] > 0)
    edges = np.where(bad[:, None], [[0.9, 0.05, 0.05, 1.0]], [[0.05, 0.05, 0.05, 1.0]])
    widths = np.where(bad, 1.6, 0.5)
    disc = s["cls"] == _PEDESTRIAN
    box = ~disc
    if box.any():
        b = {k: v[box] for k, v in s.items()}
        ax.add_collection(PolyCollection(list(_boxes(b)), facecolors=colours[box], edgecolors=edges[box],
                                         linewidths=widths[box], zorder=8))
        nose = np.stack([b["x"] + 0.5 * b["length"] * np.cos(b["heading"]),
                         b["y"] + 0.5 * b["length"] * np.sin(b["heading"])], -1)
        ax.scatter(nose[:, 0], nose[:, 1], s=3, c="white", zorder=9)
    if disc.any():
        r = np.maximum(s["length"][disc], s["width"][disc])[:, None, None]
        polys = list(np.stack([s["x"][disc], s["y"][disc]], -1)[:, None, :] + r * _DISC[None])
        ax.add_collection(PolyCollection(polys, facecolors=colours[disc], edgecolors=edges[disc],
                                         linewidths=widths[disc], zorder=9))
    g = controlled & (s["goal_hidden"] == 0)
    if g.any():
        ax.scatter(s["goal_x"][g], s["goal_y"][g], marker="x", s=18, c=colours[g], zorder=9)
        seg = np.stack([np.stack([s["x"][g], s["y"][g]], -1), np.stack([s["goal_x"][g], s["goal_y"][g]], -1)], 1)
        ax.add_collection(LineCollection(list(seg), colors=colours[g], linewidths=0.4, linestyles="dotted", zorder=7))


def draw_static_actors(ax: Any, s: dict[str, np.ndarray]) -> None:
    """Static actors by kind (``STATIC_STYLE``): vehicles and debris as boxes (vehicles with a white
    heading mark), workers as discs, cones as small triangles."""
    for kind, (_, colour, shape) in STATIC_STYLE.items():
        sel = s["kind"] == kind
        if not sel.any():
            continue
        k = {key: v[sel] for key, v in s.items()}
        if shape == "box":
            ax.add_collection(PolyCollection(list(_boxes(k)), facecolors=[colour], edgecolors="black",
                                             linewidths=0.5, zorder=8))
            if kind != 5:
                nose = np.stack([k["x"] + 0.4 * k["length"] * np.cos(k["heading"]),
                                 k["y"] + 0.4 * k["length"] * np.sin(k["heading"])], -1)
                ax.scatter(nose[:, 0], nose[:, 1], s=4, c="white", zorder=9)
        else:
            r = np.maximum(k["length"], k["width"])[:, None, None]
            unit = _TRIANGLE if shape == "triangle" else _DISC
            polys = list(np.stack([k["x"], k["y"]], -1)[:, None, :] + r * unit[None])
            ax.add_collection(PolyCollection(polys, facecolors=[colour], edgecolors="black", linewidths=0.4,
                                             zorder=9))


def render_world(engine: Any, world: int = 0, path: str | Path | None = None, *,
                 trails: Sequence[dict[str, np.ndarray]] = (), zoom: float | None = None, dpi: int = 150,
                 title: str | None = None) -> Figure:
    """Render one world of an ``Engine`` (map plus agents); ``zoom``: half-width in metres of a window
    centred on the first live controlled agent (default: the whole map)."""
    rm = engine.road_maps[int(engine.world_map[world])]
    states = with_kinds(engine, world, engine.agent_states(world))
    t = int(engine.world_steps[world])
    fig = render_map(rm.map_data, None, dpi=dpi, signal_states=engine.signal_states(world),
                     title=title or f"{rm.map_data.name}: world {world}, step {t}, "
                                    f"{int(states['alive'].sum())} agents")
    ax = fig.axes[0]
    draw_agents(ax, states, trails)
    if zoom is not None and states["x"].size:
        live = np.nonzero((states["role"] == 0) & (states["alive"] > 0))[0]
        i = int(live[0]) if live.size else 0
        cx, cy = float(states["x"][i]), float(states["y"][i])
        ax.set_xlim(cx - zoom, cx + zoom)
        ax.set_ylim(cy - zoom, cy + zoom)
    if path is not None:
        from .foundation.safe_files import atomic_path

        with atomic_path(path, "image") as tmp:
            fig.savefig(tmp, dpi=dpi)
    return fig


def frame_rgb(engine: Any, world: int = 0, *, zoom: float | None = None, dpi: int = 80) -> np.ndarray:
    """One rendered frame of a world as an RGB uint8 array ``[H, W, 3]`` (for ``render_mode="rgb_array"``)."""
    fig = render_world(engine, world, None, zoom=zoom, dpi=dpi)
    canvas = fig.canvas
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


class RolloutRecorder:
    """Frames of one world over a rollout, drawing the map once and only the agents per frame.

        rec = RolloutRecorder(engine, world=0, zoom=None)
        for _ in range(steps):
            engine.step(actions)
            rec.capture()
        rec.save("rollout.mp4")   # .gif, or .mp4 when imageio-ffmpeg is installed
    """

    def __init__(self, engine: Any, world: int = 0, *, zoom: float | None = None, dpi: int = 80, trail: int = 20):
        rm = engine.road_maps[int(engine.world_map[world])]
        self.engine, self.world, self.zoom, self.trail = engine, world, zoom, trail
        self.map_data = rm.map_data
        self.fig = render_map(rm.map_data, None, dpi=dpi, title=rm.map_data.name)
        self.ax = self.fig.axes[0]
        self.frames: list[np.ndarray] = []
        self._history: list[dict[str, np.ndarray]] = []

    def capture(self) -> np.ndarray:
        """Draw the world's current state and keep the frame (RGB uint8 ``[H, W, 3]``)."""
        states = with_kinds(self.engine, self.world, self.engine.agent_states(self.world))
        before = set(self.ax.collections) | set(self.ax.texts)
        draw_signals(self.ax, self.map_data, self.engine.signal_states(self.world))
        draw_agents(self.ax, states, self._history[-self.trail:])
        self.ax.set_title(f"{self.ax.get_title().split(':')[0]}: step {int(self.engine.world_steps[self.world])}, "
                          f"{int(states['alive'].sum())} agents", fontsize=9)
        if self.zoom is not None and states["x"].size:
            live = np.nonzero((states["role"] == 0) & (states["alive"] > 0))[0]
            i = int(live[0]) if live.size else 0
            self.ax.set_xlim(states["x"][i] - self.zoom, states["x"][i] + self.zoom)
            self.ax.set_ylim(states["y"][i] - self.zoom, states["y"][i] + self.zoom)
        self.fig.canvas.draw()
        frame = np.asarray(self.fig.canvas.buffer_rgba())[..., :3].copy()
        for artist in (set(self.ax.collections) | set(self.ax.texts)) - before:
            artist.remove()
        self._history.append(states)
        self.frames.append(frame)
        return frame

    def save(self, path: str | Path, fps: int = 10) -> Path:
        """Write the frames as a video (``.mp4`` needs imageio-ffmpeg; otherwise a ``.gif`` is
        written next to the requested path). Returns the path written."""
        import imageio.v3 as iio

        from .foundation.safe_files import atomic_path

        path = Path(path)
        if not self.frames:
            raise ValueError("no frames captured")
        if path.suffix.lower() == ".mp4":
            try:
                import imageio_ffmpeg  # noqa: F401

                with atomic_path(path, "video") as tmp:  # no write through a link planted at path
                    iio.imwrite(tmp, np.stack(self.frames), fps=fps, codec="libx264")
                return path
            except ImportError:
                path = path.with_suffix(".gif")
        with atomic_path(path, "video") as tmp:
            iio.imwrite(tmp, np.stack(self.frames), duration=1000 / fps, loop=0)
        return path
