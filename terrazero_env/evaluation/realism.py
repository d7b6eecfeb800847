"""Realism of simulated traffic against logged traffic, in the style of the Waymo Open Sim Agents
Challenge (WOSAC, Montali et al. 2023).

    from terrazero_env.evaluation.realism import realism_table
    print(format_realism(realism_table("usa_us101", rollouts=16)))

Agents start from the logged state at the end of a history window (WOSAC: 1.1 s), a policy drives
them for the future window (WOSAC: 8 s, clipped to what the log holds), ``rollouts`` times. For every
feature (linear speed and acceleration, angular speed and acceleration, distance to the nearest
object, time to collision, distance to the road edge; collision and off-road indicators) and every
agent and future step, the rollouts' values give a histogram with fixed bins (additive smoothing
``ALPHA`` per bin); the logged value's probability under it, averaged in log space over agents and
steps and exponentiated, is the feature's likelihood in (0, 1]. The indicators are Bernoulli per
agent over the whole future. The meta score is the weighted mean of the likelihoods with WOSAC 2023's
weights (:data:`WEIGHTS`). Policies: ``log`` (logged replay, the upper bound), ``constant_velocity``
and ``idm`` (the engine's IDM vehicles on the lane graph, one seeded world per rollout), and trained
checkpoints (``--policy RUN``: the policy drives the logged agents toward their logged end positions). Features
are computed with NumPy and the engine's box kernels; nothing loops over agents in Python.
Where ours differs from WOSAC: histogram bins are fixed per feature rather than adapted, TTC is the
exact constant-velocity box TTC to any agent ahead (capped at 5 s), distances to objects use the
gap along the line of centres, and the road edge distance is unsigned (off-road is its own feature).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import engine as core
from ..foundation.checks import check_int
from ..maps.schema import MapData

__all__ = ["ALPHA", "BINS", "POLICIES", "WEIGHTS", "format_realism", "realism_scores", "realism_table",
           "rollout_features"]

#: Meta-score weights (WOSAC 2023).
WEIGHTS: dict[str, float] = {
    "linear_speed": 0.05, "linear_acceleration": 0.05, "angular_speed": 0.05, "angular_acceleration": 0.05,
    "distance_to_nearest_object": 0.10, "collision": 0.25, "time_to_collision": 0.10,
    "distance_to_road_edge": 0.10, "offroad": 0.25,
}
#: Histogram range and bin count per continuous feature (units: m/s, m/s^2, rad/s, rad/s^2, m, s, m).
BINS: dict[str, tuple[float, float, int]] = {
    "linear_speed": (0.0, 30.0, 20), "linear_acceleration": (-10.0, 10.0, 20), "angular_speed": (-1.0, 1.0, 20),
    "angular_acceleration": (-3.0, 3.0, 20), "distance_to_nearest_object": (0.0, 30.0, 20),
    "time_to_collision": (0.0, 5.0, 10), "distance_to_road_edge": (0.0, 20.0, 20),
}
#: Additive smoothing per histogram bin (and per Bernoulli outcome).
ALPHA = 0.1
TTC_CAP = 5.0


def _wrap(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def rollout_features(traj: np.ndarray, size: np.ndarray, road: Any, edges: np.ndarray, dt: float) -> dict[str, np.ndarray]:
    """Features of trajectories ``traj`` float64 ``[R, A, T + 1, 3]`` (x, y, heading; step 0 is the
    last history state) of agents with ``size`` ``[A, 2]`` (length, width): the per-step features
    ``[R, A, T]`` and the indicators ``collision``, ``offroad`` ``[R, A]``. ``road``: the map's
    ``RoadMap`` (engine off-road test); ``edges``: road-edge segments ``[S, 4]``."""
    R, A, T1, _ = traj.shape
    T = T1 - 1
    x, y, h = traj[..., 0], traj[..., 1], traj[..., 2]
    vx, vy = np.diff(x, axis=2) / dt, np.diff(y, axis=2) / dt              # [R, A, T]
    speed = np.hypot(vx, vy)
    yaw = _wrap(np.diff(h, axis=2)) / dt
    f: dict[str, np.ndarray] = {
        "linear_speed": speed,
        "linear_acceleration": np.diff(speed, axis=2, prepend=speed[:, :, :1]) / dt,
        "angular_speed": yaw,
        "angular_acceleration": np.diff(yaw, axis=2, prepend=yaw[:, :, :1]) / dt,
    }
    px, py, ph = x[:, :, 1:], y[:, :, 1:], h[:, :, 1:]                       # positions at future steps
    L = np.broadcast_to(size[None, :, None, 0], px.shape)
    W = np.broadcast_to(size[None, :, None, 1], px.shape)
    # pairs (i, j), i != j, at every rollout and step
    ii, jj = np.nonzero(~np.eye(A, dtype=bool))
    def pair(v: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return v[:, idx, :]                                                  # [R, P, T]
    dx, dy = pair(px, jj) - pair(px, ii), pair(py, jj) - pair(py, ii)
    d = np.hypot(dx, dy)
    ux, uy = dx / np.maximum(d, 1e-9), dy / np.maximum(d, 1e-9)

    def extent(hh: np.ndarray, ll: np.ndarray, ww: np.ndarray) -> np.ndarray:
        c, s = np.cos(hh), np.sin(hh)
        return 0.5 * ll * np.abs(ux * c + uy * s) + 0.5 * ww * np.abs(-ux * s + uy * c)

    gap = d - extent(pair(ph, ii), pair(L, ii), pair(W, ii)) - extent(pair(ph, jj), pair(L, jj), pair(W, jj))
    boxes_i = np.stack([pair(px, ii), pair(py, ii), pair(ph, ii), pair(L, ii), pair(W, ii)], -1).reshape(-1, 5)
    boxes_j = np.stack([pair(px, jj), pair(py, jj), pair(ph, jj), pair(L, jj), pair(W, jj)], -1).reshape(-1, 5)
    overlap = core.obb_overlap_batch(np.ascontiguousarray(boxes_i), np.ascontiguousarray(boxes_j)).reshape(gap.shape)
    gap = np.where(overlap, 0.0, np.maximum(gap, 0.0))
    ttc = core.box_ttc_batch(np.ascontiguousarray(np.concatenate([boxes_i, np.stack(
        [pair(vx, ii), pair(vy, ii)], -1).reshape(-1, 2)], 1)), np.ascontiguousarray(np.concatenate([boxes_j, np.stack(
            [pair(vx, jj), pair(vy, jj)], -1).reshape(-1, 2)], 1)), TTC_CAP).reshape(gap.shape)
    ahead = (dx * np.cos(pair(ph, ii)) + dy * np.sin(pair(ph, ii))) > 0
    ttc = np.where(ahead & ~overlap, np.minimum(ttc, TTC_CAP), TTC_CAP)
    f["distance_to_nearest_object"] = np.full((R, A, T), np.inf)
    f["time_to_collision"] = np.full((R, A, T), TTC_CAP)
    np.minimum.at(f["distance_to_nearest_object"], (slice(None), ii, slice(None)), gap)
    np.minimum.at(f["time_to_collision"], (slice(None), ii, slice(None)), ttc)
    f["distance_to_nearest_object"] = np.minimum(f["distance_to_nearest_object"], BINS["distance_to_nearest_object"][1])
    collided = np.zeros((R, A), bool)
    np.logical_or.at(collided, (slice(None), ii), overlap.any(axis=2))
    f["distance_to_road_edge"] = _edge_distance(np.stack([px.reshape(-1), py.reshape(-1)], 1), edges).reshape(R, A, T)
    off = core.footprint_offroad(road, np.stack([px, py, ph, L, W], -1).reshape(-1, 5)).reshape(R, A, T)
    f["collision"] = collided.astype(float)
    f["offroad"] = off.any(axis=2).astype(float)
    return f


#: Point-segment pairs per block of :func:`_edge_distance` (its temporaries stay near 100 MB however
#: many rollout points and road-edge segments a scene has; a WOMD scene has thousands of segments).
EDGE_BLOCK_PAIRS = 1 << 22


def _edge_distance(p: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Distance from each point of ``p`` ``[N, 2]`` to the nearest segment of ``edges`` ``[E, 4]``
    (x0, y0, x1, y1), computed in blocks of points."""
    a, b = edges[:, :2], edges[:, 2:]
    ab = b - a
    ab2 = np.maximum((ab * ab).sum(-1), 1e-12)[None]
    out = np.empty(p.shape[0])
    step = max(1, EDGE_BLOCK_PAIRS // max(1, edges.shape[0]))
    for s in range(0, p.shape[0], step):
        pp = p[s:s + step]
        t = np.clip(((pp[:, None, :] - a[None]) * ab[None]).sum(-1) / ab2, 0, 1)
        q = a[None] + t[..., None] * ab[None]
        out[s:s + step] = np.sqrt(((pp[:, None, :] - q) ** 2).sum(-1)).min(1)
    return out


def _likelihood(sim: np.ndarray, logged: np.ndarray, valid: np.ndarray, bins: tuple[float, float, int] | None) -> float:
    """exp(mean log p(logged | histogram of the rollouts)) over valid entries; ``sim`` ``[R, ...]``."""
    R = sim.shape[0]
    if bins is None:     # Bernoulli indicator
        p1 = (sim.sum(0) + ALPHA) / (R + 2 * ALPHA)
        p = np.where(logged > 0.5, p1, 1 - p1)
    else:
        lo, hi, n = bins
        idx = lambda v: np.clip(((v - lo) / (hi - lo) * n).astype(int), 0, n - 1)  # noqa: E731
        hit = (idx(sim) == idx(logged)[None]).sum(0)
        p = (hit + ALPHA) / (R + ALPHA * n)
    return float(np.exp(np.log(p[valid]).mean())) if valid.any() else math.nan


def realism_scores(sim: dict[str, np.ndarray], logged: dict[str, np.ndarray]) -> dict[str, float]:
    """Per-feature likelihoods and the ``meta`` score of rollouts ``sim`` (features ``[R, ...]``)
    against the logged features (``[1, ...]``)."""
    out = {}
    for k in WEIGHTS:
        s, lg = sim[k], logged[k][0]
        valid = np.isfinite(lg)
        out[k] = _likelihood(s, np.nan_to_num(lg), valid, BINS.get(k))
    out["meta"] = sum(w * out[k] for k, w in WEIGHTS.items()) / sum(WEIGHTS.values())
    return out


def _idm_rollouts(m: MapData, road: Any, start: np.ndarray, size: np.ndarray, steps: int, rollouts: int,
                  seed: int) -> np.ndarray:
    """The engine's IDM vehicles from the logged start states, one world per rollout (seeded, with an
    IDM mode drawn per vehicle); vehicles off every lane stand still. ``[R, A, steps + 1, 3]``."""
    from ..config.io import load_config

    A = start.shape[0]
    cfg = load_config("quick").with_overrides(num_worlds=rollouts, slots_per_world=1, max_agents_per_world=max(A, 8),
                                              episode_length=steps + 1)
    e = core.Engine(cfg, maps=[m])
    on_lane = road.lanes.query(np.column_stack([start[:, 0], start[:, 1], np.zeros(A)]))["row"] >= 0
    rng = np.random.default_rng(seed)
    for r in range(rollouts):
        modes = rng.integers(0, 3, A)
        e.set_scene(r, [{"cls": 0, "x": float(s[0]), "y": float(s[1]), "heading": float(s[2]), "speed": float(s[3]),
                         "length": float(z[0]), "width": float(z[1]), "idm": bool(ok), "controlled": False,
                         "idm_mode": int(k)} for s, z, ok, k in zip(start, size, on_lane, modes)], seed=seed + r)
    out = np.zeros((rollouts, A, steps + 1, 3))
    ag = e.agents
    out[:, :, 0] = start[None, :, :3]
    for t in range(steps):
        e.step(np.zeros(rollouts, np.int32))
        out[:, :, t + 1] = np.stack([ag["x"][:, :A], ag["y"][:, :A], ag["heading"][:, :A]], -1)
    return out


POLICIES: dict[str, str] = {"log": "logged replay", "constant_velocity": "constant velocity",
                            "idm": "IDM on the lane graph"}


def realism_table(map_name: str = "usa_us101", rollouts: int = 32, history_steps: int = 11,
                  future_steps: int = 80, seed: int = 0,
                  policies: tuple[str, ...] = ("log", "constant_velocity", "idm"),
                  extra: dict[str, Callable[..., np.ndarray]] | None = None,
                  scene_policies: dict[str, Callable[[dict[str, Any]], np.ndarray]] | None = None) -> dict[str, Any]:
    """Realism of each policy on a logged scenario: ``{"policies": {name: scores}, ...}`` with the
    window actually used (``future_steps`` is clipped to what the log holds). Agents: the tracks valid
    over the whole window. ``map_name``: a bundled map, a ``.tzb`` or any map source with logged
    tracks (a WOMD TFRecord's first scenario, a GPUDrive JSON). ``extra``: more policies as
    ``fn(map, start, size, steps, rollouts, seed)``; ``scene_policies``: policies given one dict
    (``map``, ``start`` [A, 4] x, y, heading, speed, ``size`` [A, 2], ``types`` [A] AgentType,
    ``goals`` [A, 2] logged end positions, ``steps``, ``rollouts``, ``seed``), as a trained policy
    needs (:func:`terrazero_env.agents.realism_rollouts.policy_rollouts`); both return
    ``[rollouts, A, steps + 1, 3]`` (x, y, heading)."""
    check_int("realism rollouts", rollouts, 1, MAX_ROLLOUTS)
    check_int("realism history_steps", history_steps, 2, MAX_WINDOW_STEPS)
    check_int("realism future_steps", future_steps, 2, MAX_WINDOW_STEPS)
    road = core.road_map(map_name)
    m = road.map_data
    if m.tracks is None or len(m.tracks.valid) == 0:
        raise ValueError(f"map {map_name!r} has no logged tracks")
    tr = m.tracks
    n_steps = tr.valid.shape[1]
    if n_steps < history_steps + 2:
        raise ValueError(f"{map_name}: the log holds {n_steps} steps, fewer than history {history_steps} + 2")
    future = min(future_steps, n_steps - history_steps)
    window = tr.valid[:, history_steps - 1: history_steps + future].all(axis=1)
    st = tr.state[window][:, history_steps - 1: history_steps + future]        # [A, T + 1, 6]
    size = np.ascontiguousarray(tr.size[window][:, :2], np.float64)
    dt = float(tr.dt)
    logged = st[None, :, :, [0, 1, 3]]
    heading0 = st[:, 0, 3]
    v0 = st[:, 0, 4] * np.cos(heading0) + st[:, 0, 5] * np.sin(heading0)
    start = np.column_stack([st[:, 0, 0], st[:, 0, 1], heading0, v0])
    edges = np.concatenate([np.concatenate([r[:-1, :2], r[1:, :2]], 1) for r in m.road_edges.rows() if len(r) > 1])
    lf = rollout_features(logged, size, road, edges, dt)
    t = np.arange(future + 1) * dt
    makers: dict[str, Callable[[], np.ndarray]] = {
        "log": lambda: np.repeat(logged, rollouts, 0),
        "constant_velocity": lambda: np.repeat(np.stack(
            [st[:, :1, 0] + st[:, :1, 4] * t, st[:, :1, 1] + st[:, :1, 5] * t,
             np.repeat(heading0[:, None], future + 1, 1)], -1)[None], rollouts, 0),
        "idm": lambda: _idm_rollouts(m, road, start, size, future, rollouts, seed),
    }
    for name, fn in (extra or {}).items():
        makers[name] = lambda fn=fn: fn(m, start, size, future, rollouts, seed)
    scene = {"map": m, "start": start, "size": size, "types": tr.agent_type[window], "goals": st[:, -1, :2].copy(),
             "steps": future, "rollouts": rollouts, "seed": seed}
    for name, fn in (scene_policies or {}).items():
        makers[name] = lambda fn=fn: fn(scene)
    scores = {}
    for p in list(policies) + list(extra or {}) + list(scene_policies or {}):
        if p not in makers:
            raise ValueError(f"unknown realism policy {p!r}; known: {sorted(makers)}")
        scores[p] = realism_scores(rollout_features(makers[p](), size, road, edges, dt), lf)
    return {"map": map_name, "agents": int(window.sum()), "rollouts": rollouts, "history_s": history_steps * dt,
            "future_s": future * dt, "policies": scores}


def format_realism(result: dict[str, Any]) -> str:
    """The table of :func:`realism_table`: one row per feature (with its weight), one column per policy."""
    pols = list(result["policies"])
    head = f"{'feature':<28}{'weight':>7}" + "".join(f"{p[:18]:>20}" for p in pols)
    lines = [f"realism on {result['map']}: {result['agents']} logged agents, {result['rollouts']} rollouts, "
             f"history {result['history_s']:.1f} s, future {result['future_s']:.1f} s", head, "-" * len(head)]
    for k in list(WEIGHTS) + ["meta"]:
        w = f"{WEIGHTS[k]:.2f}" if k in WEIGHTS else ""
        lines.append(f"{k:<28}{w:>7}" + "".join(f"{result['policies'][p][k]:>20.4f}" for p in pols))
    return "\n".join(lines)


MAX_ROLLOUTS = 1024
"""Most rollouts of one realism table: each is a world of the engine (memory and time grow with it)."""
MAX_WINDOW_STEPS = 10_000
"""Most history or future steps (0.1 s each) asked for."""


def add_arguments(p: Any) -> None:
    """The realism table's options on an ``argparse`` parser (``terrazero realism`` and this module's entry)."""
    from ..config.train_options import SEED, int_in

    p.add_argument("--map", default="usa_us101", help="a bundled map or .tzb with logged tracks")
    p.add_argument("--rollouts", type=int_in(1, MAX_ROLLOUTS), default=32,
                   help=f"rollouts per scene, each a world of the engine (WOSAC: 32; at most {MAX_ROLLOUTS})")
    p.add_argument("--history-steps", type=int_in(2, MAX_WINDOW_STEPS), default=11,
                   help="logged steps before the start (WOSAC: 11)")
    p.add_argument("--future-steps", type=int_in(2, MAX_WINDOW_STEPS), default=80,
                   help="steps driven (WOSAC: 80; clipped to the log)")
    p.add_argument("--seed", type=SEED, default=0)
    p.add_argument("--json", default=None, metavar="OUT", help="also write the table as JSON")
    p.add_argument("--policy", action="append", default=[], metavar="RUN",
                   help="also score a trained policy (a run folder or checkpoint zip; repeatable); it drives the "
                        "logged agents of the classes its config controls (needs the train extra: torch)")
    p.add_argument("--preset", default=None, help="with --policy: the config to run it under (default: the run's)")
    p.add_argument("--deterministic", action="store_true", help="with --policy: take the most likely action")


def run(a: Any) -> int:
    """Print the table for parsed :func:`add_arguments` options (and write ``--json``). Bad input
    raises ``OSError``/``ValueError``/``TypeError``/``KeyError``/``OverflowError`` naming it."""
    from pathlib import Path

    from ..foundation.safe_files import atomic_write

    scene_policies = {}
    if a.policy:
        # Loading a checkpoint needs torch; the env layer reaches the training code only here.
        from ..agents.realism_rollouts import policy_rollouts

        for path in a.policy:
            name, fn = policy_rollouts(path, preset=a.preset, deterministic=a.deterministic)
            scene_policies[name] = fn
    result = realism_table(a.map, a.rollouts, a.history_steps, a.future_steps, a.seed, scene_policies=scene_policies)
    print(format_realism(result))
    if a.json:
        atomic_write(Path(a.json), json.dumps(result, indent=1), "realism table")
        print(f"wrote {a.json}")
    return 0


def main(argv: list[str] | None = None, prog: str = "python -m terrazero_env.evaluation.realism") -> int:
    """This module's entry, the same as ``terrazero realism`` (its ``--help`` says so): the table. A
    bad argument or input ends it with one line naming it and exit status 2."""
    import argparse
    import sys

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str):  # type: ignore[override]
            self.exit(2, f"{self.prog}: error: {message}\n")

    p = _Parser(prog=prog, description=__doc__.splitlines()[0] + " (the command is `terrazero realism`)")
    add_arguments(p)
    a = p.parse_args(argv)
    try:
        return run(a)
    except (OSError, ValueError, TypeError, KeyError, OverflowError) as e:
        text = " ".join(str(e).split()) or type(e).__name__
        print(f"{p.prog}: error: {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
