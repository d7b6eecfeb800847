"""Engine throughput: simulated agent-steps per second with random actions, observations fully on.

    python benchmarks/bench_engine.py [--steps 300] [--maps grid_town grid_town_lht] [--lane-tracking] [--json PATH]

For each bundled town and each (W worlds, K controlled slots) in {(1, 32), (16, 32), (64, 16)}:
every world is filled with K controlled cars (violations have no consequence, so every slot stays
live and each step simulates W*K agents), actions are drawn in advance, and the timed loop is
``engine.step(actions[t])`` (one thread, then OpenMP over worlds with ``--threads``); the median of ``--repeats`` timed runs is reported. Also reported: reset time per world, observation
floats per agent, buffer bytes per agent and per world (the shared map excluded), and the map's
shared index size. ``--lane-tracking`` runs the engine with ``EngineConfig.lane_tracking`` on.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

from terrazero_env import engine as core
from terrazero_env.config import Consequence, EngineConfig, InitConfig, ObsConfig, RoadUsersConfig
from terrazero_env.maps import asset_path, load

CONFIGS = [(1, 32), (16, 32), (64, 16)]


def bench(map_name: str, W: int, K: int, steps: int, repeats: int = 3, threads: int = 1, seed: int = 0,
          idm: int = 0, lane_tracking: bool = False) -> dict:
    """``idm``: extra IDM-driven cars per world besides the K controlled ones; ``lane_tracking``:
    ``EngineConfig.lane_tracking``."""
    m = load(asset_path(map_name))
    cfg = EngineConfig(
        num_worlds=W, slots_per_world=K, max_agents_per_world=K + idm, episode_length=100_000,
        consequences={k: Consequence.NONE for k in ("collision", "offroad", "wrong_way")},
        init=InitConfig(num_agents=(K + idm, K + idm), placement_tries=200),
        road_users=RoadUsersConfig(idm_fraction=1.0),
        obs=ObsConfig(lane_state=True, partner_acceleration=True), lane_tracking=lane_tracking,
    )
    e = core.Engine(cfg, maps=m, num_threads=threads)
    t0 = time.perf_counter()
    for _ in range(3):
        e.reset(seeds=np.arange(W) + seed)
    reset_ms = 1e3 * (time.perf_counter() - t0) / (3 * W)
    rng = np.random.default_rng(seed)
    nact = e.num_actions(0)
    actions = rng.integers(0, nact, (steps, W * K)).astype(np.int32)
    actions *= (e.agent_type >= 0)[None, :]
    e.step(actions[0])  # warm-up
    walls, live = [], 0
    for _ in range(repeats):  # the median of several timed runs: shared machines are noisy
        e.reset(seeds=np.arange(W) + seed)
        live = 0
        t0 = time.perf_counter()
        for t in range(steps):
            e.step(actions[t])
            live += int(e.valid.sum()) + idm * W
        walls.append(time.perf_counter() - t0)
    wall = float(np.median(walls))
    return {
        "map": map_name, "W": W, "K": K, "idm": idm, "threads": threads, "lane_tracking": lane_tracking, "agents": int(e.valid.sum()), "steps": steps,
        "agent_steps_per_s": live / wall, "world_steps_per_s": W * steps / wall,
        "us_per_agent_step": 1e6 * wall / max(live, 1),
        "reset_ms_per_world": reset_ms, "obs_dim": e.obs_dim,
        "buffer_bytes_per_agent": e.buffer_nbytes() / K, "bytes_per_world": e.buffer_nbytes(),
        "shared_map_bytes": e.road_maps[0].nbytes(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                    help="thread counts (OpenMP over worlds); >1 only for configurations with several worlds")
    ap.add_argument("--maps", nargs="+", default=["grid_town", "grid_town_lht"])
    ap.add_argument("--lane-tracking", action="store_true", help="EngineConfig.lane_tracking on")
    ap.add_argument("--json", default="benchmarks/results/bench_engine.json")
    args = ap.parse_args()
    lt = args.lane_tracking
    rows = [bench(m, W, K, args.steps, args.repeats, t, lane_tracking=lt) for m in args.maps for W, K in CONFIGS
            for t in args.threads if t == 1 or W > 1]
    # The cost of rule-based traffic: 32 vehicles per world, all policy-controlled vs half IDM.
    rows += [bench(args.maps[0], 16, 32, args.steps, args.repeats, lane_tracking=lt),
             bench(args.maps[0], 16, 16, args.steps, args.repeats, idm=16, lane_tracking=lt)]
    cols = ["map", "W", "K", "idm", "threads", "agents", "agent_steps_per_s", "us_per_agent_step", "reset_ms_per_world", "obs_dim",
            "buffer_bytes_per_agent", "bytes_per_world", "shared_map_bytes"]
    print(" | ".join(f"{c:>14}" for c in cols))
    for r in rows:
        print(" | ".join(f"{r[c]:>14.2f}" if isinstance(r[c], float) else f"{r[c]:>14}" for c in cols))
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "processor": platform.processor(),
                               "cpu_count": os.cpu_count(), "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
