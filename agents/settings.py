"""A training run's settings, resolved in one place: :class:`TrainSettings` (everything about a run
but the engine config; ``OUT/train.yaml``) and :func:`resolve_run`, which turns a preset, the
trainer settings given as options (:func:`option_settings`) and dotted overrides (or a run folder
being resumed) into a :class:`ResolvedRun`: the engine config, the settings and, for a resume, the
checkpoint it continues. The precedence: the preset's ``train:`` section, then options, then
``train.*`` overrides; a resume reads the run folder's files and takes only ``total_steps`` and
``torch_threads`` anew, and reads the folder's ``checkpoints/latest`` pointer once, here. Both
training entries (``agents.train.train`` and the command line's ``train_from_args``) call it."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from terrazero_env.config.io import load_config, load_train_section, override_name
from terrazero_env.foundation import safe_yaml
from terrazero_env.foundation.checks import check_bool, check_float, check_int

from . import checkpoint as ckpt
from .ppo import N_STEPS

__all__ = ["OPTION_SETTINGS", "PPO_KEYS", "REMOVED_SETTINGS", "RESUME_OPTIONS", "SAMPLERS", "ResolvedRun", "TrainSettings",
           "option_settings", "resolve_run"]

#: ``terrazero_env.agents.PPO`` arguments a ``train:`` section may set (``learning_rate``: the
#: initial value, annealed linearly to 0 unless ``lr_anneal`` is false).
PPO_KEYS = frozenset({
    "learning_rate", "n_steps", "batch_size", "num_minibatches", "n_epochs", "gamma", "gae_lambda", "clip_range",
    "normalize_advantage", "ent_coef", "vf_coef", "max_grad_norm", "target_kl", "vtrace", "rho_bar", "c_bar",
    "popart", "popart_decay", "popart_min_sigma", "popart_schedule", "prioritized", "priority_alpha", "priority_beta0",
    "priority_beta_final", "segment_length", "array_path", "pack_once",
})
SAMPLERS = ("dpsa", "sgr", "autoreset")
#: The trainer settings the training command has options for (``--total-steps`` ... ``--n-steps``),
#: by name (the options' own destinations and ``train``'s keyword arguments); ``--full-policy`` sets
#: ``policy: {}``. A resume takes :data:`RESUME_OPTIONS` of them anew and keeps the run's others.
OPTION_SETTINGS = ("total_steps", "seed", "sampler", "threshold", "checkpoint_every", "torch_threads", "dataset",
                   "n_steps")
RESUME_OPTIONS = ("total_steps", "torch_threads")
#: Settings this version no longer has: name -> (the value that is what every run does now, why).
#: A ``train:`` section or a run folder's ``train.yaml`` naming one with that value is read with a
#: ``FutureWarning`` (older run folders record it); any other value is refused, naming the setting.
REMOVED_SETTINGS = {
    "overlap": (False, "train.overlap was removed: PPO collects through one loop that steps every world at once "
                       "(two double-buffered halves showed no reliable gain, BENCHMARKS.md, 'Overlap')"),
}


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
    init_from: str | None = None
    """A warm start (a curriculum's second stage): a checkpoint zip or run folder whose policy weights
    and PopArt moments the new run starts from, with a fresh optimizer, step count and learning-rate
    schedule; its policy must have this run's shapes (same observation layout and policy settings).
    None: a freshly initialized policy (ours)."""
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
        if self.torch_threads is not None:
            check_int("train.torch_threads", self.torch_threads, 1)
        if self.dataset is not None and not (isinstance(self.dataset, str) and self.dataset):
            raise ValueError(f"train.dataset: a manifest path or bundled dataset name, got {self.dataset!r}")
        if self.init_from is not None and not (isinstance(self.init_from, str) and self.init_from):
            raise ValueError(f"train.init_from: a checkpoint zip or run folder, got {self.init_from!r}")
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
        """Flat keys: the fields above, anything in :data:`PPO_KEYS`; unknown keys are named, and a key
        of :data:`REMOVED_SETTINGS` warns (at the value every run now has) or is refused."""
        own = {f.name for f in fields(cls)} - {"ppo"}
        base = cls()
        ppo = dict(base.ppo)
        ppo.update(d.get("ppo") or {})
        kwargs: dict[str, Any] = {}
        for k, v in d.items():
            if k == "ppo":
                continue
            if k in REMOVED_SETTINGS:
                _removed_setting(k, v)
            elif k in own:
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


def _removed_setting(name: str, value: Any) -> None:
    kept, why = REMOVED_SETTINGS[name]
    if type(value) is type(kept) and value == kept:
        warnings.warn(f"{why}; '{name}: {value}' is what every run does now: delete the key", FutureWarning,
                      stacklevel=3)
        return
    raise ValueError(f"{why}; this setting asks for {value!r}, which no longer exists: delete the key (a run "
                     "trained with it cannot be resumed by this version)")


def option_settings(values: Mapping[str, Any], full_policy: bool = False) -> dict[str, Any]:
    """The trainer settings given as options: the :data:`OPTION_SETTINGS` of ``values`` (an argparse
    namespace's ``vars`` or ``train``'s keyword arguments) that are not None, and ``policy: {}`` (the
    paper-sized policy) for ``full_policy``."""
    out = {k: values[k] for k in OPTION_SETTINGS if values.get(k) is not None}
    if full_policy:
        out["policy"] = {}
    return out


@dataclass(frozen=True)
class ResolvedRun:
    """What the trainer runs: the engine config, the trainer settings and, for a resume, the
    checkpoint folder it continues (the run folder's ``checkpoints/latest``, read once by
    :func:`resolve_run`; None for a new run)."""

    cfg: Any
    settings: TrainSettings
    checkpoint: Path | None = None

    @property
    def resume(self) -> bool:
        return self.checkpoint is not None


def _split_overrides(overrides: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Dotted overrides into (engine, trainer): ``train.X`` goes to the trainer. Every name passes
    :func:`~terrazero_env.config.io.override_name` (an empty one is refused, as for ``--set``)."""
    engine, trainer = {}, {}
    for k, v in (overrides or {}).items():
        key = override_name(k).replace("__", ".")
        if key.startswith("train."):
            trainer[key[len("train."):]] = v
        else:
            engine[key] = v
    return engine, trainer


def _check_config_matches_checkpoint(cfg: Any, out: Path, folder: Path) -> None:
    """Refuse to resume when the run's ``config.yaml`` differs from the copy saved with the checkpoint
    ``folder`` it continues (a truncated or edited file would otherwise resume with other settings, its
    missing sections at their defaults)."""
    saved = folder / "config.yaml"
    if not saved.is_file():
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


def resolve_run(preset: str | os.PathLike[str], out: str | os.PathLike[str], resume: bool,
                overrides: Mapping[str, Any] | None, explicit: Mapping[str, Any],
                num_worlds: int | None = None) -> ResolvedRun:
    """The engine config and trainer settings of a new run, or of the run in ``out`` being resumed
    with the checkpoint it continues. ``explicit``: trainer settings given as options
    (:func:`option_settings`; None values are not given); ``num_worlds``: worlds per rank of a new
    run (after the overrides; a resume keeps the run's)."""
    out = Path(out)
    engine_over, train_over = _split_overrides(overrides)
    if resume:
        if not (out / "train.yaml").is_file() or not (out / "config.yaml").is_file():
            raise FileNotFoundError(f"cannot resume: {out} has no train.yaml/config.yaml (not a run folder)")
        folder = ckpt.latest_checkpoint(out)
        if folder is None:
            raise FileNotFoundError(f"cannot resume: {out / 'checkpoints'} holds no complete checkpoint")
        if engine_over:
            raise ValueError(f"cannot change the engine config of a run being resumed: {sorted(engine_over)}")
        for name in ("config.yaml", "train.yaml", "progress.jsonl"):
            ckpt._run_path(out, out / name, "run file")
        cfg = load_config(out / "config.yaml")
        _check_config_matches_checkpoint(cfg, out, folder)
        d = safe_yaml.load_file(out / "train.yaml")
        if not isinstance(d, dict):
            raise ValueError(f"{out / 'train.yaml'}: expected a mapping of trainer settings, got "
                             f"{'an empty file' if d is None else 'a ' + type(d).__name__}")
        d.update({k: v for k, v in explicit.items() if k in RESUME_OPTIONS and v is not None})
        return ResolvedRun(cfg, TrainSettings.from_mapping(d), folder)
    cfg = load_config(preset, **engine_over)
    d = load_train_section(preset)
    d.update({k: v for k, v in explicit.items() if v is not None})
    d.update(train_over)
    d["preset"] = str(preset)
    if isinstance(d.get("dataset"), str) and os.path.exists(d["dataset"]):  # a resume may run elsewhere
        d["dataset"] = str(Path(d["dataset"]).resolve())
    settings = TrainSettings.from_mapping(d)
    if num_worlds is not None:
        cfg = cfg.with_overrides(num_worlds=num_worlds)
    return ResolvedRun(cfg, settings)
