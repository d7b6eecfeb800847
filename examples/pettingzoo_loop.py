"""A PettingZoo parallel loop: every controlled car of one world is an agent.

    python examples/pettingzoo_loop.py [--steps 200]
"""

import argparse

import terrazero_env

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=200)
args = parser.parse_args()

env = terrazero_env.parallel_env(preset="quick", **{"init.num_agents": [6, 8]})
observations, infos = env.reset(seed=42)
print(f"{len(env.agents)} agents: {env.agents}")
returns = {a: 0.0 for a in env.agents}
for t in range(args.steps):
    if not env.agents:
        print(f"every agent finished after {t} steps")
        break
    actions = {a: env.action_space(a).sample() for a in env.agents}
    observations, rewards, terminations, truncations, infos = env.step(actions)
    for a, r in rewards.items():
        returns[a] += r
    for a in rewards:
        if terminations[a] or truncations[a]:
            print(f"step {t}: {a} {'terminated' if terminations[a] else 'truncated'} with return {returns[a]:.3f}")
env.close()
