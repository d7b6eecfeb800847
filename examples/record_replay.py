"""Record your own rollout as a browser replay: a Gymnasium episode, then a PettingZoo one, each saved
as a ``.tzr`` file with a self-contained ``.html`` page beside it (open it from disk, no network).

    python examples/record_replay.py [--steps 200] [--out replays]
    terrazero view replays          # or open replays/gym.html in a browser
"""

import argparse
from pathlib import Path

import gymnasium as gym

import terrazero_env
from terrazero_env.replay import ReplayRecorder
from terrazero_env.viewer import write_viewer

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--out", default="replays")
args = parser.parse_args()
out = Path(args.out)

# A single-agent Gymnasium env: record after the reset and after every step.
env = gym.make("TerraZero/Drive-v0")
rec = ReplayRecorder(env, meta={"title": "Drive-v0, random actions"})
env.reset(seed=3)
rec.capture()
for _ in range(args.steps):
    _, _, terminated, truncated, _ = env.step(env.action_space.sample())
    rec.capture()
    if terminated or truncated:
        break
path = rec.save(out / "gym.tzr")
print(f"wrote {path} ({rec.replay().num_frames} frames, {path.stat().st_size / 1024:.0f} KiB) "
      f"and {write_viewer(path, out / 'gym.html')}")
env.close()

# A PettingZoo ParallelEnv with the planner preset: every slot's reward by term is in the replay.
penv = terrazero_env.parallel_env(preset="planner")
rec = ReplayRecorder(penv, meta={"title": "planner preset, random actions"})
penv.reset(seed=5)
rec.capture()
for _ in range(args.steps):
    if not penv.agents:
        break
    penv.step({a: penv.action_space(a).sample() for a in penv.agents})
    rec.capture()
path = rec.save(out / "pettingzoo.tzr")
print(f"wrote {path} ({rec.replay().num_frames} frames) and {write_viewer(path, out / 'pettingzoo.html')}")
penv.close()
