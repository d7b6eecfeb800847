"""How often the lane a car is matched to jumps: the hand-written driver's lane-state heading residual.

    python benchmarks/lane_jumps.py [--preset quick] [--rounds 2] [--worlds 32] [--threshold 8]
                                    [--set KEY=VALUE ...] [--json out.json]

Runs ``scripted_driver.py``'s ``ScriptedDriver`` (it reads its lane only through the observation's
``lane_state``) on the preset's config for ``rounds`` rounds of ``worlds`` worlds (autoreset off,
each round one episode per slot, world seeds ``1000 * round + world``, as ``violation_context.py``
records), once with ``lane_tracking`` off and once on, and counts per car-step (a valid slot's
observation, the first after the reset included):

* **jumps**: consecutive valid steps of a slot whose observed heading residual changes by more than
  ``--threshold`` degrees (wrapped), the mark of a lane match moving between overlapping lanes (a car
  on the jerk grid turns by at most a few degrees in 0.1 s);
* **above 45**: steps with a heading residual above 45 degrees.

The driver's actions depend on what it reads, so the two runs drive different paths after the first
difference; the counts compare the two lane rules on the same episodes' starts.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

import terrazero_env
from terrazero_env.config.io import load_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scripted_driver import ScriptedDriver  # noqa: E402


def count(cfg: Any, rounds: int, worlds: int, threshold_deg: float) -> dict[str, Any]:
    """Car-steps, residual jumps above ``threshold_deg`` and residuals above 45 degrees of the driver."""
    venv = terrazero_env.envs.TerraZeroVectorEnv(cfg.with_overrides(num_worlds=worlds), autoreset_mode="Disabled")
    try:
        driver = ScriptedDriver(venv)
        layout = venv.engine.obs_layout
        col = layout.groups["ego"].start + layout.groups["ego"].feature("lane_state").start
        scale = float(layout.normalisers["lane_heading_range"])
        thr = math.radians(threshold_deg)
        steps = jumps = wide = episodes = 0
        for rnd in range(rounds):
            obs, info = venv.reset(seed=[1000 * rnd + w for w in range(worlds)])
            valid = np.asarray(info["valid"], bool)
            episodes += int(valid.sum())
            prev_res = np.asarray(obs)[:, col] * scale
            prev_valid = valid
            steps += int(valid.sum())
            wide += int((np.abs(prev_res[valid]) > math.radians(45.0)).sum())
            for _ in range(int(venv.config.episode_length)):
                obs, _, _, _, info = venv.step(np.asarray(driver.act(np.asarray(obs, np.float64)), np.int64))
                valid = np.asarray(info["valid"], bool)
                res = np.asarray(obs)[:, col] * scale
                both = valid & prev_valid
                d = (res - prev_res + math.pi) % (2 * math.pi) - math.pi
                jumps += int((np.abs(d[both]) > thr).sum())
                steps += int(valid.sum())
                wide += int((np.abs(res[valid]) > math.radians(45.0)).sum())
                prev_res, prev_valid = res, valid
                if not valid.any():
                    break
    finally:
        venv.close()
    return {"episodes": episodes, "car_steps": steps, "jumps": jumps, "above_45": wide}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--worlds", type=int, default=32)
    ap.add_argument("--threshold", type=float, default=8.0, help="degrees")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (YAML value)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.worlds < 1:
        ap.error("--rounds and --worlds must be positive")
    overrides = {}
    for kv in args.set:
        key, _, val = kv.partition("=")
        overrides[key] = yaml.safe_load(val)
    rows = {}
    print(f"{'lane_tracking':<14} {'episodes':>9} {'car-steps':>10} {'jumps':>7} {'per 1k':>7} {'above 45':>9}")
    for track in (False, True):
        cfg = load_config(args.preset, **{**overrides, "lane_tracking": track})
        r = count(cfg, args.rounds, args.worlds, args.threshold)
        rows["on" if track else "off"] = r
        print(f"{str(track):<14} {r['episodes']:>9} {r['car_steps']:>10} {r['jumps']:>7} "
              f"{1e3 * r['jumps'] / max(r['car_steps'], 1):>7.2f} {r['above_45']:>9}")
    out = {"preset": args.preset, "overrides": overrides, "rounds": args.rounds, "worlds": args.worlds,
           "threshold_deg": args.threshold, "rows": rows}
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
