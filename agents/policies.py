"""The Deep Sets actor-critic policy of TerraZero (section 5.1, table 15: a compact MLP of about 3.5M
parameters for the planner).

The observation row is split with the env's observation layout (never hard-coded offsets): an ego MLP
encodes the ego features; partners, road segments and traffic entities each go through a shared
per-entity MLP followed by a max-pool over the entities present (absent entities are all-zero rows),
which makes the encoding invariant to the order and number of entities (Zaheer et al. 2017). The
concatenation feeds a three-layer 1024-unit MLP shared by the actor and value heads. When the env
controls several agent types (ego feature ``agent_type``: vehicle 1, pedestrian 2, cyclist 3), each
type gets its own action head.

    from terrazero_env.agents import PPO
    model = PPO("DeepSetsPolicy", terrazero_env.make_vec(None, "planner"))
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from stable_baselines3.common.distributions import CategoricalDistribution
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper
from terrazero_env._packing import pack_present, segment_max
from torch import nn

from terrazero_env import engine as core
from terrazero_env.envs.vector import policy_layout

__all__ = ["DeepSetsExtractor", "DeepSetsPolicy", "PackedObs", "TypedActionHeads", "count_parameters",
           "encode_present", "layout_from_env", "linear_relu_layers", "max_pool_rows", "mlp_no_grad",
           "pack_entities"]

#: Adam's settings when a caller gives no ``optimizer_kwargs`` (copied per model): eps 1e-8, and torch's
#: fused step (one kernel over each parameter, ``torch.optim.Adam(fused=True)``, on the CPU from torch
#: 2.4): the update of the per-parameter loop up to float rounding, in a third of the multi-tensor
#: step's time for the quick policy on one CPU core. Older torch: the multi-tensor step.
DEFAULT_OPTIMIZER_KWARGS = ({"eps": 1e-8, "fused": True} if torch.__version__ >= "2.4"
                            else {"eps": 1e-8, "foreach": True})

ENTITY_GROUPS = ("partners", "road", "traffic")
#: Implementations of the entity encoders (:meth:`DeepSetsExtractor.encode_entities`).
ENCODERS = ("packed", "dense")
#: Ego ``agent_type`` code of each engine class (CAR, TRUCK, BUS, PEDESTRIAN, CYCLIST), from the engine.
TYPE_CODES: tuple[int, ...] = core.TYPE_CODES


def _base_env(env: Any) -> Any:
    """The native env under SB3 VecEnv wrappers, the SB3 adapter and Gymnasium wrappers."""
    while isinstance(env, VecEnvWrapper):
        env = env.venv
    if isinstance(env, VecEnv):
        inner = getattr(env, "vector_env", None)
        if inner is None and getattr(env, "envs", None):
            inner = env.envs[0]
        if inner is None:
            raise TypeError(f"cannot find the observation layout of {type(env).__name__}")
        env = inner
    return env.unwrapped if isinstance(env, (gym.Env, gym.vector.VectorEnv)) else env


def layout_from_env(env: Any) -> dict[str, Any]:
    """``DeepSetsPolicy`` keyword arguments read from a TerraZero env (single, vector, wrapped or
    adapted for SB3): ``layout`` (group name -> ``[start, count, width]``), ``type_column`` (index of
    the ego ``agent_type`` feature) and ``agent_types`` (the type codes the env controls)."""
    return policy_layout(_base_env(env))


def pack_entities(obs: torch.Tensor, start: int, count: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The present (not all-zero) entities of one group of ``obs`` ``[B, D]``, the group's ``count``
    blocks of ``width`` features from column ``start``: int64 ``[P]`` row of each and ``[P, width]``
    its features, row-major. A float32 CPU batch that needs no gradient goes through the compiled
    two-pass kernel (``terrazero_env._packing``); anything else through the same steps in torch."""
    if obs.device.type == "cpu" and obs.dtype == torch.float32 and not obs.requires_grad and obs.dim() == 2:
        rows, feats = pack_present(obs.contiguous().numpy(), start, count, width)
        return torch.from_numpy(rows), torch.from_numpy(feats)
    ents = obs[:, start:start + count * width].reshape(obs.shape[0], count, width)
    flat = (ents != 0).any(dim=-1).reshape(-1).nonzero().squeeze(1)  # (row, entity) pairs, row-major
    return torch.div(flat, count, rounding_mode="floor"), ents.reshape(-1, width).index_select(0, flat)


class _SegmentMax(torch.autograd.Function):
    """:func:`terrazero_env._packing.segment_max` with its gradient: each pooled entry's gradient goes to
    the packed row that attained it (none where the pool is the initial 0)."""

    @staticmethod
    def forward(ctx: Any, h: torch.Tensor, rows: torch.Tensor, n_rows: int) -> torch.Tensor:
        pooled, arg = segment_max(h.detach().contiguous().numpy(), rows.numpy(), n_rows)
        ctx.save_for_backward(torch.from_numpy(arg))
        ctx.n_packed = h.shape[0]
        return torch.from_numpy(pooled)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (arg,) = ctx.saved_tensors
        width = arg.shape[1]
        hit = arg >= 0
        flat = (arg * width + torch.arange(width).unsqueeze(0))[hit]
        grad_h = grad.new_zeros(ctx.n_packed * width)
        grad_h[flat] = grad[hit]
        return grad_h.view(ctx.n_packed, width), None, None


def max_pool_rows(h: torch.Tensor, rows: torch.Tensor, n_rows: int) -> torch.Tensor:
    """``out[r] = max(0, max of h[p] over p with rows[p] == r)``, ``[n_rows, H]``, differentiable in ``h``.
    On the CPU in float32 the compiled pool routes each gradient to the first row attaining the max;
    elsewhere ``scatter_reduce("amax")`` splits it among tied rows (the two differ only on exact ties
    of a positive maximum)."""
    if h.device.type == "cpu" and h.dtype == torch.float32:
        return _SegmentMax.apply(h, rows, n_rows)
    pooled = torch.zeros(n_rows, h.shape[1], dtype=h.dtype, device=h.device)
    return pooled.scatter_reduce(0, rows.unsqueeze(1).expand(-1, h.shape[1]), h, "amax", include_self=True)


def linear_relu_layers(mlp: nn.Module) -> list[nn.Linear] | None:
    """The linear layers of ``mlp`` when it is a stack of ``Linear``, ``ReLU`` pairs (what the Deep Sets
    encoders, the ego MLP and the trunk are, :func:`_mlp`); None for any other module."""
    if not isinstance(mlp, nn.Sequential) or len(mlp) == 0 or len(mlp) % 2:
        return None
    layers = list(mlp)
    linears = layers[0::2]
    if not (all(type(m) is nn.Linear and m.bias is not None for m in linears)
            and all(type(m) is nn.ReLU for m in layers[1::2])):
        return None
    return linears


class _Scratch:
    """Activation buffers of the no-gradient entity MLPs, kept from one call to the next and grown by a
    quarter when too small: a fresh tensor of the road group's size (some 17,000 x 32 float32 per
    minibatch) costs more in first-touch page faults than the matrix multiply that fills it. Each
    thread has its own buffers (a policy called from two threads at once computes correctly), and a
    copy or pickle of the policy starts with none."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, key: int, rows: int, width: int, like: torch.Tensor) -> torch.Tensor:
        buffers = getattr(self._local, "buffers", None)
        if buffers is None:
            buffers = self._local.buffers = {}
        buf = buffers.get(key)
        if buf is None or buf.shape[0] < rows or buf.shape[1] != width or buf.dtype != like.dtype:
            buf = buffers[key] = like.new_empty((rows + rows // 4, width))
        return buf[:rows]

    def __getstate__(self) -> dict[str, Any]:
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._local = threading.local()


def mlp_no_grad(mlp: nn.Module, x: torch.Tensor, scratch: _Scratch | None = None) -> torch.Tensor:
    """``mlp(x)`` without autograd for a stack of ``Linear``, ``ReLU`` pairs: each layer one ``addmm``
    (as ``nn.Linear`` computes it) and an in-place ReLU, into ``scratch``'s buffers where given (the
    result is then a view of them, valid until the next call with the same scratch); any other module
    is simply called."""
    linears = linear_relu_layers(mlp)
    if linears is None or torch.is_grad_enabled():
        return mlp(x)
    for i, lin in enumerate(linears):
        out = None if scratch is None else scratch.get(i, x.shape[0], lin.out_features, x)
        x = torch.addmm(lin.bias, x, lin.weight.t(), out=out)
        x.relu_()
    return x


def _winners(arg: torch.Tensor, n_packed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From a segment max's ``arg`` ``[n_rows, H]`` (the packed row attaining each pooled entry, -1 for
    none): the packed rows that attain at least one entry (``winners``, ascending), and for every
    attained entry its flat position in the pool (``src``) and in a ``[len(winners), H]`` block of
    the winners' rows (``dst``)."""
    width = arg.shape[1]
    flat_arg = arg.reshape(-1)
    src = (flat_arg >= 0).nonzero().squeeze(1)
    at = flat_arg.index_select(0, src)
    won = torch.zeros(n_packed, dtype=torch.bool)
    won[at] = True
    winners = won.nonzero().squeeze(1)
    slot = torch.cumsum(won, 0) - 1
    dst = slot.index_select(0, at) * width + src % width
    return winners, src, dst


class _PooledMLP(torch.autograd.Function):
    """``max_pool_rows(mlp(feats), rows, n_rows)`` for an MLP of ``Linear``, ``ReLU`` pairs, with the
    backward pass written out over the winners only.

    A Deep Sets max-pool passes each pooled entry's gradient to the one entity that attains it
    (Zaheer et al. 2017; the same argument routes gradients through max-pooling layers in CNNs). The
    forward pass runs the MLP on every present entity without autograd, into reused buffers, and the
    compiled segment max finds the attaining entity of each entry; it keeps each layer's input at the
    winners (at most ``n_rows x H`` of them: on the quick preset's minibatches 16% of the road
    entities). The backward pass scatters the pooled gradient into those rows (the attaining entry of
    a ReLU output is > 0, so its derivative is 1 there) and back-propagates through the linear layers
    by hand: ``dW = dz^T a``, ``db = sum dz``, ``da = dz W`` masked by ``a > 0``. No entity's forward
    pass runs twice and no graph of the per-entity MLP is recorded. Values equal the plain path's
    exactly; gradients up to float summation order."""

    @staticmethod
    def forward(ctx: Any, feats: torch.Tensor, rows: torch.Tensor, n_rows: int, scratch: _Scratch | None,
                *params: torch.Tensor) -> torch.Tensor:
        weights, biases = params[0::2], params[1::2]
        inputs = []
        x = feats
        for i, (w, b) in enumerate(zip(weights, biases)):
            inputs.append(x)
            out = None if scratch is None else scratch.get(i, x.shape[0], w.shape[0], x)
            x = torch.addmm(b, x, w.t(), out=out)
            x.relu_()
        pooled, arg = segment_max(x.contiguous().numpy(), rows.numpy(), n_rows)
        winners, src, dst = _winners(torch.from_numpy(arg), feats.shape[0])
        ctx.save_for_backward(src, dst, *(a.index_select(0, winners) for a in inputs), *weights)
        ctx.n_layers, ctx.n_winners, ctx.width = len(weights), winners.shape[0], x.shape[1]
        return torch.from_numpy(pooled)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        src, dst, *saved = ctx.saved_tensors
        inputs, weights = saved[:ctx.n_layers], saved[ctx.n_layers:]
        dz = grad.new_zeros(ctx.n_winners * ctx.width)
        dz[dst] = grad.reshape(-1).index_select(0, src)
        dz = dz.view(ctx.n_winners, ctx.width)
        out: list[torch.Tensor | None] = []
        for i in range(ctx.n_layers - 1, -1, -1):
            a = inputs[i]
            out[:0] = [dz.t().mm(a), dz.sum(0)]
            if i:
                dz = dz.mm(weights[i]).mul_(a > 0)
        return (None, None, None, None, *out)


def encode_present(mlp: nn.Module, rows: torch.Tensor, feats: torch.Tensor, n_rows: int,
                   scratch: _Scratch | None = None) -> torch.Tensor:
    """``max_pool_rows(mlp(feats), rows, n_rows)``: the Deep Sets max-pool of a per-entity MLP over the
    packed present entities ``feats`` ``[P, width]`` of observation rows ``rows`` ``[P]``.

    On the CPU in float32 with an MLP of ``Linear``, ``ReLU`` pairs: without a gradient to compute (the
    collection, the value bootstraps), the MLP runs in place (:func:`mlp_no_grad`) and
    ``scatter_reduce("amax")`` pools it (a quarter of the compiled segment max's time: it needs no
    attaining row, and torch vectorizes it over the columns); with one, :class:`_PooledMLP` runs the MLP on every entity without autograd
    and back-propagates through the attaining entities alone. ``scratch``: reused activation buffers.
    Values and gradients equal the plain path's up to float summation order
    (``tests/test_agents_fastpaths.py``). Elsewhere (another device, dtype or module, ``feats``
    itself requiring a gradient) the plain path runs."""
    compiled = feats.device.type == "cpu" and feats.dtype == torch.float32 and feats.dim() == 2
    linears = linear_relu_layers(mlp) if compiled and not feats.requires_grad else None
    if linears is None:
        return max_pool_rows(mlp(feats), rows, n_rows)
    if not torch.is_grad_enabled():  # values only: torch's scatter max, vectorized over the columns
        h = mlp_no_grad(mlp, feats, scratch)
        pooled = h.new_zeros(n_rows, h.shape[1])
        return pooled.scatter_reduce_(0, rows.unsqueeze(1).expand(-1, h.shape[1]), h, "amax", include_self=True)
    params = [t for lin in linears for t in (lin.weight, lin.bias)]
    return _PooledMLP.apply(feats, rows, n_rows, scratch, *params)


class PackedObs(NamedTuple):
    """A batch of ``n`` observations with every entity group already packed (:func:`pack_entities`):
    what :meth:`DeepSetsExtractor.forward_packed` reads. The rollout buffer keeps the packing done at
    collection and gathers minibatches of it, so each observation is packed once per rollout."""

    #: The ego group's features ``[n, ego_width]`` (float32).
    ego: torch.Tensor
    #: Group name -> ``(rows [P] int64, feats [P, width] float32)`` of its present entities.
    groups: dict[str, tuple[torch.Tensor, torch.Tensor]]
    #: The ego ``agent_type`` code ``[n, 1]`` where the policy has per-type heads, else None.
    kind: torch.Tensor | None
    n: int


def _mlp(sizes: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers)


class DeepSetsExtractor(BaseFeaturesExtractor):
    """Ego MLP + one masked max-pool Deep Sets encoder per entity group + the shared trunk MLP.

    Output: the trunk's last layer, followed by the ego ``agent_type`` code as one extra column when
    there are several agent types (read by :class:`TypedActionHeads`).

    :param layout: group name -> ``[start, count, width]`` (see :func:`layout_from_env`).
    :param bf16: run under bfloat16 autocast when the input is on a CUDA device.
    :param encoder: ``"packed"`` runs the entity MLPs on the present rows only and max-pools them with
        one scatter; ``"dense"`` runs them on every padded row and masks
        (:meth:`encode_entities_dense`, the reference). Both compute the same function.
    """

    def __init__(self, observation_space: gym.spaces.Box, layout: dict[str, Sequence[int]], type_column: int,
                 agent_types: Sequence[int] = (1,), ego_hidden: int = 256, entity_hidden: int = 256,
                 trunk: Sequence[int] = (1024, 1024, 1024), bf16: bool = True, encoder: str = "packed") -> None:
        if encoder not in ENCODERS:
            raise ValueError(f"encoder: one of {', '.join(ENCODERS)}, got {encoder!r}")
        self.typed = len(agent_types) > 1
        super().__init__(observation_space, int(trunk[-1]) + int(self.typed))
        if "ego" not in layout:
            raise ValueError("the observation layout has no ego group")
        self.layout = {name: tuple(int(v) for v in layout[name]) for name in layout}
        self.type_column = type_column
        self.bf16 = bf16
        self.encoder = encoder
        ego_start, _, ego_width = self.layout["ego"]
        self.ego = _mlp([ego_width, ego_hidden, ego_hidden])
        self.entity_groups = [g for g in ENTITY_GROUPS if g in self.layout]
        self.encoders = nn.ModuleDict({g: _mlp([self.layout[g][2], entity_hidden, entity_hidden])
                                       for g in self.entity_groups})
        width = ego_hidden + entity_hidden * len(self.entity_groups)
        self.trunk = _mlp([width, *trunk])
        #: Reused activation buffers of each entity group's MLP (:class:`_Scratch`; not parameters).
        self._scratch = {g: _Scratch() for g in self.entity_groups}

    def encode_entities(self, group: str, obs: torch.Tensor) -> torch.Tensor:
        """Max-pool of the shared per-entity MLP over the present (not all-zero) rows of ``obs``
        ``[B, D]``; zeros when no entity is present. Output ``[B, entity_hidden]``.

        Only the present rows go through the MLP (padding is most of a group: 98% of the partner
        rows and 31% of the road rows on the quick preset), found and copied out by
        :func:`pack_entities`, and pooled by :func:`max_pool_rows`.
        The MLP ends in a ReLU, so every output is >= 0 and a pool that starts from zeros equals
        the max over the present rows, and zero when there are none: the dense function exactly."""
        if self.encoder == "dense":
            return self.encode_entities_dense(group, obs)
        rows, feats = pack_entities(obs, *self.layout[group])
        return encode_present(self.encoders[group], rows, feats, obs.shape[0], self._scratch[group])

    def encode_entities_dense(self, group: str, obs: torch.Tensor) -> torch.Tensor:
        """The reference encoder: the MLP on every padded row, then a masked max-pool."""
        start, count, width = self.layout[group]
        ents = obs[:, start:start + count * width].reshape(obs.shape[0], count, width)
        present = (ents != 0).any(dim=-1)
        h = self.encoders[group](ents)
        h = h.masked_fill(~present.unsqueeze(-1), float("-inf")).amax(dim=1)
        return torch.where(present.any(dim=1, keepdim=True), h, torch.zeros_like(h))

    def pack(self, obs: torch.Tensor) -> PackedObs:
        """``obs`` ``[B, D]`` (float) with its entity groups packed (:class:`PackedObs`)."""
        ego_start, _, ego_width = self.layout["ego"]
        kind = obs[:, self.type_column:self.type_column + 1] if self.typed else None
        return PackedObs(obs[:, ego_start:ego_start + ego_width],
                         {g: pack_entities(obs, *self.layout[g]) for g in self.entity_groups}, kind, obs.shape[0])

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        ego_start, _, ego_width = self.layout["ego"]
        parts = [mlp_no_grad(self.ego, obs[:, ego_start:ego_start + ego_width])]
        parts += [self.encode_entities(g, obs) for g in self.entity_groups]
        return mlp_no_grad(self.trunk, torch.cat(parts, dim=1))

    def _features_packed(self, packed: PackedObs) -> torch.Tensor:
        parts = [mlp_no_grad(self.ego, packed.ego)]
        parts += [encode_present(self.encoders[g], *packed.groups[g], packed.n, self._scratch[g])
                  for g in self.entity_groups]
        return mlp_no_grad(self.trunk, torch.cat(parts, dim=1))

    def _autocast(self, x: torch.Tensor, compute: Any, arg: Any) -> torch.Tensor:
        if self.bf16 and x.is_cuda:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return compute(arg).float()
        return compute(arg)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        features = self._autocast(obs, self._features, obs)
        if self.typed:
            features = torch.cat([features, obs[:, self.type_column:self.type_column + 1]], dim=1)
        return features

    def forward_packed(self, packed: PackedObs) -> torch.Tensor:
        """:meth:`forward` of the observations ``packed`` holds (packed encoder only)."""
        if self.encoder != "packed":
            raise ValueError("forward_packed needs the packed entity encoder")
        features = self._autocast(packed.ego, self._features_packed, packed)
        if self.typed:
            features = torch.cat([features, packed.kind.to(features.dtype)], dim=1)
        return features


class TypedActionHeads(nn.Module):
    """One linear action head per agent type; the input's last column holds the type code that selects
    the head of each row."""

    def __init__(self, latent_dim: int, n_outputs: int, agent_types: Sequence[int]) -> None:
        super().__init__()
        self.register_buffer("codes", torch.as_tensor(list(agent_types), dtype=torch.float32))
        self.heads = nn.ModuleList(nn.Linear(latent_dim, n_outputs) for _ in agent_types)

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        h, code = latent[:, :-1], latent[:, -1:]
        head = (code.round() == self.codes.unsqueeze(0)).float().argmax(dim=1)
        logits = torch.stack([m(h) for m in self.heads], dim=1)
        return logits.gather(1, head.view(-1, 1, 1).expand(-1, 1, logits.shape[-1])).squeeze(1)


class DeepSetsPolicy(ActorCriticPolicy):
    """SB3 actor-critic with :class:`DeepSetsExtractor` (shared by actor and critic, no further MLP
    layers) and per-type action heads when the env has several agent types (Discrete actions).

    ``layout``, ``type_column`` and ``agent_types`` come from :func:`layout_from_env`;
    :class:`terrazero_env.agents.PPO` fills them in from its env. ``ego_hidden``, ``entity_hidden``,
    ``trunk``, ``bf16`` and ``encoder`` size and shape the extractor.
    """

    def __init__(self, observation_space: gym.spaces.Box, action_space: gym.spaces.Space, lr_schedule: Any,
                 layout: dict[str, Sequence[int]], type_column: int, agent_types: Sequence[int] = (1,),
                 ego_hidden: int = 256, entity_hidden: int = 256, trunk: Sequence[int] = (1024, 1024, 1024),
                 bf16: bool = True, encoder: str = "packed", **kwargs: Any) -> None:
        self.agent_types = list(agent_types)
        if len(self.agent_types) > 1 and not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError("per-type action heads need a Discrete action space")
        kwargs.setdefault("net_arch", [])
        kwargs.setdefault("activation_fn", nn.ReLU)
        kwargs.setdefault("optimizer_kwargs", dict(DEFAULT_OPTIMIZER_KWARGS))
        kwargs["features_extractor_class"] = DeepSetsExtractor
        kwargs["features_extractor_kwargs"] = {
            "layout": layout, "type_column": type_column, "agent_types": self.agent_types,
            "ego_hidden": ego_hidden, "entity_hidden": entity_hidden, "trunk": tuple(trunk), "bf16": bf16,
            "encoder": encoder}
        kwargs["share_features_extractor"] = True
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def _build(self, lr_schedule: Any) -> None:
        super()._build(lr_schedule)
        if len(self.agent_types) > 1:
            self.action_net = TypedActionHeads(self.mlp_extractor.latent_dim_pi - 1, int(self.action_space.n),
                                               self.agent_types)
            if self.ortho_init:
                self.action_net.apply(lambda m: self.init_weights(m, gain=0.01))
            self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    @property
    def packs_entities(self) -> bool:
        """Whether :meth:`forward_packed` and :meth:`evaluate_actions_packed` apply (the packed encoder)."""
        return self.features_extractor.encoder == "packed"

    def forward_packed(self, obs: torch.Tensor,
                       deterministic: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, PackedObs]:
        """SB3's ``forward`` (actions, values, log-probabilities; the same computation and random
        draws), and the packed observations, which the rollout buffer keeps for the update."""
        packed = self.features_extractor.pack(self.obs_to_float(obs))
        latent_pi, latent_vf = self.mlp_extractor(self.features_extractor.forward_packed(packed))
        values = self.value_net(latent_vf)
        log_pmf = self._categorical(latent_pi)
        if log_pmf is not None:  # torch's Categorical, step for step, without the object
            probs = torch.softmax(log_pmf, dim=-1)
            if deterministic:
                actions = torch.argmax(probs, dim=1)
            else:
                actions = torch.multinomial(probs, 1, True).T.reshape(-1)
            log_prob = log_pmf.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
            return actions.reshape((-1, *self.action_space.shape)), values, log_prob, packed
        distribution = self._get_action_dist_from_latent(latent_pi)
        actions = distribution.get_actions(deterministic=deterministic)
        log_prob = distribution.log_prob(actions)
        return actions.reshape((-1, *self.action_space.shape)), values, log_prob, packed

    def evaluate_actions_packed(self, packed: PackedObs,
                                actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """SB3's ``evaluate_actions`` on already packed observations (:class:`PackedObs`)."""
        latent_pi, latent_vf = self.mlp_extractor(self.features_extractor.forward_packed(packed))
        log_pmf = self._categorical(latent_pi)
        if log_pmf is not None:  # SB3's order of operations, so autograd sums the gradients in its order
            log_prob = log_pmf.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
            values = self.value_net(latent_vf)
            clamped = torch.clamp(log_pmf, min=torch.finfo(log_pmf.dtype).min)
            entropy = -(clamped * torch.softmax(log_pmf, dim=-1)).sum(-1)
            return values, log_prob, entropy
        distribution = self._get_action_dist_from_latent(latent_pi)
        log_prob = distribution.log_prob(actions)
        return self.value_net(latent_vf), log_prob, distribution.entropy()

    def _categorical(self, latent_pi: torch.Tensor) -> torch.Tensor | None:
        """For a Discrete action space, the normalized log-probabilities that
        ``torch.distributions.Categorical(logits=...)`` holds for the action head's logits (the logits
        minus their logsumexp), computed as it computes them; the callers take its softmax, sample and
        gather as it does, without building the distribution object or validating its arguments (a
        dozen small ops per call). None for other action distributions (SB3's path)."""
        if not isinstance(self.action_dist, CategoricalDistribution):
            return None
        logits = self.action_net(latent_pi)
        return logits - logits.logsumexp(dim=-1, keepdim=True)

    @staticmethod
    def obs_to_float(obs: torch.Tensor) -> torch.Tensor:
        """SB3's ``preprocess_obs`` of a Box observation: a float32 tensor."""
        return obs.float()

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        fe = data.pop("features_extractor_kwargs")
        data.pop("features_extractor_class")
        data.pop("share_features_extractor", None)
        data.update(agent_types=self.agent_types, **{k: v for k, v in fe.items() if k != "agent_types"})
        return data


def count_parameters(module: nn.Module) -> int:
    """Number of trainable parameters."""
    return int(np.sum([p.numel() for p in module.parameters() if p.requires_grad]))
