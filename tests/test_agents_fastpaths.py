"""The learner's fast paths against their plain references: the winners-only gradient of the Deep
Sets max-pool (``tests/test_learner_fastpaths.py`` holds its hand-written backward pass too), the
packing kept from collection and gathered per minibatch, the packed forward of collection, and PPO
trained with and without the kept packing."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from terrazero_env.agents import PPO  # noqa: E402
from terrazero_env.agents.policies import (  # noqa: E402
    _mlp,
    encode_present,
    max_pool_rows,
    pack_entities,
)
from terrazero_env.agents.rollout_buffer import PackedEntities  # noqa: E402
from terrazero_env.wrappers import DPSA  # noqa: E402

import terrazero_env  # noqa: E402

SMALL = {"ego_hidden": 16, "entity_hidden": 24, "trunk": (32, 32)}
#: The quick preset without road users, cars starting at 4-8 m/s: episodes end (and DPSA pads) within
#: the first rollout (as in ``tests/test_agents_ppo.py``).
CARS_ONLY = {"init.num_agents": [4, 4], "road_users.idm_fraction": 0.0, "road_users.parked": 0,
             "init.initial_speed": [4.0, 8.0]}


def sparse_obs(rng, rows, count, width, present=0.4, extra=3):
    """``[rows, extra + count * width]`` float32: ``extra`` leading columns, then ``count`` entities of
    which about ``present`` have features (the rest all zero), some with zeros among their features."""
    x = rng.normal(size=(rows, count, width)).astype(np.float32)
    x[rng.random((rows, count)) >= present] = 0.0
    x[rng.random((rows, count, width)) < 0.2] = 0.0  # zero features inside present entities
    lead = rng.normal(size=(rows, extra)).astype(np.float32)
    return torch.from_numpy(np.concatenate([lead, x.reshape(rows, -1)], axis=1))


def grads(module):
    return [p.grad.clone() for p in module.parameters()]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_winner_gradient_equals_the_full_backward_of_the_max_pool(seed):
    """``encode_present`` (gradient back-propagated through the attaining entities only) gives the
    values and the parameter gradients of the plain path (MLP on every entity, compiled segment max
    with its backward) and of the dense masked max, on rows with many, one and no entities."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    count, width, hidden, n = 30, 7, 24, 40
    obs = sparse_obs(rng, n, count, width)
    obs[3, 3:] = 0.0  # a row without any entity
    obs[5, 3 + width:] = 0.0  # a row with one entity at most
    rows, feats = pack_entities(obs, 3, count, width)
    mlp = _mlp([width, hidden, hidden])
    upstream = torch.from_numpy(rng.normal(size=(n, hidden)).astype(np.float32))

    fast = encode_present(mlp, rows, feats, n)
    (fast * upstream).sum().backward()
    g_fast = grads(mlp)
    mlp.zero_grad()
    plain = max_pool_rows(mlp(feats), rows, n)
    (plain * upstream).sum().backward()
    g_plain = grads(mlp)
    mlp.zero_grad()
    ents = obs[:, 3:].reshape(n, count, width)
    present = (ents != 0).any(-1)
    dense = mlp(ents).masked_fill(~present.unsqueeze(-1), float("-inf")).amax(1)
    dense = torch.where(present.any(1, keepdim=True), dense, torch.zeros_like(dense))
    (dense * upstream).sum().backward()
    g_dense = grads(mlp)

    assert fast.requires_grad and float(fast[3].detach().abs().sum()) == 0.0
    torch.testing.assert_close(fast, plain, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(fast, dense, rtol=1e-6, atol=1e-6)
    moved = 0.0
    for a, b, c in zip(g_fast, g_plain, g_dense):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-6)
        moved = max(moved, float(a.abs().max()))
    assert moved > 1e-3  # the gradients are not all zero


def test_winner_gradient_with_no_positive_activation_is_zero_and_connected():
    """Every entity's MLP output <= 0: the pool is all zeros and every parameter gets a zero gradient
    (not None), as the full backward gives."""
    mlp = _mlp([4, 8, 8])
    with torch.no_grad():
        for p in mlp.parameters():
            p.fill_(-1.0)
    feats = torch.ones(6, 4)
    rows = torch.tensor([0, 0, 1, 2, 2, 2])
    out = encode_present(mlp, rows, feats, 4)
    assert torch.equal(out, torch.zeros(4, 8))
    out.sum().backward()
    assert all(p.grad is not None and float(p.grad.abs().sum()) == 0.0 for p in mlp.parameters())


def test_packed_entities_gather_equals_packing_the_gathered_observations():
    """The store fed per step (one chunk, or two halves out of order) gives, for any flat sample
    indices (scattered, or runs of consecutive samples as drawn segments are), exactly what packing
    those observations again gives: same rows, same features, same order."""
    rng = np.random.default_rng(3)
    steps, envs = 5, 6
    groups = {"a": (3, 10, 4), "b": (43, 5, 2)}
    from terrazero_env.agents.policies import PackedObs

    obs = sparse_obs(rng, steps * envs, 10, 4, extra=3)
    obs = torch.cat([obs, sparse_obs(rng, steps * envs, 5, 2, present=0.2, extra=0)], dim=1).reshape(steps, envs, -1)
    obs[2, 4, 3:] = 0.0  # an observation with no entity in either group

    def pack(x):
        return PackedObs(x[:, :3].clone(), {g: pack_entities(x, *groups[g]) for g in groups}, x[:, :1].clone(), x.shape[0])

    for halves in (False, True):
        store = PackedEntities(steps, envs, list(groups), typed=True)
        order = [(t, lo, hi) for t in range(steps) for lo, hi in ([(0, 2), (2, envs)] if halves else [(0, envs)])]
        if halves:
            order = order[::-1]
        for t, lo, hi in order:
            store.add(t, lo, pack(obs[t, lo:hi]))
        assert store.finalize() and store.ready
        flat = obs.transpose(0, 1).flatten(0, 1)  # flat sample i: step i % T of env i // T
        scattered = torch.from_numpy(rng.integers(0, steps * envs, size=17))
        scattered[0] = 4 * steps + 2  # env 4, step 2: no entity
        segments = torch.cat([torch.arange(5, 10), torch.arange(20, 25), torch.arange(0, 5), torch.arange(5, 10)])
        for indices in (scattered, segments):  # samples one by one, and runs of consecutive samples
            got = store.gather(indices)
            want = pack(flat.index_select(0, indices))
            assert got.n == want.n == indices.shape[0]
            torch.testing.assert_close(got.ego, want.ego, rtol=0, atol=0)
            torch.testing.assert_close(got.kind, want.kind, rtol=0, atol=0)
            for g in groups:
                torch.testing.assert_close(got.groups[g][0], want.groups[g][0], rtol=0, atol=0)
                torch.testing.assert_close(got.groups[g][1], want.groups[g][1], rtol=0, atol=0)


def test_packed_entities_refuse_an_incomplete_rollout():
    """A store missing a step (or a block of slots) keeps nothing, so minibatches pack again."""
    store = PackedEntities(2, 3, ["a"], typed=False)
    from terrazero_env.agents.policies import PackedObs

    x = torch.ones(3, 4)
    store.add(0, 0, PackedObs(x[:, :1], {"a": pack_entities(x, 1, 3, 1)}, None, 3))
    assert not store.finalize() and not store.ready
    store.add(0, 0, PackedObs(x[:, :1], {"a": pack_entities(x, 1, 3, 1)}, None, 3))
    store.add(1, 1, PackedObs(x[:2, :1], {"a": pack_entities(x[:2], 1, 3, 1)}, None, 2))
    assert not store.finalize()


def quick_model(**kwargs):
    venv = DPSA(terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled", **CARS_ONLY), threshold=0.5, horizon=20)
    return PPO("DeepSetsPolicy", venv, n_steps=32, seed=0, policy_kwargs=SMALL, **kwargs)


def test_packed_forward_of_collection_equals_the_policy_forward():
    """``forward_packed`` draws the same actions and gives the same values and log-probabilities as
    SB3's forward, from the same random state."""
    model = quick_model()
    obs = torch.as_tensor(model.env.reset())
    with torch.no_grad():
        torch.manual_seed(5)
        a1, v1, l1 = model.policy(obs)
        torch.manual_seed(5)
        a2, v2, l2, packed = model.policy.forward_packed(obs)
    assert packed.n == obs.shape[0]
    torch.testing.assert_close(a2, a1, rtol=0, atol=0)
    torch.testing.assert_close(v2, v1, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(l2, l1, rtol=1e-6, atol=1e-6)


def test_minibatches_carry_the_collection_packing_of_their_observations():
    """After a rollout on the array path, every prioritized minibatch holds the packing of exactly its
    samples' stored observations."""
    model = quick_model()
    model.learn(model.n_steps * model.n_envs)
    buf = model.rollout_buffer
    assert buf.entities is not None and buf.entities.ready
    fe = model.policy.features_extractor
    for batch in buf.get_prioritized(model.batch_size, 3, 0.85, 0.9):
        assert batch.packed is not None
        plain = buf._samples(batch.indices)
        want = fe.pack(plain.observations.float())
        torch.testing.assert_close(batch.packed.ego, want.ego, rtol=0, atol=0)
        for g in fe.entity_groups:
            for got_part, want_part in zip(batch.packed.groups[g], want.groups[g]):
                torch.testing.assert_close(got_part, want_part, rtol=0, atol=0)


def test_training_with_the_kept_packing_equals_packing_per_minibatch():
    """Two rollouts and updates with the collection's packing kept (the default) and with every
    minibatch packed again reach the same parameters (float tolerance)."""
    runs = []
    for pack_once in (True, False):
        model = quick_model(pack_once=pack_once)
        model.learn(2 * model.n_steps * model.n_envs)
        assert (model.rollout_buffer.entities is not None) is pack_once
        runs.append([p.detach().clone() for p in model.policy.parameters()])
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
