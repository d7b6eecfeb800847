"""The learner's arithmetic fast paths against plain references: the Deep Sets pool with its backward
pass written out over the winners (``_PooledMLP``), the in-place no-gradient MLP with reused buffers,
the Categorical head without the distribution object, the flat gradient buffer's zeroing and clipping,
and PPO trained with every fast path against PPO trained with none of them."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

from terrazero_env.agents import PPO, policies  # noqa: E402
from terrazero_env.agents import ppo as ppo_module  # noqa: E402
from terrazero_env.agents.policies import (  # noqa: E402
    _mlp,
    _Scratch,
    encode_present,
    linear_relu_layers,
    max_pool_rows,
    mlp_no_grad,
    pack_entities,
)
from terrazero_env.agents.ppo import FlatGradients  # noqa: E402
from terrazero_env.wrappers import DPSA  # noqa: E402

import terrazero_env  # noqa: E402

SMALL = {"ego_hidden": 16, "entity_hidden": 24, "trunk": (32, 32)}
CARS_ONLY = {"init.num_agents": [4, 4], "road_users.idm_fraction": 0.0, "road_users.parked": 0,
             "init.initial_speed": [4.0, 8.0]}


def packed_entities(seed, n=40, count=30, width=7, present=0.4):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, count, width)).astype(np.float32)
    x[rng.random((n, count)) >= present] = 0.0
    x[3] = 0.0  # an observation without any entity
    obs = torch.from_numpy(x.reshape(n, -1))
    return pack_entities(obs, 0, count, width)


def test_linear_relu_layers_recognizes_only_linear_relu_stacks():
    mlp = _mlp([7, 16, 8])
    assert linear_relu_layers(mlp) == [mlp[0], mlp[2]]
    assert linear_relu_layers(torch.nn.Sequential(torch.nn.Linear(3, 4))) is None
    assert linear_relu_layers(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())) is None
    assert linear_relu_layers(torch.nn.Sequential(torch.nn.Linear(3, 4, bias=False), torch.nn.ReLU())) is None
    assert linear_relu_layers(torch.nn.Linear(3, 4)) is None


def test_no_grad_mlp_with_reused_buffers_equals_the_module():
    """``mlp_no_grad`` gives the module's output exactly, with and without scratch buffers, for
    batches that grow and shrink (the buffers are reused and regrown), and calls the module itself
    where a gradient is recorded."""
    torch.manual_seed(0)
    mlp = _mlp([7, 32, 32, 16])
    scratch = _Scratch()
    for rows in (50, 400, 10, 401, 0):
        x = torch.randn(rows, 7)
        want = mlp(x).detach()
        with torch.no_grad():
            torch.testing.assert_close(mlp_no_grad(mlp, x), want, rtol=0, atol=0)
            torch.testing.assert_close(mlp_no_grad(mlp, x, scratch).clone(), want, rtol=0, atol=0)
    assert mlp_no_grad(mlp, torch.randn(3, 7)).requires_grad


@pytest.mark.parametrize("sizes", [[7, 24, 24], [7, 16, 24, 24], [5, 12]])
@pytest.mark.parametrize("seed", [0, 1])
def test_pooled_mlp_backward_equals_autograd_of_the_plain_pool(sizes, seed):
    """``encode_present`` with a gradient (``_PooledMLP``: MLP without autograd, hand-written backward
    over the attaining entities) gives the plain path's values exactly and its parameter gradients
    within float tolerance, for one, two and three layers, with scratch buffers reused between calls
    of different sizes."""
    torch.manual_seed(seed)
    mlp = _mlp(sizes)
    scratch = _Scratch()
    for call, n in enumerate((40, 25, 60)):
        rows, feats = packed_entities(seed * 10 + call, n=n, width=sizes[0])
        upstream = torch.randn(n, sizes[-1])
        mlp.zero_grad()
        fast = encode_present(mlp, rows, feats, n, scratch)
        (fast * upstream).sum().backward()
        g_fast = [p.grad.clone() for p in mlp.parameters()]
        mlp.zero_grad()
        plain = max_pool_rows(mlp(feats), rows, n)
        (plain * upstream).sum().backward()
        torch.testing.assert_close(fast, plain, rtol=0, atol=0)
        moved = 0.0
        for a, p in zip(g_fast, mlp.parameters()):
            torch.testing.assert_close(a, p.grad, rtol=1e-5, atol=1e-6)
            moved = max(moved, float(a.abs().max()))
        assert moved > 1e-3


def quick_model(**kwargs):
    venv = DPSA(terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled", **CARS_ONLY), threshold=0.5, horizon=20)
    return PPO("DeepSetsPolicy", venv, n_steps=32, seed=0, policy_kwargs=SMALL, **kwargs)


def test_categorical_head_equals_sb3_distribution_in_log_prob_and_entropy():
    """``evaluate_actions_packed`` (Categorical maths without the object) gives SB3's
    ``evaluate_actions`` values, log-probabilities and entropies; ``forward_packed`` with
    ``deterministic=True`` takes SB3's most likely actions."""
    model = quick_model()
    obs = torch.as_tensor(model.env.reset())
    pol = model.policy
    actions = torch.randint(0, model.action_space.n, (obs.shape[0],))
    packed = pol.features_extractor.pack(obs.float())
    v1, l1, e1 = pol.evaluate_actions(obs, actions)
    v2, l2, e2 = pol.evaluate_actions_packed(packed, actions)
    torch.testing.assert_close(v2, v1, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(l2, l1, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(e2, e1, rtol=1e-6, atol=1e-6)
    assert l2.requires_grad and e2.requires_grad
    with torch.no_grad():
        det, _, _ = pol(obs, deterministic=True)
        det2, _, _, _ = pol.forward_packed(obs, deterministic=True)
    torch.testing.assert_close(det2, det, rtol=0, atol=0)


def test_flat_gradients_zero_and_clip_as_torch_does():
    """``FlatGradients.clip_norm_`` scales as ``clip_grad_norm_`` (float tolerance) and returns the same
    norm; ``zero_`` binds the views again after SB3's ``zero_grad`` set the gradients to None."""
    torch.manual_seed(0)
    net = _mlp([6, 16, 4])
    ref = _mlp([6, 16, 4])
    ref.load_state_dict(net.state_dict())
    flat = FlatGradients(list(net.parameters()))
    for max_norm in (1e-3, 1e3):
        x = torch.randn(32, 6)
        flat.zero_()
        net(x).pow(2).sum().backward()
        ref.zero_grad()
        ref(x).pow(2).sum().backward()
        norm = flat.clip_norm_(max_norm)
        ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), max_norm)
        torch.testing.assert_close(norm, ref_norm, rtol=1e-5, atol=0)
        for p, q in zip(net.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7)
        assert all(p.grad.data_ptr() == v.data_ptr() for p, v in zip(net.parameters(), flat.views))
    torch.optim.SGD(net.parameters(), lr=0.1).zero_grad()  # set_to_none
    assert all(p.grad is None for p in net.parameters())
    flat.zero_()
    assert all(p.grad is v for p, v in zip(net.parameters(), flat.views))
    assert float(flat.flat.abs().sum()) == 0.0


def test_training_with_the_fast_paths_equals_the_plain_reference(monkeypatch):
    """Two rollouts and updates of PPO with every fast path (the default) and with none of them
    (autograd through the whole per-entity MLP and the plain pool, SB3's distribution, its
    ``zero_grad`` and ``clip_grad_norm_``) reach the same parameters within float tolerance."""
    fast = quick_model()
    fast.learn(2 * fast.n_steps * fast.n_envs)
    monkeypatch.setattr(policies, "linear_relu_layers", lambda mlp: None)
    monkeypatch.setattr(policies.DeepSetsPolicy, "_categorical", lambda self, latent: None)
    monkeypatch.setattr(ppo_module.PPO, "_flat_gradients", lambda self: None)
    plain = quick_model()
    plain.learn(2 * plain.n_steps * plain.n_envs)
    moved = 0.0
    initial = quick_model().policy.parameters()
    for (name, a), b, c in zip(fast.policy.named_parameters(), plain.policy.parameters(), initial):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
        moved = max(moved, float((a - c).detach().abs().max()))
    assert moved > 1e-4  # the updates moved the parameters


def test_direct_fused_adam_step_equals_the_optimizer_step():
    """``FlatGradients.adam_step`` (the fused kernel called directly) updates parameters, moments and
    step counts exactly as ``torch.optim.Adam(fused=True).step()``; it declines (returns False, changes
    nothing) before the optimizer has its state, and for an optimizer it does not reproduce."""
    torch.manual_seed(0)
    nets = [_mlp([6, 16, 4]) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    opts = [torch.optim.Adam(n.parameters(), lr=3e-3, eps=1e-8, fused=True) for n in nets]
    flat = FlatGradients(list(nets[0].parameters()))
    for step in range(4):
        x = torch.randn(32, 6)
        flat.zero_()
        opts[1].zero_grad()
        for n in nets:
            n(x).pow(2).sum().backward()
        if step == 0:
            assert not flat.adam_step(opts[0])  # no state yet: the optimizer's own step
            opts[0].step()
        else:
            assert flat.adam_step(opts[0])
        opts[1].step()
        for p, q in zip(*(n.parameters() for n in nets)):
            torch.testing.assert_close(p, q, rtol=0, atol=0)
            for key in ("exp_avg", "exp_avg_sq", "step"):
                torch.testing.assert_close(opts[0].state[p][key], opts[1].state[q][key], rtol=0, atol=0)
    sgd = torch.optim.SGD(nets[0].parameters(), lr=0.1)
    assert not flat.adam_step(sgd)
    loop = torch.optim.Adam(nets[0].parameters(), lr=1e-3, foreach=False)
    loop.step()
    assert not flat.adam_step(loop)


def test_scratch_buffers_are_per_thread_and_not_copied():
    """Two threads pooling different batches through one encoder at once each get their own result
    (each thread has its own buffers); a deep copy of an extractor's scratch starts empty and works."""
    import copy
    import threading

    torch.manual_seed(0)
    mlp = _mlp([7, 32, 32])
    scratch = _Scratch()
    batches = [packed_entities(seed, n=60) for seed in (4, 5)]
    with torch.no_grad():
        want = [max_pool_rows(mlp(f), r, 60) for r, f in batches]
    got = [[], []]

    def work(k):
        with torch.no_grad():
            for _ in range(50):
                got[k].append(encode_present(mlp, *batches[k], 60, scratch))

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in (0, 1):
        assert len(got[k]) == 50
        for out in got[k]:
            torch.testing.assert_close(out, want[k], rtol=0, atol=0)
    clone = copy.deepcopy(scratch)
    with torch.no_grad():
        torch.testing.assert_close(encode_present(mlp, *batches[0], 60, clone), want[0], rtol=0, atol=0)
