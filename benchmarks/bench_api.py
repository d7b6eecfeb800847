"""Agent-steps per second through each interface layer on the same scene.

    python benchmarks/bench_api.py [--steps 300] [--json benchmarks/results/bench_api.json]

Layers: the raw engine, the native vector env, the SB3 adapter over it, the PettingZoo ParallelEnv
dict API (one world), and the single-agent Gymnasium env (one ego). The scene is the default town
with 16 controlled cars per world (one world for the single-agent and PettingZoo rows); violations
have no consequence so every slot stays live, and actions are drawn in advance.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import terrazero_env
from terrazero_env import engine as core
from terrazero_env.config.io import load_config

SCENE = {"slots_per_world": 16, "max_agents_per_world": 16, "init.num_agents": [16, 16],
         "consequences.collision": "none", "consequences.offroad": "none", "consequences.wrong_way": "none",
         "episode_length": 100_000}


def _timed(fn, steps: int) -> tuple[float, int]:
    live = 0
    fn()  # warm-up
    t0 = time.perf_counter()
    for t in range(steps):
        live += fn(t)
    return time.perf_counter() - t0, live


def bench_engine(W: int, steps: int, acts: np.ndarray) -> float:
    e = core.Engine(load_config("quick", num_worlds=W, **SCENE))
    e.reset(seeds=np.arange(W))

    def f(t: int = 0) -> int:
        e.step(acts[t % len(acts)])
        return int(e.valid.sum())

    wall, live = _timed(f, steps)
    return live / wall


def bench_vector(W: int, steps: int, acts: np.ndarray) -> float:
    v = terrazero_env.make_vec(W, "quick", **SCENE)
    v.reset(seed=0)

    def f(t: int = 0) -> int:
        _, _, _, _, info = v.step(acts[t % len(acts)])
        return int(info["valid"].sum())

    wall, live = _timed(f, steps)
    return live / wall


def bench_sb3(W: int, steps: int, acts: np.ndarray) -> float | None:
    try:
        from terrazero_env.wrappers import SB3VecEnv
    except ImportError:
        return None
    venv = SB3VecEnv(terrazero_env.make_vec(W, "quick", **SCENE))
    venv.reset()

    def f(t: int = 0) -> int:
        _, _, _, infos = venv.step(acts[t % len(acts)])
        return sum(1 for i in infos if i.get("valid", True))

    wall, live = _timed(f, steps)
    return live / wall


def bench_parallel(steps: int) -> float:
    env = terrazero_env.parallel_env("quick", **SCENE)
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def f(t: int = 0) -> int:
        n = len(env.agents)
        env.step({a: int(rng.integers(0, 12)) for a in env.agents})
        return n

    wall, live = _timed(f, steps)
    return live / wall


def bench_single(steps: int) -> float:
    env = terrazero_env.DriveEnv("quick", **SCENE)
    env.reset(seed=0)
    rng = np.random.default_rng(0)

    def f(t: int = 0) -> int:
        env.step(int(rng.integers(0, 12)))
        return 1

    wall, live = _timed(f, steps)
    return live / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--worlds", type=int, default=16)
    ap.add_argument("--json", default="benchmarks/results/bench_api.json")
    args = ap.parse_args()
    W = args.worlds
    acts = np.random.default_rng(0).integers(0, 12, (64, W * 16)).astype(np.int32)
    rows = [
        {"layer": "engine", "agents": W * 16, "agent_steps_per_s": bench_engine(W, args.steps, acts)},
        {"layer": "native vector env", "agents": W * 16, "agent_steps_per_s": bench_vector(W, args.steps, acts)},
        {"layer": "SB3 adapter", "agents": W * 16, "agent_steps_per_s": bench_sb3(W, args.steps, acts)},
        {"layer": "PettingZoo parallel (1 world)", "agents": 16, "agent_steps_per_s": bench_parallel(args.steps)},
        {"layer": "Gymnasium single agent", "agents": 1, "agent_steps_per_s": bench_single(args.steps * 4)},
    ]
    base = rows[0]["agent_steps_per_s"]
    for r in rows:
        r["vs_engine"] = r["agent_steps_per_s"] / base if r["agent_steps_per_s"] else None
    print(f"{'layer':>32} | {'agents':>7} | {'agent-steps/s':>14} | {'vs engine':>9}")
    for r in rows:
        v, ratio = r["agent_steps_per_s"], r["vs_engine"]
        speed = "n/a" if v is None else f"{v:,.0f}"
        rel = "-" if ratio is None else f"{ratio:.2f}"
        print(f"{r['layer']:>32} | {r['agents']:>7} | {speed:>14} | {rel:>9}")
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "cpu_count": os.cpu_count(), "worlds": W,
                               "steps": args.steps, "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
