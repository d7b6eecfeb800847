"""A Gymnasium loop: one ego car among background traffic, random actions.

    python examples/random_rollout.py [--episodes 3]
"""

import argparse
import time

import gymnasium as gym

import terrazero_env  # noqa: F401  (registers TerraZero/Drive-v0)

parser = argparse.ArgumentParser()
parser.add_argument("--episodes", type=int, default=3)
parser.add_argument("--preset", default="quick")
args = parser.parse_args()

env = gym.make("TerraZero/Drive-v0", preset=args.preset)
steps, t0 = 0, time.perf_counter()
for episode in range(args.episodes):
    obs, info = env.reset(seed=episode)
    ret, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        ret += reward
        steps += 1
        done = terminated or truncated
    why = "terminated" if terminated else "truncated"
    print(f"episode {episode}: return {ret:.3f} after {info['count_collision']} collisions, "
          f"{info['count_offroad']} off-road events ({why})")
print(f"{steps} steps in {time.perf_counter() - t0:.2f} s")
env.close()
