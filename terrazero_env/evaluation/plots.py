"""Pictures of an evaluation: bar charts of a paired comparison with their 95% intervals, and a
filmstrip of the worst-scoring episodes.

    from terrazero_env.evaluation.plots import comparison_chart, filmstrip
    comparison_chart(result["comparison"], "vs.png", "early", "final")

This module owns only the drawing; the numbers come from :mod:`terrazero_env.evaluation.metrics` and the
episodes from ``terrazero_env.agents.evaluate``. Torch-free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from ..maps.render import render_map
from ..render import draw_agents

__all__ = ["comparison_chart", "filmstrip"]

_A, _B = "#3b6fb6", "#d9822b"


def comparison_chart(rows: dict[str, dict[str, Any]], path: str | Path, name_a: str = "A", name_b: str = "B",
                     dpi: int = 110) -> Path:
    """One small panel per metric (rows of :func:`terrazero_env.evaluation.metrics.compare`): A's and B's means as
    bars with their jackknife 95% intervals, the title marked ``*`` (and drawn in red) when the paired
    difference's interval excludes zero. Writes ``path`` (PNG) and returns it."""
    if not rows:
        raise ValueError("no metrics to chart")
    keys = list(rows)
    cols = 5
    nrows = math.ceil(len(keys) / cols)
    fig = Figure(figsize=(3.0 * cols, 2.3 * nrows))
    for i, k in enumerate(keys):
        r = rows[k]
        ax = fig.add_subplot(nrows, cols, i + 1)
        vals = [r["a"], r["b"]]
        err = np.array([[v - (c[0] if c[0] is not None and not math.isnan(c[0]) else v),
                         (c[1] if c[1] is not None and not math.isnan(c[1]) else v) - v]
                        for v, c in ((r["a"], r["a_ci"]), (r["b"], r["b_ci"]))]).T
        ax.bar([0, 1], vals, color=[_A, _B], yerr=err, capsize=4, width=0.6)
        ax.set_xticks([0, 1], [name_a[:12], name_b[:12]], fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
        diff = f"A-B {r['diff']:+.3g} [{r['ci_low']:+.3g}, {r['ci_high']:+.3g}]" if not math.isnan(r["ci_low"]) else ""
        mark = " *" if r["significant"] else ""
        ax.set_title(f"{r['label']}{mark}\n{diff}", fontsize=7.5, color="#b01010" if r["significant"] else "black")
    fig.suptitle(f"{name_a} (blue) vs {name_b} (orange): means with jackknife 95% intervals; * the paired "
                 f"difference excludes zero", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    path = Path(path)
    from ..foundation.safe_files import atomic_path

    with atomic_path(path, "image") as tmp:
        fig.savefig(tmp, dpi=dpi)
    return path


def filmstrip(strips: Sequence[dict[str, Any]], path: str | Path, zoom: float = 35.0, dpi: int = 90) -> Path:
    """One row of frames per episode. Each strip: ``map`` (MapData), ``agent`` (the episode's agent
    index), ``states`` (``Engine.agents`` rows of its world, one per frame), ``steps`` (their step
    numbers) and ``title``. Frames are centred on the agent (``zoom``: half-width in metres), which is
    drawn with a thick outline; collided or off-road agents are outlined red. Writes a PNG."""
    if not strips:
        raise ValueError("no episodes to draw")
    n_frames = max(len(s["states"]) for s in strips)
    fig = Figure(figsize=(2.6 * n_frames, 2.9 * len(strips)))
    for row, s in enumerate(strips):
        for col, (snap, step) in enumerate(zip(s["states"], s["steps"])):
            ax = fig.add_subplot(len(strips), n_frames, row * n_frames + col + 1)
            render_map(s["map"], None, ax=ax, title="")
            st = {name: np.asarray(snap[name]) for name in snap.dtype.names}
            st["goal_hidden"] = np.ones_like(st["alive"])
            st["goal_hidden"][s["agent"]] = 0
            draw_agents(ax, st)
            a = s["agent"]
            cx, cy, h = float(st["x"][a]), float(st["y"][a]), float(st["heading"][a])
            c, si = math.cos(h), math.sin(h)
            hl, hw = 0.5 * float(st["length"][a]), 0.5 * float(st["width"][a])
            box = np.array([[hl, -hw], [hl, hw], [-hl, hw], [-hl, -hw], [hl, -hw]])
            bad = int(st["collided"][a]) or int(st["offroad"][a])
            ax.plot(cx + box[:, 0] * c - box[:, 1] * si, cy + box[:, 0] * si + box[:, 1] * c,
                    color="#e01010" if bad else "black", linewidth=2.0, zorder=11)
            ax.set_xlim(cx - zoom, cx + zoom)
            ax.set_ylim(cy - zoom, cy + zoom)
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_xlabel("")
            ax.set_ylabel("")
            flags = [f for f in ("collided", "offroad", "wrong_way", "red_light") if int(st[f][a])]
            alive = "" if int(st["alive"][a]) else " (gone)"
            ax.set_title(f"t={step * s.get('dt', 0.1):.1f}s{alive} {' '.join(flags)}", fontsize=8)
            if col == 0:
                ax.set_ylabel(s["title"], fontsize=7)
    fig.tight_layout()
    path = Path(path)
    from ..foundation.safe_files import atomic_path

    with atomic_path(path, "image") as tmp:
        fig.savefig(tmp, dpi=dpi)
    return path
