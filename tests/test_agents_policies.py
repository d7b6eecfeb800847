"""DeepSetsPolicy: layout from the env, parameter count, permutation and absent-entity invariance,
per-type action heads, and the ``PPO("DeepSetsPolicy", env)`` alias."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

import gymnasium as gym  # noqa: E402
from terrazero_env.agents import PPO, DeepSetsPolicy  # noqa: E402
from terrazero_env.agents.policies import DeepSetsExtractor, count_parameters, layout_from_env  # noqa: E402
from terrazero_env.wrappers import DPSA  # noqa: E402

import terrazero_env  # noqa: E402

SMALL = {"ego_hidden": 16, "entity_hidden": 24, "trunk": (32, 32)}


@pytest.fixture(scope="module")
def quick():
    venv = terrazero_env.make_vec(2, "quick")
    obs, _ = venv.reset(seed=0)
    yield venv, np.array(obs)
    venv.close()


def test_layout_read_from_the_env(quick):
    venv, _ = quick
    kw = layout_from_env(venv)
    for name, group in venv.obs_layout.groups.items():
        assert kw["layout"][name] == [group.start, group.count, group.width]
    assert kw["agent_types"] == [1]
    wrapped = DPSA(terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled"))
    assert layout_from_env(wrapped) == kw


def test_planner_parameter_count():
    venv = terrazero_env.make_vec(1, "planner")
    policy = DeepSetsPolicy(venv.single_observation_space, venv.single_action_space, lambda _: 5e-4,
                            **layout_from_env(venv))
    n = count_parameters(policy)
    print(f"DeepSetsPolicy parameters on the planner preset: {n:,}")
    assert 3.2e6 < n < 3.8e6


def extractor(quick, **kw):
    venv, _ = quick
    torch.manual_seed(0)
    args = {**layout_from_env(venv), **SMALL, **kw}
    args.pop("agent_types", None)
    return DeepSetsExtractor(venv.single_observation_space, **args).eval()


def test_permutation_invariance_over_entities(quick):
    venv, obs = quick
    fe = extractor(quick)
    x = torch.as_tensor(obs)
    y = x.clone()
    rng = np.random.default_rng(0)
    for name in ("partners", "road", "traffic"):
        start, count, width = fe.layout[name]
        block = y[:, start:start + count * width].reshape(len(y), count, width)
        y[:, start:start + count * width] = block[:, torch.as_tensor(rng.permutation(count))].reshape(len(y), -1)
    assert not torch.equal(x, y)
    with torch.no_grad():
        torch.testing.assert_close(fe(y), fe(x), rtol=1e-5, atol=1e-6)


def test_absent_entities_are_ignored(quick):
    venv, obs = quick
    fe = extractor(quick)
    x = torch.as_tensor(obs)
    start, count, width = fe.layout["road"]
    ents = x[:, start:start + count * width].reshape(len(x), count, width)
    present = (ents != 0).any(-1)
    assert present.any() and not present.all()  # some road rows are absent (all zero)
    with torch.no_grad():
        pooled = fe.encode_entities("road", x)
        for i in range(len(x)):  # the max over the present entities alone
            ref = fe.encoders["road"](ents[i][present[i]]).amax(0)
            torch.testing.assert_close(pooled[i], ref)
        empty = x.clone()
        empty[:, start:start + count * width] = 0
        assert torch.all(fe.encode_entities("road", empty) == 0)


def test_per_type_action_heads():
    layout = {"ego": [0, 1, 4], "partners": [4, 3, 2]}
    space = gym.spaces.Box(-1, 1, (10,), np.float32)
    policy = DeepSetsPolicy(space, gym.spaces.Discrete(5), lambda _: 1e-3, layout=layout, type_column=0,
                            agent_types=[1, 2, 3], ego_hidden=8, entity_hidden=8, trunk=(16,))
    obs = torch.randn(6, 10)
    obs[:, 0] = torch.tensor([1.0, 2.0, 3.0, 3.0, 2.0, 1.0])
    with torch.no_grad():
        latent = policy.extract_features(obs)
        logits = policy.get_distribution(obs).distribution.logits
        for row, code in enumerate(obs[:, 0].long().tolist()):
            head = policy.action_net.heads[code - 1]
            torch.testing.assert_close(logits[row], torch.log_softmax(head(latent[row, :-1]), -1))
    assert policy.action_net.heads[0].weight.abs().max() > 0
    assert {id(p) for p in policy.action_net.parameters()} <= {id(p) for g in policy.optimizer.param_groups
                                                               for p in g["params"]}


def test_ppo_alias_with_a_gymnasium_vector_env():
    model = PPO("DeepSetsPolicy", terrazero_env.make_vec(1, "quick"), n_steps=16, seed=0, policy_kwargs=SMALL)
    assert isinstance(model.policy, DeepSetsPolicy)
    assert model.policy.features_extractor.layout["road"] == tuple(layout_from_env(model.env)["layout"]["road"])


def test_policy_save_load_roundtrip(quick, tmp_path):
    venv, obs = quick
    policy = DeepSetsPolicy(venv.single_observation_space, venv.single_action_space, lambda _: 5e-4,
                            **layout_from_env(venv), **SMALL)
    policy.save(tmp_path / "policy.pt")
    loaded = DeepSetsPolicy.load(tmp_path / "policy.pt")
    x = torch.as_tensor(obs)
    with torch.no_grad():
        torch.testing.assert_close(loaded.predict_values(x), policy.predict_values(x))


def test_packed_encoder_matches_the_dense_reference_in_values_and_gradients(quick):
    """The packed entity encoder (MLP on present rows, scatter max-pool) computes the dense
    reference's function: same features and the same parameter gradients, on real observations
    plus rows with no entity at all and rows with every entity present."""
    venv, obs = quick
    x = torch.as_tensor(obs).clone()
    layout = layout_from_env(venv)["layout"]
    start, count, width = layout["partners"]
    x[0, start:start + count * width] = 0.0  # no partner at all
    x[1, start:start + count * width] = torch.rand(count * width) + 0.1  # every partner slot present
    fe = extractor(quick)
    assert fe.encoder == "packed"
    dense = extractor(quick, encoder="dense")
    dense.load_state_dict(fe.state_dict())
    out_packed, out_dense = fe(x), dense(x)
    torch.testing.assert_close(out_packed, out_dense, rtol=1e-6, atol=1e-6)
    out_packed.square().sum().backward()
    out_dense.square().sum().backward()
    for (name, p), q in zip(fe.named_parameters(), dense.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6, msg=name)
    for group in fe.entity_groups:  # the pool of each group alone, rows without entities give zeros
        torch.testing.assert_close(fe.encode_entities(group, x), dense.encode_entities_dense(group, x))


def test_unknown_encoder_is_refused_naming_the_choices(quick):
    with pytest.raises(ValueError, match="encoder: one of packed, dense"):
        extractor(quick, encoder="sparse")
