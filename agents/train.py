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

Settings come from the preset's ``train:`` section, then keyword arguments, then ``train.*``
overrides; see :data:`TRAIN_DEFAULTS` and :data:`PPO_KEYS`. ``dataset`` (``--dataset MANIFEST``, or
``dataset:`` in a config's ``train:`` section) trains on a :class:`~terrazero_env.maps.Dataset`:
every world reset draws its scenario, balanced over the dataset's (region, type) groups.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import LinearSchedule

import terrazero_env
from terrazero_env import safe_yaml
from terrazero_env.config_checks import check_bool, check_float, check_int
from terrazero_env.config_io import dump_config, load_config, load_train_section
from terrazero_env.safe_files import append_text, atomic_write, read_bytes, refuse_link

from ..wrappers import DPSA, SGR, DoubleBufferedEnv, SamplingStats
from . import checkpoint as ckpt
from .distributed import Sync, env_int, init_from_environment
from .ppo import N_STEPS, PPO

__all__ = ["PPO_KEYS", "TrainSettings", "build_model", "train", "train_from_args"]

#: ``terrazero_env.agents.PPO`` arguments a ``train:`` section may set (``learning_rate``: the
#: initial value, annealed linearly to 0 unless ``lr_anneal`` is false).
PPO_KEYS = frozenset({
    "learning_rate", "n_steps", "batch_size", "num_minibatches", "n_epochs", "gamma", "gae_lambda", "clip_range",
    "normalize_advantage", "ent_coef", "vf_coef", "max_grad_norm", "target_kl", "vtrace", "rho_bar", "c_bar",
    "popart", "popart_decay", "popart_min_sigma", "popart_schedule", "prioritized", "priority_alpha", "priority_beta0",
    "priority_beta_final", "segment_length", "array_path",
})
SAMPLERS = ("dpsa", "sgr", "autoreset")


@dataclass
class TrainSettings:
    """Everything about a run except the engine config; saved as ``OUT/train.yaml``. The PPO
    hyperparameters (``ppo``) default to :class:`~terrazero_env.agents.PPO`'s, which are table 14's."""

    preset: str = "quick"
    """Preset name or YAML path the engine config came from (ours)."""
    total_steps: int = 50_000
    """Agent steps over every rank, padding included, as the env produced them; a count >= 1 (ours:
    sized for the quick preset on a CPU)."""
    seed: int = 0
    """Seed of rank 0's model and env; rank r uses ``seed + 10_007 * r`` (ours)."""
    sampler: str = "dpsa"
    """dpsa (FAST's DPSA, FAST section II), sgr (synchronous global reset, FAST's baseline) or autoreset
    (per-world autoreset) (the default is FAST's)."""
    threshold: float = 0.5
    """DPSA's termination-rate threshold rho, a rate in (0, 1] (FAST section II defines it; 0.5 is ours)."""
    policy: dict[str, Any] = field(default_factory=dict)
    """``DeepSetsPolicy`` keyword arguments (``{}``: the paper-sized policy, table 15)."""
    checkpoint_every: int = 10
    """Iterations (rollout + update) between checkpoints, a count >= 1 (ours)."""
    lr_anneal: bool = True
    """Anneal the learning rate linearly to 0 over ``total_steps`` (table 14: linear decay)."""
    torch_threads: int | None = None
    """Torch CPU threads per rank; None: torch's default in one process, the cores divided among
    the ranks under torchrun. A small policy trains fastest on one thread (the engine runs beside it) (ours)."""
    dataset: str | None = None
    """Scenarios to train on instead of the config's ``maps``: a dataset manifest file, the name of a
    bundled one (``bundled``), a folder or a glob of ``.tzb`` files; relative paths are relative to the
    working directory and recorded absolute. Every world reset draws one, balanced over the dataset's
    (region, type) groups (None: the config's maps; ours)."""
    overlap: bool = False
    """Double buffering: the worlds as two halves, each with its own sampler, one
    half stepping while the policy computes the other's actions (:class:`~terrazero_env.wrappers.DoubleBufferedEnv`).
    Needs an even number of worlds; changes the run against one env of all the worlds (BENCHMARKS.md) (ours)."""
    ppo: dict[str, Any] = field(default_factory=lambda: {"n_steps": N_STEPS})
    """:data:`PPO_KEYS` arguments of :class:`~terrazero_env.agents.PPO`; unset keys take PPO's defaults
    (table 14). ``n_steps`` is recorded explicitly: PPO's own default (``agents.ppo.N_STEPS``, ours;
    table 14 gives no rollout length)."""

    def __post_init__(self) -> None:
        check_int("train.total_steps", self.total_steps, 1)
        check_int("train.seed", self.seed, 0)
        if self.sampler not in SAMPLERS:
            raise ValueError(f"train.sampler: one of {', '.join(SAMPLERS)}, got {self.sampler!r}")
        check_float("train.threshold", self.threshold, 0.0, 1.0, lo_open=True)
        check_int("train.checkpoint_every", self.checkpoint_every, 1)
        check_bool("train.lr_anneal", self.lr_anneal)
        check_bool("train.overlap", self.overlap)
        if self.torch_threads is not None:
            check_int("train.torch_threads", self.torch_threads, 1)
        if self.dataset is not None and not (isinstance(self.dataset, str) and self.dataset):
            raise ValueError(f"train.dataset: a manifest path or bundled dataset name, got {self.dataset!r}")
        if not isinstance(self.policy, dict):
            raise ValueError(f"train.policy: a mapping of DeepSetsPolicy arguments, got {self.policy!r}")
        unknown = set(self.ppo) - PPO_KEYS
        if unknown:
            raise ValueError(f"train: unknown keys {sorted(unknown)}")
        # Sizes that allocate: the rollout buffer grows with n_steps, the update's work with the rest
        # (the bounds of the command line's --n-steps; a run folder's train.yaml is read the same way).
        for name, hi in (("n_steps", 10**6), ("batch_size", 10**8), ("num_minibatches", 10**6), ("n_epochs", 10**4),
                         ("segment_length", 10**6)):
            v = self.ppo.get(name)
            if v is not None:
                check_int(f"train.{name}", v, 1, hi)
        lr = self.ppo.get("learning_rate")
        if lr is not None and not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
            raise ValueError(f"train.learning_rate: a positive number, got {lr!r}")

    @classmethod
    def from_mapping(cls, d: dict[str, Any]) -> TrainSettings:
        """Flat keys: the fields above, anything in :data:`PPO_KEYS`; unknown keys are named."""
        own = {f.name for f in fields(cls)} - {"ppo"}
        base = cls()
        ppo = dict(base.ppo)
        ppo.update(d.get("ppo") or {})
        kwargs: dict[str, Any] = {}
        for k, v in d.items():
            if k == "ppo":
                continue
            if k in own:
                kwargs[k] = v
            elif k in PPO_KEYS:
                ppo[k] = v
            else:
                raise ValueError(f"train: unknown key {k!r} (trainer: {sorted(own)}; PPO: {sorted(PPO_KEYS)})")
        return cls(**kwargs, ppo=ppo)

    def to_mapping(self) -> dict[str, Any]:
        d = asdict(self)
        ppo = d.pop("ppo")
        d.update(ppo)
        return d


def _split_overrides(overrides: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dotted overrides into (engine, trainer): ``train.X`` goes to the trainer."""
    engine, trainer = {}, {}
    for k, v in (overrides or {}).items():
        key = k.replace("__", ".")
        if key.startswith("train."):
            trainer[key[len("train."):]] = v
        else:
            engine[key] = v
    return engine, trainer


def _make_env(cfg: Any, settings: TrainSettings) -> Any:
    if settings.overlap:
        if cfg.num_worlds < 2 or cfg.num_worlds % 2:
            raise ValueError(f"train.overlap: needs an even number of worlds (two halves), the config has {cfg.num_worlds}")
        half = cfg.with_overrides(num_worlds=cfg.num_worlds // 2)
        return DoubleBufferedEnv(_sampled_env(half, settings), _sampled_env(half, settings))
    return _sampled_env(cfg, settings)


def _sampled_env(cfg: Any, settings: TrainSettings) -> Any:
    """The native vector env of ``cfg`` under the run's sampling wrapper."""
    ds = None if settings.dataset is None else terrazero_env.maps.Dataset(settings.dataset)
    if settings.sampler == "autoreset":
        return SamplingStats(terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="NextStep", dataset=ds))
    base = terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled", dataset=ds)
    if settings.sampler == "sgr":
        return SGR(base, horizon=cfg.episode_length)
    return DPSA(base, threshold=settings.threshold, horizon=cfg.episode_length)


def build_model(cfg: Any, settings: TrainSettings, seed: int, device: torch.device | str = "cpu",
                tensorboard_log: str | None = None) -> PPO:
    """The run's PPO on a fresh env (the same construction for a new run and for a resume)."""
    kwargs = dict(settings.ppo)
    if "learning_rate" in kwargs and settings.lr_anneal:
        kwargs["learning_rate"] = LinearSchedule(float(kwargs["learning_rate"]), 0.0, 1.0)
    env = _make_env(cfg, settings)
    return PPO("DeepSetsPolicy", env, seed=seed, device=device, policy_kwargs=dict(settings.policy),
               tensorboard_log=tensorboard_log, **kwargs)


# ---------------------------------------------------------------------------------- progress

_COUNTERS = list(terrazero_env.engine.COUNTER_NAMES)


class _Display:
    """Rank 0's view: a tqdm bar on a terminal, otherwise one line per iteration."""

    def __init__(self, mode: str, total: int, initial: int):
        if mode == "auto":
            mode = "bar" if sys.stderr.isatty() else "lines"
        if mode not in ("bar", "lines", "none"):
            raise ValueError(f"progress: 'auto', 'bar', 'lines' or 'none', got {mode!r}")
        self.mode, self.total, self.bar = mode, total, None
        if mode == "bar":
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, unit="step", unit_scale=True, dynamic_ncols=True,
                            smoothing=0.1)

    def update(self, row: dict[str, Any], advanced: int) -> None:
        ret = "n/a" if row["return"] is None else f"{row['return']:.2f}"
        rates = {k: "n/a" if row[k] is None else f"{row[k]:.2f}" for k in ("goal", "collision", "offroad")}
        if self.bar is not None:
            self.bar.update(advanced)
            self.bar.set_postfix_str(f"{row['agent_steps_per_s']:,.0f} steps/s ret {ret} goal {rates['goal']} "
                                     f"col {rates['collision']} off {rates['offroad']} mu {row['mu']:.2f} "
                                     f"eta {row['eta']:.2f}", refresh=False)
        elif self.mode == "lines":
            print(f"[{100 * row['agent_steps'] / self.total:5.1f}%] {row['agent_steps']:>10,} agent steps | "
                  f"{row['agent_steps_per_s']:>8,.0f} steps/s | return {ret} | goal {rates['goal']} "
                  f"collision {rates['collision']} off-road {rates['offroad']} | mu {row['mu']:.2f} "
                  f"eta {row['eta']:.2f}", flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class _Loop(BaseCallback):
    """Per iteration: episode statistics summed over ranks (shown and logged by rank 0), checkpoints
    every ``checkpoint_every`` iterations, and a synchronized stop on SIGINT/SIGTERM."""

    def __init__(self, run: _Run, iteration: int, steps_before: int, seconds_before: float):
        super().__init__()
        self.run = run
        self.iteration = self.start_iteration = iteration
        self.steps_before, self.seconds_before = steps_before, seconds_before
        self.stop_requested = False
        self.stopping = False
        self._acc = np.zeros(5)  # finished episodes, their return sum, goal, collision and off-road counts
        self._t0 = time.perf_counter()
        self._last_steps = steps_before
        self.last_row: dict[str, Any] | None = None

    # SB3 hooks ---------------------------------------------------------------------------
    def _on_training_start(self) -> None:
        self._t0 = time.perf_counter()

    def _on_rollout_start(self) -> None:
        if self.iteration == self.start_iteration:
            return
        stop = self.run.sync.any(self.stop_requested)
        if stop or self.iteration % self.run.settings.checkpoint_every == 0:
            self.run.save(self)
        if stop:
            self.stopping = True

    def _on_step(self) -> bool:
        if self.stopping:
            return False
        if "infos" not in self.locals:  # the array path tallies episodes itself (agents/collect.py)
            return True
        dones = np.asarray(self.locals["dones"], bool)
        if dones.any():
            infos = self.locals["infos"]
            ended = [i for i in np.flatnonzero(dones) if infos[i].get("valid", True)]
            if ended:
                counters = np.stack([infos[i].get("counters", np.zeros(len(_COUNTERS))) for i in ended]) > 0
                rets = [infos[i]["episode"]["r"] for i in ended if "episode" in infos[i]]
                self._acc[0] += len(ended)
                self._acc[1] += float(np.sum(rets)) if rets else 0.0
                self._acc[2] += counters[:, _COUNTERS.index("goal_reached")].sum()
                self._acc[3] += counters[:, _COUNTERS.index("collision")].sum()
                self._acc[4] += counters[:, _COUNTERS.index("offroad")].sum()
        return True

    def _on_rollout_end(self) -> None:
        self.iteration += 1
        run = self.run
        stats = _sampler_stats(run.model)
        if run.model.episode_tally is not None:
            self._acc += run.model.episode_tally.take()
        glob = run.sync.sum([*self._acc, self.num_timesteps, stats["mu"], stats["eta"]])
        self._acc[:] = 0.0
        episodes, ret_sum, goals, cols, offs = glob[:5]
        steps = int(glob[5])
        elapsed = self.seconds_before + time.perf_counter() - self._t0
        rate = (steps - self.steps_before) / max(time.perf_counter() - self._t0, 1e-9)
        n = max(episodes, 1.0)
        row = {"iteration": self.iteration, "agent_steps": steps, "seconds": elapsed, "agent_steps_per_s": rate,
               "episodes": int(episodes), "return": ret_sum / n if episodes else None,
               "goal": goals / n if episodes else None, "collision": cols / n if episodes else None,
               "offroad": offs / n if episodes else None,
               "mu": glob[6] / run.sync.world_size, "eta": glob[7] / run.sync.world_size}
        self.last_row = row
        if run.sync.is_main:
            append_text(run.out / "progress.jsonl", json.dumps(row) + "\n", "progress file")
            for key in ("return", "goal", "collision", "offroad"):
                if row[key] is not None:
                    self.logger.record(f"episode/{key}", row[key])
            self.logger.record("time/agent_steps_per_s", rate)
            self.logger.record("sampling/mu", row["mu"])
            self.logger.record("sampling/eta", row["eta"])
            run.display.update(row, steps - self._last_steps)
        self._last_steps = steps

    def elapsed(self) -> float:
        return self.seconds_before + time.perf_counter() - self._t0


def _sampler_stats(model: PPO) -> dict[str, float]:
    """FAST's validity rate mu and time efficiency eta since the start, from the sampling wrapper."""
    env = model.env
    while env is not None and not isinstance(env, (DPSA, SamplingStats, DoubleBufferedEnv)):
        env = getattr(env, "venv", None) or getattr(env, "vector_env", None)
    total = env.total.as_dict()
    return {"mu": total["mu"], "eta": total["eta"]}


@dataclass
class _Run:
    out: Path
    settings: TrainSettings
    sync: Sync
    model: PPO
    display: Any

    def save(self, loop: _Loop) -> Path:
        """A checkpoint of this iteration, written by every rank; ``latest`` moves when all are done."""
        folder = self.out / "checkpoints" / f"iter_{loop.iteration:06d}"
        if self.sync.is_main:
            folder.mkdir(parents=True, exist_ok=True)
        self.sync.barrier()
        folder.mkdir(parents=True, exist_ok=True)
        ckpt._run_path(self.out, self.out / "checkpoints", "checkpoint folder")
        ckpt._run_path(self.out, folder, "checkpoint folder")
        extra = {"iteration": loop.iteration, "seconds": loop.elapsed()}
        ckpt.save_rank_state(self.model, folder / f"rank{self.sync.rank}.pt", self.sync.rank, self.sync.world_size,
                             extra)
        if self.sync.is_main:
            refuse_link(folder / "model.zip", "checkpoint file")
            self.model.save(folder / "model.zip")
            _copy_file(self.out / "config.yaml", folder / "config.yaml")
        self.sync.barrier()
        if self.sync.is_main:
            ckpt.mark_latest(folder)
        return folder


# ------------------------------------------------------------------------------------ train


def _copy_file(src: Path, dst: Path) -> None:
    """Copy ``src`` over ``dst`` atomically (never writing through a link planted at ``dst``)."""
    atomic_write(dst, read_bytes(src, 1 << 34, "run file"), "run file")


def _check_config_matches_checkpoint(cfg: Any, out: Path) -> None:
    """Refuse to resume when the run's ``config.yaml`` differs from the copy saved with its newest
    checkpoint (a truncated or edited file would otherwise resume with other settings, its missing
    sections at their defaults)."""
    folder = ckpt.latest_checkpoint(out)
    saved = None if folder is None else folder / "config.yaml"
    if saved is None or not saved.is_file():
        return
    ckpt._run_path(out, saved, "checkpoint file")
    if not saved.is_file():
        return
    kept = load_config(saved)
    if kept != cfg:
        differ = [f.name for f in fields(cfg) if getattr(cfg, f.name) != getattr(kept, f.name)]
        raise ValueError(f"cannot resume: {out / 'config.yaml'} differs from the config saved with {folder.name} "
                         f"(in {', '.join(differ) or 'its values'}); restore it, or start a new run to change the "
                         "engine config")


def _resolve(preset: str, out: Path, resume: bool, overrides: dict[str, Any] | None,
             explicit: dict[str, Any]) -> tuple[Any, TrainSettings]:
    """The engine config and trainer settings of a new run or of the run being resumed."""
    engine_over, train_over = _split_overrides(overrides)
    if resume:
        if not (out / "train.yaml").is_file() or not (out / "config.yaml").is_file():
            raise FileNotFoundError(f"cannot resume: {out} has no train.yaml/config.yaml (not a run folder)")
        if ckpt.latest_checkpoint(out) is None:
            raise FileNotFoundError(f"cannot resume: {out / 'checkpoints'} holds no complete checkpoint")
        if engine_over:
            raise ValueError(f"cannot change the engine config of a run being resumed: {sorted(engine_over)}")
        for name in ("config.yaml", "train.yaml", "progress.jsonl"):
            ckpt._run_path(out, out / name, "run file")
        cfg = load_config(out / "config.yaml")
        _check_config_matches_checkpoint(cfg, out)
        d = safe_yaml.load_file(out / "train.yaml")
        if not isinstance(d, dict):
            raise ValueError(f"{out / 'train.yaml'}: expected a mapping of trainer settings, got "
                             f"{'an empty file' if d is None else 'a ' + type(d).__name__}")
        d.update({k: v for k, v in explicit.items() if k in ("total_steps", "torch_threads") and v is not None})
        return cfg, TrainSettings.from_mapping(d)
    cfg = load_config(preset, **engine_over)
    d = load_train_section(preset)
    d.update({k: v for k, v in explicit.items() if v is not None})
    d.update(train_over)
    d["preset"] = str(preset)
    if isinstance(d.get("dataset"), str) and os.path.exists(d["dataset"]):  # a resume may run elsewhere
        d["dataset"] = str(Path(d["dataset"]).resolve())
    return cfg, TrainSettings.from_mapping(d)


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
    out = Path(out)
    explicit = {"total_steps": total_steps, "seed": seed, "sampler": sampler, "threshold": threshold,
                "checkpoint_every": checkpoint_every, "torch_threads": torch_threads, "dataset": dataset}
    if n_steps is not None:
        explicit["n_steps"] = n_steps
    if full_policy:
        explicit["policy"] = {}
    cfg, settings = _resolve(preset, out, resume, overrides, explicit)
    if num_worlds is not None and not resume:
        cfg = cfg.with_overrides(num_worlds=num_worlds)
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
    if resume:
        folder = ckpt.latest_checkpoint(out)
        extra = ckpt.load_rank_state(model, folder / f"rank{sync.rank}.pt", sync.rank, sync.world_size)
        iteration, seconds = int(extra["iteration"]), float(extra["seconds"])
    per_rank = math.ceil(settings.total_steps / sync.world_size)
    done_global = int(sync.sum([model.num_timesteps])[0])
    n_params = sum(p.numel() for p in model.policy.parameters())
    display = _Display(progress if sync.is_main else "none", settings.total_steps, done_global)
    if sync.is_main:
        what = f"resuming {out} at iteration {iteration}, {done_global:,} agent steps" if resume else "training"
        print(f"{what}: {sync.world_size} rank(s) x {cfg.num_worlds} worlds x {cfg.slots_per_world} slots on "
              f"{where} ({dev.type}); policy {n_params:,} parameters; {settings.sampler} sampling; "
              f"{settings.total_steps:,} agent steps", flush=True)
    run = _Run(out, settings, sync, model, display)
    loop = _Loop(run, iteration, done_global, seconds)

    handlers = _install_stop_handlers(loop)
    try:
        callbacks: list[BaseCallback] = [loop]
        if _stop_after is not None:  # tests: the same path as a signal, after a given iteration
            callbacks.append(_StopAfter(loop, _stop_after))
        remaining = max(per_rank - model.num_timesteps, 0)
        if remaining > 0:
            model.learn(remaining, callback=callbacks, reset_num_timesteps=not resume,
                        tb_log_name="ppo", progress_bar=False)
        if not loop.stopping:
            run.save(loop)
    finally:
        _restore_handlers(handlers)
        display.close()
    final = out / "checkpoint.zip"
    if sync.is_main:
        if loop.stopping:  # the state of the checkpoint, not of the step taken after it
            _copy_file(ckpt.latest_checkpoint(out) / "model.zip", final)
        else:
            refuse_link(final, "checkpoint file")
            model.save(final)
        state = "stopped" if loop.stopping else "finished"
        print(f"{state} at iteration {loop.iteration}: saved {final} and {ckpt.latest_checkpoint(out)}", flush=True)
    model.env.close()
    sync.barrier()
    return final


def train_from_args(args: argparse.Namespace) -> Path:
    """Run the training command from options parsed by
    :func:`terrazero_env.train_options.add_train_arguments` (``terrazero train`` and
    ``python -m terrazero_env.agents.launch``); ``--set KEY=VALUE`` values are read as YAML."""
    overrides: dict[str, Any] = {}
    for kv in args.set:
        if "=" not in kv:
            raise ValueError(f"--set expects KEY=VALUE, got {kv!r}")
        key, value = kv.split("=", 1)
        overrides[key.strip()] = safe_yaml.load(value, f"--set {key.strip()}")
    out = args.resume if args.resume else args.out
    return train(preset=args.config or args.preset, total_steps=args.total_steps, out=out, seed=args.seed,
                 sampler=args.sampler, threshold=args.threshold, num_worlds=args.worlds, n_steps=args.n_steps,
                 full_policy=args.full_policy, checkpoint_every=args.checkpoint_every, resume=bool(args.resume),
                 device=args.device, torch_threads=args.torch_threads, overrides=overrides,
                 progress=args.progress, tensorboard=not args.no_tensorboard, dataset=args.dataset)


class _StopAfter(BaseCallback):
    """Raise the stop request once ``iteration`` iterations are done (what a signal does)."""

    def __init__(self, loop: _Loop, iteration: int):
        super().__init__()
        self.loop, self.at = loop, iteration

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        if self.loop.iteration >= self.at:
            self.loop.stop_requested = True


def _install_stop_handlers(loop: _Loop) -> dict[int, Any]:
    """SIGINT/SIGTERM ask for a checkpoint and a clean stop at the next update boundary; a second
    SIGINT interrupts at once."""
    if not _main_thread():
        return {}

    def handler(signum: int, frame: Any) -> None:
        if loop.stop_requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        loop.stop_requested = True
        print(f"\n{signal.Signals(signum).name}: saving a checkpoint after this update, then stopping "
              "(SIGINT again to stop now)", file=sys.stderr, flush=True)

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        old[sig] = signal.signal(sig, handler)
    return old


def _restore_handlers(old: dict[int, Any]) -> None:
    for sig, h in old.items():
        signal.signal(sig, h)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
