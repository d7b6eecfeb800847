"""Vector-env throughput with the worlds in worker processes: agent-steps per second against workers.

    python benchmarks/bench_workers.py [--steps 300] [--repeats 5] [--workers 1 2] [--threads 2] [--json PATH]

For each (W worlds, K controlled slots) in {(16, 32), (64, 16)} on the ``quick`` preset's town, every
world holds K controlled agents whose violations have no consequence (each slot stays live until the
horizon), and the timed loop is ``venv.step(actions[t])`` of ``make_vec(num_worlds=W,
num_workers=P)`` with uniformly random actions drawn in advance (autoreset included: worlds restart
at the 128-step horizon). P = 1 is the in-process engine (one thread, and ``--threads`` OpenMP
threads for reference); P > 1 puts the worlds in P processes of one thread each. Reported: live
agent-steps per second, the speedup over P = 1 with one thread, and the time to build the env.
Each variant's figure is its best of ``--repeats`` timed runs (the median is reported too): on a
shared machine the best run is the one least disturbed by other load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

import terrazero_env

CONFIGS = [(16, 32), (64, 16)]


def _make(W: int, K: int, workers: int, threads: int):
    overrides = {"slots_per_world": K, "max_agents_per_world": K, "init.num_agents": [K, K],
                 "init.placement_tries": 200, "consequences.collision": "none", "consequences.offroad": "none",
                 "consequences.wrong_way": "none"}
    return terrazero_env.make_vec(W, "quick", num_workers=workers, num_threads=threads, **overrides)


def _timed_run(venv, actions: np.ndarray, seed: int) -> tuple[float, int]:
    """Seconds for ``len(actions)`` steps after a reset, and the live agent-steps they simulated."""
    venv.reset(seed=seed)
    venv.step(actions[0])  # warm-up
    live = 0
    t0 = time.perf_counter()
    for a in actions:
        live += int(venv.step(a)[4]["valid"].sum())
    return time.perf_counter() - t0, live


def bench(W: int, K: int, runs: list[tuple[int, int]], steps: int, repeats: int, seed: int = 0) -> list[dict]:
    """One row per (workers, threads) in ``runs``; their timed runs alternate, so that a load spike
    on the machine hits every variant alike. Every variant simulates the same rollout."""
    envs, build = [], []
    for workers, threads in runs:
        t0 = time.perf_counter()
        envs.append(_make(W, K, workers, threads))
        build.append(time.perf_counter() - t0)
    try:
        actions = np.random.default_rng(seed).integers(0, envs[0].single_action_space.n, (steps, envs[0].num_envs))
        walls: list[list[float]] = [[] for _ in runs]
        lives = [0] * len(runs)
        for _ in range(repeats):
            for i, venv in enumerate(envs):
                wall, lives[i] = _timed_run(venv, actions, seed)
                walls[i].append(wall)
    finally:
        for venv in envs:
            venv.close()
    rows = []
    for (workers, threads), w, live, b in zip(runs, walls, lives, build):
        best, median = min(w), float(np.median(w))
        rows.append({"W": W, "K": K, "workers": workers, "threads": threads, "steps": steps, "agent_steps": live,
                     "agent_steps_per_s": live / best, "agent_steps_per_s_median": live / median,
                     "us_per_step": 1e6 * best / steps, "build_s": b})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker processes (1: in-process)")
    ap.add_argument("--threads", type=int, nargs="*", default=[2],
                    help="OpenMP thread counts also measured in-process, for reference")
    ap.add_argument("--json", default="benchmarks/results/bench_workers.json")
    args = ap.parse_args()
    runs = [(p, 1) for p in args.workers] + [(1, t) for t in args.threads if t > 1]
    rows = []
    for W, K in CONFIGS:
        group = bench(W, K, runs, args.steps, args.repeats)
        base = next((r["agent_steps_per_s"] for r in group if r["workers"] == 1 and r["threads"] == 1), None)
        for r in group:
            r["speedup"] = r["agent_steps_per_s"] / base if base else float("nan")
        rows += group
    cols = ["W", "K", "workers", "threads", "agent_steps_per_s", "agent_steps_per_s_median", "speedup",
            "us_per_step", "build_s"]
    print(" | ".join(f"{c:>13}" for c in cols))
    for r in rows:
        print(" | ".join(f"{r[c]:>13.2f}" if isinstance(r[c], float) else f"{r[c]:>13}" for c in cols))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "processor": platform.processor(),
                               "cpu_count": os.cpu_count(), "command": " ".join(["python", "benchmarks/bench_workers.py", *sys.argv[1:]]),
                               "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
