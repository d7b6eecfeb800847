"""Cost of planner-driven traffic (PDM-Closed style, cyext/planner.pxd) per vehicle-step against IDM traffic.

    python benchmarks/bench_planner.py [--worlds 16] [--vehicles 32] [--steps 300] [--repeats 3] [--json out.json]

Every row steps the same worlds (grid_town, seeds 0..W-1) holding ``--vehicles`` background cars and
no policy agents: parked in place (the baseline: the step's fixed cost), all IDM-driven, half of the
IDM vehicles planner-driven, all planner-driven (default planner settings: 3 offsets x 5 speeds, 4 s
at 0.2 s, a plan per second), and all planner-driven replanning every step (0.1 s: the plan's own cost
ten times over). Each run builds its engine afresh, steps once, then times ``--steps``
steps with the process's CPU time (one thread; ``time.process_time``, which other processes on a
shared machine disturb far less than the wall clock); the best of ``--repeats`` runs, timed round
robin. Reported: microseconds per step per world, and per vehicle-step above the parked baseline
(the rule-based driving's own cost), and the ratio of each to IDM traffic.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

from terrazero_env import engine as core
from terrazero_env import load_config


class Row:
    def __init__(self, label: str, overrides: dict, W: int, vehicles: int) -> None:
        self.label, self.W = label, W
        self.cfg = load_config("quick", **{
            "num_worlds": W, "maps": ["grid_town"], "max_agents_per_world": vehicles + 8, "episode_length": 100_000,
            "init.num_agents": [vehicles, vehicles], "init.controlled": [False] * 5,
            "init.class_weights": [1, 0, 0, 0, 0], "consequences.collision": "none",
            "consequences.offroad": "none", "road_users.parked": 0, **overrides})

    def run(self, steps: int) -> tuple[float, float]:
        """Seconds of CPU per step per world, and the share of rule-based vehicles that are planners."""
        e = core.Engine(self.cfg)
        e.reset(seeds=np.arange(self.W))
        e.step()
        t0 = time.process_time()
        for _ in range(steps):
            e.step()
        dt = (time.process_time() - t0) / steps / self.W
        idm = sum(int((e.agents[w, : e.num_agents(w)]["role"] == 3).sum()) for w in range(self.W))
        plan = sum(int(e.planner_state(w)["planner"].sum()) for w in range(self.W))
        return dt, plan / max(idm, 1)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worlds", type=int, default=16)
    p.add_argument("--vehicles", type=int, default=32)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    rows = [Row("parked (baseline)", {"road_users.idm_fraction": 0.0}, a.worlds, a.vehicles),
            Row("IDM", {"road_users.idm_fraction": 1.0}, a.worlds, a.vehicles),
            Row("half planner", {"road_users.idm_fraction": 1.0, "road_users.planner_fraction": 0.5}, a.worlds,
                a.vehicles),
            Row("all planner", {"road_users.idm_fraction": 1.0, "road_users.planner_fraction": 1.0}, a.worlds,
                a.vehicles),
            Row("all planner, 0.1 s", {"road_users.idm_fraction": 1.0, "road_users.planner_fraction": 1.0,
                                       "road_users.planner_interval": 0.1}, a.worlds, a.vehicles)]
    best = [float("inf")] * len(rows)
    share = [0.0] * len(rows)
    for _ in range(a.repeats):
        for k, r in enumerate(rows):
            t, share[k] = r.run(a.steps)
            best[k] = min(best[k], t)
    base = best[0]
    per_vehicle = [(t - base) / a.vehicles for t in best]
    idm_step, idm_veh = best[1], per_vehicle[1]
    print(f"{'traffic':20s} {'planner share':>13s} {'us/step/world':>14s} {'vs IDM':>7s} "
          f"{'us/vehicle-step':>16s} {'vs IDM':>7s}")
    out = []
    for r, t, pv, s in zip(rows, best, per_vehicle, share):
        print(f"{r.label:20s} {s:13.2f} {1e6 * t:14.1f} {t / idm_step:7.2f} {1e6 * pv:16.2f} "
              f"{pv / idm_veh if r is not rows[0] else 0.0:7.2f}")
        out.append({"traffic": r.label, "planner_share": s, "us_per_step_per_world": 1e6 * t,
                    "us_per_vehicle_step_above_parked": 1e6 * pv})
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": platform.processor() or platform.machine(), "worlds": a.worlds,
                       "vehicles": a.vehicles, "steps": a.steps, "rows": out}, f, indent=1)


if __name__ == "__main__":
    main()
