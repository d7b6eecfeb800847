"""The environment layer: Gymnasium single-agent and vector envs, PettingZoo parallel and AEC envs.

Importing ``terrazero_env`` registers ``TerraZero/Drive-v0`` with Gymnasium (``gym.make`` and
``gym.make_vec``) and with PettingZoo (``pettingzoo.make("parallel", "TerraZero/Drive-v0")``).
In a fresh process, ``gym.make("terrazero_env:TerraZero/Drive-v0")`` imports the package first.
"""

from __future__ import annotations

from typing import Any

from gymnasium.vector import AutoresetMode

from ..config import EngineConfig
from ..config.io import load_config
from ..foundation.checks import check_int
from ..maps import Dataset
from .conventions import EnvClosedError, check_overrides
from .multi import ParallelDriveEnv, aec_env, parallel_env
from .single import DriveEnv
from .vector import TerraZeroVectorEnv

__all__ = ["DriveEnv", "EnvClosedError", "ParallelDriveEnv", "TerraZeroVectorEnv", "aec_env", "make_vec",
           "parallel_env", "register"]

ENV_ID = "TerraZero/Drive-v0"


def make_vec(num_worlds: int | None = None, preset: str | EngineConfig | None = "quick", *,
             autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP, num_threads: int = 1,
             render_mode: str | None = None, num_workers: int = 1, worker_context: str | None = None,
             dataset: Any = None, **overrides: Any) -> TerraZeroVectorEnv:
    """The native vector env: ``num_worlds`` worlds (default: the preset's) of the preset's
    ``slots_per_world`` controlled slots each; ``overrides`` are dotted config names
    (``obs__dtype="float16"`` or ``**{"obs.dtype": "float16"}``).

    ``num_workers > 1`` splits the worlds over that many processes sharing their buffers with this
    one (``workers.MultiProcessEngine``; rollouts are identical to ``num_workers=1``), each stepping
    its worlds with ``num_threads`` threads; ``worker_context``: their start method (default
    forkserver on Linux, else spawn). Scripts that build such an env need the
    ``if __name__ == "__main__":`` guard, and ``close()`` stops the workers.

    ``dataset``: a ``terrazero_env.maps.Dataset`` (or a manifest path or bundled dataset name) from
    which every world reset draws its scenario, balanced over its groups, from the world's seed; with
    workers, each worker builds the road maps of its worlds' scenarios, and the rollout (scenarios
    included) is the one of ``num_workers=1``."""
    check_overrides("make_vec", overrides)
    if num_worlds is not None:
        check_int("make_vec num_worlds", num_worlds, 1)  # 2.7 is not a number of worlds
    check_int("make_vec num_workers", num_workers, 1)
    cfg = load_config(preset, **overrides)
    if num_worlds is not None:
        cfg = cfg.with_overrides(num_worlds=int(num_worlds))
    engine = None
    if dataset is not None and not isinstance(dataset, Dataset):
        dataset = Dataset(dataset)
    if num_workers > 1:
        from .workers import MultiProcessEngine

        # With a dataset, every world starts on its first scenario (as in process) until a reset draws one.
        engine = MultiProcessEngine(cfg, num_workers, num_threads=num_threads, context=worker_context,
                                    maps=None if dataset is None else [dataset[0]], dataset=dataset)
    return TerraZeroVectorEnv(cfg, autoreset_mode=autoreset_mode, num_threads=num_threads, render_mode=render_mode,
                              engine=engine, dataset=dataset)


def _vector_entry(num_envs: int = 1, preset: str | EngineConfig | None = "quick", **kwargs: Any) -> TerraZeroVectorEnv:
    """``gym.make_vec(ENV_ID, num_envs=N)``: N worlds with one ego each, like N copies of the
    single-agent env, batched natively."""
    vector_kwargs = kwargs.pop("vector_kwargs", None) or {}
    check_overrides("make_vec", kwargs)
    check_int("make_vec num_envs", num_envs, 1)
    cfg = load_config(preset, **kwargs).with_overrides(num_worlds=int(num_envs), slots_per_world=1)
    return TerraZeroVectorEnv(cfg, **vector_kwargs)


def register() -> None:
    """Register ``TerraZero/Drive-v0`` with Gymnasium and PettingZoo (idempotent)."""
    import gymnasium as gym
    import pettingzoo

    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="terrazero_env.envs.single:DriveEnv",
                     vector_entry_point="terrazero_env.envs:_vector_entry")
    for kind, registry, entry in (("parallel", pettingzoo.parallel_registry, "terrazero_env.envs.multi:parallel_env"),
                                  ("aec", pettingzoo.aec_registry, "terrazero_env.envs.multi:aec_env")):
        if ENV_ID not in registry:
            pettingzoo.register(kind, ENV_ID, entry)
