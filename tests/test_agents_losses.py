"""The functions of terrazero_env.agents.losses, each against an independent oracle."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from gymnasium import spaces  # noqa: E402
from stable_baselines3.common.buffers import RolloutBuffer  # noqa: E402
from terrazero_env.agents import losses  # noqa: E402


def reference_vtrace(log_rhos, rewards, values, next_values, terminated, done, valid, gamma, lam,
                     rho_bar=1.0, c_bar=1.0):
    """Scalar loops written from the V-trace equations (Espeholt et al. 2018, eq. 1; TerraZero appendix E)."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        nxt = 0.0
        for t in reversed(range(T)):
            if not valid[t, n]:
                adv[t, n] = 0.0
                nxt = 0.0
                continue
            ratio = float(np.exp(log_rhos[t, n]))
            rho, c = min(rho_bar, ratio), min(c_bar, ratio)
            boot = 0.0 if terminated[t, n] else next_values[t, n]
            delta = rho * (rewards[t, n] + gamma * boot - values[t, n])
            carry = 0.0 if done[t, n] else c * nxt
            adv[t, n] = delta + gamma * lam * carry
            nxt = adv[t, n]
    return adv, adv + values


def random_rollout(rng, T=24, N=5, padding=True):
    """Random [T, N] data with terminals, truncations and padding runs, and consistent flags."""
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    ends = rng.random((T, N)) < 0.15
    terminated = ends & (rng.random((T, N)) < 0.5)
    valid = np.ones((T, N), bool)
    if padding:
        for n in range(N):
            for t in np.flatnonzero(ends[:, n])[:1]:  # pad after the first end of each env
                valid[t + 1:t + 1 + rng.integers(0, 4), n] = False
    next_values = np.concatenate([values[1:], rng.normal(size=(1, N))])
    truncated = ends & ~terminated
    next_values[truncated] = rng.normal(size=truncated.sum())  # V(s_final)
    done = ends.copy()
    done[:-1] |= ~valid[1:]
    log_rhos = rng.normal(scale=0.5, size=(T, N))
    return log_rhos, rewards, values, next_values, terminated, done, valid


@pytest.mark.parametrize("lam,rho_bar,c_bar", [(0.95, 1.0, 1.0), (0.7, 2.0, 0.5), (1.0, 1.0, 1.0)])
@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_vtrace_gae_matches_reference_loop(lam, rho_bar, c_bar, backend):
    rng = np.random.default_rng(0)
    data = random_rollout(rng)
    ref_adv, ref_vs = reference_vtrace(*data, 0.97, lam, rho_bar, c_bar)
    args = [torch.as_tensor(x) for x in data] if backend == "torch" else data
    adv, vs = losses.vtrace_gae(*args, 0.97, lam, rho_bar=rho_bar, c_bar=c_bar)
    assert isinstance(adv, torch.Tensor) == (backend == "torch")
    np.testing.assert_allclose(np.asarray(adv), ref_adv, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.asarray(vs), ref_vs, rtol=1e-12, atol=1e-12)
    assert np.all(np.asarray(adv)[~data[-1]] == 0)


def test_masked_gae_is_vtrace_with_zero_log_rhos():
    rng = np.random.default_rng(1)
    _, *rest = random_rollout(rng)
    adv, ret = losses.masked_gae(*rest, 0.99, 0.95)
    ref_adv, ref_ret = reference_vtrace(np.zeros_like(rest[0]), *rest, 0.99, 0.95)
    np.testing.assert_allclose(adv, ref_adv, atol=1e-12)
    np.testing.assert_allclose(ret, ref_ret, atol=1e-12)


def test_vtrace_matches_torchrl_at_lambda_one():
    functional = pytest.importorskip("torchrl.objectives.value.functional")
    rng = np.random.default_rng(2)
    log_rhos, rewards, values, next_values, terminated, done, _ = random_rollout(rng, padding=False)
    _, vs = losses.vtrace_gae(log_rhos, rewards, values, next_values, terminated, done,
                              np.ones_like(done), 0.95, 1.0, rho_bar=1.0, c_bar=0.9)

    def batch_time(x):  # [T, N] -> torchrl's [N, T, 1]
        return torch.as_tensor(np.ascontiguousarray(x.T))[..., None]

    log_mu = rng.normal(size=log_rhos.shape)
    _, tr_vs = functional.vtrace_advantage_estimate(
        0.95, batch_time(log_mu + log_rhos), batch_time(log_mu), batch_time(values), batch_time(next_values),
        batch_time(rewards), batch_time(done), terminated=batch_time(terminated), rho_thresh=1.0, c_thresh=0.9)
    # torchrl casts the discounts and clip levels to float32, hence the float32-level tolerance.
    np.testing.assert_allclose(tr_vs[..., 0].numpy().T, vs, rtol=1e-6, atol=1e-6)


def sb3_gae(rewards, values, episode_starts, last_values, last_dones, gamma, lam):
    T, N = rewards.shape
    buf = RolloutBuffer(T, spaces.Box(-1, 1, (1,)), spaces.Discrete(2), "cpu", gae_lambda=lam, gamma=gamma, n_envs=N)
    for t in range(T):
        buf.add(np.zeros((N, 1)), np.zeros((N, 1)), rewards[t], episode_starts[t],
                torch.as_tensor(values[t]), torch.zeros(N))
    buf.compute_returns_and_advantage(torch.as_tensor(last_values), last_dones)
    return buf.advantages, buf.returns


@pytest.mark.parametrize("fn", ["masked_gae", "vtrace_inf"])
def test_infinite_clips_reproduce_sb3_gae(fn):
    rng = np.random.default_rng(3)
    T, N = 32, 6
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    values = rng.normal(size=(T, N)).astype(np.float32)
    dones = rng.random((T, N)) < 0.1  # episode ends (terminal) after step t
    episode_starts = np.concatenate([rng.random((1, N)) < 0.5, dones[:-1]]).astype(np.float32)
    last_values = rng.normal(size=N).astype(np.float32)
    adv_sb3, ret_sb3 = sb3_gae(rewards, values, episode_starts, last_values, dones[-1].astype(np.float32), 0.99, 0.95)
    next_values = np.concatenate([values[1:], last_values[None]])
    valid = np.ones((T, N), bool)
    if fn == "masked_gae":
        adv, ret = losses.masked_gae(rewards, values, next_values, dones, dones, valid, 0.99, 0.95)
    else:
        adv, ret = losses.vtrace_gae(np.zeros((T, N), np.float32), rewards, values, next_values, dones, dones,
                                     valid, 0.99, 0.95, rho_bar=np.inf, c_bar=np.inf)
    np.testing.assert_allclose(adv, adv_sb3, rtol=0, atol=1e-6)
    np.testing.assert_allclose(ret, ret_sb3, rtol=0, atol=1e-6)


def test_padding_leaves_valid_advantages_unchanged():
    rng = np.random.default_rng(4)
    T, N = 20, 3
    _, rewards, values, next_values, terminated, done, _ = random_rollout(rng, T, N, padding=False)
    valid = np.ones((T, N), bool)
    base_adv, base_ret = losses.masked_gae(rewards, values, next_values, terminated, done, valid, 0.99, 0.9)
    # Insert 5 padding steps of garbage after step 9 of every env; step 9 becomes the end of its trace.
    done9 = done.copy()
    done9[9] = True
    cut_adv, _ = losses.masked_gae(rewards, values, next_values, terminated, done9, valid, 0.99, 0.9)
    pad = 5

    def insert(x, fill):
        return np.concatenate([x[:10], fill, x[10:]])

    garbage = rng.normal(scale=1e6, size=(pad, N))
    adv, ret = losses.masked_gae(insert(rewards, garbage), insert(values, garbage), insert(next_values, garbage),
                                 insert(terminated, rng.random((pad, N)) < 0.5),
                                 insert(done9, rng.random((pad, N)) < 0.5),
                                 insert(valid, np.zeros((pad, N), bool)), 0.99, 0.9)
    np.testing.assert_array_equal(adv[10:10 + pad], 0.0)
    np.testing.assert_allclose(np.concatenate([adv[:10], adv[10 + pad:]]), cut_adv, atol=1e-12)
    # After the cut, later steps are untouched by the padding and equal the uncut computation.
    np.testing.assert_allclose(adv[10 + pad:], base_adv[10:], atol=1e-12)
    np.testing.assert_allclose(ret[10 + pad:], base_ret[10:], atol=1e-12)


def test_truncation_bootstraps_final_value_and_terminal_does_not():
    # Env 0 is truncated after step 1 with V(s_final) = 4; env 1 terminates there.
    rewards = np.array([[1.0, 1.0], [2.0, 2.0]])
    values = np.array([[0.5, 0.5], [0.25, 0.25]])
    next_values = np.array([[0.25, 0.25], [4.0, 4.0]])
    terminated = np.array([[False, False], [False, True]])
    done = np.array([[False, False], [True, True]])
    adv, ret = losses.masked_gae(rewards, values, next_values, terminated, done, np.ones((2, 2), bool), 0.9, 0.8)
    # truncated: A1 = 2 + 0.9 * 4 - 0.25 = 5.35; A0 = (1 + 0.9 * 0.25 - 0.5) + 0.9 * 0.8 * 5.35 = 4.577
    # terminal:  A1 = 2 - 0.25 = 1.75;           A0 = 0.725 + 0.72 * 1.75 = 1.985
    np.testing.assert_allclose(adv, [[4.577, 1.985], [5.35, 1.75]], atol=1e-12)
    np.testing.assert_allclose(ret, adv + values)


def sb3_style_loss(log_prob, old_log_prob, adv, values, returns, entropy, clip, ent_coef, vf_coef):
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    ratio = torch.exp(log_prob - old_log_prob)
    pg = -torch.min(adv * ratio, adv * torch.clamp(ratio, 1 - clip, 1 + clip)).mean()
    vf = torch.nn.functional.mse_loss(returns, values)
    return pg + ent_coef * -torch.mean(entropy) + vf_coef * vf


def test_masked_ppo_loss_equals_sb3_loss_when_all_valid():
    g = torch.Generator().manual_seed(0)
    n = 64
    x = [torch.randn(n, generator=g, dtype=torch.float64) for _ in range(6)]
    log_prob, old_log_prob, adv, values, returns, entropy = x
    loss, stats = losses.masked_ppo_loss(log_prob, old_log_prob * 0.3 + log_prob, adv, values, returns, entropy,
                                         torch.ones(n, dtype=torch.bool), 0.2, 0.01, 0.5)
    ref = sb3_style_loss(log_prob, old_log_prob * 0.3 + log_prob, adv, values, returns, entropy, 0.2, 0.01, 0.5)
    torch.testing.assert_close(loss, ref, rtol=1e-12, atol=1e-12)
    assert 0 < stats["clip_fraction"] < 1


def test_masked_ppo_loss_ignores_padding_values_and_gradients():
    g = torch.Generator().manual_seed(1)
    n, pad = 40, 13
    params = torch.randn(n + pad, 3, generator=g, requires_grad=True)
    data = [torch.randn(n + pad, generator=g) for _ in range(3)]
    weights = torch.rand(n + pad, generator=g)

    def loss_of(p, mask, garbage):
        log_prob, values, entropy = p[:, 0], p[:, 1], p[:, 2]
        old, adv, ret = (torch.where(mask, d, garbage) for d in data)
        loss, _ = losses.masked_ppo_loss(log_prob, old, adv, values, ret, entropy, mask, 0.2, 0.01, 0.5, weights)
        return loss

    mask = torch.zeros(n + pad, dtype=torch.bool)
    mask[torch.randperm(n + pad, generator=g)[:n]] = True
    l1 = loss_of(params, mask, torch.full((n + pad,), 1e9))
    (g1,) = torch.autograd.grad(l1, params)
    l2 = loss_of(params, mask, torch.full((n + pad,), float("nan")))
    (g2,) = torch.autograd.grad(l2, params)
    # The same loss computed on the valid entries alone.
    l3, _ = losses.masked_ppo_loss(params[mask, 0], data[0][mask], data[1][mask], params[mask, 1], data[2][mask],
                                   params[mask, 2], torch.ones(n, dtype=torch.bool), 0.2, 0.01, 0.5, weights[mask])
    (g3,) = torch.autograd.grad(l3, params)
    torch.testing.assert_close(l1, l3, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(l2, l3, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(g1, g3, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(g2, g3, rtol=1e-6, atol=1e-7)
    assert torch.all(g1[~mask] == 0)


def test_masked_mean_of_empty_mask_is_zero():
    x = torch.tensor([float("inf"), 2.0])
    assert losses.masked_mean(x, torch.zeros(2, dtype=torch.bool)).item() == 0.0


def test_popart_preserves_predictions():
    g = torch.Generator().manual_seed(2)
    head = torch.nn.Linear(16, 1).double()
    h = torch.randn(100, 16, generator=g, dtype=torch.float64)
    mean, sq = 3.0, 3.0**2 + 2.0**2
    before = head(h) * losses.popart_sigma(mean, sq) + mean
    targets = np.random.default_rng(0).normal(50.0, 20.0, size=500)
    new_mean, new_sq, w, b = losses.popart_update(mean, sq, head.weight.data, head.bias.data, targets, 0.9997, 1e-4)
    step = 1 - 0.9997**500
    assert new_mean == pytest.approx((1 - step) * mean + step * targets.mean())
    assert new_sq == pytest.approx((1 - step) * sq + step * (targets**2).mean())
    after = (h @ w.T + b) * losses.popart_sigma(new_mean, new_sq) + new_mean
    torch.testing.assert_close(after, before, rtol=0, atol=1e-5)
    assert losses.popart_sigma(new_mean, new_sq) > 2.0


def test_popart_sigma_floor():
    assert losses.popart_sigma(1.0, 1.0, 1e-4) == 1e-4


def test_segment_priorities_and_weights():
    adv = np.array([[1.0, -1.0], [0.0, 0.0], [3.0, 1.0], [-0.5, 0.0]])
    p = losses.segment_priorities(adv, 0.85)
    score = np.array([2.0, 0.0, 4.0, 0.5]) ** 0.85
    np.testing.assert_allclose(p, score / score.sum())
    w = losses.priority_weights(p, np.array([0, 2, 3]), 0.9)
    full = (4 * p[[0, 2, 3]]) ** -0.9
    np.testing.assert_allclose(w, full / full.max())
    assert w.max() == pytest.approx(1.0)
    np.testing.assert_allclose(losses.segment_priorities(np.zeros((3, 2))), 1 / 3)


def test_priority_sampling_frequencies_match_probabilities():
    rng = np.random.default_rng(5)
    p = losses.segment_priorities(rng.normal(size=(12, 8)), 0.85)
    draws = 200_000
    counts = np.bincount(losses.sample_segments(p, draws, rng), minlength=12)
    sigma = np.sqrt(draws * p * (1 - p))
    assert np.all(np.abs(counts - draws * p) < 5 * sigma)


def test_popart_epoch_step_takes_the_first_batch_then_approaches_the_ema_step():
    """Bias-corrected per-update step: 1 at the first update, 1 - decay in the limit, and a constant
    stream of equal batches gives exactly their mean from the first update on."""
    assert losses.popart_epoch_step(0.9997, 1) == 1.0
    assert losses.popart_epoch_step(0.9997, 10**6) == pytest.approx(3e-4, rel=1e-9)
    assert losses.popart_epoch_step(0.9, 2) == pytest.approx(0.1 / 0.19)
    mean, sq = 0.0, 1.0
    w, b = torch.ones(1, 3), torch.zeros(1)
    for k in range(1, 5):
        mean, sq, w, b = losses.popart_update_moments(mean, sq, w, b, (4, 4 * 7.0, 4 * 50.0), 0.9997, 1e-4,
                                                      losses.popart_epoch_step(0.9997, k))
        assert mean == pytest.approx(7.0) and sq == pytest.approx(50.0)
    with pytest.raises(ValueError, match="updates"):
        losses.popart_epoch_step(0.9997, 0)
