"""Engine throughput with the planner's road-user mix against policy cars only.

    python benchmarks/bench_road_users.py [--worlds 32] [--steps 200] [--repeats 3] [--threads 1] [--json out.json]

Every row steps the same worlds (the planner preset's maps, seeds 0..W-1) with 16 policy cars each,
holding the zero action, and reports policy agent-steps per second (valid slots stepped / wall
time, resets excluded; the best of ``--repeats`` runs, the rows timed round robin). With one thread the time is the process's CPU time
(``time.process_time``), which other processes on a shared machine disturb far less than the wall
clock; ``--wall`` uses the wall clock (needed with more than one thread). Rows: policy cars only; the full planner mix (IDM traffic and every static
generator at the preset's counts, crossers and jaywalkers at rates drawn from the preset's ranges);
each generator alone at the top of its preset range (pedestrian generators at their top rate), and its
cost relative to policy cars only. The earlier floor: the full mix keeps at least 60% of the
policy-only throughput.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # idle BLAS threads spinning would count in the CPU time

import argparse
import json
import platform
import time

import numpy as np

from terrazero_env import engine as core
from terrazero_env import load_config
from terrazero_env.config import StaticGenerator


class Composition:
    """One row's worlds: the planner preset with ``overrides``, policy cars holding the zero action.
    Every run builds its engine afresh, so no row keeps a memory placement (huge pages, cache
    colouring) that the others do not get."""

    def __init__(self, overrides: dict, W: int, threads: int) -> None:
        self.cfg = load_config("planner", **{"num_worlds": W, "episode_length": 100_000,
                                             "consequences.collision": "none", "consequences.offroad": "none",
                                             **overrides})
        self.W, self.threads = W, threads
        e = self._engine()
        self.agents = float(np.mean([e.num_agents(w) for w in range(W)]))

    def _engine(self) -> core.Engine:
        e = core.Engine(self.cfg, num_threads=self.threads)
        e.reset(seeds=np.arange(self.W))
        return e

    def run(self, steps: int, clock=time.process_time) -> float:
        """Policy agent-steps per second of one run of ``steps`` steps from the reset (after one step)."""
        e = self._engine()
        hold = int(np.nonzero((e.action_values(0) == 0).all(axis=1))[0][0])
        actions = np.full(e.actions.shape, hold, np.int32)
        e.step(actions)
        stepped = 0
        t0 = clock()
        for _ in range(steps):
            e.step(actions)
            stepped += int(e.valid.sum())
        return stepped / (clock() - t0)


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
    off.update({"road_users.pedestrians.crossing_rate": 0.0, "road_users.pedestrians.jaywalk_rate": 0.0})
    only = {"init.num_agents": [16, 16], "road_users.idm_fraction": 0.0, **off}
    rows = [("policy cars only", only), ("full planner mix", {"init.num_agents": [16, 32]})]
    rows.append(("IDM traffic (16 extra cars)", {**only, "init.num_agents": [32, 32], "road_users.idm_fraction": 1.0}))
    rows.append(("planner traffic (16 extra cars)", {**only, "init.num_agents": [32, 32], "road_users.idm_fraction": 1.0,
                                                     "road_users.planner_fraction": 1.0}))
    for g in StaticGenerator:
        name = g.name.lower()
        rows.append((f"{name} x{getattr(planner, name)[1]}", {**only, f"road_users.{name}": getattr(planner, name)[1]}))
    for name in ("crossing_rate", "jaywalk_rate"):
        top = planner.pedestrians.rate_range(name)[1]
        rows.append((f"{name} {top:g}/s", {**only, f"road_users.pedestrians.{name}": top}))
    clock = time.perf_counter if (a.wall or a.threads > 1) else time.process_time
    comps = [Composition(ov, a.worlds, a.threads) for _, ov in rows]
    best = [0.0] * len(rows)
    paired = []
    # Round robin: every repeat times each row once, so a change of load on a shared machine touches
    # all rows alike instead of the rows measured while it lasts. The first two rows (policy cars
    # only, full mix) run back to back, and their ratio within each repeat is kept as well: on a
    # machine whose speed drifts, the median of those paired ratios moves less than a ratio of bests.
    for _ in range(a.repeats):
        times = [c.run(a.steps, clock) for c in comps]
        paired.append(times[1] / times[0])
        best = [max(b, t) for b, t in zip(best, times)]
    out = []
    base = best[0]
    print(f"{'composition':32s} {'agents/world':>12s} {'policy agent-steps/s':>21s} {'vs policy only':>15s}")
    for (label, _), c, sps in zip(rows, comps, best):
        out.append({"composition": label, "agents_per_world": c.agents, "policy_agent_steps_per_s": sps,
                    "relative": sps / base})
        print(f"{label:32s} {c.agents:12.1f} {sps:21,.0f} {100 * sps / base:14.0f}%")
    ratios = np.sort(paired)
    print(f"full mix / policy only, paired within each repeat: median {100 * np.median(ratios):.0f}% "
          f"(range {100 * ratios[0]:.0f}-{100 * ratios[-1]:.0f}%, {len(ratios)} repeats)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(), "worlds": a.worlds,
                       "steps": a.steps, "threads": a.threads, "rows": out,
                       "paired_full_over_policy": [float(r) for r in paired]}, f, indent=1)


if __name__ == "__main__":
    main()
