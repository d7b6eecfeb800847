"""The env and the model of a training run: the native vector env of the engine config under the
run's sampling wrapper (FAST's DPSA, its synchronous-global-reset baseline, or per-world autoreset),
and the run's PPO on it."""

from __future__ import annotations

from typing import Any

import torch
from stable_baselines3.common.utils import LinearSchedule

import terrazero_env

from ..wrappers import DPSA, SGR, SamplingStats
from .ppo import PPO
from .settings import TrainSettings

__all__ = ["build_model"]


def _sampled_env(cfg: Any, settings: TrainSettings) -> Any:
    """The native vector env of ``cfg`` under the run's sampling wrapper."""
    ds = None if settings.dataset is None else terrazero_env.maps.Dataset(settings.dataset)
    if settings.sampler == "autoreset":
        return SamplingStats(terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="NextStep", dataset=ds))
    base = terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled", dataset=ds)
    if settings.sampler == "sgr":
        return SGR(base, horizon=cfg.episode_length, copy=False)  # the rollout copies each step into storage
    return DPSA(base, threshold=settings.threshold, horizon=cfg.episode_length, copy=False)


def build_model(cfg: Any, settings: TrainSettings, seed: int, device: torch.device | str = "cpu",
                tensorboard_log: str | None = None) -> PPO:
    """The run's PPO on a fresh env (the same construction for a new run and for a resume)."""
    kwargs = dict(settings.ppo)
    if "learning_rate" in kwargs and settings.lr_anneal:
        kwargs["learning_rate"] = LinearSchedule(float(kwargs["learning_rate"]), 0.0, 1.0)
    env = _sampled_env(cfg, settings)
    return PPO("DeepSetsPolicy", env, seed=seed, device=device, policy_kwargs=dict(settings.policy),
               tensorboard_log=tensorboard_log, **kwargs)
