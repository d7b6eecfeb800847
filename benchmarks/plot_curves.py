"""Training curves of several runs, grouped: each group's runs (seeds) drawn thin, their mean thick,
one panel per quantity of ``progress.jsonl`` (goal-reach, off-road and collision shares of the episodes
that ended in an iteration, and the mean return), against agent steps.

    python benchmarks/plot_curves.py --out docs/careful_curves.png \\
        "baseline=runs/abl/baseline_s*" "careful=runs/abl/careful_s*"

A group is ``LABEL=GLOB`` (run folders, each holding a ``progress.jsonl`` as ``terrazero train``
writes it). Curves are smoothed over ``--window`` iterations (a moving mean weighted by each
iteration's ended episodes), since an iteration of the quick preset ends only some tens of episodes.
"""

from __future__ import annotations

import argparse
import glob
import json
from pathlib import Path

import numpy as np

PANELS = (("goal", "goal-reach (episodes ended)"), ("offroad", "off-road"), ("collision", "collision"),
          ("return", "mean episode return"))


def read_progress(run: Path) -> dict[str, np.ndarray]:
    """The columns of a run's ``progress.jsonl`` as arrays (``agent_steps``, ``episodes`` and PANELS)."""
    rows = [json.loads(line) for line in (run / "progress.jsonl").read_text(encoding="utf-8").splitlines()
            if line.strip()]
    if not rows:
        raise ValueError(f"{run}: progress.jsonl holds no iteration")
    keys = ("agent_steps", "episodes") + tuple(k for k, _ in PANELS)
    missing = [k for k in keys if k not in rows[0]]
    if missing:
        raise ValueError(f"{run}: progress.jsonl lacks {missing}")
    # An iteration in which no episode ended has no rates (null): NaN, weighted 0 by ``smooth``.
    return {k: np.array([np.nan if r[k] is None else float(r[k]) for r in rows]) for k in keys}


def smooth(values: np.ndarray, weights: np.ndarray, window: int) -> np.ndarray:
    """Moving mean of ``values`` over the last ``window`` iterations, weighted by ``weights``."""
    v = np.nan_to_num(values) * weights
    cv = np.concatenate([[0.0], np.cumsum(v)])
    cw = np.concatenate([[0.0], np.cumsum(weights)])
    lo = np.maximum(np.arange(1, len(values) + 1) - window, 0)
    hi = np.arange(1, len(values) + 1)
    w = cw[hi] - cw[lo]
    return np.where(w > 0, (cv[hi] - cv[lo]) / np.maximum(w, 1e-12), np.nan)


def plot(groups: dict[str, list[Path]], out: Path, window: int = 20, title: str | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(PANELS), figsize=(4.2 * len(PANELS), 3.4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for gi, (label, runs) in enumerate(groups.items()):
        color = colors[gi % len(colors)]
        curves = [read_progress(r) for r in runs]
        n = min(len(c["agent_steps"]) for c in curves)
        steps = curves[0]["agent_steps"][:n]
        for ax, (key, name) in zip(axes, PANELS):
            ys = np.array([smooth(c[key][:n], c["episodes"][:n], window) for c in curves])
            for y in ys:
                ax.plot(steps, y, color=color, lw=0.6, alpha=0.35)
            with np.errstate(all="ignore"):  # iterations where no run has ended an episode yet: NaN
                mean = np.array([np.nan if np.isnan(col).all() else np.nanmean(col) for col in ys.T])
            ax.plot(steps, mean, color=color, lw=2.0,
                    label=f"{label} ({len(runs)} seed{'s' if len(runs) != 1 else ''})")
            ax.set_title(name)
            ax.set_xlabel("agent steps")
            ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=8, frameon=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return out


def parse_group(text: str) -> tuple[str, list[Path]]:
    if "=" not in text:
        raise SystemExit(f"group {text!r}: expected LABEL=GLOB")
    label, pattern = text.split("=", 1)
    runs = sorted(Path(p) for p in glob.glob(pattern) if (Path(p) / "progress.jsonl").is_file())
    if not runs:
        raise SystemExit(f"group {label!r}: no run folder with a progress.jsonl matches {pattern!r}")
    return label, runs


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("groups", nargs="+", help="LABEL=GLOB of run folders")
    ap.add_argument("--out", required=True, help="PNG to write")
    ap.add_argument("--window", type=int, default=20, help="iterations per moving mean")
    ap.add_argument("--title", default=None)
    args = ap.parse_args(argv)
    if args.window < 1:
        raise SystemExit("--window: a positive number of iterations")
    groups = dict(parse_group(g) for g in args.groups)
    print(plot(groups, Path(args.out), args.window, args.title))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
