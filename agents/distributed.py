"""Data parallelism for :class:`terrazero_env.agents.PPO` (TerraZero section 5.2) with
``torch.distributed``: NCCL on GPUs, gloo on CPUs.

Every rank owns its own worlds and seeds and collects its own rollout; ranks agree on everything
that decides an update:

* parameters (and buffers) are broadcast from rank 0 at the start;
* gradients are summed after every backward, while every loss term is divided by the valid count
  summed over the ranks, so the summed gradient is the gradient of the global SMPO loss (SB3 calls
  the policy's methods directly, so ``DistributedDataParallel`` would not see those calls);
* advantage-normalization moments, PopArt moments and the prioritized-sampling normalizers
  (segment count, largest weight) are all-reduced, so every rank uses one global scale;
* an epoch that ends early (target KL) ends on the KL averaged over every rank's samples, and a
  stop request (SIGINT/SIGTERM on any rank) stops every rank at the same update.

``Sync`` is the only object the learner talks to; ``Sync.local()`` is the one-process case, where
every reduction is the identity.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

__all__ = ["Sync", "env_int", "init_from_environment", "shutdown"]


class Sync:
    """The collective operations of one rank (identity when ``world_size == 1``)."""

    def __init__(self, rank: int = 0, world_size: int = 1, device: torch.device | str = "cpu"):
        self.rank, self.world_size, self.device = int(rank), int(world_size), torch.device(device)

    @classmethod
    def local(cls) -> Sync:
        return cls(0, 1)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def _reduce(self, values: Iterable[float] | np.ndarray | torch.Tensor, op: dist.ReduceOp) -> np.ndarray:
        arr = values.detach().cpu().double().numpy() if isinstance(values, torch.Tensor) \
            else np.asarray(values, np.float64)
        if not self.distributed:
            return arr.copy()
        t = torch.as_tensor(arr, dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=op)
        return t.cpu().numpy()

    def sum(self, values: Iterable[float] | np.ndarray | torch.Tensor) -> np.ndarray:
        """Element-wise sum over ranks (float64)."""
        return self._reduce(values, dist.ReduceOp.SUM)

    def max(self, values: Iterable[float] | np.ndarray | torch.Tensor) -> np.ndarray:
        """Element-wise maximum over ranks (float64)."""
        return self._reduce(values, dist.ReduceOp.MAX)

    def broadcast_module(self, module: torch.nn.Module) -> None:
        """Copy rank 0's parameters and buffers to every rank."""
        if not self.distributed:
            return
        with torch.no_grad():
            for t in list(module.parameters()) + list(module.buffers()):
                dist.broadcast(t.data, src=0)

    def sum_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Sum every parameter's gradient over ranks, as one flat buffer."""
        if not self.distributed:
            return
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset:offset + n].view_as(g))
            offset += n

    def any(self, flag: bool) -> bool:
        """True on every rank when ``flag`` is true on any rank."""
        return bool(self.max([1.0 if flag else 0.0])[0] > 0)

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()


def env_int(name: str, default: int, lo: int, hi: int) -> int:
    """The integer environment variable ``name`` (``default`` when unset) in [lo, hi]; anything else
    raises ValueError naming the variable."""
    text = os.environ.get(name)
    if text is None or text.strip() == "":
        return default
    try:
        v = int(text.strip(), 10)
    except ValueError:
        raise ValueError(f"environment variable {name}={text[:40]!r}: expected an integer") from None
    if not lo <= v <= hi:
        raise ValueError(f"environment variable {name}={v}: must lie in [{lo}, {hi}]")
    return v


def init_from_environment(device: str = "auto", timeout_s: float = 600.0) -> tuple[Sync, torch.device]:
    """Join the process group that ``torchrun`` describes (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
    ``MASTER_ADDR``/``MASTER_PORT``) and pick this rank's device: ``cuda:LOCAL_RANK`` when CUDA is
    available (NCCL), else the CPU (gloo). A plain process (no ``WORLD_SIZE`` or 1) gets ``Sync.local()``.
    ``device``: "auto", "cpu" or "cuda"."""
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be 'auto', 'cpu' or 'cuda', got {device!r}")
    world_size = env_int("WORLD_SIZE", 1, 1, 65_536)
    local_rank = env_int("LOCAL_RANK", 0, 0, 65_535)
    if world_size > 1:
        rank = env_int("RANK", 0, 0, world_size - 1)
        if local_rank > rank:
            raise ValueError(f"environment variable LOCAL_RANK={local_rank} exceeds RANK={rank}")
    use_cuda = device == "cuda" or (device == "auto" and torch.cuda.is_available())
    if use_cuda and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch sees no CUDA device")
    dev = torch.device(f"cuda:{local_rank}" if use_cuda else "cpu")
    if use_cuda:
        torch.cuda.set_device(dev)
    if world_size <= 1:
        return Sync(0, 1, dev), dev
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo", timeout=timedelta(seconds=timeout_s))
    return Sync(dist.get_rank(), dist.get_world_size(), dev), dev


def shutdown() -> None:
    """Leave the process group, if one was joined."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
