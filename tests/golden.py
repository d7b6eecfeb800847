"""Golden rollouts: a fixed-seed rollout of every bundled map under every preset (plus IDM traffic,
log and hybrid scenes, and the native vector env), reduced to one SHA-256 per case.

A behaviour-preserving change (a refactor, a move, a rename) must leave every hash unchanged; a change
that alters behaviour on purpose re-records them in its own commit, saying why::

    python tests/golden.py --record      # rewrite tests/golden_rollouts.json
    python tests/golden.py               # print the cases that differ

``tests/test_golden.py`` checks them.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from terrazero_env import engine as core
from terrazero_env import load_config, make_vec
from terrazero_env.maps import bundled_maps

GOLDEN = Path(__file__).with_name("golden_rollouts.json")
STEPS = 60
PRESETS = ("quick", "planner", "sim_agent")
#: Extra cases beyond the presets: reactive traffic, log and hybrid scenes.
VARIANTS = {
    "planner+idm": ("planner", {"init.idm_fraction": 0.6}),
    "planner+log": ("planner", {"init.mode": "log"}),
    "planner+hybrid": ("planner", {"init.mode": "hybrid", "init.idm_fraction": 0.5}),
    # The bicycle models without a steering-rate limit (ClassSpec.max_steer_rate: null) and without
    # planner traffic, as every run before the limit was made: these hashes are the planner preset's
    # from before it.
    "planner+steer_direct": ("planner", {**{f"classes.{c}.max_steer_rate": None for c in ("car", "truck", "bus", "cyclist")},
                                         "road_users.planner_fraction": 0.0}),
}


def _random_actions(engine, rng: np.random.Generator) -> np.ndarray:
    nact = np.zeros(engine.agent_type.shape, np.int64)
    for cls in np.unique(engine.agent_type):
        if cls >= 0:
            nact[engine.agent_type == cls] = engine.num_actions(int(cls))
    return (rng.integers(0, 1 << 30, nact.shape) % np.maximum(nact, 1)).astype(np.int32)


def engine_rollout_hash(preset: str, map_name: str, overrides: dict | None = None, steps: int = STEPS) -> str:
    cfg = load_config(preset, **{"num_worlds": 3, "maps": [map_name], **(overrides or {})})
    engine = core.Engine(cfg)
    engine.reset(seeds=np.array([7, 8, 9]))
    rng = np.random.default_rng(123)
    h = hashlib.sha256()
    for _ in range(steps):
        engine.step(_random_actions(engine, rng))
        for buf in (engine.observations, engine.rewards, engine.terminated, engine.truncated, engine.valid,
                    engine.agent_type, engine.counters):
            h.update(np.ascontiguousarray(buf).tobytes())
        # The agents field by field in name order, so the hash does not depend on the C struct's layout.
        for name in sorted(engine.agents.dtype.names):
            h.update(np.ascontiguousarray(engine.agents[name]).tobytes())
        done = np.flatnonzero((engine.terminated | engine.truncated).reshape(engine.num_worlds, -1).any(axis=1))
        if done.size:
            engine.reset(world_ids=done, seeds=done + 100)
    return h.hexdigest()


def vector_rollout_hash(preset: str = "quick", steps: int = STEPS) -> str:
    venv = make_vec(num_worlds=2, preset=preset)
    obs, _ = venv.reset(seed=3)
    venv.action_space.seed(4)
    h = hashlib.sha256(np.ascontiguousarray(obs).tobytes())
    for _ in range(steps):
        obs, rew, term, trunc, info = venv.step(venv.action_space.sample())
        for buf in (obs, rew, term, trunc, info["valid"]):
            h.update(np.ascontiguousarray(buf).tobytes())
    venv.close()
    return h.hexdigest()


def cases() -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for name in bundled_maps():
        for preset in PRESETS:
            out[f"{preset}/{name}"] = ("engine", preset, name, None)
        for label, (preset, over) in VARIANTS.items():
            out[f"{label}/{name}"] = ("engine", preset, name, over)
    out["vector/quick"] = ("vector", "quick")
    return out


def compute(case: tuple) -> str:
    if case[0] == "engine":
        return engine_rollout_hash(*case[1:])
    return vector_rollout_hash(*case[1:])


def compute_all() -> dict[str, str]:
    return {key: compute(case) for key, case in cases().items()}


if __name__ == "__main__":
    got = compute_all()
    if "--record" in sys.argv:
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        print(f"recorded {len(got)} golden rollouts in {GOLDEN.name}")
    else:
        want = json.loads(GOLDEN.read_text())
        bad = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
        print("all golden rollouts match" if not bad else "differ: " + ", ".join(bad))
        sys.exit(1 if bad else 0)
