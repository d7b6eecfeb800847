"""FAST's training-speed claim on real reset costs: DPSA, SGR and per-world
autoreset compared by the wall-clock time and the agent steps that PPO training takes to reach a fixed
goal-reach rate, when every world reset loads its map from disk.

    python benchmarks/bench_samplers.py [--seeds 0 1 2] [--target 0.1] [--window 5] [--max-seconds 280]
    python benchmarks/bench_samplers.py --read          # re-analyse the run folders of an earlier call

The scenario dataset holds several bundled maps (``--maps``) with ``cache_size: 1``, so a world reset
that draws a map other than the last one loaded reads its ``.tzb`` from disk (checksums verified) and
builds its road index again: a real cost, not a sleep. Each run is ``terrazero train --preset quick
--dataset MANIFEST --sampler S --seed N`` with the same settings; the runs go round-robin by seed
(seed 0: dpsa, sgr, autoreset; seed 1: ...) so that the load of a shared machine touches every sampler
alike, one at a time.

Per run, from its ``progress.jsonl`` (one row per rollout): the goal-reach rate (share of the
rollout's finished episodes in which the car reached a goal) smoothed by a moving average over
``--window`` rollouts, weighted by the episodes of each rollout; the first rollout at which it reaches
``--target`` gives the training wall-clock seconds and agent steps to target (agent steps count every
slot-step the env produced, padding of masked slots included, as ``terrazero train`` counts them). A
run stops once it gets there (``--no-stop-at-target`` lets it finish) or after ``--max-seconds``; one
that never gets there is reported as "not reached in N s".

Before the runs, the mean cost of one world reset is measured on the same dataset: cold (cache of one
map, as in training) and warm (every map cached), next to the cost of one step of all worlds.

Prints a table, writes JSON (``--json``) and a plot of smoothed goal-reach against wall-clock, one line
per run coloured by sampler (``--plot``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SAMPLERS = ("dpsa", "sgr", "autoreset")
COLOURS = {"dpsa": "tab:blue", "sgr": "tab:red", "autoreset": "tab:green"}
DEFAULT_MAPS = ("grid_town", "grid_town_lht", "highway", "roundabout")


# ------------------------------------------------------------------------------------------ dataset

def write_manifest(folder: Path, maps: list[str], cache_size: int = 1) -> Path:
    """A dataset manifest over the bundled ``maps`` holding ``cache_size`` map(s) open; ``root`` is
    written relative to ``folder`` (the manifest's own folder)."""
    from terrazero_env.maps import asset_path

    folder.mkdir(parents=True, exist_ok=True)
    paths = [Path(asset_path(m)) for m in maps]
    root = paths[0].parent
    if any(p.parent != root for p in paths):
        raise ValueError("the maps must lie in one folder")
    lines = [f"root: {os.path.relpath(root, folder)}", f"cache_size: {cache_size}", "scenarios:"]
    from terrazero_env.maps import Dataset

    shipped = Dataset("bundled")  # the shipped manifest's groups (region, source, type) for its maps
    groups = {f.name: e for f, e in zip(shipped.files, shipped.manifest)}
    probe = Dataset([str(p) for p in paths])  # else from each file's metadata
    for p, e in zip(paths, probe.manifest):
        e = groups.get(p.name, e)
        lines.append(f"  {p.name}: {{region: {e['region']}, source: {e['source']}, type: {e['type']}}}")
    path = folder / "dataset.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def measure_reset_cost(manifest: Path, worlds: int, resets: int, steps: int,
                       seed: int = 0) -> dict[str, float]:
    """Mean milliseconds per single-world reset on ``manifest``'s dataset as written (cold: a map not
    held open is read from disk) and with every map cached (warm), and per step of all ``worlds``
    worlds with random actions."""
    import terrazero_env
    from terrazero_env.maps import Dataset, load

    out: dict[str, float] = {}
    rng = np.random.default_rng(seed)
    for name in ("cold", "warm"):
        ds = Dataset(manifest) if name == "cold" else Dataset(manifest, cache_size=len(Dataset(manifest)))
        venv = terrazero_env.make_vec(worlds, preset="quick", dataset=ds)
        venv.reset(seed=seed)
        if name == "warm":  # fill the caches first
            for i in range(len(ds)):
                venv._dataset_maps[i]
        seeds = rng.integers(0, 2**31, resets)
        t0 = time.perf_counter()
        for j in range(resets):
            venv.reset_worlds(np.array([j % worlds]), seeds=seeds[j:j + 1])
        out[f"{name}_reset_ms"] = 1e3 * (time.perf_counter() - t0) / resets
        if name == "cold":
            n = venv.action_space.shape[0] if venv.action_space.shape else venv.num_envs
            acts = [venv.action_space.sample() for _ in range(steps)]
            venv.reset(seed=seed)
            t0 = time.perf_counter()
            for a in acts:
                venv.step(a)
            out["step_ms"] = 1e3 * (time.perf_counter() - t0) / steps
            out["slots"] = float(n)
        venv.close()
    out["load_ms"] = out["cold_reset_ms"] - out["warm_reset_ms"]
    # of which reading the file (checksums verified); the rest builds the map's road index
    files = Dataset(manifest).files
    t0 = time.perf_counter()
    for j in range(max(resets // 4, len(files))):
        load(files[j % len(files)])
    out["read_ms"] = 1e3 * (time.perf_counter() - t0) / max(resets // 4, len(files))
    return out


# ------------------------------------------------------------------------------------------ runs

def run_dir(out: Path, sampler: str, seed: int) -> Path:
    return out / f"{sampler}_seed{seed}"


def train(manifest: Path, folder: Path, sampler: str, seed: int, args: argparse.Namespace) -> float:
    """One ``terrazero train`` run into ``folder`` (replaced); returns its wall-clock seconds."""
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    cmd = [sys.executable, "-m", "terrazero_env.cli", "train", "--preset", "quick",
           "--dataset", str(manifest),
           "--sampler", sampler, "--seed", str(seed), "--total-steps", str(args.total_steps),
           "--out", str(folder), "--progress", "none", "--no-tensorboard", "--checkpoint-every", "100000"]
    if args.worlds:
        cmd += ["--worlds", str(args.worlds)]
    if args.n_steps:
        cmd += ["--n-steps", str(args.n_steps)]
    for kv in args.set:
        cmd += ["--set", kv]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    progress = folder / "progress.jsonl"
    while proc.poll() is None:
        time.sleep(1.0)
        elapsed = time.perf_counter() - t0
        rows = read_progress(folder) if args.stop_at_target and progress.is_file() else []
        done = bool(rows) and time_to_target(rows, args.target, args.window)["seconds"] is not None
        if done or (args.max_seconds and elapsed > args.max_seconds):
            proc.send_signal(signal.SIGTERM)  # the trainer stops at the end of the rollout and saves
            break
    if proc.wait() not in (0, -signal.SIGTERM):
        raise RuntimeError(f"terrazero train failed ({proc.returncode}): {' '.join(cmd)}")
    return time.perf_counter() - t0


def read_progress(folder: Path) -> list[dict[str, Any]]:
    rows = []
    with open(folder / "progress.jsonl", encoding="utf-8") as f:
        for line in f:
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:  # a line still being written
                break
    return rows


def smoothed_goal(rows: list[dict[str, Any]], window: int) -> np.ndarray:
    """Goal-reach over the last ``window`` rollouts (goals / episodes, so each rollout weighs by its
    finished episodes); NaN until an episode has finished."""
    eps = np.array([r["episodes"] for r in rows], float)
    goals = np.array([(r["goal"] or 0.0) * r["episodes"] for r in rows], float)
    ce, cg = np.concatenate([[0], np.cumsum(eps)]), np.concatenate([[0], np.cumsum(goals)])
    idx = np.arange(1, len(rows) + 1)
    lo = np.maximum(idx - window, 0)
    e, g = ce[idx] - ce[lo], cg[idx] - cg[lo]
    return np.where(e > 0, g / np.maximum(e, 1), np.nan)


def time_to_target(rows: list[dict[str, Any]], target: float, window: int) -> dict[str, Any]:
    """Seconds and agent steps of the first rollout whose smoothed goal-reach is >= ``target`` (None
    if never), the run's length, its final smoothed goal-reach and mean sampler statistics."""
    g = smoothed_goal(rows, window)
    hit = np.flatnonzero(np.nan_to_num(g, nan=-1.0) >= target)
    i = int(hit[0]) if hit.size else None
    return {"seconds": None if i is None else rows[i]["seconds"],
            "agent_steps": None if i is None else rows[i]["agent_steps"],
            "run_seconds": rows[-1]["seconds"], "run_agent_steps": rows[-1]["agent_steps"],
            "final_goal": float(g[-1]), "steps_per_s": rows[-1]["agent_steps"] / rows[-1]["seconds"],
            "mu": float(np.mean([r["mu"] for r in rows])), "eta": float(np.mean([r["eta"] for r in rows])),
            "episodes": int(sum(r["episodes"] for r in rows))}


# ------------------------------------------------------------------------------------------ report

def _fmt(v: float | None, run_s: float, unit: str = "") -> str:
    return f"not reached in {run_s:.0f} s" if v is None else f"{v:,.0f}{unit}"


def _fmt_steps(v: int | None, run_steps: int) -> str:
    return f"not reached in {run_steps:,}" if v is None else f"{v:,}"


def summarize(results: dict[str, dict[int, dict[str, Any]]], target: float) -> list[str]:
    """Markdown table: per sampler, time and agent steps to target for each seed, and their mean and
    standard deviation over the seeds that reached it."""
    seeds = sorted({s for r in results.values() for s in r})
    lines = [f"| sampler | seconds to goal-reach {target:.2f}: " + ", ".join(f"seed {s}" for s in seeds)
             + " | mean +- sd (s) | agent steps to target: " + ", ".join(f"seed {s}" for s in seeds)
             + " | mean +- sd (steps) | agent-steps/s (padding included) | mu | eta | agent steps per finished episode"
             " | final goal-reach |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for sampler, runs in results.items():
        rs = [runs[s] for s in seeds if s in runs]
        secs = [r["seconds"] for r in rs if r["seconds"] is not None]
        steps = [r["agent_steps"] for r in rs if r["agent_steps"] is not None]
        note = "" if len(secs) == len(rs) else f" ({len(secs)}/{len(rs)} reached)"

        def ms(v: list[float]) -> str:
            sd = np.std(v, ddof=1) if len(v) > 1 else 0.0
            return "n/a" if not v else f"{np.mean(v):,.0f} +- {sd:,.0f}{note}"

        lines.append(f"| {sampler} | " + ", ".join(_fmt(r["seconds"], r["run_seconds"]) for r in rs)
                     + f" | {ms(secs)} | "
                     + ", ".join(_fmt_steps(r["agent_steps"], r["run_agent_steps"]) for r in rs)
                     + f" | {ms(steps)} | {np.mean([r['steps_per_s'] for r in rs]):,.0f}"
                     + f" | {np.mean([r['mu'] for r in rs]):.2f} | {np.mean([r['eta'] for r in rs]):.3f}"
                     + f" | {np.mean([r['run_agent_steps'] / max(r['episodes'], 1) for r in rs]):.1f}"
                     + f" | {np.mean([r['final_goal'] for r in rs]):.2f} |")
    return lines


def plot(curves: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]], target: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    seen = set()
    for (sampler, _seed), (t, g) in curves.items():
        ax.plot(t, g, color=COLOURS.get(sampler, "k"), lw=1.3, alpha=0.85,
                label=None if sampler in seen else sampler)
        seen.add(sampler)
    ax.axhline(target, color="grey", ls="--", lw=1, label=f"target {target:.2f}")
    ax.set_xlabel("training wall-clock (s)")
    ax.set_ylabel("goal-reach (moving average)")
    ax.set_title("PPO on the quick task, every map load from disk: one line per run")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--samplers", nargs="+", default=list(SAMPLERS), choices=SAMPLERS)
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--maps", nargs="+", default=list(DEFAULT_MAPS), help="bundled maps of the dataset")
    p.add_argument("--cache-size", type=int, default=1, help="maps the dataset holds open")
    p.add_argument("--total-steps", type=int, default=1_000_000,
                   help="agent steps per run (the learning rate anneals to 0 over them)")
    p.add_argument("--worlds", type=int, default=None, help="worlds (default: the preset's)")
    p.add_argument("--n-steps", type=int, default=None, help="rollout length (default: the preset's)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="passed to terrazero train (e.g. a smaller policy for a smoke test)")
    p.add_argument("--target", type=float, default=0.1, help="goal-reach rate to reach")
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop a run after this much wall-clock (it then reports the target as not reached)")
    p.add_argument("--stop-at-target", action=argparse.BooleanOptionalAction, default=True,
                   help="stop a run once it reaches the target (default) or let it run to --total-steps")
    p.add_argument("--window", type=int, default=5, help="rollouts in the moving average")
    p.add_argument("--reset-samples", type=int, default=200, help="world resets timed for the reset cost")
    p.add_argument("--step-samples", type=int, default=200, help="vector steps timed for the step cost")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_samplers", help="run folders")
    p.add_argument("--read", action="store_true", help="analyse the run folders in --out; train nothing")
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "bench_samplers.json")
    p.add_argument("--plot", type=Path, default=ROOT / "docs" / "samplers_time_to_target.png")
    args = p.parse_args(argv)

    manifest = args.out / "dataset.yaml"
    if not args.read:
        manifest = write_manifest(args.out, args.maps, args.cache_size)
    cost = measure_reset_cost(manifest, args.worlds or 8, args.reset_samples, args.step_samples)
    print(f"world reset, map loaded from disk: {cost['cold_reset_ms']:.2f} ms; map cached: "
          f"{cost['warm_reset_ms']:.2f} ms (loading: {cost['load_ms']:.2f} ms, of which reading the file "
          f"{cost['read_ms']:.2f} ms); one step of all worlds: "
          f"{cost['step_ms']:.3f} ms", flush=True)

    wall: dict[str, float] = {}
    if not args.read:
        for seed in args.seeds:  # round-robin by seed
            for sampler in args.samplers:
                s = train(manifest, run_dir(args.out, sampler, seed), sampler, seed, args)
                wall[f"{sampler}_seed{seed}"] = s
                print(f"  {sampler} seed {seed}: {s:.0f} s", flush=True)

    results: dict[str, dict[int, dict[str, Any]]] = {}
    curves: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}
    for sampler in args.samplers:
        for seed in args.seeds:
            folder = run_dir(args.out, sampler, seed)
            if not (folder / "progress.jsonl").is_file():
                continue
            rows = read_progress(folder)
            results.setdefault(sampler, {})[seed] = time_to_target(rows, args.target, args.window)
            seconds = np.array([r["seconds"] for r in rows])
            curves[(sampler, seed)] = (seconds, smoothed_goal(rows, args.window))
    table = summarize(results, args.target)
    print("\n".join(table))
    plot(curves, args.target, args.plot)
    report = {"machine": {"platform": platform.platform(), "processor": platform.processor(),
                          "cpus": os.cpu_count()},
              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "reset_cost": cost, "wall_s": wall,
              "runs": {s: {str(k): v for k, v in r.items()} for s, r in results.items()}}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report, indent=1))
    return report


if __name__ == "__main__":
    main()
