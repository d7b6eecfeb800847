"""Census of a preset's training worlds: the share of controlled cars that meet each long-tail feature.

    python benchmarks/longtail_census.py                          # the longtail preset beside the quick one
    python benchmarks/longtail_census.py --presets longtail --worlds 64 --seed 1 --json census.json

Each world is reset from its seed and its controlled cars are driven by the reference driver (the
policy's own controls, ``terrazero_env.drivers``) until their first episode ends, with no autoreset.
A car *meets* a feature when, at some step of that episode, the driver's nearest constraint
(``Engine.reference_plan``'s ``leader``) is:

- ``blocking obstacle``: an agent at rest (``ROLE_STATIC``: a stopped, parked or crashed vehicle, a
  cone, a worker) within 30 m of travel (the driver's ``pass_distance``), which it would have to pass;
- ``jaywalker``: a pedestrian crossing mid-block (``ROLE_JAYWALKER``);
- ``vehicle``: a moving or stopped IDM vehicle (traffic it follows or waits for);

and a car's goal lies *in another lane* when, at reset, the lane nearest its goal is not its own lane
or one of its successors six lanes deep, but is a same-direction neighbour's (``goal in another
lane``, ``InitConfig.goal_lane_change``). ``any long-tail feature`` is a blocking obstacle, a
jaywalker or a goal in another lane. The rows are shares of the controlled cars
of all worlds; a census counts, it times nothing (the seconds column says how long it took).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np

from terrazero_env import load_config
from terrazero_env.drivers import make_driver
from terrazero_env.engine import ROLES, Engine

ROLE = {name.lower(): code for code, name in enumerate(ROLES)}
FEATURES = ("blocking obstacle", "jaywalker", "goal in another lane", "any long-tail feature", "vehicle")


def _reaches(succ: list[list[int]], lane: int, goal: int, depth: int = 6) -> bool:
    """Whether ``goal`` is ``lane`` or one of its successors ``depth`` lanes deep."""
    if lane == goal:
        return True
    return depth > 0 and any(_reaches(succ, j, goal, depth - 1) for j in succ[lane])


def _goal_lanes(e: Engine, cfg: Any, K: int, valid: np.ndarray) -> np.ndarray:
    """Per slot: the goal lies on a same-direction neighbour's lane chain and not on the car's own."""
    from terrazero_env.evaluation.interplan_scenes import LaneNet

    out = np.zeros(valid.shape[0], bool)
    nets: dict[int, Any] = {}
    for r in np.flatnonzero(valid):
        w, k = divmod(int(r), K)
        mi = int(e.world_map[w])
        rm = e.road_maps[mi]
        net = nets.setdefault(mi, LaneNet(rm.map_data))
        st = e.agent_states(w)
        i = int(np.asarray(e.slot_agent)[r])
        lane = int(st["lane"][i])
        q = rm.lanes.query(np.array([[st["goal_x"][i], st["goal_y"][i]]]))
        gl = int(q["row"][0])
        if lane < 0 or gl < 0 or _reaches(net.succ, lane, gl):
            continue
        out[r] = any(nb >= 0 and _reaches(net.succ, int(nb), gl) for nb in (net.left[lane], net.right[lane]))
    return out


def census(preset: str, worlds: int = 32, seed: int = 0, steps: int | None = None) -> dict[str, Any]:
    """Shares of the controlled cars of ``worlds`` worlds of ``preset`` (reset with seeds ``seed`` ..)
    that meet each of :data:`FEATURES` in their first episode, and their count."""
    cfg = load_config(preset).with_overrides(num_worlds=int(worlds))
    e = Engine(cfg)
    e.reset(np.arange(worlds), [int(seed) * 100_003 + w for w in range(worlds)])
    K = cfg.slots_per_world
    driver = make_driver("reference")
    valid0 = np.asarray(e.valid).astype(bool).copy()
    live = valid0.copy()
    met = {f: np.zeros(worlds * K, bool) for f in FEATURES}
    met["goal in another lane"] = _goal_lanes(e, cfg, K, valid0)
    horizon = cfg.episode_length if steps is None else int(steps)
    for _ in range(horizon):
        if not live.any():
            break
        for w in np.unique(np.flatnonzero(live) // K):  # a census, not a step path: per world
            plan = e.reference_plan(int(w))
            roles = np.asarray(e.agents[w]["role"])
            for k in range(K):
                r = w * K + k
                who = int(plan["leader"][k])
                if not live[r] or who < 0:
                    continue
                role = int(roles[who])
                if role == ROLE["static"] and plan["gap"][k] < 30.0:
                    met["blocking obstacle"][r] = True
                elif role == ROLE["jaywalker"]:
                    met["jaywalker"][r] = True
                elif role == ROLE["idm"]:
                    met["vehicle"][r] = True
        e.step(driver.act(e))
        live &= ~(np.asarray(e.terminated) | np.asarray(e.truncated) | ~np.asarray(e.valid).astype(bool))
    met["any long-tail feature"] = met["blocking obstacle"] | met["jaywalker"] | met["goal in another lane"]
    n = int(valid0.sum())
    return {"preset": preset, "worlds": int(worlds), "seed": int(seed), "cars": n,
            "shares": {f: float(met[f][valid0].mean()) if n else 0.0 for f in FEATURES}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", nargs="+", default=["quick", "longtail"])
    p.add_argument("--worlds", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=None)
    args = p.parse_args()
    rows = []
    print("| preset | cars | " + " | ".join(FEATURES) + " | s |")
    print("|---|---:|" + "---:|" * (len(FEATURES) + 1))
    for name in args.presets:
        t = time.perf_counter()
        row = census(name, args.worlds, args.seed)
        rows.append(row)
        print(f"| {name} | {row['cars']} | " + " | ".join(f"{100 * row['shares'][f]:.1f}%" for f in FEATURES)
              + f" | {time.perf_counter() - t:.1f} |", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
