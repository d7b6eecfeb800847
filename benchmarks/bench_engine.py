"""Engine throughput: simulated agent-steps per second with random actions, observations fully on.

    python benchmarks/bench_engine.py [--steps 300] [--maps grid_town grid_town_lht] [--lane-tracking] [--json PATH]
    python benchmarks/bench_engine.py --density [16 64 256] --maps usa_lanker [--total 4096] [--steps 100]

For each bundled town and each (W worlds, K controlled slots) in {(1, 32), (16, 32), (64, 16)}:
every world is filled with K controlled cars (violations have no consequence, so every slot stays
live and each step simulates W*K agents), actions are drawn in advance, and the timed loop is
``engine.step(actions[t])`` (one thread, then OpenMP over worlds with ``--threads``); the median of ``--repeats`` timed runs is reported. Also reported: reset time per world, observation
floats per agent, buffer bytes per agent and per world (the shared map excluded), and the map's
shared index size. ``--lane-tracking`` runs the engine with ``EngineConfig.lane_tracking`` on.

``--density``: how the cost per agent-step grows with the agents a world holds (the neighbour queries
of partners, leaders, lane changes, planners and yielding): the full road-user mix at 16, 64 and 256
vehicles per world over the same total (:func:`density`).
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


#: The planner preset's static generators (upper bounds of their per-world counts), scaled with the
#: density in :func:`density` so the mix keeps its proportions.
STATIC_TOPS = {"parked": 3, "crash_disc": 1, "crash_chain": 1, "crash_tbone": 1, "crash_fan": 1, "cone_grid": 1,
               "cone_taper": 1, "lane_block": 1, "debris": 2}


def density(map_name: str, n: int, total: int, steps: int, repeats: int = 3, seed: int = 0,
            neighbour_search: str = "auto") -> dict:
    """The full road-user mix at ``n`` vehicles per world, ``total // n`` worlds (same total): a
    quarter of the vehicles policy-controlled (holding the zero-jerk action), the rest IDM traffic,
    the planner preset's static generators with their counts scaled by ``n / 16`` and its crossing
    and jaywalking pedestrians. Cost: CPU seconds (one thread, ``time.process_time``) per agent-step,
    every live agent of every kind counted."""
    from terrazero_env import load_config

    W, K = max(1, total // n), max(1, n // 4)
    f = n / 16
    statics = {g: [0, max(1, round(top * f))] for g, top in STATIC_TOPS.items()}
    cfg = load_config("planner", **{
        "maps": [map_name], "num_worlds": W, "slots_per_world": K, "max_agents_per_world": 4 * n,
        "episode_length": 100_000, "consequences.collision": "none", "consequences.offroad": "none",
        "consequences.wrong_way": "none", "init.num_agents": [n, n], "init.placement_tries": 200,
        "neighbour_search": neighbour_search,
        **{f"road_users.{g}": v for g, v in statics.items()}})
    best, agents = float("inf"), 0.0
    for _ in range(repeats):
        e = core.Engine(cfg)
        e.reset(seeds=np.arange(W) + seed)
        hold = int(np.nonzero((e.action_values(0) == 0).all(axis=1))[0][0])
        actions = np.full(e.actions.shape, hold, np.int32)
        e.step(actions)
        live = 0
        t0 = time.process_time()
        for _ in range(steps):
            e.step(actions)
            live += sum(e.num_agents(w) for w in range(W))
        best = min(best, (time.process_time() - t0) / max(live, 1))
        agents = live / (steps * W)
    return {"map": map_name, "vehicles_per_world": n, "W": W, "K": K, "agents_per_world": agents,
            "neighbour_search": neighbour_search,
            "us_per_agent_step": 1e6 * best, "agent_steps_per_s": 1.0 / best}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                    help="thread counts (OpenMP over worlds); >1 only for configurations with several worlds")
    ap.add_argument("--maps", nargs="+", default=["grid_town", "grid_town_lht"])
    ap.add_argument("--lane-tracking", action="store_true", help="EngineConfig.lane_tracking on")
    ap.add_argument("--json", default="benchmarks/results/bench_engine.json")
    ap.add_argument("--density", nargs="*", type=int, default=None, metavar="N",
                    help="only the density sweep: the full road-user mix at N vehicles per world (default 16 64 "
                         "256), the same total agents (--total), on --maps' first map; cost per agent-step")
    ap.add_argument("--total", type=int, default=4096, help="vehicles over all worlds in the density sweep")
    ap.add_argument("--neighbour-search", nargs="+", default=["auto"], choices=["auto", "grid", "scan"],
                    help="EngineConfig.neighbour_search of the density sweep (several: one sweep each)")
    args = ap.parse_args()
    if args.density is not None:
        rows = []
        print(f"{'search':>6} | {'vehicles/world':>14} | {'worlds':>6} | {'agents/world':>12} | {'us/agent-step':>13} | "
              f"{'vs first':>8}")
        for mode in args.neighbour_search:
            sweep = [density(args.maps[0], n, args.total, args.steps, args.repeats, neighbour_search=mode)
                     for n in (args.density or [16, 64, 256])]
            base = sweep[0]["us_per_agent_step"]
            for r in sweep:
                print(f"{mode:>6} | {r['vehicles_per_world']:>14} | {r['W']:>6} | {r['agents_per_world']:>12.1f} | "
                      f"{r['us_per_agent_step']:>13.3f} | {r['us_per_agent_step'] / base:>8.2f}")
            rows += sweep
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"machine": platform.platform(), "processor": platform.processor(),
                                   "cpu_count": os.cpu_count(), "density": rows}, indent=2))
        print(f"wrote {out}")
        return
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
