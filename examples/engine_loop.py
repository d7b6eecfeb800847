"""The raw engine: W worlds x K slots stepped in one call, buffers read in place.

    python examples/engine_loop.py [--steps 500]
"""

import argparse
import time

import numpy as np

from terrazero_env import load_config
from terrazero_env.engine import COUNTER_NAMES, Engine

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=500)
args = parser.parse_args()

cfg = load_config("planner", num_worlds=8)
engine = Engine(cfg)
engine.reset(seeds=np.arange(cfg.num_worlds))
layout = engine.obs_layout
print(layout)
rng = np.random.default_rng(0)
n_actions = engine.num_actions(0)
live = 0
t0 = time.perf_counter()
for _ in range(args.steps):
    engine.step(rng.integers(0, n_actions, engine.actions.shape[0]).astype(np.int32))
    live += int(engine.valid.sum())
    done = engine.world_steps >= cfg.episode_length
    if done.any():
        engine.reset(np.nonzero(done)[0], rng.integers(0, 2**31, int(done.sum())))
dt = time.perf_counter() - t0
road = layout.split(engine.observations)["road"]
print(f"{live / dt:,.0f} live agent-steps/s; counters {dict(zip(COUNTER_NAMES, engine.counters.sum(0)))}")
print(f"road segments seen by slot 0: {int((np.abs(road[0]).sum(axis=1) > 0).sum())}")
