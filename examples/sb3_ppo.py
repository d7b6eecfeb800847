"""Stock Stable-Baselines3 PPO on the native vector env, through the SB3 adapter.

    python examples/sb3_ppo.py [--timesteps 20000] [--save ppo_terrazero.zip]

Every controlled agent slot is one SB3 environment. Slots that wait for their world to restart
yield padding steps marked ``infos[i]["valid"] = False``; stock SB3 trains on them as zero-reward
steps (the masked PPO in ``terrazero_env.agents`` skips them).
"""

import argparse
import time

from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecMonitor
from terrazero_env.wrappers import SB3VecEnv

import terrazero_env

parser = argparse.ArgumentParser()
parser.add_argument("--timesteps", type=int, default=20_000)
parser.add_argument("--save", default="ppo_terrazero.zip")
args = parser.parse_args()

venv = VecMonitor(SB3VecEnv(terrazero_env.make_vec(4, preset="quick")))
model = PPO("MlpPolicy", venv, n_steps=64, batch_size=256, n_epochs=2, learning_rate=5e-4, gamma=0.99,
            gae_lambda=0.95, ent_coef=0.01, policy_kwargs={"net_arch": [128, 128]}, seed=0, verbose=0)
t0 = time.perf_counter()
model.learn(args.timesteps)
elapsed = time.perf_counter() - t0
rewards = [ep["r"] for ep in model.ep_info_buffer]
mean = sum(rewards) / len(rewards) if rewards else float("nan")
print(f"{args.timesteps} steps in {elapsed:.1f} s ({args.timesteps / elapsed:,.0f} steps/s); "
      f"{len(rewards)} episodes, mean return {mean:.3f}")
model.save(args.save)
print(f"saved {args.save}")
