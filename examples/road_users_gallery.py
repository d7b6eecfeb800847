"""Gallery of the static road-user generators (issue 16): one panel per generator on the procedural
town, written to docs/road_users.png, and a short GIF of a full planner-preset scene
(docs/planner_scene.gif).

    python examples/road_users_gallery.py [--out docs/road_users.png] [--gif docs/planner_scene.gif]

Each panel is a world with only that generator switched on (workers always present), zoomed on
what it placed; controlled cars are blue, IDM cars pale blue, and the static actors follow
``terrazero_env.render.STATIC_STYLE`` (legend at the bottom).
"""

import argparse
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.config import EngineConfig, InitConfig, RoadUsersConfig
from terrazero_env.maps.render import render_map
from terrazero_env.render import STATIC_STYLE, RolloutRecorder, draw_agents, with_kinds

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
    cx, cy = float(st["x"].mean()), float(st["y"].mean())
    ax.set_xlim(cx - half, cx + half)
    ax.set_ylim(cy - half, cy + half)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel(f"{2 * half:.0f} m across", fontsize=8)
    ax.set_ylabel("")
    ax.set_title(title, fontsize=10)


def gallery(out: Path) -> None:
    fig = Figure(figsize=(12, 12.8))
    axes = fig.subplots(3, 3)
    for ax, (gen, title, extra, half) in zip(axes.flat, PANELS):
        panel(ax, gen, title, extra, half)
    handles = [Patch(facecolor=c, edgecolor="black", label=f"{label} ({shape})")
               for label, c, shape in STATIC_STYLE.values()]
    handles += [Patch(facecolor=(0.20, 0.45, 0.85), edgecolor="black", label="controlled car"),
                Patch(facecolor=0.45 * np.array([0.20, 0.45, 0.85]) + 0.55, edgecolor="black", label="IDM car")]
    fig.legend(handles=handles, loc="lower center", ncol=4, fontsize=10, frameon=False)
    fig.subplots_adjust(left=0.02, right=0.98, top=0.97, bottom=0.08, wspace=0.05, hspace=0.12)
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
