"""What a trained car was doing when it ran a red light or left the road.

    python benchmarks/violation_context.py RUN [--rounds 6] [--worlds 32] [--deterministic] [--maps MAP]
                                               [--episode-length STEPS] [--json out.json]

Runs the checkpoint of ``RUN`` (a ``terrazero train`` folder or a checkpoint zip) on its own config (or
on ``--maps``) for ``rounds`` rounds of ``worlds`` worlds (autoreset off, each round one 128-step
episode per slot, or ``--episode-length`` steps, world seeds ``1000 * round + world``) and prints one
row per event:

* **red light** (each crossing of a stop bar on red by a controlled car): when the car's stop line
  last turned from green, the car's speed and its distance to the line then (front bumper), and the
  constant deceleration it needed to stop before the line, ``v^2 / (2 d)``. A small figure says the
  car could have stopped comfortably and did not; ``never slowed`` says its speed never fell below
  the speed it had at that moment. Whether the line was already not green when the car was placed
  (``at spawn``) is shown too, and how long the line stayed red after the crossing (``red_left``: the
  seconds until it next showed green, NaN when the recording ended first; a longer
  ``--episode-length`` follows more crossings to their green).
* **off-road** (each car's first off-road step): its speed, and its heading residual (degrees, +
  left of the lane's direction) and lateral offset (m, + left) from its lane one step and ten steps
  before, from the ego observation's ``lane_state`` (the run must observe it), with the lane
  curvature ahead where it is observed, and the kind of place the car was on a step before
  (``Places``: junction, turning loop, bend or straight, from the nearest centerline).

The stop line of a red-light event is the one nearest the car's front at the event (the engine tests
the line ending the car's previous lane; at a crossing the nearest line is that one). Summaries
follow the rows: medians, and the share of red-light events with a required deceleration below 2 m/s^2.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

import terrazero_env
import terrazero_env.maps

GREEN = 2


def record(act: Callable[[np.ndarray], np.ndarray], venv: Any, rounds: int) -> list[dict[str, np.ndarray]]:
    """Per round: ``obs`` [T, n, D] (the observation each action was chosen from), ``agents`` [T + 1,
    W, A] snapshots (after the reset, then after each step), ``stop_lines`` [T + 1, W, S] states,
    ``placed`` [W, A] (the rows in use) and ``episodes``, the controlled cars placed."""
    e = venv.engine
    W = venv.num_worlds
    out = []
    for rnd in range(rounds):
        obs, info = venv.reset(seed=[1000 * rnd + w for w in range(W)])
        seen, A, S = [], [np.array(e.agents)], [np.stack([e.stop_line_states(w) for w in range(W)])]
        for _ in range(int(venv.config.episode_length) + 2):
            seen.append(np.array(obs))
            obs, _, _, _, _ = venv.step(np.asarray(act(np.array(obs)), np.int64).reshape(venv.num_envs))
            A.append(np.array(e.agents))
            S.append(np.stack([e.stop_line_states(w) for w in range(W)]))
        placed = np.arange(A[0].shape[1])[None, :] < np.asarray(e.n_agents_per_world)[:, None]
        out.append({"obs": np.array(seen), "agents": np.array(A), "stop_lines": np.array(S), "placed": placed,
                    "episodes": int(np.asarray(info["valid"], bool).sum())})
    return out


def _flagged(rec: list[dict[str, np.ndarray]], flag: str) -> Iterator[tuple[int, dict[str, np.ndarray], int, int, int]]:
    """``(round, recording, step, world, agent row)`` for every step on which a controlled car raised
    ``flag``. A car's flags stay as they were once its episode ended: a step counts only while the
    car was alive before it, and only rows in use."""
    for rnd, r in enumerate(rec):
        A = r["agents"]
        for t in range(1, len(A)):
            hit = (A[t][flag] == 1) & (A[t]["slot"] >= 0) & (A[t - 1]["alive"] == 1) & r["placed"]
            for w, a in zip(*np.nonzero(hit)):
                yield rnd, r, t, int(w), int(a)


def _front(ag: np.void) -> tuple[float, float]:
    return (ag["x"] + 0.5 * ag["length"] * np.cos(ag["heading"]), ag["y"] + 0.5 * ag["length"] * np.sin(ag["heading"]))


def red_light_events(rec: list[dict[str, np.ndarray]], stop_line_points: np.ndarray, dt: float) -> list[dict[str, Any]]:
    """One row per crossing of a stop bar on red by a controlled car (see the module docstring)."""
    mid = stop_line_points[:, :, :2].mean(axis=1)
    rows = []
    for rnd, r, t, w, a in _flagged(rec, "red_light"):
        A, S = r["agents"], r["stop_lines"]
        ag = A[t][w, a]
        fx, fy = _front(ag)
        s = int(np.argmin(np.hypot(mid[:, 0] - fx, mid[:, 1] - fy)))
        green = np.nonzero(S[:t + 1, w, s] == GREEN)[0]
        t0 = int(green[-1]) + 1 if green.size else 0
        a0 = A[t0][w, a]
        f0x, f0y = _front(a0)
        d0 = float(np.hypot(mid[s, 0] - f0x, mid[s, 1] - f0y))
        v0 = float(a0["speed"])
        later = np.nonzero(S[t:, w, s] == GREEN)[0]
        rows.append({"round": rnd, "world": int(w), "agent": int(a), "step": t, "stop_line": s,
                     "seconds_since_green": (t - t0) * dt, "at_spawn": not green.size,
                     "speed_then": v0, "distance_then": d0,
                     "decel_needed": v0 * v0 / (2.0 * max(d0, 0.1)),
                     "speed_at_line": float(ag["speed"]),
                     "never_slowed": bool(A[t0:t + 1, w, a]["speed"].min() >= v0 - 1e-9),
                     "red_left": float(later[0]) * dt if later.size else float("nan")})
    return rows


class Places:
    """Where on the map a point lies: ``junction`` (its nearest centerline is a lane inside an
    intersection), else ``loop`` (a lane that turns through more than 150 degrees in all, the turning
    loops at dead ends, passes within 10 m), else ``bend`` (some lane turns faster than 0.03 rad per
    metre within 10 m: in a bend, entering or leaving one), else ``straight``."""

    def __init__(self, map_data: Any) -> None:
        lanes = map_data.lanes
        segs, rows, rates = [], [], []
        inter = np.asarray(lanes.intersection)
        self.inter = inter
        loop = np.zeros(len(lanes), bool)
        for lane in range(len(lanes)):
            pts = np.asarray(lanes.centerline.row(lane), float)[:, :2]
            d = np.diff(pts, axis=0)
            h = np.unwrap(np.arctan2(d[:, 1], d[:, 0]))
            seg_len = np.maximum(np.linalg.norm(d, axis=1), 1e-6)
            rate = np.zeros(len(d))
            if len(d) > 1:  # heading change per metre at each inner vertex, given to both its segments
                r = np.abs(np.diff(h)) / (0.5 * (seg_len[1:] + seg_len[:-1]))
                rate[1:] = np.maximum(rate[1:], r)
                rate[:-1] = np.maximum(rate[:-1], r)
            loop[lane] = len(h) > 0 and abs(h[-1] - h[0]) > np.radians(150.0)
            segs.append(np.concatenate([pts[:-1], pts[1:]], axis=1))
            rows.append(np.full(len(d), lane))
            rates.append(rate)
        self.seg, self.row, self.rate = np.concatenate(segs), np.concatenate(rows), np.concatenate(rates)
        self.loop = loop[self.row] & (inter[self.row] < 0)
        self.inside = inter[self.row] >= 0

    def __call__(self, x: float, y: float) -> str:
        a, d = self.seg[:, :2], self.seg[:, 2:] - self.seg[:, :2]
        t = np.clip(((np.array([x, y]) - a) * d).sum(1) / np.maximum((d * d).sum(1), 1e-12), 0.0, 1.0)
        dist = np.linalg.norm(a + t[:, None] * d - [x, y], axis=1)
        if self.inside[int(np.argmin(dist))]:
            return "junction"
        near = dist <= 10.0
        if (near & self.loop).any():
            return "loop"
        return "bend" if (near & ~self.inside & (self.rate > 0.03)).any() else "straight"


def offroad_events(rec: list[dict[str, np.ndarray]], layout: Any, slots_per_world: int,
                   places: Places | None = None) -> list[dict[str, Any]]:
    """One row per controlled car's first off-road step (see the module docstring); with ``places``,
    where the car was one step before (``Places``)."""
    ego = layout.groups["ego"]
    names = {n for n, _, _ in ego.features}
    if "lane_state" not in names:
        raise ValueError("the run does not observe lane_state (obs.lane_state), which the off-road rows read")
    lane = ego.feature("lane_state")
    curv = ego.feature("road_curvature") if "road_curvature" in names else None
    norms = layout.normalisers
    rows = []
    for rnd, r, t, w, a in _flagged(rec, "offroad"):
        A, seen = r["agents"], r["obs"]
        if (A[:t, w, a]["offroad"] == 1).any():
            continue
        slot = w * slots_per_world + int(A[t][w, a]["slot"])

        def at(k: int) -> np.ndarray:
            return seen[max(t - k, 0), slot]

        row = {"round": rnd, "world": int(w), "agent": int(a), "step": t, "speed": float(A[t][w, a]["speed"]),
               "width": float(A[t][w, a]["width"])}
        for k in (1, 10):
            ls = at(k)[lane]
            row[f"heading_residual_{k}"] = float(np.degrees(ls[0] * norms["lane_heading_range"]))
            row[f"lateral_offset_{k}"] = float(ls[1] * norms["lane_lateral_range"])
        row["curvature"] = (float(at(1)[curv][0] * norms["curvature_range"]) if curv is not None else None)
        if places is not None:
            before = A[t - 1][w, a]
            row["place"] = places(float(before["x"]), float(before["y"]))
        rows.append(row)
    return rows


def _table(rows: list[dict[str, Any]], keys: list[str]) -> str:
    def f(v: Any) -> str:
        return f"{v:.2f}" if isinstance(v, float) else str(v)
    return "\n".join([" ".join(keys)] + [" ".join(f(r[k]) for k in keys) for r in rows])


def _nanmedian(v: list[float]) -> str:
    a = np.asarray(v, float)
    a = a[np.isfinite(a)]
    return f"{np.median(a):.1f} ({a.size} of {len(v)} seen turning green)" if a.size else "unknown (none turned green)"


def _red_light_summary(red: list[dict[str, Any]]) -> str:
    dec = np.array([r["decel_needed"] for r in red])
    return (f"median deceleration needed {np.median(dec):.2f} m/s^2, max {dec.max():.2f}; below 2 m/s^2: "
            f"{(dec < 2).mean():.0%}; never slowed: {np.mean([r['never_slowed'] for r in red]):.0%}; "
            f"line not green at the car's spawn: {np.mean([r['at_spawn'] for r in red]):.0%}; "
            f"red left at the crossing (s) median {_nanmedian([r['red_left'] for r in red])}")


def _offroad_summary(off: list[dict[str, Any]]) -> str:
    lat = np.array([r["lateral_offset_1"] for r in off])
    head = np.array([r["heading_residual_1"] for r in off])
    right = (lat < 0) & (head < 0)
    where = ""
    if off and "place" in off[0]:
        names, counts = np.unique([r["place"] for r in off], return_counts=True)
        where = "; where: " + ", ".join(f"{n} {c / len(off):.0%}" for n, c in zip(names, counts))
    return (f"median |heading residual| {np.median(np.abs(head)):.1f} deg, median |offset| "
            f"{np.median(np.abs(lat)):.2f} m one step before; heading and offset both to the right: "
            f"{right.mean():.0%}; |heading residual| above 90 deg (against the lane): "
            f"{(np.abs(head) > 90).mean():.0%}; speed below 0 (reversing): "
            f"{np.mean([r['speed'] < 0 for r in off]):.0%}{where}")


def _report(title: str, rows: list[dict[str, Any]], keys: list[str],
            summary: Callable[[list[dict[str, Any]]], str]) -> None:
    """The event count, then (when there are any) one line per event and the summary line."""
    print(f"\n{title}: {len(rows)}")
    if rows:
        print(_table(rows, keys))
        print(summary(rows))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    from terrazero_env.agents.evaluate import load_checkpoint, resolve_run

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run", help="a terrazero train folder or checkpoint zip")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--worlds", type=int, default=32)
    ap.add_argument("--deterministic", action="store_true", help="most likely actions (default: sampled)")
    ap.add_argument("--seed", type=int, default=0, help="torch seed of the sampled actions")
    ap.add_argument("--maps", nargs="+", default=None, help="a map other than the run's (one)")
    ap.add_argument("--episode-length", type=int, default=None, metavar="STEPS",
                    help="record this many steps per round instead of the config's episode length (a longer "
                         "recording follows each red-light crossing to the next green)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.episode_length is not None and args.episode_length < 1:
        ap.error("--episode-length must be positive")
    if args.rounds < 1 or args.worlds < 1:
        ap.error("--rounds and --worlds must be positive")
    path, cfg, _ = resolve_run(args.run)
    model = load_checkpoint(path)
    cfg = cfg.with_overrides(num_worlds=args.worlds, **({"maps": args.maps} if args.maps else {}),
                             **({"episode_length": args.episode_length} if args.episode_length else {}))
    if len(cfg.maps) != 1:
        ap.error(f"one map per run, got {list(cfg.maps)}")
    venv = terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled")
    try:
        torch.manual_seed(args.seed)
        rec = record(lambda o: model.predict(o, deterministic=args.deterministic)[0], venv, args.rounds)
        points = np.asarray(terrazero_env.maps.load_source(cfg.maps[0]).stop_lines.points, float).reshape(-1, 2, 3)
        red = red_light_events(rec, points, float(cfg.dt))
        off = offroad_events(rec, venv.engine.obs_layout, venv.slots_per_world,
                             Places(terrazero_env.maps.load_source(cfg.maps[0])))
    finally:
        venv.close()
    episodes = sum(r["episodes"] for r in rec)
    print(f"{path}: {args.rounds} rounds x {args.worlds} worlds, {episodes} episodes, "
          f"{'deterministic' if args.deterministic else 'sampled'} actions")
    _report("red-light events", red, ["round", "world", "agent", "step", "seconds_since_green", "at_spawn",
                                      "speed_then", "distance_then", "decel_needed", "speed_at_line", "never_slowed",
                                      "red_left"],
            _red_light_summary)
    _report("off-road events (first per car)", off, ["round", "world", "agent", "step", "speed", "heading_residual_1",
                                                     "lateral_offset_1", "heading_residual_10", "lateral_offset_10",
                                                     "curvature", "width", "place"], _offroad_summary)
    result = {"run": str(path), "rounds": args.rounds, "worlds": args.worlds, "episodes": episodes,
              "deterministic": args.deterministic, "red_light": red, "offroad": off}
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return result


if __name__ == "__main__":
    main()
