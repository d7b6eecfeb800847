"""terrazero_env.agents.targets (the device versions of the rollout maths) against the NumPy
references of terrazero_env.agents.losses and against torchrl: float64 to 1e-10, float32 to 1e-5, on
random masked rollouts with DPSA-style padding runs, terminals and truncations."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from stable_baselines3.common.utils import explained_variance as sb3_explained_variance  # noqa: E402
from terrazero_env.agents import losses, targets  # noqa: E402

TOL = {torch.float64: dict(rtol=1e-10, atol=1e-10), torch.float32: dict(rtol=1e-5, atol=1e-5)}


def rollout(seed, T=40, N=7, padding=True):
    """Random ``[T, N]`` data: terminals and truncations (V(s_final) in ``next_values``), runs of padding
    after episode ends (DPSA's virtual steps, holding garbage rewards and values), ``done`` cut before
    padding as the rollout buffer cuts it."""
    rng = np.random.default_rng(seed)
    rewards, values = rng.normal(size=(T, N)), rng.normal(size=(T, N))
    ends = rng.random((T, N)) < 0.15
    terminated = ends & (rng.random((T, N)) < 0.5)
    valid = np.ones((T, N), bool)
    for n in range(N if padding else 0):
        for t in np.flatnonzero(ends[:, n]):
            valid[t + 1:t + 1 + rng.integers(0, 5), n] = False
    rewards[~valid] = 1e6
    values[~valid] = -1e6
    next_values = np.concatenate([values[1:], rng.normal(size=(1, N))])
    truncated = ends & ~terminated
    next_values[truncated] = rng.normal(size=truncated.sum())
    next_values[terminated] = 0.0
    done = ends.copy()
    done[:-1] |= ~valid[1:]
    log_rhos = rng.normal(scale=0.7, size=(T, N))
    return log_rhos, rewards, values, next_values, terminated, done, valid


def to_torch(arrays, dtype):
    return [torch.as_tensor(a, dtype=torch.bool if a.dtype == bool else dtype) for a in arrays]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("lam,rho_bar,c_bar", [(0.95, 1.0, 1.0), (0.8, 2.0, 0.5), (1.0, 1.0, 0.9)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_device_vtrace_equals_the_numpy_reference(dtype, lam, rho_bar, c_bar, seed):
    data = rollout(seed)
    assert not data[-1].all() and (data[4] & data[-1]).any() and (data[5] & ~data[4] & data[-1]).any()
    ref_adv, ref_vs = losses.vtrace_gae(*data, 0.97, lam, rho_bar=rho_bar, c_bar=c_bar)
    adv, vs = targets.vtrace_gae(*to_torch(data, dtype), 0.97, lam, rho_bar=rho_bar, c_bar=c_bar)
    assert adv.dtype == dtype and vs.dtype == dtype
    np.testing.assert_allclose(adv.numpy(), ref_adv, **TOL[dtype])
    np.testing.assert_allclose(vs.numpy(), ref_vs, **TOL[dtype])
    assert np.all(adv.numpy()[~data[-1]] == 0)  # padding: advantage 0, despite its garbage rewards


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("seed", [3, 4])
def test_device_masked_gae_equals_the_numpy_reference(dtype, seed):
    _, *rest = rollout(seed)
    ref_adv, ref_ret = losses.masked_gae(*rest, 0.99, 0.95)
    adv, ret = targets.masked_gae(*to_torch(rest, dtype), 0.99, 0.95)
    np.testing.assert_allclose(adv.numpy(), ref_adv, **TOL[dtype])
    np.testing.assert_allclose(ret.numpy(), ref_ret, **TOL[dtype])
    if dtype == torch.float64:  # the same operations in the same order: equal to the bit
        np.testing.assert_array_equal(adv.numpy(), ref_adv)


def test_device_vtrace_matches_torchrl_at_lambda_one():
    functional = pytest.importorskip("torchrl.objectives.value.functional")
    log_rhos, rewards, values, next_values, terminated, done, _ = rollout(5, padding=False)
    valid = np.ones_like(done)
    _, vs = targets.vtrace_gae(*to_torch([log_rhos, rewards, values, next_values, terminated, done, valid],
                                         torch.float64), 0.95, 1.0, rho_bar=1.0, c_bar=0.9)

    def batch_time(x):  # [T, N] -> torchrl's [N, T, 1]
        return torch.as_tensor(np.ascontiguousarray(x.T))[..., None]

    log_mu = np.random.default_rng(6).normal(size=log_rhos.shape)
    _, tr_vs = functional.vtrace_advantage_estimate(
        0.95, batch_time(log_mu + log_rhos), batch_time(log_mu), batch_time(values), batch_time(next_values),
        batch_time(rewards), batch_time(done), terminated=batch_time(terminated), rho_thresh=1.0, c_thresh=0.9)
    # torchrl casts the discounts and clip levels to float32, hence the float32-level tolerance.
    np.testing.assert_allclose(tr_vs[..., 0].numpy().T, vs.numpy(), rtol=1e-6, atol=1e-6)


def test_device_gae_matches_torchrl_without_padding():
    functional = pytest.importorskip("torchrl.objectives.value.functional")
    _, rewards, values, next_values, terminated, done, _ = rollout(7, padding=False)
    valid = np.ones_like(done)
    adv, _ = targets.masked_gae(*to_torch([rewards, values, next_values, terminated, done, valid], torch.float64),
                                0.99, 0.95)

    def batch_time(x):
        return torch.as_tensor(np.ascontiguousarray(x.T))[..., None]

    tr_adv, _ = functional.generalized_advantage_estimate(
        0.99, 0.95, batch_time(values), batch_time(next_values), batch_time(rewards), batch_time(done),
        terminated=batch_time(terminated))
    # torchrl computes its discount factors in float32, hence the float32-level tolerance.
    np.testing.assert_allclose(tr_adv[..., 0].numpy().T, adv.numpy(), rtol=1e-6, atol=1e-6)


def test_target_moments_equal_the_numpy_sums_of_the_valid_targets():
    _, _, values, _, _, _, valid = rollout(8)
    stats = targets.target_moments(torch.as_tensor(values, dtype=torch.float32), torch.as_tensor(valid))
    t = values[valid].astype(np.float32).astype(np.float64)
    np.testing.assert_allclose(stats.numpy(), [t.size, t.sum(), (t * t).sum()], rtol=1e-10)


def test_device_priorities_weights_and_draws_equal_the_numpy_reference():
    rng = np.random.default_rng(9)
    adv = rng.normal(size=(24, 8))
    adv[3] = 0.0  # a segment of padding only: probability 0, excluded from the weights' maximum
    p_ref = losses.segment_priorities(adv, 0.85)
    p = targets.segment_priorities(torch.as_tensor(adv, dtype=torch.float32), 0.85)
    np.testing.assert_allclose(p.numpy(), p_ref, rtol=1e-5)
    p64 = targets.segment_priorities(torch.as_tensor(adv), 0.85)
    np.testing.assert_allclose(p64.numpy(), p_ref, rtol=1e-10, atol=0)
    for n_all, ranks in [(None, 1), (48, 2)]:
        w_max = losses.priority_weight_max(p_ref, 0.9, n_all, ranks)
        assert float(targets.priority_weight_max(p64, 0.9, n_all, ranks)) == pytest.approx(w_max, rel=1e-10)
        idx = np.array([0, 5, 5, 23])
        np.testing.assert_allclose(targets.priority_weights(p64, torch.as_tensor(idx), 0.9, n_all, ranks).numpy(),
                                   losses.priority_weights(p_ref, idx, 0.9, n_all, ranks), rtol=1e-10)
    np.testing.assert_allclose(targets.segment_priorities(torch.zeros(3, 2)).numpy(), 1 / 3)
    draws = 200_000
    counts = np.bincount(targets.sample_segments(p64, draws, torch.Generator().manual_seed(0)).numpy(),
                         minlength=24)
    assert counts[3] == 0
    sigma = np.sqrt(draws * p_ref * (1 - p_ref))
    assert np.all(np.abs(counts - draws * p_ref) <= 5 * sigma)


def test_explained_variance_equals_sb3_over_the_valid_entries():
    _, rewards, values, _, _, _, valid = rollout(10)
    rewards[~valid] = np.nan  # never read
    got = targets.explained_variance(torch.as_tensor(values), torch.as_tensor(rewards), torch.as_tensor(valid))
    assert got == pytest.approx(float(sb3_explained_variance(values[valid], rewards[valid])), rel=1e-10)
