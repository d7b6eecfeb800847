"""Learning check (TerraZero issue: the training algorithm, item 10): train from scratch on the
``quick`` preset for a fixed wall-clock budget with ``terrazero_env.agents.PPO`` (DeepSets policy,
DPSA sampling, SMPO, V-trace, PopArt, prioritized segments) and with stock Stable-Baselines3 PPO
(MLP policy, the native env through the SB3 adapter), and record both learning curves.

    python benchmarks/bench_learning.py [--seconds 240] [--worlds 8] [--eval-every 20]

Every ``--eval-every`` seconds of training, the policy (sampling its actions) drives one episode of
every slot of a separate evaluation env (``--eval-worlds`` worlds of the preset, fixed seed): the
goal-reach rate is the share of episodes whose agent reached its goal at least once (the engine's
``goal_reached`` counter at the episode end), next to the mean episode return. A uniformly random
policy is evaluated the same way as the baseline. Training throughput counts agent steps (padding
included, as the env produced them) per second of training wall-clock, collection and updates
together; evaluation time is excluded. CPU threads: torch uses one (``--threads``).

Writes ``benchmarks/results/learning.json`` and ``docs/learning_curve.png``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecMonitor
from terrazero_env.agents import PPO
from terrazero_env.agents.policies import count_parameters
from terrazero_env.wrappers import DPSA, SB3VecEnv

import terrazero_env

ROOT = Path(__file__).resolve().parent.parent
GOAL = 3  # column of Engine.counters (COUNTER_NAMES)


def evaluate(act: Any, worlds: int, seed: int) -> dict[str, float]:
    """One episode per slot of a fresh ``quick`` env; ``act(obs) -> actions``."""
    venv = terrazero_env.make_vec(worlds, "quick")
    obs, info = venv.reset(seed=seed)
    n = venv.num_envs
    finished = ~np.asarray(info["valid"], bool)
    returns, goals, ended = np.zeros(n), np.zeros(n, bool), np.zeros(n, bool)
    for _ in range(4 * venv.config.episode_length):
        obs, rew, term, trunc, info = venv.step(np.asarray(act(np.array(obs)), np.int64).reshape(n))
        live = ~finished & np.asarray(info["valid"], bool)
        returns[live] += rew[live]
        done = live & (term | trunc)
        goals[done] = venv.engine.counters[done, GOAL] > 0
        ended |= done
        finished |= done
        if finished.all():
            break
    venv.close()
    return {"goal_rate": float(goals[ended].mean()), "mean_return": float(returns[ended].mean()),
            "episodes": int(ended.sum())}


class Curve(BaseCallback):
    """Stops training after ``seconds`` of training wall-clock and evaluates every ``every`` seconds."""

    def __init__(self, seconds: float, every: float, eval_worlds: int, seed: int) -> None:
        super().__init__()
        self.seconds, self.every, self.eval_worlds, self.seed = seconds, every, eval_worlds, seed
        self.points: list[dict[str, float]] = []
        self.train_time = 0.0
        self.valid_steps = 0

    def _point(self) -> None:
        policy = self.model
        result = evaluate(lambda o: policy.predict(o, deterministic=False)[0], self.eval_worlds, self.seed)
        buf = list(self.model.ep_info_buffer)
        result.update(train_seconds=self.train_time, agent_steps=int(self.model.num_timesteps),
                      valid_agent_steps=self.valid_steps,
                      train_ep_return=float(np.mean([e["r"] for e in buf])) if buf else float("nan"))
        self.points.append(result)
        print(f"  {self.train_time:7.1f} s {self.model.num_timesteps:9d} steps  goal rate "
              f"{result['goal_rate']:.3f}  eval return {result['mean_return']:7.2f}", flush=True)

    def _on_training_start(self) -> None:
        self._point()
        self._next = self.every
        self._t0 = time.perf_counter()

    def _on_rollout_start(self) -> None:
        # Called after each update: the clock ran through the last rollout and its update.
        now = time.perf_counter()
        self.train_time += now - self._t0
        if self.train_time >= self._next:
            self._point()
            self._next = self.train_time + self.every
        self._t0 = time.perf_counter()

    def _on_step(self) -> bool:
        for info in self.locals.get("infos", []):
            self.valid_steps += int(bool(info.get("valid", True)))
        return self.train_time + (time.perf_counter() - self._t0) < self.seconds

    def finish(self) -> None:
        self.train_time += time.perf_counter() - self._t0
        self._point()


def run(name: str, model: Any, args: argparse.Namespace) -> dict[str, Any]:
    curve = Curve(args.seconds, args.eval_every, args.eval_worlds, args.seed + 1000)
    print(f"{name}: {count_parameters(model.policy):,} parameters", flush=True)
    model.learn(args.max_steps, callback=curve)
    curve.finish()
    return {"name": name, "parameters": count_parameters(model.policy), "points": curve.points,
            "train_seconds": curve.train_time, "agent_steps": int(model.num_timesteps),
            "valid_agent_steps": curve.valid_steps,
            "throughput_agent_steps_per_s": model.num_timesteps / curve.train_time,
            "throughput_valid_agent_steps_per_s": curve.valid_steps / curve.train_time}


def plot(results: list[dict[str, Any]], random: dict[str, float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for res in results:
        pts = res["points"]
        for row, key in enumerate(("goal_rate", "mean_return")):
            for col, x in enumerate(("train_seconds", "agent_steps")):
                axes[row, col].plot([p[x] for p in pts], [p[key] for p in pts], marker="o", label=res["name"])
    for row, key in enumerate(("goal_rate", "mean_return")):
        for col, x in enumerate(("training wall-clock (s)", "agent steps")):
            ax = axes[row, col]
            ax.axhline(random[key], color="gray", ls="--", label="random policy")
            ax.set_xlabel(x)
            ax.set_ylabel("goal-reach rate" if key == "goal_rate" else "mean episode return")
            ax.grid(alpha=0.3)
    axes[0, 0].legend()
    fig.suptitle("Learning on the quick preset (evaluation episodes, stochastic policy)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=240.0, help="training wall-clock per algorithm")
    parser.add_argument("--worlds", type=int, default=8)
    parser.add_argument("--n-steps", type=int, default=64)
    parser.add_argument("--eval-every", type=float, default=20.0)
    parser.add_argument("--eval-worlds", type=int, default=8)
    parser.add_argument("--max-steps", type=int, default=2_000_000, help="horizon of the learning-rate schedule")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--algos", default="ours,stock", help="comma-separated subset of ours,stock")
    parser.add_argument("--full-policy", action="store_true",
                        help="the default DeepSetsPolicy (about 3.4M parameters) instead of the CPU-sized one")
    parser.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "learning.json"))
    parser.add_argument("--png", default=str(ROOT / "docs" / "learning_curve.png"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    rng = np.random.default_rng(args.seed)
    random = evaluate(lambda o: rng.integers(0, 12, len(o)), args.eval_worlds, args.seed + 1000)
    print(f"random policy: goal rate {random['goal_rate']:.3f}, return {random['mean_return']:.2f}", flush=True)

    algos = args.algos.split(",")
    results = []
    n_envs = args.worlds * terrazero_env.load_config("quick").slots_per_world
    if "ours" in algos:
        ours_env = DPSA(terrazero_env.make_vec(args.worlds, "quick", autoreset_mode="Disabled"), threshold=0.5,
                        horizon=128)
        size = {} if args.full_policy else {"ego_hidden": 64, "entity_hidden": 64, "trunk": (256, 256)}
        ours = PPO("DeepSetsPolicy", ours_env, n_steps=args.n_steps, seed=args.seed, device=args.device,
                   policy_kwargs=size)
        results.append(run("terrazero_env.agents.PPO (DeepSets, DPSA)", ours, args))
        ours_env.close()
    if "stock" in algos:
        stock_env = VecMonitor(SB3VecEnv(terrazero_env.make_vec(args.worlds, "quick")))
        stock = SB3PPO("MlpPolicy", stock_env, n_steps=args.n_steps, batch_size=args.n_steps * n_envs // 16,
                       n_epochs=2, learning_rate=5e-4, gamma=0.99, gae_lambda=0.95, ent_coef=0.01,
                       policy_kwargs={"net_arch": [256, 256]}, seed=args.seed, device=args.device)
        results.append(run("stable_baselines3.PPO (MLP)", stock, args))
        stock_env.close()

    out = {"preset": "quick", "worlds": args.worlds, "agents": n_envs, "seconds_per_algorithm": args.seconds,
           "threads": args.threads, "device": args.device, "full_policy": args.full_policy, "machine": platform.processor() or platform.machine(),
           "random_policy": random, "runs": results}
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1))
    plot(results, random, Path(args.png))
    for res in results:
        last = res["points"][-1]
        print(f"{res['name']}: {res['agent_steps']:,} agent steps in {res['train_seconds']:.0f} s "
              f"({res['throughput_agent_steps_per_s']:,.0f} agent-steps/s incl. updates); final goal rate "
              f"{last['goal_rate']:.3f}, return {last['mean_return']:.2f}")
    print(f"wrote {args.json} and {args.png}")


if __name__ == "__main__":
    main()
