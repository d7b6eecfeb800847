"""The rollout maths of the training path as batched torch on the rollout's own device and dtype:
masked GAE and V-trace as one reverse scan over time vectorized over every slot, the PopArt
moments of the valid value targets, and prioritized segment sampling (priorities, importance
weights and the draws). Nothing here leaves the device except the scalars a caller asks for.

They compute what the NumPy functions of :mod:`terrazero_env.agents.losses` compute (those stay the
reference: ``tests/test_agents_targets.py`` checks these against them and against torchrl), with the
same conventions: arrays ``[T, N]`` (time, slot); ``terminated`` zeroes a bootstrap, ``done`` cuts
the trace after its step, ``valid = 0`` marks padding (DPSA's virtual steps), whose advantage is 0
and which no trace crosses.
"""

from __future__ import annotations

from typing import Any

import torch

from . import losses

__all__ = ["vtrace_gae", "masked_gae", "target_moments", "segment_priorities", "priority_weight_max",
           "sample_segments", "priority_weights", "explained_variance"]


def _like(x: Any, ref: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``x`` (tensor or array) on the device of ``ref``, in ``dtype`` (default: that of ``ref``)."""
    return torch.as_tensor(x, device=ref.device).to(ref.dtype if dtype is None else dtype)


def vtrace_gae(log_rhos: torch.Tensor | None, rewards: torch.Tensor, values: torch.Tensor,
               next_values: torch.Tensor, terminated: torch.Tensor, done: torch.Tensor, valid: torch.Tensor,
               gamma: float, lam: float, rho_bar: float = 1.0,
               c_bar: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`losses.vtrace_gae` on ``values``' device and dtype: ``delta`` and the trace coefficients
    ``gamma lam (1 - done) c`` of every step at once, then ``A_t = delta_t + coef_t A_{t+1}`` (0 where
    ``valid_t = 0``) as a reverse scan of three element-wise operations per step over all slots.
    ``log_rhos`` None: on-policy (``rho = c = 1``, :func:`masked_gae`).

    :return: ``(advantages, value_targets)``, ``[T, N]`` tensors in the dtype of ``values``.
    """
    valid_b = _like(valid, values, torch.bool)
    not_terminal = 1.0 - _like(terminated, values)
    not_done = 1.0 - _like(done, values)
    delta = _like(rewards, values) + gamma * not_terminal * _like(next_values, values) - values
    coef = gamma * lam * not_done
    if log_rhos is not None:
        ratios = torch.exp(_like(log_rhos, values))
        delta = torch.clamp(ratios, max=rho_bar) * delta
        coef = coef * torch.clamp(ratios, max=c_bar)
    zero = torch.zeros((), dtype=values.dtype, device=values.device)
    last = torch.zeros_like(values[0])
    out = []
    for d, k, v in zip(delta.unbind(0)[::-1], coef.unbind(0)[::-1], valid_b.unbind(0)[::-1]):
        last = torch.where(v, d + k * last, zero)
        out.append(last)
    advantages = torch.stack(out[::-1]) if out else torch.zeros_like(values)
    return advantages, advantages + values


def masked_gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
               done: torch.Tensor, valid: torch.Tensor, gamma: float,
               lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`losses.masked_gae` on the device: :func:`vtrace_gae` without importance ratios."""
    return vtrace_gae(None, rewards, values, next_values, terminated, done, valid, gamma, lam)


def target_moments(targets: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``[count, sum, sum of squares]`` (float64, on the device) of the valid value targets: what
    PopArt's update reads (:func:`losses.popart_update_moments`), three scalars to the host."""
    return losses.moments(targets, valid)


def segment_priorities(advantages: torch.Tensor, alpha: float = 0.85) -> torch.Tensor:
    """:func:`losses.segment_priorities` on the device (float64): ``p_i ∝ (sum_t |A_i,t|)^alpha`` for
    ``advantages`` ``[S, L]``, uniform when no segment has a finite positive score; no host sync."""
    a = advantages.detach().double()
    score = a.abs().reshape(a.shape[0], -1).sum(dim=1) ** alpha
    total = score.sum()
    usable = torch.isfinite(total) & (total > 0)
    return torch.where(usable, score / torch.where(usable, total, torch.ones_like(total)),
                       torch.full_like(score, 1.0 / a.shape[0]))


def priority_weight_max(probs: torch.Tensor, beta: float, num_segments: int | None = None,
                        ranks: int = 1) -> torch.Tensor:
    """:func:`losses.priority_weight_max` as a 0-d device tensor: ``(N min_{p_i > 0} p_i / ranks)^-beta``."""
    n = probs.shape[0] if num_segments is None else num_segments
    smallest = torch.where(probs > 0, probs, torch.full_like(probs, float("inf"))).min()
    return (n * smallest / ranks) ** (-beta)


def priority_weights(probs: torch.Tensor, indices: torch.Tensor, beta: float, num_segments: int | None = None,
                     ranks: int = 1, w_max: float | torch.Tensor | None = None) -> torch.Tensor:
    """:func:`losses.priority_weights` on the device: ``(N p_i / ranks)^-beta / w_max`` of the drawn
    segments ``indices`` (``w_max`` None: the largest over this rank's segments)."""
    n = probs.shape[0] if num_segments is None else num_segments
    if w_max is None:
        w_max = priority_weight_max(probs, beta, n, ranks)
    return (n * probs[indices] / ranks) ** (-beta) / w_max


def sample_segments(probs: torch.Tensor, count: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """``count`` segment indices drawn with replacement with probabilities ``probs``, on their device,
    from torch's generator of that device (seeded by SB3's ``set_random_seed``; saved in checkpoints)."""
    return torch.multinomial(probs, count, replacement=True, generator=generator)


def explained_variance(predicted: torch.Tensor, target: torch.Tensor, valid: torch.Tensor) -> float:
    """SB3's ``explained_variance`` (``1 - Var[y - y_pred] / Var[y]``, population variances, nan when
    ``Var[y] = 0``) over the valid entries, reduced on the device in float64."""
    m = valid.bool()
    count = m.sum().double()
    if float(count) == 0:
        return float("nan")

    def var(x: torch.Tensor) -> torch.Tensor:
        x = torch.where(m, x.double(), torch.zeros((), dtype=torch.float64, device=x.device))
        mean = x.sum() / count
        return torch.where(m, (x - mean) ** 2, torch.zeros_like(x)).sum() / count

    var_y = float(var(target))
    return float("nan") if var_y == 0 else 1.0 - float(var(target - predicted)) / var_y
