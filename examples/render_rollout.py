"""Record a short rollout of the native vector env's first world to an animated GIF.

    python examples/render_rollout.py [--steps 40] [--out rollout.gif]
"""

import argparse

import numpy as np

import terrazero_env
from terrazero_env.render import RolloutRecorder

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--out", default="rollout.gif")
args = parser.parse_args()

venv = terrazero_env.make_vec(1, preset="quick", **{"init.initial_speed": [4.0, 6.0]})
venv.reset(seed=7)
hold = int(np.nonzero((venv.engine.action_values(0) == 0).all(axis=1))[0][0])  # keep speed and curvature
recorder = RolloutRecorder(venv.engine, world=0, zoom=40.0, dpi=60)
recorder.capture()
for _ in range(args.steps):
    venv.step(np.full(venv.num_envs, hold))
    recorder.capture()
print(f"wrote {recorder.save(args.out)}")
