"""The rollout storage of :class:`terrazero_env.agents.PPO`: every per-step field of a rollout as a
tensor on the training device, allocated once and cleared in place, with the validity mask, the
terminal-or-truncation flags and V(s_final) that SMPO and V-trace need, the per-step host fields
staged in one block and copied in one transfer, and the minibatch samplers (uniform, and by segment
priority). Advantages and targets are computed there by :mod:`terrazero_env.agents.targets`.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3.common.buffers import RolloutBuffer

from . import targets
from .distributed import Sync
from .policies import PackedObs

__all__ = ["MaskedRolloutBuffer", "MaskedRolloutSamples", "PackedEntities"]


class MaskedRolloutSamples(NamedTuple):
    """One minibatch: SB3's fields plus the validity mask, importance weights (None: uniform) and the
    flat buffer indices of the samples (a tensor on the buffer's device)."""

    observations: torch.Tensor
    actions: torch.Tensor
    old_values: torch.Tensor
    old_log_prob: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    valid: torch.Tensor
    weights: torch.Tensor | None
    indices: torch.Tensor
    #: The samples' observations with their entity groups packed (gathered from
    #: :class:`PackedEntities`), or None where the rollout kept no packing.
    packed: PackedObs | None = None


class PackedEntities:
    """The present entities of every observation of a rollout, as the policy packed them at collection
    (:meth:`DeepSetsPolicy.forward_packed`), so that the update gathers its minibatches' entities
    instead of finding and copying them again in every epoch.

    Collection adds the packing of each step (or of each contiguous block of slots of a step) with
    :meth:`add`; :meth:`finalize` concatenates them in (step, slot) order, the order they were packed
    in, and records per group where each observation's entities start and how many there are;
    :meth:`gather` builds the :class:`PackedObs` of any samples from those offsets, reading only the
    gathered entities (the padding of the observations is never read again)."""

    def __init__(self, n_steps: int, n_envs: int, groups: list[str], typed: bool) -> None:
        self.n_steps, self.n_envs, self.groups, self.typed = n_steps, n_envs, list(groups), typed
        self._storage: dict[str, torch.Tensor] = {}
        self.reset()

    def reset(self) -> None:
        self._chunks: list[tuple[int, int, PackedObs]] = []
        self.ready = False

    def add(self, step: int, first_slot: int, packed: PackedObs) -> None:
        """The packing of slots ``first_slot .. first_slot + packed.n - 1`` at ``step``."""
        self._chunks.append((step, first_slot, packed))
        self.ready = False

    def finalize(self) -> bool:
        """Index the chunks added since :meth:`reset`; False (and no packing kept) unless they tile
        every (step, slot) pair exactly once."""
        chunks = sorted(self._chunks, key=lambda c: (c[0], c[1]))
        expect = 0
        for step, first, packed in chunks:
            if step * self.n_envs + first != expect:
                break
            expect += packed.n
        if expect != self.n_steps * self.n_envs or not chunks:
            self.reset()
            return False
        self.ego = self._concat("ego", [c[2].ego for c in chunks])
        self.kind = self._concat("kind", [c[2].kind for c in chunks]) if self.typed else None
        self.feats = {g: self._concat(g, [c[2].groups[g][1] for c in chunks]) for g in self.groups}
        #: ``[T * N, groups]``: each observation's entity count and first entity, per group, at
        #: ``step * n_envs + slot``.
        self.counts = torch.stack([torch.cat([torch.bincount(c[2].groups[g][0], minlength=c[2].n) for c in chunks])
                                   for g in self.groups], dim=1)
        self.starts = torch.cumsum(self.counts, 0) - self.counts
        self._chunks = []
        self.ready = True
        return True

    def _concat(self, name: str, parts: list[torch.Tensor]) -> torch.Tensor:
        """``torch.cat(parts)`` into storage kept from one rollout to the next (grown by a quarter when
        too small): a fresh tensor of this size costs more in first-touch page faults than the copy."""
        rows = sum(p.shape[0] for p in parts)
        store = self._storage.get(name)
        if store is None or store.shape[0] < rows or store.shape[1:] != parts[0].shape[1:] or store.dtype != parts[0].dtype:
            store = self._storage[name] = parts[0].new_empty((rows + rows // 4, *parts[0].shape[1:]))
        return torch.cat(parts, out=store[:rows])

    def gather(self, indices: torch.Tensor) -> PackedObs:
        """The :class:`PackedObs` of the samples at the buffer's flat ``indices`` (int64 ``[B]``; sample
        ``i`` is step ``i % T`` of env ``i // T``), in that order."""
        b = indices.shape[0]
        dev = indices.device
        keys = (indices % self.n_steps) * self.n_envs + torch.div(indices, self.n_steps, rounding_mode="floor")
        counts = self.counts.index_select(0, keys)  # [B, groups]
        totals = counts.sum(0).tolist()
        # Entity j of the batch, the k-th of its sample: source starts[sample] + k = j + shift[sample].
        shift = self.starts.index_select(0, keys) - (torch.cumsum(counts, 0) - counts)
        arange_b = torch.arange(b, device=dev)
        groups = {}
        for j, g in enumerate(self.groups):
            rows = torch.repeat_interleave(arange_b, counts[:, j], output_size=totals[j])
            src = torch.arange(totals[j], device=dev) + shift[:, j].index_select(0, rows)
            groups[g] = (rows, self.feats[g].index_select(0, src))
        kind = self.kind.index_select(0, keys) if self.typed else None
        return PackedObs(self.ego.index_select(0, keys), groups, kind, b)


#: The per-step ``[T, N]`` fields of :class:`MaskedRolloutBuffer` and their dtypes (torch tensors on
#: the training device).
_STEP_FIELDS = {"valid": torch.bool, "terminated": torch.bool, "dones": torch.bool, "final_values": torch.float32,
                "next_values": torch.float32, "log_rhos": torch.float32, "rewards": torch.float32,
                "returns": torch.float32, "episode_starts": torch.float32, "values": torch.float32,
                "log_probs": torch.float32, "advantages": torch.float32}


class MaskedRolloutBuffer(RolloutBuffer):
    """SB3's rollout buffer plus, per step ``[T, N]``: ``valid``, ``terminated`` (true terminal),
    ``dones`` (any episode end), ``final_values`` (V(s_final) at truncations), ``next_values`` and the
    current ``log_rhos`` (log pi - log mu) for V-trace. ``log_probs`` are the behaviour log-probabilities.

    Every field is a torch tensor on the training device, observations included:
    advantages, value targets, PopArt moments and priorities are computed there
    (:mod:`terrazero_env.agents.targets`), and minibatches are gathered there.

    Flat sample index ``i`` is step ``i % T`` of env ``i // T`` (SB3's ``swap_and_flatten`` order),
    so a trajectory segment of ``segment_length`` steps is a contiguous index range.
    """

    def __init__(self, buffer_size: int, observation_space: spaces.Space, action_space: spaces.Space,
                 device: torch.device | str = "auto", gae_lambda: float = 1, gamma: float = 0.99,
                 n_envs: int = 1, segment_length: int = 16) -> None:
        if not isinstance(observation_space, spaces.Box):
            raise TypeError(f"MaskedRolloutBuffer supports Box observations, got {observation_space}")
        self.segment_length = segment_length
        #: The rollout's packed entities (:class:`PackedEntities`), set by the trainer when its policy
        #: packs them at collection; None: minibatches carry observations only.
        self.entities: PackedEntities | None = None
        #: Collective operations for data-parallel training (``terrazero_env.agents.distributed``).
        self.sync = Sync.local()
        super().__init__(buffer_size, observation_space, action_space, device, gae_lambda, gamma, n_envs)

    def reset(self) -> None:
        shape = (self.buffer_size, self.n_envs)
        # Allocated once on the training device and cleared in place at every rollout. float16
        # observations (``obs.dtype: float16``, section 3.1) stay float16 on the device; the policy
        # casts them to float32 (SB3's ``preprocess_obs``).
        if not isinstance(getattr(self, "observations", None), torch.Tensor):
            dtype = torch.float16 if self.observation_space.dtype == np.float16 else torch.float32
            self.observations = torch.zeros((self.buffer_size, self.n_envs, *self.obs_shape), dtype=dtype,
                                            device=self.device)
            self.actions = torch.zeros((*shape, self.action_dim), dtype=torch.float32, device=self.device)
            for name, field_dtype in _STEP_FIELDS.items():
                setattr(self, name, torch.zeros(shape, dtype=field_dtype, device=self.device))
        else:
            self.actions.zero_()
            for name in _STEP_FIELDS:  # advantages, returns, next_values: the last rollout's results, reused
                getattr(self, name).zero_()
        self.valid.fill_(True)
        if self.entities is not None:
            self.entities.reset()
        self.generator_ready = False
        self.pos, self.full = 0, False

    def _put(self, name: str, value: Any) -> None:
        """``self.<name>[pos] = value`` (an array or a tensor on any device), without a host round trip."""
        row = getattr(self, name)[self.pos]
        row.copy_(torch.as_tensor(value).reshape(row.shape))

    def _put_host_rows(self, fields: list[tuple[str, Any]]) -> None:
        """``_put`` of several host arrays of ``n_envs`` flags or float32 scalars in one transfer: they are
        stacked into one float32 row block (0/1 and float32 values exactly), copied to the device once,
        and split into their fields there."""
        staged = np.empty((len(fields), self.n_envs), np.float32)
        for k, (_, value) in enumerate(fields):
            staged[k] = np.asarray(value).reshape(self.n_envs)
        block = torch.from_numpy(staged).to(self.device)
        for k, (name, _) in enumerate(fields):
            getattr(self, name)[self.pos].copy_(block[k])

    def add(self, obs: np.ndarray | None, action: np.ndarray | torch.Tensor, reward: np.ndarray,
            episode_start: np.ndarray, value: torch.Tensor, log_prob: torch.Tensor, valid: np.ndarray | None = None,
            terminated: np.ndarray | None = None, dones: np.ndarray | None = None,
            final_values: np.ndarray | torch.Tensor | None = None) -> None:
        """SB3's ``add`` plus this step's validity, terminal and episode-end flags and V(s_final).
        ``obs`` None: the observation is already in ``observations[pos]`` (the array path writes it there).
        The host-side per-step arrays (flags, rewards, episode starts) cross to the device in one copy."""
        fields = [("valid", valid), ("rewards", reward), ("episode_starts", episode_start)]
        if dones is not None:
            fields += [("dones", dones), ("terminated", dones if terminated is None else terminated)]
        host: list[tuple[str, Any]] = []
        for name, arr in fields:
            if arr is None:
                continue
            if isinstance(arr, torch.Tensor):
                self._put(name, arr)
            else:
                host.append((name, arr))
        if host:
            self._put_host_rows(host)
        if final_values is not None:
            self._put("final_values", final_values)
        if obs is not None:
            self._put("observations", np.asarray(obs))
        self._put("actions", action)
        self._put("values", value.detach())
        self._put("log_probs", log_prob.detach())
        self.pos += 1
        if self.pos == self.buffer_size:
            self.full = True

    def compute_returns_and_advantage(self, last_values: torch.Tensor, dones: np.ndarray) -> None:
        """Fill ``next_values`` (V(s_{t+1}), V(s_final) at truncations, 0 at terminals) and compute the
        masked GAE on the device. A valid step followed by padding ends its trace."""
        nxt = torch.cat([self.values[1:], last_values.detach().reshape(1, -1).to(self.values)])
        nxt = torch.where(self.dones & ~self.terminated, self.final_values, nxt)
        self.next_values = nxt.masked_fill(self.terminated, 0.0)
        self.dones[:-1] |= ~self.valid[1:]
        self.log_rhos.zero_()
        self.advantages, self.returns = targets.masked_gae(
            self.rewards, self.values, self.next_values, self.terminated, self.dones, self.valid,
            self.gamma, self.gae_lambda)

    def recompute_vtrace(self, rho_bar: float, c_bar: float) -> None:
        """Advantages and value targets from the stored ``log_rhos`` (V-trace, :func:`targets.vtrace_gae`)."""
        self.advantages, self.returns = targets.vtrace_gae(
            self.log_rhos, self.rewards, self.values, self.next_values, self.terminated, self.dones,
            self.valid, self.gamma, self.gae_lambda, rho_bar, c_bar)

    def store_log_rhos(self, indices: np.ndarray | torch.Tensor, log_rhos: np.ndarray | torch.Tensor) -> None:
        """Record log pi - log mu of the samples at flat ``indices``."""
        idx = torch.as_tensor(indices, device=self.device)
        self.log_rhos[idx % self.buffer_size, torch.div(idx, self.buffer_size, rounding_mode="floor")] = \
            torch.as_tensor(log_rhos, device=self.device).detach().to(self.log_rhos.dtype)

    def _flat(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(0, 1).reshape(self.buffer_size * self.n_envs, *x.shape[2:])

    def _samples(self, indices: np.ndarray | torch.Tensor, weights: torch.Tensor | None = None,
                 use_packed: bool = False) -> MaskedRolloutSamples:
        """The minibatch at flat ``indices``; ``use_packed``: with the packed entities of the rollout
        (:attr:`entities`) where it kept them, and then no observations."""
        # Flat index i is step i % T of env i // T: gathered from the [T, N, ...] storage on the device.
        idx = torch.as_tensor(indices, device=self.device)
        t, n = idx % self.buffer_size, torch.div(idx, self.buffer_size, rounding_mode="floor")
        keys = t * self.n_envs + n
        packed = None
        if use_packed and self.entities is not None and self.entities.ready:
            # The packing done at collection, gathered; the observations themselves are not read.
            packed = self.entities.gather(idx)
            obs = self.observations[:0].flatten(0, 1)
        else:
            # One index_select over the [T * N, ...] view: a fraction of the time of obs[t, n] on the CPU.
            obs = self.observations.flatten(0, 1).index_select(0, keys)
        return MaskedRolloutSamples(
            packed=packed,
            observations=obs, actions=self.actions[t, n], old_values=self.values[t, n],
            old_log_prob=self.log_probs[t, n], advantages=self.advantages[t, n], returns=self.returns[t, n],
            valid=self.valid[t, n], weights=None if weights is None else weights.to(torch.float32), indices=idx)

    def get(self, batch_size: int | None = None) -> Generator[MaskedRolloutSamples, None, None]:  # type: ignore[override]
        """Minibatches of a random permutation of the whole rollout (the same draws as SB3's ``get``)."""
        assert self.full, "the rollout buffer is not full"
        total = self.buffer_size * self.n_envs
        indices = torch.as_tensor(np.random.permutation(total), device=self.device)
        batch_size = total if batch_size is None else batch_size
        for start in range(0, total, batch_size):
            yield self._samples(indices[start:start + batch_size], use_packed=True)

    def get_prioritized(self, batch_size: int, num_minibatches: int, alpha: float, beta: float,
                        sync: Sync | None = None) -> Generator[MaskedRolloutSamples, None, None]:
        """``num_minibatches`` minibatches of ``batch_size // segment_length`` segments each, drawn on the
        device with replacement with p_i ∝ (sum_t |A_i,t|)^alpha, with importance weights
        (N p_i)^-beta / max. With data-parallel ``sync``, N and the maximum are taken over every
        rank's segments (two scalars cross the host)."""
        assert self.full, "the rollout buffer is not full"
        sync = sync or Sync.local()
        length = self.segment_length
        probs = targets.segment_priorities(self._flat(self.advantages).reshape(-1, length), alpha)
        n_all = int(sync.sum([probs.shape[0]])[0])
        w_max = float(sync.max(targets.priority_weight_max(probs, beta, n_all, sync.world_size).reshape(1))[0])
        steps = torch.arange(length, device=self.device)
        for _ in range(num_minibatches):
            drawn = targets.sample_segments(probs, batch_size // length)
            weights = targets.priority_weights(probs, drawn, beta, n_all, sync.world_size, w_max)
            yield self._samples((drawn[:, None] * length + steps).reshape(-1), weights.repeat_interleave(length),
                                use_packed=True)
