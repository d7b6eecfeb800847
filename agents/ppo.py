"""PPO with SMPO masking, V-trace, PopArt and prioritized segment sampling (TerraZero section 5.1 and
appendix E; FAST section III), as a subclass of Stable-Baselines3's PPO with the same user API.

    import terrazero_env
    from terrazero_env.agents import PPO
    from terrazero_env.wrappers import DPSA

    venv = DPSA(terrazero_env.make_vec(8, "quick", autoreset_mode="Disabled"), threshold=0.5, horizon=128)
    model = PPO("DeepSetsPolicy", venv, seed=0)   # a Gymnasium VectorEnv or an SB3 VecEnv
    model.learn(100_000)

The rollout buffer keeps, per step, the validity mask (``info["valid"]``, all ones when the env
gives none), the behaviour log-probabilities, whether an episode end is a true terminal or a
truncation, and V(s_final) for truncations. ``train()`` orchestrates the functions of
:mod:`terrazero_env.agents.losses`: the masked loss of every term, V-trace advantages recomputed at
the start of every epoch after the first from the importance ratios of the previous epoch's
minibatches, PopArt statistics updated once per rollout, and minibatches of trajectory segments drawn
by priority. Defaults follow table 14.

Given a Gymnasium vector env (the native env, DPSA, SGR), rollouts are collected on the array-only
path of :mod:`terrazero_env.agents.collect` (no per-slot info dicts) into storage on the training
device; ``array_path=False`` goes through the SB3 adapter instead, with the same results. Every
per-step field of the rollout lives on that device, and advantages, value targets, PopArt moments
and priority draws are computed there (:mod:`terrazero_env.agents.targets`).
"""

from __future__ import annotations

import math
import os
import sys
from collections import defaultdict, deque
from collections.abc import Generator
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import PPO as SB3PPO
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import HumanOutputFormat, Logger
from stable_baselines3.common.utils import LinearSchedule, obs_as_tensor
from stable_baselines3.common.vec_env import VecEnv, VecMonitor, VecNormalize, unwrap_vec_wrapper

from . import losses, targets
from .collect import EpisodeTally, ObservationStage, array_vector_env, final_observations
from .distributed import Sync
from .modelzip import add_safe_entry
from .policies import DEFAULT_OPTIMIZER_KWARGS, DeepSetsPolicy, layout_from_env
from .rollout_buffer import MaskedRolloutBuffer, MaskedRolloutSamples, PackedEntities

__all__ = ["PPO", "MaskedRolloutBuffer", "MaskedRolloutSamples"]

#: Table 14's learning rate: 5e-4, linearly annealed to 0 over training.
LINEAR_5E4 = LinearSchedule(5e-4, 0.0, 1.0)
#: Rollout length per update, steps per env (table 14 gives none; ours: half of table 7's 256-step
#: episode). ``TrainSettings`` (``agents/settings.py``) reads its default from here.
N_STEPS = 128
#: When PopArt updates its statistics (see :class:`PPO`).
POPART_SCHEDULES = ("sample", "epoch")


class PPO(SB3PPO):
    """SB3 PPO with SMPO masking, V-trace, PopArt and prioritized segment sampling.

    Arguments beyond SB3's PPO (whose defaults here follow TerraZero table 14):

    :param env: an SB3 ``VecEnv`` (or anything SB3 accepts), or a Gymnasium ``VectorEnv``, which is
        wrapped in ``SB3VecEnv(env)``: the array path then keeps the episode statistics itself
        (:attr:`episode_tally`); where the adapter path runs instead, in ``VecMonitor(SB3VecEnv(env))``.
    :param batch_size: minibatch size; None: rollout size / ``num_minibatches``.
    :param num_minibatches: minibatches per epoch (also the number drawn by priority).
    :param vtrace: V-trace off-policy correction, clip levels ``rho_bar`` and ``c_bar``.
    :param popart: normalized value head with PopArt (``popart_decay``, ``popart_min_sigma``); not
        allowed with ``VecNormalize(norm_reward=True)``. ``popart_schedule``: ``"sample"`` updates the
        statistics once per rollout with the decay applied per target sample; ``"epoch"`` once per
        epoch (section 5.1's reading) with the decay applied per update, bias-corrected
        (:func:`losses.popart_epoch_step`). ``BENCHMARKS.md`` compares the two on the learning check.
    :param prioritized: draw minibatches of ``segment_length``-step segments by priority
        (``priority_alpha``; ``priority_beta0`` annealed linearly to ``priority_beta_final``);
        ``segment_length`` None: the largest divisor of ``n_steps`` and ``batch_size`` up to 16.
    :param array_path: when the env is a Gymnasium vector env (wrapped here for SB3), collect rollouts
        by stepping it directly and reading its arrays (:mod:`terrazero_env.agents.collect`); False: go
        through the SB3 adapter's per-slot infos (same results, slower; for other SB3 tooling).
    :param pack_once: on the array path with the packed entity encoder, keep the present entities the
        policy packed at collection and gather the update's minibatches from them
        (:class:`~terrazero_env.agents.rollout_buffer.PackedEntities`) instead of packing every
        observation again per minibatch (same values); False: pack per minibatch.
    """

    policy_aliases = {**SB3PPO.policy_aliases, "DeepSetsPolicy": DeepSetsPolicy}
    rollout_buffer: MaskedRolloutBuffer

    def __init__(self, policy: str | type, env: Any, learning_rate: float | Any = LINEAR_5E4,
                 n_steps: int = N_STEPS, batch_size: int | None = None, num_minibatches: int = 16,
                 n_epochs: int = 2, gamma: float = 0.99, gae_lambda: float = 0.95, clip_range: float | Any = 0.2,
                 clip_range_vf: None = None, normalize_advantage: bool = True, ent_coef: float = 0.01,
                 vf_coef: float = 0.5, max_grad_norm: float = 0.5, vtrace: bool = True, rho_bar: float = 1.0,
                 c_bar: float = 1.0, popart: bool = True, popart_decay: float = 0.9997,
                 popart_min_sigma: float = 1e-4, popart_schedule: str = "sample", prioritized: bool = True, priority_alpha: float = 0.85,
                 priority_beta0: float = 0.85, priority_beta_final: float = 0.978, segment_length: int | None = None,
                 array_path: bool = True, pack_once: bool = True, policy_kwargs: dict[str, Any] | None = None, _init_setup_model: bool = True,
                 **kwargs: Any) -> None:
        if clip_range_vf is not None:
            raise ValueError("value clipping is not supported (TerraZero table 14: unclipped)")
        if isinstance(env, gym.vector.VectorEnv):
            from ..wrappers.sb3 import SB3VecEnv

            env = SB3VecEnv(env)
            if not (array_path and not kwargs.get("use_sde", False) and array_vector_env(env) is not None):
                env = VecMonitor(env)  # the adapter path: SB3's episode log comes from the monitor's infos
        policy_kwargs = dict(policy_kwargs or {})
        policy_class = self.policy_aliases.get(policy, policy) if isinstance(policy, str) else policy
        if (env is not None and isinstance(policy_class, type) and issubclass(policy_class, DeepSetsPolicy)
                and "layout" not in policy_kwargs):
            policy_kwargs.update(layout_from_env(env))
        policy_kwargs.setdefault("optimizer_kwargs", dict(DEFAULT_OPTIMIZER_KWARGS))
        if batch_size is None:
            batch_size = max(2, n_steps * getattr(env, "num_envs", 1) // num_minibatches)
        self.num_minibatches = num_minibatches
        self.vtrace, self.rho_bar, self.c_bar = vtrace, rho_bar, c_bar
        self.popart, self.popart_decay, self.popart_min_sigma = popart, popart_decay, popart_min_sigma
        if popart_schedule not in POPART_SCHEDULES:
            raise ValueError(f"popart_schedule: one of {', '.join(POPART_SCHEDULES)}, got {popart_schedule!r}")
        self.popart_schedule = popart_schedule
        self.popart_mean, self.popart_sq_mean = 0.0, 1.0
        #: Per-epoch PopArt updates done so far (``popart_schedule="epoch"``'s bias correction).
        self.popart_updates = 0
        self.prioritized, self.priority_alpha = prioritized, priority_alpha
        self.priority_beta0, self.priority_beta_final = priority_beta0, priority_beta_final
        self.segment_length = segment_length
        self.array_path = array_path
        self.pack_once = pack_once
        #: Episode statistics of the array path (None until it runs; see ``agents/collect.py``).
        self.episode_tally: EpisodeTally | None = None
        #: Collective operations for data-parallel training (``terrazero_env.agents.distributed``).
        self.sync = Sync.local()
        super().__init__(policy, env, learning_rate=learning_rate, n_steps=n_steps, batch_size=batch_size,
                         n_epochs=n_epochs, gamma=gamma, gae_lambda=gae_lambda, clip_range=clip_range,
                         normalize_advantage=normalize_advantage, ent_coef=ent_coef, vf_coef=vf_coef,
                         max_grad_norm=max_grad_norm, rollout_buffer_class=MaskedRolloutBuffer,
                         policy_kwargs=policy_kwargs,
                         _init_setup_model=_init_setup_model, **kwargs)

    def _setup_model(self) -> None:
        if self.popart and self.env is not None and _normalizes_reward(self.env):
            raise ValueError("PopArt must not be combined with reward normalization (VecNormalize(norm_reward=True))")
        if self.segment_length is None:
            self.segment_length = min(16, math.gcd(self.n_steps, self.batch_size))
        if self.prioritized and (self.n_steps % self.segment_length or self.batch_size % self.segment_length):
            raise ValueError(f"prioritized sampling needs segment_length ({self.segment_length}) to divide "
                             f"n_steps ({self.n_steps}) and batch_size ({self.batch_size})")
        self.rollout_buffer_kwargs = {**(self.rollout_buffer_kwargs or {}), "segment_length": self.segment_length}
        super()._setup_model()

    # ------------------------------------------------------------------------------ PopArt helpers

    @property
    def popart_sigma(self) -> float:
        return losses.popart_sigma(self.popart_mean, self.popart_sq_mean, self.popart_min_sigma)

    def denormalize_values(self, values: torch.Tensor) -> torch.Tensor:
        """Value-head outputs on the true return scale (identity without PopArt)."""
        return values * self.popart_sigma + self.popart_mean if self.popart else values

    def training_state(self) -> dict[str, Any]:
        """What an exact resume needs besides the weights, the optimizer and the env: the step and
        update counts, the last observation and episode starts, the episode logs, PopArt's
        statistics and the array path's episode tally (``agents/checkpoint.py`` writes it). SB3 keeps
        several of these in private fields; this subclass is the one place that reads them."""
        return {
            "popart": (self.popart_mean, self.popart_sq_mean, self.popart_updates),
            "num_timesteps": self.num_timesteps, "n_updates": self._n_updates, "episode_num": self._episode_num,
            "last_obs": self._last_obs, "last_episode_starts": self._last_episode_starts,
            "ep_info_buffer": list(self.ep_info_buffer or []), "ep_success_buffer": list(self.ep_success_buffer or []),
            "episode_tally": self.episode_tally.state() if self.episode_tally is not None else None,
        }

    def load_training_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`training_state` (from a checkpoint of a run built with the same settings)."""
        self.popart_mean, self.popart_sq_mean = state["popart"][:2]
        self.popart_updates = int(state["popart"][2]) if len(state["popart"]) > 2 else 0
        self.num_timesteps, self._n_updates = state["num_timesteps"], state["n_updates"]
        self._episode_num = state["episode_num"]
        self._last_obs, self._last_episode_starts = state["last_obs"], state["last_episode_starts"]
        self.ep_info_buffer = deque(state["ep_info_buffer"], maxlen=self._stats_window_size)
        self.ep_success_buffer = deque(state["ep_success_buffer"], maxlen=self._stats_window_size)
        tally = state.get("episode_tally")
        if tally is None:
            self.episode_tally = None
        else:
            self.episode_tally = EpisodeTally(len(tally["returns"]))
            self.episode_tally.set_state(tally)

    def _excluded_save_params(self) -> list[str]:
        # The rollout's runtime state (last observations, episode-start flags, episode-info buffers)
        # is not part of a model: a saved zip holds the policy and its settings, which load without
        # unpickling (modelzip); exact resumes use the training checkpoints (checkpoint.py).
        return [*super()._excluded_save_params(), "sync", "episode_tally", "_obs_stage", "_next_obs", "_next_obs_host", "_grads", "_last_obs",
                "_last_episode_starts", "_last_original_obs", "ep_info_buffer", "ep_success_buffer"]

    def save(self, path: Any, exclude: Any = None, include: Any = None) -> None:
        """SB3's ``save``, plus (for a file path) the plain-data entry that lets
        :func:`terrazero_env.agents.modelzip.load_model` read the zip without unpickling."""
        super().save(path, exclude=exclude, include=include)
        if isinstance(path, (str, os.PathLike)):
            add_safe_entry(self, path)

    def _setup_learn(self, total_timesteps: int, callback: Any = None, reset_num_timesteps: bool = True,
                     tb_log_name: str = "run", progress_bar: bool = False) -> tuple[int, BaseCallback]:
        """SB3's, with one difference: without a TensorBoard folder (and no logger set by the caller)
        the logger writes to standard output at ``verbose >= 1`` and nowhere else, as SB3's does, but
        without the empty ``tempdir/SB3-<time>`` folder that SB3's ``configure`` makes on every
        ``learn`` for it."""
        own = not self._custom_logger and self.tensorboard_log is None
        if own:
            formats = [HumanOutputFormat(sys.stdout)] if self.verbose >= 1 else []
            self._logger = Logger(folder=None, output_formats=formats)
            self._custom_logger = True  # SB3 keeps a logger so marked
        try:
            return super()._setup_learn(total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar)
        finally:
            if own:
                self._custom_logger = False

    def _popart_step(self) -> None:
        """Update the statistics with the current value targets (over every rank's) and rescale the
        value head: once per rollout with the decay per target sample (``popart_schedule="sample"``),
        or once per epoch with the bias-corrected decay per update (``"epoch"``)."""
        buf = self.rollout_buffer
        head = self.policy.value_net
        stats = self.sync.sum(targets.target_moments(buf.returns, buf.valid))  # three scalars to the host
        step = None
        if self.popart_schedule == "epoch" and stats[0] > 0:
            self.popart_updates += 1
            step = losses.popart_epoch_step(self.popart_decay, self.popart_updates)
        with torch.no_grad():
            mean, sq_mean, weight, bias = losses.popart_update_moments(
                self.popart_mean, self.popart_sq_mean, head.weight.data, head.bias.data, stats,
                self.popart_decay, self.popart_min_sigma, step)
            head.weight.copy_(weight)
            head.bias.copy_(bias)
        self.popart_mean, self.popart_sq_mean = mean, sq_mean

    # ------------------------------------------------------------------------------- collection

    def collect_rollouts(self, env: VecEnv, callback: BaseCallback, rollout_buffer: RolloutBuffer,
                         n_rollout_steps: int) -> bool:
        """SB3's rollout loop, recording validity, terminal-vs-truncation and V(s_final) (denormalized);
        rewards are stored as given (truncations bootstrap through ``next_values``)."""
        assert self._last_obs is not None, "no previous observation was provided"
        found = array_vector_env(env) if self.array_path and not self.use_sde else None
        if found is not None:
            return self._collect_arrays(found, callback, rollout_buffer, n_rollout_steps)
        self.policy.set_training_mode(False)
        rollout_buffer.reset()
        if self.use_sde:
            self.policy.reset_noise(env.num_envs)
        callback.on_rollout_start()
        n_steps = 0
        while n_steps < n_rollout_steps:
            if self.use_sde and self.sde_sample_freq > 0 and n_steps % self.sde_sample_freq == 0:
                self.policy.reset_noise(env.num_envs)
            with torch.no_grad():
                actions, values, log_probs = self.policy(obs_as_tensor(self._last_obs, self.device))
            actions = actions.cpu().numpy()
            clipped = actions
            if isinstance(self.action_space, spaces.Box):
                clipped = (self.policy.unscale_action(actions) if self.policy.squash_output
                           else np.clip(actions, self.action_space.low, self.action_space.high))
            new_obs, rewards, dones, infos = env.step(clipped)
            self.num_timesteps += env.num_envs
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, dones)
            n_steps += 1
            if isinstance(self.action_space, spaces.Discrete):
                actions = actions.reshape(-1, 1)
            valid = np.array([bool(info.get("valid", True)) for info in infos])
            truncated = dones & np.array([bool(info.get("TimeLimit.truncated", False))
                                          and info.get("terminal_observation") is not None for info in infos])
            final_values = torch.zeros(env.num_envs, device=self.device)
            if truncated.any():
                ids = np.flatnonzero(truncated)
                final_obs = np.stack([infos[i]["terminal_observation"] for i in ids])
                with torch.no_grad():
                    v = self.denormalize_values(self.policy.predict_values(obs_as_tensor(final_obs, self.device)))
                final_values[torch.as_tensor(ids, device=self.device)] = v.reshape(-1)
            rollout_buffer.add(self._last_obs, actions, rewards, self._last_episode_starts,
                               self.denormalize_values(values), log_probs, valid=valid,
                               terminated=dones & ~truncated, dones=dones, final_values=final_values)
            self._last_obs = new_obs
            self._last_episode_starts = dones
        with torch.no_grad():
            values = self.denormalize_values(self.policy.predict_values(obs_as_tensor(new_obs, self.device)))
        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _collect_arrays(self, venv: Any, callback: BaseCallback, buf: MaskedRolloutBuffer,
                        n_rollout_steps: int) -> bool:
        """The array-only rollout loop (``agents/collect.py``): the same transitions as
        :meth:`collect_rollouts` through the SB3 adapter, read from the vector env's arrays. Per step,
        the policy acts on every slot's observation (already in the buffer on the training device),
        then the whole env steps once and its new observations go into the buffer's next row."""
        self.policy.set_training_mode(False)
        buf.reset()
        n = venv.num_envs
        if self.episode_tally is None or self.episode_tally.returns.shape != (n,):
            self.episode_tally = EpisodeTally(n)
        self.episode_tally.episode_log = self.ep_info_buffer  # SB3 and a resume replace the deque
        stage = getattr(self, "_obs_stage", None)
        if stage is None or stage.device != buf.observations.device:
            stage = self._obs_stage = ObservationStage(tuple(buf.observations.shape[1:]), buf.observations.device,
                                                       buf.observations.dtype)
        tally = self.episode_tally
        # The last rollout's final observations are still on the device (``_next_obs``): copied there
        # unless ``_last_obs`` was replaced since (a reset, a restored checkpoint, another env).
        next_obs = getattr(self, "_next_obs", None)
        if (next_obs is not None and self._last_obs is getattr(self, "_next_obs_host", None)
                and next_obs.shape == buf.observations[0].shape and next_obs.device == buf.observations.device):
            buf.observations[0].copy_(next_obs)
        else:
            stage.copy_into(buf.observations[0], self._last_obs)
            next_obs = self._next_obs = torch.empty_like(buf.observations[0])
        entities = self._entity_store(buf)
        callback.on_rollout_start()
        ones = np.ones(n, bool)
        for t in range(n_rollout_steps):
            actions_dev, values, log_probs = self._act(buf.observations[t], entities, t)
            new_obs, rewards, terminated, truncated_flags, info = venv.step(self._env_actions(actions_dev))
            rewards = np.asarray(rewards, np.float32)
            terminated = np.asarray(terminated, bool)
            dones = terminated | np.asarray(truncated_flags, bool)
            self.num_timesteps += n
            callback.update_locals(locals())
            if not callback.on_step():
                return False
            valid = np.asarray(info.get("valid", ones), bool)
            tally.step(rewards, dones, valid, info)
            truncated = dones & ~terminated
            final_values = torch.zeros(n, device=self.device)
            if truncated.any():
                ids = np.flatnonzero(truncated)
                final_obs = torch.as_tensor(final_observations(new_obs, info, ids), device=self.device,
                                            dtype=buf.observations.dtype)
                with torch.no_grad():
                    v = self.denormalize_values(self.policy.predict_values(final_obs))
                final_values[torch.as_tensor(ids, device=self.device)] = v.reshape(-1)
            buf.add(None, actions_dev, rewards, self._last_episode_starts,
                    self.denormalize_values(values), log_probs, valid=valid, terminated=terminated, dones=dones,
                    final_values=final_values)
            stage.copy_into(buf.observations[t + 1] if t + 1 < n_rollout_steps else next_obs, new_obs)
            self._last_episode_starts = dones
        # SB3's ``_last_obs`` is a host array: on the CPU a view of ``_next_obs`` (overwritten only at
        # the end of the next rollout, by which time it was read), on a GPU one copy to the host.
        self._last_obs = self._next_obs_host = next_obs.numpy() if next_obs.device.type == "cpu" else next_obs.cpu().numpy()
        if entities is not None:
            entities.finalize()
        with torch.no_grad():
            values = self.denormalize_values(self.policy.predict_values(next_obs))
        buf.compute_returns_and_advantage(last_values=values, dones=dones)
        callback.update_locals(locals())
        callback.on_rollout_end()
        return True

    def _env_actions(self, actions: torch.Tensor) -> np.ndarray:
        """The policy's actions as the env takes them (Box actions unscaled or clipped, as SB3 does)."""
        a = actions.cpu().numpy()
        if isinstance(self.action_space, spaces.Box):
            a = (self.policy.unscale_action(a) if self.policy.squash_output
                 else np.clip(a, self.action_space.low, self.action_space.high))
        return a

    def _entity_store(self, buf: MaskedRolloutBuffer) -> PackedEntities | None:
        """The buffer's store of packed entities when this rollout keeps them (``pack_once`` and a
        policy with the packed encoder), created on first use; else None (and the buffer keeps none)."""
        if not (self.pack_once and isinstance(self.policy, DeepSetsPolicy) and self.policy.packs_entities):
            buf.entities = None
            return None
        fe = self.policy.features_extractor
        store = buf.entities
        if (store is None or store.n_steps != buf.buffer_size or store.n_envs != buf.n_envs
                or store.groups != fe.entity_groups or store.typed != fe.typed):
            store = buf.entities = PackedEntities(buf.buffer_size, buf.n_envs, fe.entity_groups, fe.typed)
        store.reset()
        return store

    def _act(self, obs: torch.Tensor, entities: PackedEntities | None,
             step: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The policy's actions, values and log-probabilities of ``obs`` (every slot of ``step``; no
        gradient); with a store, its packing of ``obs`` is kept there as that step's."""
        with torch.no_grad():
            if entities is None:
                return self.policy(obs)
            actions, values, log_probs, packed = self.policy.forward_packed(obs)
        entities.add(step, 0, packed)
        return actions, values, log_probs

    # ---------------------------------------------------------------------------------- update

    def _flat_gradients(self) -> FlatGradients | None:
        """The policy's gradients as views of one flat buffer (:class:`FlatGradients`), for a Deep Sets
        policy, whose every parameter is in the graph of every minibatch's loss; None for other
        policies (SB3's ``zero_grad`` and ``clip_grad_norm_``)."""
        if not isinstance(self.policy, DeepSetsPolicy):
            return None
        grads = getattr(self, "_grads", None)
        if grads is None or not grads.covers(self.policy):
            grads = self._grads = FlatGradients(list(self.policy.parameters()))
        return grads

    def _minibatches(self, beta: float) -> Generator[MaskedRolloutSamples, None, None]:
        if self.prioritized:
            return self.rollout_buffer.get_prioritized(self.batch_size, self.num_minibatches,
                                                       self.priority_alpha, beta, self.sync)
        return self.rollout_buffer.get(self.batch_size)

    def train(self) -> None:
        """One update on the collected rollout: PopArt step, then ``n_epochs`` passes of minibatches
        with the masked PPO loss, V-trace recomputed before every epoch after the first."""
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)
        buf = self.rollout_buffer
        if self.popart and self.popart_schedule == "sample":
            self._popart_step()
        beta = self.priority_beta0 + (self.priority_beta_final - self.priority_beta0) * (
            1.0 - self._current_progress_remaining)
        logs: dict[str, list[float]] = defaultdict(list)
        stop = False
        for epoch in range(self.n_epochs):
            if epoch > 0 and self.vtrace:
                buf.recompute_vtrace(self.rho_bar, self.c_bar)
            if self.popart and self.popart_schedule == "epoch":  # this epoch's targets (section 5.1)
                self._popart_step()
            for batch in self._minibatches(beta):
                actions = batch.actions
                if isinstance(self.action_space, spaces.Discrete):
                    actions = actions.long().flatten()
                if batch.packed is not None:
                    values, log_prob, entropy = self.policy.evaluate_actions_packed(batch.packed, actions)
                else:
                    values, log_prob, entropy = self.policy.evaluate_actions(batch.observations, actions)
                value_targets = batch.returns
                if self.popart:
                    value_targets = (value_targets - self.popart_mean) / self.popart_sigma
                num_valid, adv_stats, normalize = None, None, self.normalize_advantage
                if self.sync.distributed:  # one global count and advantage scale over every rank
                    agg = self.sync.sum(losses.moments(batch.advantages, batch.valid))
                    num_valid, normalize = float(agg[0]), normalize and agg[0] >= 2
                    adv_stats = losses.mean_std_from_moments(agg) if normalize else None
                loss, stats = losses.masked_ppo_loss(
                    log_prob, batch.old_log_prob, batch.advantages, values.flatten(), value_targets, entropy,
                    batch.valid, clip_range, self.ent_coef, self.vf_coef, batch.weights, normalize,
                    num_valid=num_valid, adv_stats=adv_stats)
                if self.vtrace:
                    buf.store_log_rhos(batch.indices, (log_prob - batch.old_log_prob).detach())
                if self.sync.distributed:  # the losses are already global sums; the KL is averaged
                    n_local = float(batch.valid.sum())
                    kl = self.sync.sum([stats["approx_kl"] * n_local, n_local])
                    stats["approx_kl"] = float(kl[0] / max(kl[1], 1.0))
                for key, value in stats.items():
                    logs[key].append(value)
                if self.target_kl is not None and stats["approx_kl"] > 1.5 * self.target_kl:
                    stop = True
                    if self.verbose >= 1:
                        print(f"Early stopping at epoch {epoch} due to reaching max kl: {stats['approx_kl']:.2f}")
                    break
                grads = self._flat_gradients()
                if grads is None:
                    self.policy.optimizer.zero_grad()
                else:
                    grads.zero_()
                loss.backward()
                self.sync.sum_gradients(self.policy.parameters())
                if grads is None:
                    torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                else:
                    grads.clip_norm_(self.max_grad_norm)
                if grads is None or not grads.adam_step(self.policy.optimizer):
                    self.policy.optimizer.step()
                logs["loss"].append(loss.item())
            self._n_updates += 1
            if stop:
                break
        self._record(logs, clip_range)

    def _record(self, logs: dict[str, list[float]], clip_range: float) -> None:
        buf = self.rollout_buffer
        for key in ("policy_loss", "value_loss", "entropy_loss", "approx_kl", "clip_fraction", "loss"):
            if logs[key]:
                name = "policy_gradient_loss" if key == "policy_loss" else key
                self.logger.record(f"train/{name}", float(np.mean(logs[key])))
        self.logger.record("train/explained_variance", targets.explained_variance(buf.values, buf.returns, buf.valid))
        self.logger.record("train/valid_fraction", float(buf.valid.float().mean()))
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", clip_range)
        if self.popart:
            self.logger.record("train/popart_mean", self.popart_mean)
            self.logger.record("train/popart_sigma", self.popart_sigma)


class FlatGradients:
    """The gradients of a list of parameters as views of one flat buffer, so that clearing them is one
    fill and clipping their global norm one norm and one scaling of the buffer, instead of a norm per
    parameter, a stack and a scaling per parameter (``torch.nn.utils.clip_grad_norm_``): the same
    clipping up to float summation order. Autograd accumulates into an existing ``.grad`` in place, so
    the views stay bound; :meth:`zero_` binds them again where anything replaced them (SB3's
    ``zero_grad`` sets them to None)."""

    def __init__(self, params: list[torch.Tensor]) -> None:
        self.params = params
        first = params[0]
        self.flat = torch.zeros(sum(p.numel() for p in params), dtype=first.dtype, device=first.device)
        self.views: list[torch.Tensor] = []
        offset = 0
        for p in params:
            self.views.append(self.flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()

    def covers(self, module: torch.nn.Module) -> bool:
        """Whether these are the gradients of ``module``'s parameters (the same tensors, in order)."""
        params = list(module.parameters())
        return len(params) == len(self.params) and all(a is b for a, b in zip(params, self.params))

    def zero_(self) -> None:
        """Set every gradient to zero (bound to the flat buffer)."""
        for p, view in zip(self.params, self.views):
            if p.grad is not view:
                p.grad = view
        self.flat.zero_()

    def adam_step(self, optimizer: torch.optim.Optimizer) -> bool:
        """``optimizer.step()`` of a fused ``torch.optim.Adam`` over these parameters (the default,
        ``DEFAULT_OPTIMIZER_KWARGS``), as the kernel call that ``torch.optim.adam._fused_adam`` makes:
        every step count + 1, then ``torch._fused_adam_`` over the parameters, their gradients and
        moments, with the group's hyperparameters. ``Optimizer.step`` spends more in Python around
        that call (hooks, grouping by device and dtype, argument checks; about 0.4 ms a step) than the
        kernel over the quick policy's 121k parameters. The same update, value for value. False (and
        nothing done) where that is not the optimizer's step: another optimizer or setting, a
        parameter without its state yet (the first step) or without its bound gradient; the caller
        then calls ``optimizer.step()``."""
        if type(optimizer) is not torch.optim.Adam or len(optimizer.param_groups) != 1:
            return False
        group = optimizer.param_groups[0]
        if (not group.get("fused") or group.get("amsgrad") or group.get("maximize") or group.get("capturable")
                or group.get("differentiable") or group.get("decoupled_weight_decay")
                or len(group["params"]) != len(self.params)
                or any(a is not b for a, b in zip(group["params"], self.params))):
            return False
        state = optimizer.state
        cached = getattr(self, "_adam", None)
        if cached is None or any(state.get(p, {}).get("exp_avg") is not m for p, m in zip(self.params, cached[0])):
            moments = [state.get(p, {}) for p in self.params]
            if not all("exp_avg" in m and "exp_avg_sq" in m and "step" in m for m in moments):
                return False
            cached = self._adam = ([m["exp_avg"] for m in moments], [m["exp_avg_sq"] for m in moments],
                                   [m["step"] for m in moments])
        if any(p.grad is not v for p, v in zip(self.params, self.views)) or any(
                s is not state[p]["step"] or v is not state[p]["exp_avg_sq"]
                for p, s, v in zip(self.params, cached[2], cached[1])):
            self._adam = None
            return False
        beta1, beta2 = group["betas"]
        with torch.no_grad():
            torch._foreach_add_(cached[2], 1)
            torch._fused_adam_(self.params, self.views, cached[0], cached[1], [], cached[2], amsgrad=False,
                               lr=group["lr"], beta1=beta1, beta2=beta2, weight_decay=group["weight_decay"],
                               eps=group["eps"], maximize=False, grad_scale=None, found_inf=None)
        return True

    def clip_norm_(self, max_norm: float) -> torch.Tensor:
        """``clip_grad_norm_``: scale every gradient by ``min(1, max_norm / (norm + 1e-6))`` where ``norm``
        is their global 2-norm; returns the norm."""
        if any(p.grad is not view for p, view in zip(self.params, self.views)):  # rebound since zero_
            return torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        norm = torch.linalg.vector_norm(self.flat)
        self.flat.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm


def _normalizes_reward(env: VecEnv) -> bool:
    wrapper = unwrap_vec_wrapper(env, VecNormalize)
    return bool(wrapper is not None and wrapper.norm_reward)
