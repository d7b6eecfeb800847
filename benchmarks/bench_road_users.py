"""Engine throughput with the planner's road-user mix against policy cars only (issue 16, point 6).

    python benchmarks/bench_road_users.py [--worlds 32] [--steps 200] [--repeats 3] [--threads 1] [--json out.json]

Every row steps the same worlds (the planner preset's maps, seeds 0..W-1) with 16 policy cars each,
holding the zero action, and reports policy agent-steps per second (valid slots stepped / wall
time, resets excluded; the best of three runs). With one thread the time is the process's CPU time
(``time.process_time``), which other processes on a shared machine disturb far less than the wall
clock; ``--wall`` uses the wall clock (needed with more than one thread). Rows: policy cars only; the full planner mix (IDM traffic and every static
generator at the preset's counts); each generator alone at the top of its preset range, and its
cost relative to policy cars only. The floor of issue 16: the full mix keeps at least 60% of the
policy-only throughput.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from terrazero_env import engine as core
from terrazero_env import load_config
from terrazero_env.config import StaticGenerator


def throughput(overrides: dict, W: int, steps: int, threads: int, repeats: int,
               clock=time.process_time) -> tuple[float, float]:
    """(policy agent-steps/s, best of ``repeats`` runs, and mean agents per world) for one composition."""
    cfg = load_config("planner", **{"num_worlds": W, "episode_length": 100_000, "consequences.collision": "none",
                                    "consequences.offroad": "none", **overrides})
    e = core.Engine(cfg, num_threads=threads)
    e.reset(seeds=np.arange(W))
    hold = int(np.nonzero((e.action_values(0) == 0).all(axis=1))[0][0])
    actions = np.full(e.actions.shape, hold, np.int32)
    agents = float(np.mean([e.num_agents(w) for w in range(W)]))
    best = 0.0
    for _ in range(repeats):
        e.reset(seeds=np.arange(W))
        e.step(actions)
        stepped = 0
        t0 = clock()
        for _ in range(steps):
            e.step(actions)
            stepped += int(e.valid.sum())
        best = max(best, stepped / (clock() - t0))
    return best, agents


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worlds", type=int, default=32)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--wall", action="store_true")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    planner = load_config("planner").road_users
    off = {f"road_users.{g.name.lower()}": 0 for g in StaticGenerator}
    only = {"init.num_agents": [16, 16], "road_users.idm_fraction": 0.0, **off}
    rows = [("policy cars only", only), ("full planner mix", {"init.num_agents": [16, 32]})]
    rows.append(("IDM traffic (16 extra cars)", {**only, "init.num_agents": [32, 32], "road_users.idm_fraction": 1.0}))
    for g in StaticGenerator:
        name = g.name.lower()
        rows.append((f"{name} x{getattr(planner, name)[1]}", {**only, f"road_users.{name}": getattr(planner, name)[1]}))
    out = []
    base = None
    print(f"{'composition':32s} {'agents/world':>12s} {'policy agent-steps/s':>21s} {'vs policy only':>15s}")
    for label, ov in rows:
        clock = time.perf_counter if (a.wall or a.threads > 1) else time.process_time
        sps, n = throughput(ov, a.worlds, a.steps, a.threads, a.repeats, clock)
        base = base or sps
        out.append({"composition": label, "agents_per_world": n, "policy_agent_steps_per_s": sps,
                    "relative": sps / base})
        print(f"{label:32s} {n:12.1f} {sps:21,.0f} {100 * sps / base:14.0f}%")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(), "worlds": a.worlds,
                       "steps": a.steps, "threads": a.threads, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
