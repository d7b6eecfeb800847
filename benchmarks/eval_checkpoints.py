"""Evaluation curve of one training run: its saved checkpoints evaluated every ``--every`` agent
steps (and its last), with sampled and/or deterministic actions, on the run's own worlds, drawn
against the careful-driver targets (goal reach at least 85%; off-road, wrong-way at most 3%;
red-light, collision at most 2%; comfort violations at most 30%).

    python benchmarks/eval_checkpoints.py runs/quick_long --every 1400000 --episodes 200 \\
        --modes sampled deterministic --json benchmarks/results/careful_long_curve.json \\
        --plot docs/careful_long_curve.png

``terrazero train`` keeps a checkpoint every ``checkpoint_every`` iterations under
``RUN/checkpoints/iter_NNNNNN``; a mark of the curve takes the first checkpoint at or after it (the
agent steps of an iteration come from ``progress.jsonl``). The JSON is written after every
evaluation and read back on a rerun, so an interrupted curve continues where it stopped and a
longer run (``--resume``) only adds its new marks. ``--plot-only`` redraws from the JSON. ``--until`` stops at that many agent steps (a curve of the
first part of a longer run). After the curve, a table gives for each target (and for all six) the
first mark at which the rates pooled over ``--seeds`` meet it, in agent steps and in seconds of the
run's own training clock (``progress.jsonl``'s ``seconds`` at that checkpoint).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

RATES = (("goal_reach_rate", "goal reach", 0.85, "min"), ("offroad_rate", "off-road", 0.03, "max"),
         ("wrong_way_rate", "wrong-way", 0.03, "max"), ("red_light_rate", "red-light", 0.02, "max"),
         ("collision_rate", "collision", 0.02, "max"), ("comfort_violation_rate", "comfort violation", 0.30, "max"))


def progress_rows(run: Path) -> dict[int, dict]:
    """``progress.jsonl`` of ``run`` by iteration."""
    progress = run / "progress.jsonl"
    if not progress.is_file():
        raise SystemExit(f"{run}: no progress.jsonl (not a run folder of terrazero train)")
    out = {}
    for line in progress.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            out[int(row["iteration"])] = row
    return out


def checkpoint_steps(run: Path, progress: dict[int, dict] | None = None) -> list[tuple[int, Path]]:
    """``(agent steps, checkpoint folder)`` of every saved checkpoint of ``run``, in order
    (``progress``: its :func:`progress_rows`, when already read)."""
    progress = progress_rows(run) if progress is None else progress
    steps = {it: int(row["agent_steps"]) for it, row in progress.items()}
    out = []
    for folder in sorted((run / "checkpoints").glob("iter_*")):
        if not (folder / "model.zip").is_file():
            continue
        try:
            it = int(folder.name[len("iter_"):])
        except ValueError:
            continue
        if it not in steps:
            raise SystemExit(f"{folder}: iteration {it} is not in {run / 'progress.jsonl'}")
        out.append((steps[it], folder))
    if not out:
        raise SystemExit(f"{run}: no checkpoint under {run / 'checkpoints'}")
    return out


def pick(checkpoints: list[tuple[int, Path]], every: int) -> list[tuple[int, Path]]:
    """The first checkpoint at or after each multiple of ``every``, and the last one."""
    last = checkpoints[-1][0]
    chosen = []
    mark = every
    while mark <= last:
        chosen.append(next(c for c in checkpoints if c[0] >= mark))
        mark += every
    if not chosen or chosen[-1][0] != last:
        chosen.append(checkpoints[-1])
    return list(dict((c[0], c) for c in chosen).values())


def evaluate_curve(run: Path, every: int, episodes: int, modes: list[str], seeds: list[int],
                   out: Path | None, until: int | None = None) -> list[dict]:
    from terrazero_env.agents.evaluate import evaluate, load_checkpoint, resolve_run

    rows = json.loads(out.read_text(encoding="utf-8"))["rows"] if out is not None and out.is_file() else []
    done = {(r["agent_steps"], r["mode"], r["seed"], r["episodes"]) for r in rows}
    progress = progress_rows(run)
    clock = {int(r["agent_steps"]): float(r["seconds"]) for r in progress.values() if "seconds" in r}
    checkpoints = checkpoint_steps(run, progress)
    if until is not None:
        checkpoints = [c for c in checkpoints if c[0] <= until] or checkpoints[:1]
    for steps, folder in pick(checkpoints, every):
        zip_path, cfg, _ = resolve_run(str(folder))
        model = None
        for mode in modes:
            for seed in seeds:
                if (steps, mode, seed, episodes) in done:
                    continue
                if model is None:  # loaded once, and only for a checkpoint with rows still to do
                    model = load_checkpoint(zip_path)
                t0 = time.perf_counter()
                res = evaluate(model, cfg, episodes=episodes, seed=seed, deterministic=mode == "deterministic")
                row = {"agent_steps": steps, "seconds": clock.get(steps), "checkpoint": folder.name, "mode": mode,
                       "seed": seed,
                       "episodes": episodes, "score": float(sum(res["closed_loop"]["score"]) / episodes),
                       **{k: {f: res["rows"][k][f] for f in ("value", "ci_low", "ci_high", "count")}
                          for k, *_ in RATES}}
                rows.append(row)
                rows.sort(key=lambda r: (r["agent_steps"], r["mode"], r["seed"]))
                print(f"{steps:>11,} {mode:>13} seed {seed}: "
                      + " ".join(f"{name} {row[k]['value']:.1%}" for k, name, *_ in RATES)
                      + f" score {row['score']:.1f} ({time.perf_counter() - t0:.0f} s)", flush=True)
                if out is not None:
                    out.parent.mkdir(parents=True, exist_ok=True)
                    out.write_text(json.dumps({"run": str(run), "rows": rows}, indent=1), encoding="utf-8")
    return rows


def pooled(rows: list[dict], seeds: list[int]) -> list[tuple[int, float | None, str, dict[str, float]]]:
    """Per mark and mode, each rate pooled over the seeds' episodes (marks where every seed is there)."""
    out = []
    for steps, mode in sorted({(r["agent_steps"], r["mode"]) for r in rows}):
        sel = [r for r in rows if r["agent_steps"] == steps and r["mode"] == mode and r["seed"] in seeds]
        if len({r["seed"] for r in sel}) < len(set(seeds)):
            continue
        n = sum(r["episodes"] for r in sel)
        rates = {k: sum(r[k]["count"] for r in sel) / n for k, *_ in RATES}
        out.append((steps, sel[0].get("seconds"), mode, rates))
    return out


def met(rates: dict[str, float], key: str) -> bool:
    _, _, bound, kind = next(r for r in RATES if r[0] == key)
    return rates[key] >= bound if kind == "min" else rates[key] <= bound


def time_to_targets(rows: list[dict], seeds: list[int]) -> str:
    """A markdown table: per mode, the first mark whose pooled rates meet each target, and all six."""
    lines = ["| actions | " + " | ".join(name for _, name, *_ in RATES) + " | all six |",
             "|---|" + "---|" * (len(RATES) + 1)]
    table = pooled(rows, seeds)
    for mode in sorted({m for _, _, m, _ in table}):
        marks = [(s, t, r) for s, t, m, r in table if m == mode]
        cells = []
        for keys in [[k] for k, *_ in RATES] + [[k for k, *_ in RATES]]:
            first = next(((s, t) for s, t, r in marks if all(met(r, k) for k in keys)), None)
            cells.append("not met" if first is None else
                         f"{first[0] / 1e6:.1f}M" + (f" ({first[1] / 60:.0f} min)" if first[1] is not None else ""))
        lines.append(f"| {mode} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path, title: str | None = None, marks: tuple[int, ...] = ()) -> Path:
    """One panel per rate: each mode's rate over the pooled episodes of its evaluation seeds against
    agent steps, their 95% Wilson band shaded, the target as a dashed line, ``marks`` (agent steps
    where the run was resumed, say) as dotted ones."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from terrazero_env.evaluation.metrics import wilson_interval

    fig, axes = plt.subplots(2, 3, figsize=(12.6, 6.4), sharex=True)
    colors = {"sampled": "tab:blue", "deterministic": "tab:orange"}
    for ax, (key, name, target, kind) in zip(axes.ravel(), RATES):
        for mode in sorted({r["mode"] for r in rows}):
            by = {}
            for r in rows:
                if r["mode"] == mode:
                    c, n = by.get(r["agent_steps"], (0, 0))
                    by[r["agent_steps"]] = (c + r[key]["count"], n + r["episodes"])
            xs = np.array(sorted(by))
            counts = np.array([by[x][0] for x in xs])
            ns = np.array([by[x][1] for x in xs])
            lo, hi = np.array([wilson_interval(int(c), int(n)) for c, n in zip(counts, ns)]).T
            seeds = len({r["seed"] for r in rows if r["mode"] == mode})
            ax.plot(xs, counts / ns, "o-", ms=3, color=colors.get(mode), label=f"{mode} ({seeds} eval seed"
                    f"{'s' if seeds != 1 else ''})")
            ax.fill_between(xs, lo, hi, color=colors.get(mode), alpha=0.15)
        ax.axhline(target, ls="--", color="k", lw=0.8, label="target")
        for m in marks:
            ax.axvline(m, ls=":", color="grey", lw=0.8)
        ax.set_title(f"{name} ({'at least' if kind == 'min' else 'at most'} {target:.0%})")
        ax.grid(alpha=0.3)
        ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x / 1e6:g}M"))
    for ax in axes[-1]:
        ax.set_xlabel("agent steps")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=8, frameon=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", type=Path, help="run folder of terrazero train")
    ap.add_argument("--every", type=int, default=1_400_000, help="agent steps between marks")
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--modes", nargs="+", choices=("sampled", "deterministic"), default=["sampled", "deterministic"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0], help="evaluation seeds")
    ap.add_argument("--json", type=Path, default=None, help="rows to write (and to continue from)")
    ap.add_argument("--plot", type=Path, default=None, help="PNG to draw")
    ap.add_argument("--title", default=None)
    ap.add_argument("--marks", nargs="*", type=int, default=[], help="agent steps to mark with a dotted line")
    ap.add_argument("--plot-only", action="store_true", help="draw --plot from --json without evaluating")
    ap.add_argument("--until", type=int, default=None, help="only checkpoints up to this many agent steps")
    args = ap.parse_args(argv)
    if args.every < 1 or args.episodes < 1 or min(args.seeds) < 0:
        raise SystemExit("--every and --episodes are positive, --seeds non-negative")
    if args.plot_only:
        if args.json is None or args.plot is None or not args.json.is_file():
            raise SystemExit("--plot-only draws --plot from an existing --json")
        rows = json.loads(args.json.read_text(encoding="utf-8"))["rows"]
    else:
        rows = evaluate_curve(args.run, args.every, args.episodes, args.modes, args.seeds, args.json, args.until)
    print("\nFirst mark meeting each target, rates pooled over seeds " + " ".join(map(str, args.seeds)) + ":")
    print(time_to_targets(rows, args.seeds))
    if args.plot is not None:
        print(plot(rows, args.plot, args.title, tuple(args.marks)))


if __name__ == "__main__":
    main(sys.argv[1:])
