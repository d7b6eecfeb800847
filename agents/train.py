"""The main job: PPO (SMPO, V-trace, PopArt, prioritized sampling) on the native vector env with DPSA
sampling, on one device or data-parallel under ``torchrun`` (TerraZero section 5.2).

    terrazero train --preset quick --out runs/quick
    torchrun --nproc-per-node 4 -m terrazero_env.agents.launch --preset planner --out runs/planner

A run folder ``OUT`` holds ``config.yaml`` (the engine config), ``train.yaml`` (the trainer settings),
``progress.jsonl`` (one line per iteration), ``tensorboard/``, ``checkpoints/iter_NNNNNN/`` (see
:mod:`terrazero_env.agents.checkpoint`) and, at the end, ``checkpoint.zip`` (``PPO.load``,
``terrazero eval``). ``resume=True`` continues the newest checkpoint of ``OUT`` exactly; SIGINT or
SIGTERM saves a checkpoint at the next update boundary and ends the run cleanly (a second SIGINT
stops at once).

Settings come from the preset's ``train:`` section, then keyword arguments (the command's options),
then ``train.*`` overrides (``--set``), merged once by
:func:`~terrazero_env.agents.settings.resolve_run`; see :class:`TrainSettings` and :data:`PPO_KEYS`. ``dataset`` (``--dataset MANIFEST``, or
``dataset:`` in a config's ``train:`` section) trains on a :class:`~terrazero_env.maps.Dataset`:
every world reset draws its scenario, balanced over the dataset's (region, type) groups.

This module runs the job; its parts live by concern: :mod:`~terrazero_env.agents.settings` (the
settings and their resolution), :mod:`~terrazero_env.agents.train_env` (the sampled env and the
model), :mod:`~terrazero_env.agents.progress` (the per-iteration statistics, display and checkpoint
cadence), :mod:`~terrazero_env.agents.run_folder` (checkpoint writing) and
:mod:`~terrazero_env.agents.stop_signals` (SIGINT/SIGTERM).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path
from typing import Any

import torch
import yaml
from stable_baselines3.common.callbacks import BaseCallback

import terrazero_env
from terrazero_env.config.io import dump_config, parse_set_options
from terrazero_env.foundation.safe_files import atomic_write, refuse_link

from . import checkpoint as ckpt
from .distributed import env_int, init_from_environment
from .progress import Display, Loop, StopAfter
from .run_folder import Run, copy_file
from .settings import PPO_KEYS, SAMPLERS, ResolvedRun, TrainSettings, option_settings, resolve_run
from .stop_signals import install_stop_handlers, restore_handlers
from .train_env import build_model

__all__ = ["PPO_KEYS", "SAMPLERS", "TrainSettings", "build_model", "train", "train_from_args"]


def train(preset: str = "quick", total_steps: int | None = None, out: str | Path = "runs/quick",
          seed: int | None = None, sampler: str | None = None, threshold: float | None = None,
          num_worlds: int | None = None, n_steps: int | None = None, full_policy: bool = False,
          checkpoint_every: int | None = None, resume: bool = False, device: str = "auto",
          torch_threads: int | None = None, overrides: dict[str, Any] | None = None, progress: str = "auto",
          tensorboard: bool = True, dataset: str | None = None, _stop_after: int | None = None) -> Path:
    """Train (or, with ``resume=True``, continue the run in ``out``) and return the final
    ``checkpoint.zip``. Under ``torchrun`` every rank calls this; rank 0 writes the shared files.

    ``overrides``: dotted engine-config names (``{"rewards.collision": [0, 3]}``) and ``train.X``
    trainer settings. ``dataset``: see :attr:`TrainSettings.dataset`. Bad settings, missing maps and
    a dataset naming a missing or corrupt file raise before any work, naming the field or file.
    """
    options = option_settings({"total_steps": total_steps, "seed": seed, "sampler": sampler, "threshold": threshold,
                               "checkpoint_every": checkpoint_every, "torch_threads": torch_threads,
                               "dataset": dataset, "n_steps": n_steps}, full_policy)
    plan = resolve_run(preset, out, resume, overrides, options, num_worlds)
    return _train(plan, Path(out), device, progress, tensorboard, _stop_after)


def train_from_args(args: argparse.Namespace) -> Path:
    """Run the training command from options parsed by
    :func:`terrazero_env.config.train_options.add_train_arguments` (``terrazero train`` and
    ``python -m terrazero_env.agents.launch``): ``--set`` through the one parser of it
    (:func:`terrazero_env.config.io.parse_set_options`), the options straight into :func:`resolve_run`."""
    out = Path(args.resume or args.out)
    plan = resolve_run(args.config or args.preset, out, bool(args.resume), parse_set_options(args.set),
                       option_settings(vars(args), args.full_policy), args.worlds)
    return _train(plan, out, args.device, args.progress, not args.no_tensorboard)


def _warm_start(model: Any, source: str, dev: Any) -> None:
    """``train.init_from``: the policy weights and PopArt moments of another run's checkpoint (its
    run folder's ``checkpoint.zip``, or a zip), loaded into ``model``'s policy; a checkpoint whose
    parameters differ in name or shape is refused, naming the first."""
    from .evaluate import load_checkpoint

    src = Path(source)
    zip_path = src / "checkpoint.zip" if src.is_dir() else src
    if not zip_path.is_file():
        raise ValueError(f"train.init_from: no checkpoint at {zip_path}")
    donor = load_checkpoint(zip_path, device=str(dev))
    have, give = model.policy.state_dict(), donor.policy.state_dict()
    for name in sorted(set(have) | set(give)):
        if name not in have or name not in give or have[name].shape != give[name].shape:
            shape = tuple(give[name].shape) if name in give else "absent"
            raise ValueError(f"train.init_from: {zip_path} does not fit this run's policy: parameter {name!r} "
                             f"is {shape} there, {tuple(have[name].shape) if name in have else 'absent'} here")
    model.policy.load_state_dict(give)
    model.popart_mean, model.popart_sq_mean = donor.popart_mean, donor.popart_sq_mean


def _train(plan: ResolvedRun, out: Path, device: str, progress: str, tensorboard: bool,
           stop_after: int | None = None) -> Path:
    """The job of :func:`train`, from resolved settings (a resume continues ``plan.checkpoint``)."""
    cfg, settings, resume = plan.cfg, plan.settings, plan.resume
    for src in cfg.maps:  # a missing map stops before any work
        terrazero_env.maps.load_source(src)
    if settings.dataset is not None:  # so does a dataset naming a missing or corrupt file
        dataset_info = terrazero_env.maps.Dataset(settings.dataset)
        dataset_info.check()
        where = f"dataset {settings.dataset} ({len(dataset_info)} scenarios, {len(dataset_info.groups)} groups)"
    else:
        where = ", ".join(cfg.maps)

    sync, dev = init_from_environment(device)
    torch_threads = settings.torch_threads
    if torch_threads is None and dev.type == "cpu" and sync.distributed:
        local = env_int("LOCAL_WORLD_SIZE", sync.world_size, 1, 65_536)
        torch_threads = max(1, (os.cpu_count() or 1) // local)
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    if sync.is_main and not resume:
        out.mkdir(parents=True, exist_ok=True)
        dump_config(cfg, out / "config.yaml")
        atomic_write(out / "train.yaml", yaml.safe_dump(settings.to_mapping(), sort_keys=False), "run file")
        atomic_write(out / "progress.jsonl", "", "progress file")
    sync.barrier()

    rank_seed = settings.seed + 10_007 * sync.rank
    tb = str(out / "tensorboard") if (tensorboard and sync.is_main) else None
    model = build_model(cfg, settings, rank_seed, dev, tensorboard_log=tb)
    model.sync = sync
    sync.broadcast_module(model.policy)
    iteration, seconds = 0, 0.0
    if settings.init_from is not None and not resume:
        _warm_start(model, settings.init_from, dev)
    if resume:
        extra = ckpt.load_rank_state(model, plan.checkpoint / f"rank{sync.rank}.pt", sync.rank, sync.world_size)
        iteration, seconds = int(extra["iteration"]), float(extra["seconds"])
    per_rank = math.ceil(settings.total_steps / sync.world_size)
    done_global = int(sync.sum([model.num_timesteps])[0])
    n_params = sum(p.numel() for p in model.policy.parameters())
    display = Display(progress if sync.is_main else "none", settings.total_steps, done_global)
    if sync.is_main:
        what = f"resuming {out} at iteration {iteration}, {done_global:,} agent steps" if resume else "training"
        print(f"{what}: {sync.world_size} rank(s) x {cfg.num_worlds} worlds x {cfg.slots_per_world} slots on "
              f"{where} ({dev.type}); policy {n_params:,} parameters; {settings.sampler} sampling; "
              f"{settings.total_steps:,} agent steps", flush=True)
    run = Run(out, settings, sync, model, display)
    loop = Loop(run, iteration, done_global, seconds)

    handlers = install_stop_handlers(loop)
    try:
        callbacks: list[BaseCallback] = [loop]
        if stop_after is not None:  # tests: the same path as a signal, after a given iteration
            callbacks.append(StopAfter(loop, stop_after))
        remaining = max(per_rank - model.num_timesteps, 0)
        if remaining > 0:
            model.learn(remaining, callback=callbacks, reset_num_timesteps=not resume,
                        tb_log_name="ppo", progress_bar=False)
        if not loop.stopping:
            run.save(loop.iteration, loop.elapsed())
    finally:
        restore_handlers(handlers)
        display.close()
    final = out / "checkpoint.zip"
    if sync.is_main:
        if loop.stopping:  # the state of the checkpoint, not of the step taken after it
            copy_file(run.latest / "model.zip", final)
        else:
            refuse_link(final, "checkpoint file")
            model.save(final)
        state = "stopped" if loop.stopping else "finished"
        print(f"{state} at iteration {loop.iteration}: saved {final} and {run.latest}", flush=True)
    model.env.close()
    sync.barrier()
    return final

