"""WOMD scenes: conversion time per scene, load time per reset, engine throughput on imported scenes.

    python benchmarks/bench_womd.py INPUT... [--worlds 16] [--slots 32] [--steps 80] [--json PATH]

INPUT: GPUDrive JSON files, WOMD TFRecords or folders of them. Per scene: the time to read and
convert it (``MapData`` with tracks), to build it (the builder's validation and derivations), the
``.tzb`` size, the time a dataset reset pays on a cache miss (read the ``.tzb`` and index it
for the engine, ``RoadMap``), the reset time per world with log initialization, and the engine's
throughput with log initialization: every logged agent valid at the first step is in the scene,
up to ``--slots`` of the controlled classes' agents per world are policy slots (random actions,
violations without consequence) and the others replay their logged track; agent-steps count every
live agent (controlled and replayed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from terrazero_env import engine as core
from terrazero_env.config import Consequence, EngineConfig, InitConfig, InitMode
from terrazero_env.maps import build
from terrazero_env.maps.build_dataset import find_inputs
from terrazero_env.maps.convert import gpudrive_json, is_tfrecord, womd
from terrazero_env.maps.terrabin import load, save


def scenes(paths: list[Path]):
    for p in paths:
        if is_tfrecord(p):
            t0 = time.perf_counter()
            for _, sid, m in womd.iter_maps(p):
                t1 = time.perf_counter()
                if not isinstance(m, Exception):
                    yield sid, "tfrecord", m, t1 - t0
                t0 = time.perf_counter()
        elif p.suffix == ".json":
            t0 = time.perf_counter()
            m = gpudrive_json.convert(p)
            yield m.metadata["scenario_id"], "json", m, time.perf_counter() - t0


def bench_scene(m, W: int, K: int, steps: int, tmp: Path) -> dict:
    t0 = time.perf_counter()
    b = build(m)
    build_s = time.perf_counter() - t0
    path = save(b, tmp / "s.tzb")
    t0 = time.perf_counter()
    for _ in range(3):
        rm = core.RoadMap(load(path))
    index_s = (time.perf_counter() - t0) / 3
    n_tracks = len(b.tracks)
    valid0 = int(b.tracks.valid[:, 0].sum())
    A = max(n_tracks, K)
    cfg = EngineConfig(num_worlds=W, slots_per_world=K, max_agents_per_world=A, episode_length=steps + 1,
                       consequences={k: Consequence.NONE for k in ("collision", "offroad", "wrong_way")},
                       init=InitConfig(mode=InitMode.LOG, num_agents=(1, A)))
    e = core.Engine(cfg, maps=[rm])
    t0 = time.perf_counter()
    e.reset(seeds=np.arange(W))
    reset_ms = 1e3 * (time.perf_counter() - t0) / W
    rng = np.random.default_rng(0)
    actions = rng.integers(0, e.num_actions(0), (steps, W * K)).astype(np.int32)
    actions *= (e.agent_type >= 0)[None, :]
    live = 0
    ag = e.agents
    t0 = time.perf_counter()
    for t in range(steps):
        e.step(actions[t])
        live += int(ag["alive"].sum())
    wall = time.perf_counter() - t0
    return {"lanes": len(b.lanes), "tracks": n_tracks, "valid_at_start": valid0, "controlled": int(e.valid.sum()) // W,
            "build_ms": 1e3 * build_s, "tzb_kib": path.stat().st_size / 1024, "load_index_ms": 1e3 * index_s,
            "reset_ms_per_world": reset_ms, "agent_steps_per_s": live / wall, "agents_per_world": live / (W * steps)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+")
    ap.add_argument("--worlds", type=int, default=16)
    ap.add_argument("--slots", type=int, default=32)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--json", default="benchmarks/results/bench_womd.json")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for sid, fmt, m, conv_s in scenes(find_inputs(a.inputs)):
            r = {"scenario": sid, "format": fmt, "convert_ms": 1e3 * conv_s,
                 **bench_scene(m, a.worlds, a.slots, a.steps, Path(d))}
            rows.append(r)
    cols = ["scenario", "format", "lanes", "tracks", "valid_at_start", "controlled", "convert_ms", "build_ms", "tzb_kib",
            "load_index_ms", "reset_ms_per_world", "agents_per_world", "agent_steps_per_s"]
    print("| " + " | ".join(cols) + " |")
    for r in rows:
        print("| " + " | ".join(f"{r[c]:,.1f}" if isinstance(r[c], float) else str(r[c]) for c in cols) + " |")
    out = Path(a.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": platform.platform(), "cpu_count": os.cpu_count(), "rows": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
