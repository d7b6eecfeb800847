"""The maths of the masked PPO learner as plain functions (TerraZero section 5.1 and appendix E, FAST
section III): masked GAE, V-trace, the SMPO-masked PPO loss, PopArt and prioritized segment sampling.

Arrays are laid out ``[T, N]`` (time, env). Every function accepts NumPy arrays or torch tensors and
returns the same kind. The trainer runs the batched torch versions of :mod:`terrazero_env.agents.targets`
on its device; these are their references. The conventions of :func:`masked_gae` and :func:`vtrace_gae`:

* ``values[t]`` = V(s_t); ``next_values[t]`` = V(s_{t+1}) of the same episode: V(s_final) at a
  truncation, V of the state after the rollout at ``t = T - 1``;
* ``terminated[t]`` zeroes that bootstrap (a true terminal);
* ``done[t]`` cuts the trace after step ``t`` (terminal, truncation, or padding next);
* ``valid[t] = 0`` marks padding: its advantage is 0 and no trace crosses it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = [
    "masked_gae", "vtrace_gae", "masked_mean", "moments", "mean_std_from_moments", "normalize_advantages",
    "masked_ppo_loss", "popart_epoch_step", "popart_sigma", "popart_update", "popart_update_moments", "segment_priorities",
    "priority_weights", "priority_weight_max", "sample_segments",
]

Array = Any  # np.ndarray or torch.Tensor


def _as_float(x: Array, like: Array) -> Array:
    """``x`` (bool or numeric) in the float dtype of ``like``."""
    if isinstance(like, torch.Tensor):
        return torch.as_tensor(x, device=like.device).to(like.dtype)
    return np.asarray(x).astype(like.dtype)


def vtrace_gae(log_rhos: Array, rewards: Array, values: Array, next_values: Array, terminated: Array,
               done: Array, valid: Array, gamma: float, lam: float, rho_bar: float = 1.0,
               c_bar: float = 1.0) -> tuple[Array, Array]:
    """V-trace advantages and value targets with GAE's lambda (TerraZero appendix E, IMPALA eq. 1).

    ``rho_t = min(rho_bar, exp(log_rhos_t))``, ``c_t = min(c_bar, exp(log_rhos_t))``,
    ``delta_t = rho_t (r_t + gamma (1 - terminated_t) next_values_t - values_t)``,
    ``A_t = delta_t + gamma lam (1 - done_t) c_t A_{t+1}`` (``A_T = 0``; ``A_t = 0`` where
    ``valid_t = 0``), ``value_targets = A + values``. ``log_rhos = 0`` gives :func:`masked_gae`
    exactly; at ``lam = 1`` the value targets are IMPALA's ``v_s``.

    :param log_rhos: log pi(a_t|s_t) - log mu(a_t|s_t), current over behaviour policy, ``[T, N]``.
    :return: ``(advantages, value_targets)``, both ``[T, N]`` in the dtype of ``values``.
    """
    is_torch = isinstance(values, torch.Tensor)
    if is_torch:
        ratios = torch.exp(_as_float(log_rhos, values))
        rho, c = torch.clamp(ratios, max=rho_bar), torch.clamp(ratios, max=c_bar)
        advantages = torch.zeros_like(values)
        valid_b = torch.as_tensor(valid, device=values.device).bool()
    else:
        ratios = np.exp(_as_float(log_rhos, values))
        rho, c = np.minimum(ratios, rho_bar), np.minimum(ratios, c_bar)
        advantages = np.zeros_like(values)
        valid_b = np.asarray(valid).astype(bool)
    not_terminal = 1.0 - _as_float(terminated, values)
    not_done = 1.0 - _as_float(done, values)
    next_values = _as_float(next_values, values)
    rewards = _as_float(rewards, values)
    where = torch.where if is_torch else np.where
    last = advantages[0].clone() if is_torch else advantages[0].copy()
    for t in range(values.shape[0] - 1, -1, -1):
        delta = rho[t] * (rewards[t] + gamma * not_terminal[t] * next_values[t] - values[t])
        last = where(valid_b[t], delta + gamma * lam * not_done[t] * c[t] * last, advantages[t])
        advantages[t] = last
    return advantages, advantages + values


def masked_gae(rewards: Array, values: Array, next_values: Array, terminated: Array, done: Array,
               valid: Array, gamma: float, lam: float) -> tuple[Array, Array]:
    """GAE (Schulman et al. 2016) that never propagates across an invalid step (FAST's SMPO, section III):
    ``delta_t = r_t + gamma (1 - terminated_t) next_values_t - values_t``,
    ``A_t = delta_t + gamma lam (1 - done_t) A_{t+1}``, ``A_t = 0`` where ``valid_t = 0``.

    :return: ``(advantages, returns)`` with ``returns = advantages + values``, shape ``[T, N]``.
    """
    zeros = torch.zeros_like(values) if isinstance(values, torch.Tensor) else np.zeros_like(values)
    return vtrace_gae(zeros, rewards, values, next_values, terminated, done, valid, gamma, lam,
                      rho_bar=float("inf"), c_bar=float("inf"))


def masked_mean(x: torch.Tensor, mask: torch.Tensor, weights: torch.Tensor | None = None,
                num_valid: float | None = None) -> torch.Tensor:
    """SMPO's ``sum(mask * w * x) / max(1, sum(mask))``; entries outside the mask are never read, so
    padding may hold any value (even inf or nan) without touching the result or its gradient.

    ``num_valid`` replaces ``sum(mask)`` in the denominator: data-parallel learners pass the count
    summed over every rank, so the ranks' summed gradients are the gradient of the global mean."""
    m = mask.bool()
    term = x if weights is None else weights * x
    denom = torch.clamp(m.sum(), min=1).to(x.dtype) if num_valid is None else max(1.0, float(num_valid))
    return torch.where(m, term, torch.zeros_like(term)).sum() / denom


def moments(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[count, sum, sum of squares]`` of the valid entries of ``x`` (float64): the sufficient
    statistics that data-parallel ranks all-reduce to share one mean and std."""
    m = mask.bool()
    v = torch.where(m, x, torch.zeros_like(x)).double()
    return torch.stack([m.sum().double(), v.sum(), (v * v).sum()])


def mean_std_from_moments(stats: Any) -> tuple[float, float]:
    """Mean and unbiased std from ``[count, sum, sum of squares]`` (std 1 below two entries)."""
    n, s1, s2 = (float(v) for v in stats)
    if n < 2:
        return (s1 / n if n else 0.0), 1.0
    mean = s1 / n
    return mean, float(np.sqrt(max(s2 - n * mean * mean, 0.0) / (n - 1)))


def normalize_advantages(advantages: torch.Tensor, mask: torch.Tensor,
                         stats: tuple[float, float] | None = None) -> torch.Tensor:
    """``(A - mean) / (std + 1e-8)`` over the valid entries only (unbiased std, as torch and SB3);
    unchanged when fewer than two entries are valid. ``stats``: a given ``(mean, std)`` (e.g. over
    every rank's minibatch, :func:`mean_std_from_moments`) instead of this batch's."""
    if stats is not None:
        return (advantages - stats[0]) / (stats[1] + 1e-8)
    m = mask.bool()
    n = int(m.sum())
    if n < 2:
        return advantages
    safe = torch.where(m, advantages, torch.zeros_like(advantages))
    mean = safe.sum() / n
    var = torch.where(m, (advantages - mean) ** 2, torch.zeros_like(advantages)).sum() / (n - 1)
    return (advantages - mean) / (torch.sqrt(var) + 1e-8)


def masked_ppo_loss(log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantages: torch.Tensor,
                    value_pred: torch.Tensor, value_target: torch.Tensor, entropy: torch.Tensor | None,
                    mask: torch.Tensor, clip_range: float, ent_coef: float, vf_coef: float,
                    weights: torch.Tensor | None = None, normalize_advantage: bool = True,
                    num_valid: float | None = None,
                    adv_stats: tuple[float, float] | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The PPO loss (clipped surrogate, squared value error, entropy bonus) with every term reduced by
    :func:`masked_mean` (SMPO) and optionally weighted per sample (prioritized sampling's importance
    weights). With all entries valid and no weights it equals Stable-Baselines3's PPO loss.

    ``num_valid`` and ``adv_stats`` are for data-parallel learners: the valid count and the
    advantages' ``(mean, std)`` over every rank's minibatch (see :func:`masked_mean`).

    ``entropy = None`` uses ``-log_prob`` as the entropy estimate (as SB3 does). Returns the loss and
    floats for logging: ``policy_loss``, ``value_loss``, ``entropy_loss``, ``clip_fraction``, ``approx_kl``.
    """
    mask = mask.bool()

    def clean(x: torch.Tensor) -> torch.Tensor:  # padding -> 0, so no nan/inf reaches a gradient
        return torch.where(mask, x, torch.zeros_like(x))

    log_prob, old_log_prob, advantages = clean(log_prob), clean(old_log_prob), clean(advantages)
    value_pred, value_target = clean(value_pred), clean(value_target)
    entropy = None if entropy is None else clean(entropy)
    weights = None if weights is None else clean(weights)
    if normalize_advantage:
        advantages = normalize_advantages(advantages, mask, adv_stats)
    log_ratio = log_prob - old_log_prob
    ratio = torch.exp(log_ratio)
    surrogate = torch.min(advantages * ratio, advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range))
    policy_loss = masked_mean(-surrogate, mask, weights, num_valid)
    value_loss = masked_mean((value_target - value_pred) ** 2, mask, weights, num_valid)
    entropy_term = -entropy if entropy is not None else log_prob
    entropy_loss = masked_mean(entropy_term, mask, weights, num_valid)
    loss = policy_loss + ent_coef * entropy_loss + vf_coef * value_loss
    with torch.no_grad():
        clip_fraction = masked_mean(((ratio - 1).abs() > clip_range).float(), mask)
        approx_kl = masked_mean((ratio - 1) - log_ratio, mask)
    stats = {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(),
             "entropy_loss": entropy_loss.item(), "clip_fraction": clip_fraction.item(),
             "approx_kl": approx_kl.item()}
    return loss, stats


def popart_sigma(mean: float, sq_mean: float, min_sigma: float = 1e-4) -> float:
    """PopArt's scale ``sqrt(max(nu - mu^2, 0))`` floored at ``min_sigma`` (TerraZero table 14)."""
    return max(float(np.sqrt(max(sq_mean - mean * mean, 0.0))), min_sigma)


def popart_update(mean: float, sq_mean: float, weight: Array, bias: Array, targets: Array,
                  decay: float = 0.9997, min_sigma: float = 1e-4) -> tuple[float, float, Array, Array]:
    """One PopArt step (van Hasselt et al. 2016, "Preserving Outputs Precisely"): update the EMA of
    the first and second moments of the value targets, then rescale the value head's last layer
    (``y = sigma * (W h + b) + mu``) so every denormalized prediction stays the same.

    The decay applies per target sample (table 14: 0.9997 per step), so a batch of ``n`` targets
    moves the moments by the weight ``1 - decay ** n`` towards the batch means.

    :param targets: value targets on the true return scale (valid entries only), any shape.
    :return: ``(mean, sq_mean, weight, bias)``, the new statistics and the rescaled head parameters.
    """
    t = targets.detach().cpu().double().numpy() if isinstance(targets, torch.Tensor) else np.asarray(targets, float)
    t = t.reshape(-1)
    return popart_update_moments(mean, sq_mean, weight, bias, (t.size, t.sum(), (t * t).sum()), decay, min_sigma)


def popart_update_moments(mean: float, sq_mean: float, weight: Array, bias: Array, stats: Any,
                          decay: float = 0.9997, min_sigma: float = 1e-4,
                          step: float | None = None) -> tuple[float, float, Array, Array]:
    """:func:`popart_update` from the targets' ``[count, sum, sum of squares]`` (what data-parallel
    ranks all-reduce, so every rank applies the update of the union of their targets).

    ``step``: the weight of the batch means; None: ``1 - decay ** count`` (the decay per target
    sample). :func:`popart_epoch_step` gives the weight of one update per epoch."""
    n, s1, s2 = (float(v) for v in stats)
    if n <= 0:
        return mean, sq_mean, weight, bias
    if step is None:
        step = 1.0 - decay ** n
    new_mean = (1 - step) * mean + step * s1 / n
    new_sq = (1 - step) * sq_mean + step * s2 / n
    old_sigma, new_sigma = popart_sigma(mean, sq_mean, min_sigma), popart_sigma(new_mean, new_sq, min_sigma)
    new_weight = weight * (old_sigma / new_sigma)
    new_bias = (old_sigma * bias + mean - new_mean) / new_sigma
    return new_mean, new_sq, new_weight, new_bias


def popart_epoch_step(decay: float, updates: int) -> float:
    """Weight of the batch means in the ``updates``-th per-epoch PopArt update (``updates >= 1``): the
    EMA step ``1 - decay`` divided by ``1 - decay ** updates`` (the bias correction Adam applies to its
    moment averages; ours, the paper gives none), so the first update takes the batch statistics and later ones approach ``1 - decay``.
    Without the correction a decay of 0.9997 per epoch would leave the initial statistics
    (mean 0, scale 1) in place for thousands of epochs."""
    if updates < 1:
        raise ValueError(f"updates: the count of this update, >= 1, got {updates!r}")
    return (1.0 - decay) / (1.0 - decay ** updates)


def segment_priorities(advantages: Array, alpha: float = 0.85) -> np.ndarray:
    """Sampling probabilities of trajectory segments (TerraZero appendix E, prioritized sampling):
    ``p_i ∝ (sum_t |A_i,t|)^alpha`` for ``advantages`` of shape ``[S, L]`` (segment, step; padding
    holds 0). Uniform when every segment has zero advantage."""
    a = advantages.detach().cpu().double().numpy() if isinstance(advantages, torch.Tensor) else np.asarray(advantages, float)
    score = np.abs(a).reshape(a.shape[0], -1).sum(axis=1) ** alpha
    total = score.sum()
    if not np.isfinite(total) or total <= 0:
        return np.full(a.shape[0], 1.0 / a.shape[0])
    return score / total


def priority_weights(probs: np.ndarray, indices: np.ndarray, beta: float, num_segments: int | None = None,
                     ranks: int = 1, w_max: float | None = None) -> np.ndarray:
    """Importance weights ``(N p_i)^-beta`` of the drawn segments ``indices``, divided by the largest
    over all segments (so they lie in (0, 1]).

    Data-parallel ranks each draw the same number of segments from their own ``probs``, so a
    segment's probability within the union of draws is ``p_i / ranks``; they pass ``num_segments``
    (N over every rank), ``ranks`` and ``w_max`` (the largest weight over every rank, see
    :func:`priority_weight_max`), so every rank weights on one global scale."""
    n = probs.shape[0] if num_segments is None else num_segments
    p = probs / ranks
    if w_max is None:
        w_max = priority_weight_max(probs, beta, n, ranks)
    return (n * p[indices]) ** (-beta) / w_max


def priority_weight_max(probs: np.ndarray, beta: float, num_segments: int | None = None, ranks: int = 1) -> float:
    """The largest unnormalized weight ``(N p_i / ranks)^-beta`` over segments with ``p_i > 0``."""
    n = probs.shape[0] if num_segments is None else num_segments
    return float(((n * probs[probs > 0] / ranks) ** (-beta)).max())


def sample_segments(probs: np.ndarray, count: int, rng: np.random.Generator | None = None) -> np.ndarray:
    """``count`` segment indices drawn with replacement with probabilities ``probs``; ``rng`` defaults
    to NumPy's global generator (seeded by SB3's ``set_random_seed``)."""
    if rng is None:
        return np.random.choice(probs.shape[0], size=count, replace=True, p=probs)
    return rng.choice(probs.shape[0], size=count, replace=True, p=probs)
