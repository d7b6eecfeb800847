"""The compiled entity packing and max-pool of the Deep Sets encoder (``terrazero_env._packing``)
against the torch operations they replace: same rows in the same order, same pooled values, and the
gradient of ``scatter_reduce("amax")`` wherever the maximum is unique."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from terrazero_env._packing import pack_present, segment_max  # noqa: E402
from terrazero_env.agents.policies import max_pool_rows, pack_entities  # noqa: E402


def _torch_pack(obs, start, count, width):
    ents = obs[:, start:start + count * width].reshape(obs.shape[0], count, width)
    flat = (ents != 0).any(dim=-1).reshape(-1).nonzero().squeeze(1)
    return torch.div(flat, count, rounding_mode="floor"), ents.reshape(-1, width).index_select(0, flat)


def _sparse_obs(rng, rows=37, dim=5 + 9 * 4 + 3):
    obs = rng.normal(size=(rows, dim)).astype(np.float32)
    blocks = obs[:, 5:5 + 9 * 4].reshape(rows, 9, 4)
    blocks[rng.random((rows, 9)) < 0.6] = 0.0  # absent entities
    blocks[rng.random((rows, 9, 4)) < 0.3] = 0.0  # zeros inside present ones
    blocks[0] = 0.0  # a row with no entity
    blocks[1, 2] = [0.0, 0.0, 0.0, -0.0]  # -0.0 is zero
    blocks[2, 3] = [0.0, np.nan, 0.0, 0.0]  # NaN is present
    blocks[3, 8] = [0.0, 0.0, 0.0, 1e-30]  # present through its last feature only
    return torch.from_numpy(obs)


def test_pack_present_matches_the_torch_gather_row_for_row():
    obs = _sparse_obs(np.random.default_rng(0))
    rows, feats = pack_present(obs.numpy(), 5, 9, 4)
    ref_rows, ref_feats = _torch_pack(obs, 5, 9, 4)
    assert rows.dtype == np.int64 and feats.dtype == np.float32 and feats.shape == (len(rows), 4)
    np.testing.assert_array_equal(rows, ref_rows.numpy())
    np.testing.assert_array_equal(feats, ref_feats.numpy())  # NaNs at the same places
    assert 0 not in rows and len(rows) > 20


def test_pack_entities_takes_the_torch_route_off_the_compiled_one():
    obs = _sparse_obs(np.random.default_rng(1))
    fast = pack_entities(obs, 5, 9, 4)
    for other in (obs.double(), obs.clone().requires_grad_(True), obs.t().contiguous().t()):
        rows, feats = pack_entities(other, 5, 9, 4)
        torch.testing.assert_close(rows, fast[0])
        torch.testing.assert_close(feats.float(), fast[1], equal_nan=True)


def test_pack_present_refuses_a_group_outside_the_row():
    obs = np.zeros((2, 10), np.float32)
    with pytest.raises(ValueError, match="does not fit observation rows of 10 features"):
        pack_present(obs, 4, 2, 4)
    rows, feats = pack_present(obs, 2, 2, 4)  # all absent
    assert rows.shape == (0,) and feats.shape == (0, 4)


def test_max_pool_rows_matches_scatter_reduce_in_values_and_gradients():
    rng = np.random.default_rng(2)
    """Behind a ReLU, as in the encoder: entities at 0 tie with the pool's initial 0, and get no
    gradient either way (the ReLU's is 0 there)."""
    rng = np.random.default_rng(2)
    x = torch.as_tensor(rng.normal(size=(50, 6)), dtype=torch.float32).requires_grad_(True)
    x_ref = x.detach().clone().requires_grad_(True)
    rows = torch.as_tensor(np.sort(rng.integers(0, 9, size=50)))  # rows 9 and up: no entity
    out = max_pool_rows(torch.relu(x), rows, 12)
    ref = torch.zeros(12, 6).scatter_reduce(0, rows.unsqueeze(1).expand(-1, 6), torch.relu(x_ref), "amax",
                                            include_self=True)
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    assert (out[9:] == 0).all() and (out[:9] > 0).any()
    g = torch.as_tensor(rng.normal(size=(12, 6)), dtype=torch.float32)
    out.backward(g)
    ref.backward(g)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=0, atol=0)
    assert (x.grad != 0).sum() >= 9


def test_segment_max_first_of_ties_nan_wins_and_bad_rows_are_refused():
    h = np.array([[1.0, 0.0], [1.0, np.nan], [0.5, 2.0]], np.float32)
    pooled, arg = segment_max(h, np.array([0, 0, 0], np.int64), 2)
    assert pooled[0, 0] == 1.0 and arg[0, 0] == 0  # the first of two tied rows
    assert np.isnan(pooled[0, 1]) and arg[0, 1] == 1  # NaN wins its column
    np.testing.assert_array_equal(pooled[1], [0.0, 0.0])
    np.testing.assert_array_equal(arg[1], [-1, -1])
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 2\)"):
        segment_max(h, np.array([0, 2, 0], np.int64), 2)
    with pytest.raises(ValueError, match="rows has 2 entries for 3 rows"):
        segment_max(h, np.array([0, 1], np.int64), 2)
