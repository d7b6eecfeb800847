"""Gallery of the road-user generators: one panel per generator on the procedural town,
written to docs/road_users.png, and a short GIF of a full planner-preset scene
(docs/planner_scene.gif).

    python examples/road_users_gallery.py [--out docs/road_users.png] [--gif docs/planner_scene.gif]

Each panel is a world with only that generator switched on (workers always present), zoomed on
what it placed; controlled cars are blue, IDM cars pale blue, and the static actors follow
``terrazero_env.render.STATIC_STYLE``. The pedestrian panels (single crosser, pack, bidirectional
group, staggered sequence, jaywalker) step their world until the group is on its crosswalk (or the
jaywalker is in the road) and draw each walker's last seconds as a fading trail; crosswalk crossers
and jaywalkers follow ``terrazero_env.render.WALKER_STYLE``. The legend fills the last grid cell.
"""

import argparse
from pathlib import Path

import numpy as np
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.path import Path as Polygon

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.config import CrossingGroup, EngineConfig, InitConfig, PedestrianConfig, RoadUsersConfig
from terrazero_env.maps.render import render_map
from terrazero_env.render import STATIC_STYLE, WALKER_STYLE, RolloutRecorder, draw_agents, with_kinds

CROSSER, JAYWALKER = core.ROLES.index("CROSSER"), core.ROLES.index("JAYWALKER")

#: (generator, title, RoadUsersConfig fields, half-width of the panel's window in metres)
PANELS = [("parked", "parked row (car / truck / bus)", {"parked_row": (3, 3), "static_sizes": (1, 1, 1)}, 22.0),
          ("crash_disc", "crash cluster: uniform disc", {"crash_vehicles": (4, 4)}, 16.0),
          ("crash_chain", "crash cluster: rear-end chain", {"crash_vehicles": (4, 4)}, 16.0),
          ("crash_tbone", "crash cluster: T-bone", {}, 12.0),
          ("crash_fan", "crash cluster: outward fan", {"crash_vehicles": (4, 4)}, 12.0),
          ("cone_grid", "cone grid with workers", {}, 9.0),
          ("cone_taper", "diagonal cone taper with worker", {}, 12.0),
          ("lane_block", "lane-block closure with worker", {}, 9.0),
          ("debris", "debris", {"debris_size": (0.8, 1.2)}, 9.0)]


#: (group kind, or None for the jaywalker; title; PedestrianConfig fields; half-width of the window in metres)
WALKER_PANELS = [(CrossingGroup.SINGLE, "single crosswalk crosser", {}, 8.0),
                 (CrossingGroup.PACK, "pack of crossers (side by side)", {"group_size": (3, 3)}, 8.0),
                 (CrossingGroup.BIDIRECTIONAL, "bidirectional group (ORCA)", {"group_size": (2, 2)}, 8.0),
                 (CrossingGroup.STAGGERED, "staggered sequence", {"group_size": (3, 3)}, 8.0),
                 (None, "jaywalker (mid-block)", {"jaywalk_rate": 0.1}, 8.0)]
TRAIL = 30  # steps of trail behind each walker (3 s at the default 0.1 s step)


def _frame(ax, title: str, cx: float, cy: float, half: float) -> None:
    ax.set_xlim(cx - half, cx + half)
    ax.set_ylim(cy - half, cy + half)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel(f"{2 * half:.0f} m across", fontsize=8)
    ax.set_ylabel("")
    ax.set_title(title, fontsize=10)


def panel(ax, gen: str, title: str, extra: dict, half: float) -> None:
    ru = RoadUsersConfig(**{gen: 1}, worker_prob=1.0, **extra)
    cfg = EngineConfig(num_worlds=1, slots_per_world=2, max_agents_per_world=40, maps=("grid_town",),
                       init=InitConfig(num_agents=(4, 4)), road_users=ru)
    e = core.Engine(cfg)
    for seed in range(100):
        e.reset(seeds=np.array([seed]))
        kinds = e.agents[0, : e.num_agents(0)]["kind"]
        a = e.agents[0, : e.num_agents(0)]
        st = a[kinds > 0]
        if len(st) and (gen != "parked" or len(np.unique(st["cls"])) > 1):
            break
    render_map(e.road_maps[0].map_data, ax=ax, title=title)
    draw_agents(ax, with_kinds(e, 0, e.agent_states(0)))
    _frame(ax, title, float(st["x"].mean()), float(st["y"].mean()), half)


def _trails(history: list[np.ndarray], rows: np.ndarray) -> list[np.ndarray]:
    """Past positions [k, 2] (oldest first, at most ``TRAIL`` + 1) of each of ``rows`` in the latest
    snapshot, stopping where the row was not alive with the same role (rows are reused)."""
    out = []
    now = history[-1]
    for i in rows:
        pts = []
        for snap in reversed(history[-TRAIL - 1:]):
            if i >= len(snap) or not snap["alive"][i] or snap["role"][i] != now["role"][i]:
                break
            if pts and np.hypot(snap["x"][i] - pts[-1][0], snap["y"][i] - pts[-1][1]) > 1.0:
                break
            pts.append((snap["x"][i], snap["y"][i]))
        out.append(np.array(pts[::-1], np.float64).reshape(-1, 2))
    return out


def _shows(kind: CrossingGroup, along: np.ndarray, way: np.ndarray, mid: float) -> bool:
    """Whether walkers on one crosswalk (positions along its axis, walking direction +-1, the
    axis position of its middle) show a group of ``kind`` clearly, in the middle of the road."""
    n = len(along)
    if n == 0 or abs(along.mean() - mid) > 3.0:
        return False
    one_way = bool((way == way[0]).all())
    if kind == CrossingGroup.SINGLE:
        return n == 1
    if kind == CrossingGroup.PACK:
        return n >= 3 and one_way and np.ptp(along) < 1.5
    if kind == CrossingGroup.BIDIRECTIONAL:
        fw, bw = along[way > 0], along[way < 0]
        return len(fw) >= 2 and len(bw) >= 2 and 1.5 < abs(fw.mean() - bw.mean()) < 3.0  # about to meet
    return n >= 3 and one_way and np.ptp(along) > 3.0  # staggered: one after another


def walker_scene(kind: CrossingGroup | None, extra: dict, max_steps: int = 4000) -> dict:
    """Step a world with one pedestrian generator on until it shows ``kind`` (a crossing group on a
    crosswalk, or a jaywalker some seconds into the road). Returns the engine, the snapshots of its
    agents so far, the rows of the walkers that make the scene and the window centre."""
    ped = PedestrianConfig(**extra) if kind is None else PedestrianConfig(
        crossing_rate=0.01, group_probs=tuple(float(g == kind) for g in CrossingGroup), **extra)
    cfg = EngineConfig(num_worlds=1, slots_per_world=2, max_agents_per_world=64, maps=("grid_town",),
                       episode_length=100_000, init=InitConfig(num_agents=(2, 2)),
                       road_users=RoadUsersConfig(pedestrians=ped))
    e = core.Engine(cfg)
    e.reset(seeds=np.array([0]))
    hold = int(np.nonzero((e.action_values(0) == 0).all(axis=1))[0][0])  # keep speed and curvature
    polys = [Polygon(p) for p in _crosswalk_polygons(e)]
    axes = [_walk_axis(p.vertices) for p in polys]
    edges = _edge_segments(e)
    history: list[np.ndarray] = []
    for _ in range(max_steps):
        e.step(np.full_like(e.actions, hold))
        history.append(e.agents[0, : e.num_agents(0)].copy())
        a = history[-1]
        rows = np.flatnonzero((a["alive"] == 1) & (a["role"] == (JAYWALKER if kind is None else CROSSER)))
        if len(history) <= TRAIL or len(rows) == 0:
            continue
        trails = _trails(history, rows)
        vel = np.stack([t[-1] - t[max(len(t) - 10, 0)] for t in trails])  # over the last 0.9 s
        walked = np.array([len(t) > TRAIL // 2 for t in trails]) & (np.hypot(vel[:, 0], vel[:, 1]) > 0.5)
        xy = np.stack([a["x"][rows], a["y"][rows]], -1)
        if kind is None:  # a jaywalker 3 s into its walk, across a straight stretch of road
            free = walked & np.array([len(t) > TRAIL for t in trails])
            free &= [bool(f) and _straight_across(edges, xy[i], vel[i]) for i, f in enumerate(free)]
            if free.any():
                i = int(np.argmax(free))
                ahead = xy[i] + 4.0 * vel[i] / np.hypot(*vel[i])  # show the road it is crossing
                return {"engine": e, "history": history, "rows": rows[[i]], "centre": ahead}
            continue
        for p, (axis, mid) in zip(polys, axes):
            on = p.contains_points(xy)
            if on.any() and walked[on].all() and _shows(kind, xy[on] @ axis, np.sign(vel[on] @ axis), mid):
                return {"engine": e, "history": history, "rows": rows[on], "centre": p.vertices.mean(0)}
    raise RuntimeError(f"no {kind} scene within {max_steps} steps")


def _crosswalk_polygons(e) -> list[np.ndarray]:
    cw = e.road_maps[0].map_data.crosswalks
    return [np.asarray(cw.values[cw.offsets[k]:cw.offsets[k + 1], :2], np.float64) for k in range(len(cw))]


def _edge_segments(e) -> np.ndarray:
    """Road-edge segments [n, 2, 2] of the world's map."""
    re = e.road_maps[0].map_data.road_edges
    rows = [np.asarray(re.values[re.offsets[k]:re.offsets[k + 1], :2], np.float64) for k in range(len(re))]
    return np.concatenate([np.stack([r[:-1], r[1:]], 1) for r in rows if len(r) > 1])


def _straight_across(edges: np.ndarray, xy: np.ndarray, vel: np.ndarray, reach: float = 10.0) -> bool:
    """Whether every road edge within ``reach`` of a walker runs square to its walk (a straight stretch,
    walked straight across), and there are such edges."""
    mid = edges.mean(1)
    near = edges[np.hypot(*(mid - xy).T) < reach]
    if len(near) == 0:
        return False
    d = near[:, 1] - near[:, 0]
    cos = np.abs(d @ vel) / np.maximum(np.hypot(d[:, 0], d[:, 1]) * np.hypot(*vel), 1e-9)
    return bool((cos < 0.15).all())


def _walk_axis(poly: np.ndarray) -> tuple[np.ndarray, float]:
    """Unit vector along a crosswalk (its longer side) and the axis position of its middle."""
    sides = np.diff(np.vstack([poly, poly[:1]]), axis=0)
    axis = sides[int(np.argmax(np.hypot(sides[:, 0], sides[:, 1])))]
    axis = axis / np.hypot(*axis)
    return axis, float(poly.mean(0) @ axis)


def walker_panel(ax, kind: CrossingGroup | None, title: str, extra: dict, half: float) -> dict:
    """Draw a pedestrian generator's panel: the scene of ``walker_scene`` with every walker in the
    window trailing its last ``TRAIL`` positions, fading with age. Returns the scene, with the rows
    of all walkers inside the window under ``"shown"``."""
    scene = walker_scene(kind, extra)
    e, history = scene["engine"], scene["history"]
    render_map(e.road_maps[0].map_data, ax=ax, title=title)
    draw_agents(ax, with_kinds(e, 0, e.agent_states(0)))
    a = history[-1]
    cx, cy = scene["centre"]
    inside = (np.abs(a["x"] - cx) < half) & (np.abs(a["y"] - cy) < half)
    shown = np.flatnonzero((a["alive"] == 1) & np.isin(a["role"], list(WALKER_STYLE)) & inside)
    for i, trail in zip(shown, _trails(history, shown)):
        if len(trail) < 2:
            continue
        colour = np.array(WALKER_STYLE[int(a["role"][i])][1])
        rgba = np.repeat(colour[None], len(trail) - 1, 0)
        rgba[:, 3] = np.linspace(0.05, 0.8, len(trail) - 1)
        ax.add_collection(LineCollection(np.stack([trail[:-1], trail[1:]], 1), colors=rgba, linewidths=2.5,
                                         zorder=7, capstyle="round"))
    _frame(ax, title, float(cx), float(cy), half)
    return {**scene, "shown": shown}


def legend(ax) -> None:
    """The last grid cell: one entry per road-user type, in its shape and colour."""
    def entry(label: str, colour, marker: str, size: float = 11) -> Line2D:
        return Line2D([], [], ls="", marker=marker, markersize=size, markerfacecolor=colour,
                      markeredgecolor="black", label=label)

    marker = {"box": "s", "disc": "o", "triangle": "^"}
    car = np.array([0.20, 0.45, 0.85])
    handles = [entry("controlled car (box, white heading mark)", car, "s"),
               entry("IDM car (box)", 0.45 * car + 0.55, "s")]
    handles += [entry(f"{label} ({shape})", c, marker[shape]) for label, c, shape in STATIC_STYLE.values()]
    handles += [entry(f"{label} (disc)", c, "o") for label, c in WALKER_STYLE.values()]
    handles.append(Line2D([], [], color=WALKER_STYLE[CROSSER][1], lw=2.5, label="walker's last 3 s (fading)"))
    ax.axis("off")
    ax.legend(handles=handles, loc="center", fontsize=10, frameon=False, title="road users", title_fontsize=11)


def gallery(out: Path) -> None:
    fig = Figure(figsize=(19, 12))
    axes = fig.subplots(3, 5).flat
    for ax, (gen, title, extra, half) in zip(axes[:9], PANELS):
        panel(ax, gen, title, extra, half)
    for ax, (kind, title, extra, half) in zip(axes[9:14], WALKER_PANELS):
        walker_panel(ax, kind, title, extra, half)
    legend(axes[14])
    fig.subplots_adjust(left=0.01, right=0.99, top=0.97, bottom=0.03, wspace=0.06, hspace=0.14)
    fig.savefig(out, dpi=90)
    print(f"wrote {out}")


def planner_gif(out: Path, steps: int, half: float = 45.0) -> None:
    """A planner-preset world on the procedural town, policy cars holding their speed and
    curvature, in a window around its busiest spot (the agent with the most others within ``half``)."""
    venv = terrazero_env.make_vec(1, preset="planner", maps=["grid_town"])
    venv.reset(seed=11)
    e = venv.engine
    hold = int(np.nonzero((e.action_values(0) == 0).all(axis=1))[0][0])  # keep speed and curvature
    a = e.agents[0, : e.num_agents(0)]
    xy = np.stack([a["x"], a["y"]], -1)
    near = (np.abs(xy[:, None, :] - xy[None, :, :]).max(-1) < half).sum(1)
    cx, cy = xy[int(np.argmax(near))]
    rec = RolloutRecorder(e, world=0, zoom=None, dpi=50, trail=10)
    rec.ax.set_xlim(cx - half, cx + half)
    rec.ax.set_ylim(cy - half, cy + half)
    rec.capture()
    for _ in range(steps):
        venv.step(np.full(venv.num_envs, hold))
        rec.capture()
    print(f"wrote {rec.save(out, fps=8)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("docs/road_users.png"))
    parser.add_argument("--gif", type=Path, default=Path("docs/planner_scene.gif"))
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    gallery(args.out)
    if args.steps > 0:
        planner_gif(args.gif, args.steps)
