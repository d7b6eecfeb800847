"""What the observation and the car's jerk grid allow: a hand-written careful driver on the quick task.

    python benchmarks/scripted_driver.py [--preset quick] [--episodes 200] [--set KEY=VALUE ...]
                                         [--gain NAME=VALUE ...] [--places ROUNDS] [--json out.json]

A feasibility reference for the careful-driver rates (off-road, wrong-way, red-light, collision, comfort): a
controller that reads only the trained policy's own observation (no engine state) and acts on the
same discrete jerk grid, evaluated exactly as ``terrazero eval`` evaluates a checkpoint (200
episodes, evaluation seed 0, the preset's config). If it meets the targets, the observation and the
action grid allow them and what is missing is learning; where it does not, the rows say which rate
the task itself makes hard.

The controller (all gains ours):

* lateral: a lane-frame PD law on the observed lane state, with the observed curvature ahead as
  feed-forward, ``a_lat* = v^2 k - w^2 y - 2 z w y'`` (``y`` lateral offset, ``y'`` lateral velocity,
  ``k`` curvature), then the lateral jerk that brings the observed lateral acceleration to ``a_lat*``
  within ``tau``, rounded to the grid's nearest value (a dead band keeps it at 0 near the target);
* longitudinal: the lowest of a cruise speed, the speed that keeps ``v^2 k`` under a lateral
  limit, a braking profile to the car's own stop line while it shows red or yellow (``stop_line_ahead``),
  an arrival profile that reaches the goal below 3 m/s (``topology_goal_distance``), and a following
  profile behind the nearest partner in a band ahead; the acceleration it needs becomes a jerk the
  same way. The emergency jerk (-15 m/s^3, above table 8's comfort limit) is used only when the
  needed acceleration is far below the present one.

``--places ROUNDS`` also replays the driver for that many rounds of 32 worlds through
``violation_context.py`` and prints its off-road summary (where the car was, its heading and offset
from the lane one step before).

The observation must carry the optional ego features the quick preset turns on (``lane_state``,
``lateral_velocity``, ``road_curvature``, ``topology_goal_distance``, ``stop_line_ahead``).
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from terrazero_env.agents.evaluate import evaluate

import terrazero_env
from terrazero_env.config.io import load_config
from terrazero_env.foundation import safe_yaml

NEEDED = ("rel_goal_pos", "speed", "vehicle_dims", "acceleration", "lane_state", "lateral_velocity", "road_curvature",
          "topology_goal_distance", "stop_line_ahead")


class ScriptedDriver:
    """``predict(obs) -> (actions, None)`` over ``[n, obs_dim]`` observations of vehicle slots."""

    def __init__(self, venv: Any, *, cruise: float = 8.0, lat_limit: float = 2.0, omega: float = 1.6,
                 zeta: float = 0.9, tau: float = 0.25, brake: float = 2.0, follow_gap: float = 6.0,
                 headway: float = 1.5, stop_margin: float = 1.0) -> None:
        e = venv.engine
        layout = e.obs_layout
        ego = layout.groups["ego"]
        self.col = {name: ego.start + off for name, off, _ in ego.features}
        missing = [k for k in NEEDED if k not in self.col]
        if missing:
            raise ValueError(f"the scripted driver needs the ego features {missing}; turn them on under obs:")
        part = layout.groups["partners"]
        self.partners = (part.start, part.count, part.width, {name: off for name, off, _ in part.features})
        cfg = venv.config
        self.goal_scale, self.speed_scale = float(cfg.obs.goal_scale), float(cfg.obs.speed_scale)
        self.n = dict(layout.normalisers)  # the observation's fixed scales (tables 9-12)
        grid = np.asarray(e.action_values(0), float)  # the car's (long, lat) grid, row-major
        self.jl, self.jt = np.unique(grid[:, 0]), np.unique(grid[:, 1])
        self.dt = float(cfg.dt)
        self.cruise, self.lat_limit, self.omega, self.zeta, self.tau = cruise, lat_limit, omega, zeta, tau
        self.brake, self.follow_gap, self.headway, self.stop_margin = brake, follow_gap, headway, stop_margin
        self.observation_space, self.action_space = venv.single_observation_space, venv.single_action_space

    def _pick(self, grid: np.ndarray, jerk: np.ndarray, dead: float) -> np.ndarray:
        """Index of the grid value nearest ``jerk``, 0 jerk inside the dead band, never the emergency
        value unless the jerk asked for is at least 60% of it."""
        idx = np.abs(grid[None, :] - jerk[:, None]).argmin(1)
        zero = int(np.abs(grid).argmin())
        idx = np.where(np.abs(jerk) < dead, zero, idx)
        lo = int(grid.argmin())
        mild = int(np.nonzero(grid < 0)[0].max()) if (grid < 0).sum() > 1 else lo
        return np.where((idx == lo) & (jerk > 0.6 * grid[lo]), mild, idx)

    def _lead_speed_cap(self, obs: np.ndarray) -> np.ndarray:
        start, count, width, f = self.partners
        p = obs[:, start:start + count * width].reshape(len(obs), count, width)
        x, y = (p[..., f["rel_pos"] + i] / self.n["position_scale"] for i in (0, 1))
        present = np.abs(p[..., f["vehicle_dims"]:f["vehicle_dims"] + 2]).sum(-1) > 0
        length = p[..., f["vehicle_dims"] + 1] * self.n["length_range"]
        ahead = present & (x > 0) & (np.abs(y) < 2.2)
        gap = np.where(ahead, x - 0.5 * length - 2.6, np.inf).min(1)  # own half length ~2.6 m
        cap = np.sqrt(np.maximum(2.0 * self.brake * np.maximum(gap - self.follow_gap * 0.5, 0.0), 0.0))
        return np.minimum(cap, np.maximum(gap - 2.0, 0.0) / self.headway)

    def act(self, obs: np.ndarray) -> np.ndarray:
        c = self.col
        v = obs[:, c["speed"]] / self.speed_scale
        n = self.n
        a_long = obs[:, c["acceleration"]] * n["accel_long_range"]
        a_lat = obs[:, c["acceleration"] + 1] * n["accel_lat_range"]
        y = obs[:, c["lane_state"] + 1] * n["lane_lateral_range"]
        dy = obs[:, c["lateral_velocity"]] * n["lateral_velocity_range"]
        k = obs[:, c["road_curvature"]] * n["curvature_range"]
        w, z = self.omega, self.zeta
        a_lat_des = np.clip(v * v * k - w * w * y - 2.0 * z * w * dy, -3.5, 3.5)
        j_lat = (a_lat_des - a_lat) / self.tau
        i_lat = self._pick(self.jt, j_lat, 0.5 * np.abs(self.jt[self.jt != 0]).min())
        # longitudinal target speed
        v_des = np.full(len(obs), self.cruise)
        v_des = np.minimum(v_des, np.sqrt(self.lat_limit / np.maximum(np.abs(k), 1e-3)))
        sl = c["stop_line_ahead"]
        half = 0.5 * obs[:, c["vehicle_dims"] + 1] * n["length_range"]  # the line is passed when the front crosses it
        d_line = obs[:, sl] / n["position_scale"] - half - self.stop_margin
        stop = (obs[:, sl + 1] > 0.5) | (obs[:, sl + 2] > 0.5)  # red or yellow
        yellow_go = (obs[:, sl + 2] > 0.5) & (v * v > 2.0 * 3.0 * np.maximum(d_line, 0.0))  # too close to stop
        line_cap = np.sqrt(2.0 * self.brake * np.maximum(d_line, 0.0))
        v_des = np.where(stop & ~yellow_go & (d_line > -self.stop_margin), np.minimum(v_des, line_cap), v_des)
        d_goal = obs[:, c["topology_goal_distance"]] / self.goal_scale
        gx, gy = (obs[:, c["rel_goal_pos"] + i] / self.goal_scale for i in (0, 1))
        d_goal = np.minimum(d_goal, np.hypot(gx, gy) + 5.0)
        v_des = np.minimum(v_des, np.sqrt(2.0 ** 2 + 2.0 * 1.2 * np.maximum(d_goal - 1.0, 0.0)))
        v_des = np.minimum(v_des, self._lead_speed_cap(obs))
        a_des = np.clip((v_des - v) / 1.0, -4.0, 2.0)
        # the deceleration that stops the front at the line, asked for a little early (jerk takes time)
        must = stop & ~yellow_go & (d_line > -self.stop_margin)
        a_stop = -v * v / (2.0 * np.maximum(d_line, 0.05))
        a_des = np.where(must & (a_stop < -0.3), np.minimum(a_des, 1.3 * a_stop), a_des)
        j_long = (a_des - a_long) / self.tau
        i_long = self._pick(self.jl, j_long, 0.5 * np.abs(self.jl[self.jl != 0]).min())
        return i_long * len(self.jt) + i_lat

    def predict(self, obs: np.ndarray, deterministic: bool = True) -> tuple[np.ndarray, None]:
        return self.act(np.asarray(obs, np.float64)), None


def _places(driver: ScriptedDriver, cfg: Any, rounds: int) -> str:
    """``violation_context``'s off-road summary of the driver's replay (``rounds`` rounds of 32 worlds)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import violation_context as vc

    venv = terrazero_env.envs.TerraZeroVectorEnv(cfg.with_overrides(num_worlds=32), autoreset_mode="Disabled")
    try:
        rec = vc.record(lambda o: driver.act(np.asarray(o, np.float64)), venv, rounds)
        off = vc.offroad_events(rec, venv.engine.obs_layout, venv.slots_per_world,
                                vc.Places(terrazero_env.maps.load_source(cfg.maps[0])))
    finally:
        venv.close()
    return f"{len(off)}; " + (vc._offroad_summary(off) if off else "none")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="quick")
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config override (YAML value)")
    ap.add_argument("--gain", action="append", default=[], metavar="NAME=VALUE",
                    help="a ScriptedDriver parameter (cruise, lat_limit, omega, zeta, tau, brake, follow_gap, "
                         "headway, stop_margin)")
    ap.add_argument("--places", type=int, default=0, metavar="ROUNDS",
                    help="also summarize where the driver leaves the road over ROUNDS rounds of 32 worlds")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.places < 0:
        ap.error("--places: a number of rounds, 0 or more")
    if args.episodes < 1:
        ap.error("--episodes must be positive")
    gains = {}
    allowed = {"cruise", "lat_limit", "omega", "zeta", "tau", "brake", "follow_gap", "headway", "stop_margin"}
    for kv in args.gain:
        key, _, val = kv.partition("=")
        if key not in allowed:
            ap.error(f"--gain: unknown parameter {key!r} (one of {sorted(allowed)})")
        try:
            gains[key] = float(val)
        except ValueError:
            ap.error(f"--gain {key}: a number, got {val!r}")
    overrides = {}
    for kv in args.set:
        key, _, val = kv.partition("=")
        overrides[key] = safe_yaml.load(val, f"--set {key}")
    try:
        cfg = load_config(args.preset, **overrides)
    except (ValueError, TypeError, FileNotFoundError) as e:
        ap.error(str(e))
    probe = terrazero_env.envs.TerraZeroVectorEnv(cfg.with_overrides(num_worlds=1))
    try:
        driver = ScriptedDriver(probe, **gains)
    finally:
        probe.close()
    res = evaluate(driver, cfg, episodes=args.episodes, seed=args.seed, deterministic=True)
    rows = res["rows"]
    for row in rows.values():
        if row.get("value") is None:
            continue
        if row["kind"] == "rate":
            print(f"{row['label']:<28} {100 * row['value']:6.1f}%  [{100 * row['ci_low']:.1f}, {100 * row['ci_high']:.1f}]")
        else:
            print(f"{row['label']:<28} {row['value']:8.3f}")
    score = float(np.mean(res["closed_loop"]["score"])) if "score" in res["closed_loop"] else math.nan
    print(f"{'closed-loop score':<28} {score:8.1f}")
    if args.places:
        out_places = _places(driver, cfg, args.places)
        print(f"off-road events over {args.places} rounds of 32 worlds: {out_places}")
    out = {"preset": args.preset, "overrides": overrides, "gains": gains, "episodes": args.episodes, "seed": args.seed,
           "rows": rows, "score": score}
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=1, default=float), encoding="utf-8")
    return out


if __name__ == "__main__":
    main()
