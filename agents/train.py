"""``terrazero train``: PPO (SMPO, V-trace, PopArt, prioritized sampling) with DPSA sampling on the
native vector env, in one process, printing progress and throughput.

    terrazero train --preset quick --total-steps 50000 --out runs/quick

Writes ``OUT/config.yaml`` (the full config), ``OUT/progress.jsonl`` (one line per rollout) and
``OUT/checkpoint.zip`` (``terrazero_env.agents.PPO.load``). Multi-process data parallelism
(torchrun), resuming and evaluation are not part of this command yet.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.callbacks import BaseCallback
from terrazero_env.wrappers import DPSA

import terrazero_env
from terrazero_env.config_io import dump_config, load_config

from .ppo import PPO

__all__ = ["train"]

#: A Deep Sets policy sized for a CPU run; ``--full-policy`` uses the paper-sized default (~3.4M).
CPU_POLICY = {"ego_hidden": 64, "entity_hidden": 64, "trunk": (256, 256)}


class _Progress(BaseCallback):
    """One line per rollout: agent steps, throughput (including updates), episode statistics from
    the engine's counters, and DPSA's validity rate and time efficiency."""

    def __init__(self, dpsa: DPSA, log_path: Path, total: int):
        super().__init__()
        self.dpsa, self.log_path, self.total = dpsa, log_path, total
        self.t0 = time.perf_counter()
        self.log_path.write_text("")

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        engine = self.dpsa.env.unwrapped.engine
        counters = engine.counters[engine.agent_type >= 0]
        names = terrazero_env._engine.COUNTER_NAMES
        rates = {n: float((counters[:, k] > 0).mean()) if counters.size else 0.0 for k, n in enumerate(names)}
        stats = self.dpsa.total.as_dict()
        returns = [ep["r"] for ep in self.model.ep_info_buffer]
        elapsed = time.perf_counter() - self.t0
        row = {"agent_steps": int(self.num_timesteps), "seconds": elapsed,
               "agent_steps_per_s": self.num_timesteps / max(elapsed, 1e-9),
               "mean_return": float(np.mean(returns)) if returns else None,
               "goal_rate": rates["goal_reached"], "collision_rate": rates["collision"],
               "offroad_rate": rates["offroad"], "mu": stats["mu"], "eta": stats["eta"]}
        with open(self.log_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        ret = "n/a" if row["mean_return"] is None else f"{row['mean_return']:.2f}"
        print(f"[{100 * self.num_timesteps / self.total:5.1f}%] {self.num_timesteps:>9,} agent steps | "
              f"{row['agent_steps_per_s']:>7,.0f} steps/s | return {ret} | goal {row['goal_rate']:.2f} "
              f"collision {row['collision_rate']:.2f} off-road {row['offroad_rate']:.2f} | "
              f"mu {row['mu']:.2f} eta {row['eta']:.2f}", flush=True)


def train(preset: str = "quick", total_steps: int = 50_000, out: str | Path = "runs/quick", seed: int = 0,
          threshold: float = 0.5, num_worlds: int | None = None, n_steps: int = 64, full_policy: bool = False,
          device: str = "cpu", torch_threads: int | None = None, overrides: dict[str, Any] | None = None) -> Path:
    """Train from scratch and return the checkpoint path. ``overrides``: dotted config names."""
    if total_steps < 1:
        raise ValueError(f"total_steps must be positive, got {total_steps}")
    cfg = load_config(preset, **(overrides or {}))
    if num_worlds is not None:
        cfg = cfg.with_overrides(num_worlds=num_worlds)
    for src in cfg.maps:  # a missing map stops before any work
        terrazero_env.maps.load_source(src)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    dump_config(cfg, out / "config.yaml")
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    venv = DPSA(terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled"), threshold=threshold,
                horizon=cfg.episode_length)
    model = PPO("DeepSetsPolicy", venv, n_steps=n_steps, seed=seed, device=device,
                policy_kwargs={} if full_policy else dict(CPU_POLICY))
    n_params = sum(p.numel() for p in model.policy.parameters())
    print(f"training {cfg.num_worlds} worlds x {cfg.slots_per_world} slots on {', '.join(cfg.maps)}; "
          f"policy {n_params:,} parameters; {total_steps:,} agent steps", flush=True)
    model.learn(total_steps, callback=_Progress(venv, out / "progress.jsonl", total_steps))
    path = out / "checkpoint.zip"
    model.save(path)
    venv.close()
    print(f"saved {path}", flush=True)
    return path
