"""terrazero_env.agents.PPO: equivalence with stock SB3 PPO, masking, bootstraps, PopArt, priorities."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("stable_baselines3")

import gymnasium as gym  # noqa: E402
from stable_baselines3 import PPO as SB3PPO  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecMonitor, VecNormalize  # noqa: E402
from terrazero_env.agents import PPO, losses  # noqa: E402
from terrazero_env.agents.ppo import MaskedRolloutBuffer  # noqa: E402
from terrazero_env.wrappers import DPSA  # noqa: E402

import terrazero_env  # noqa: E402

SMALL = {"ego_hidden": 32, "entity_hidden": 32, "trunk": (64, 64)}
COMMON = dict(n_steps=32, batch_size=32, n_epochs=2, learning_rate=3e-4, gamma=0.99, gae_lambda=0.95, clip_range=0.2,
              ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5, seed=0,
              policy_kwargs={"net_arch": [32, 32], "optimizer_kwargs": {"eps": 1e-8}})


def host(buf, *names):
    """The buffer's per-step fields (tensors on the training device) as NumPy arrays."""
    out = [getattr(buf, name).cpu().numpy() for name in names]
    return out[0] if len(out) == 1 else out


def cartpole(n=4):
    return DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])


def test_one_update_matches_stock_sb3_ppo():
    initial = [p.detach().clone() for p in SB3PPO("MlpPolicy", cartpole(), **COMMON).policy.parameters()]
    # Each model is built and trained before the next: construction re-seeds the global RNGs.
    stock = SB3PPO("MlpPolicy", cartpole(), **COMMON)
    stock.learn(32 * 4)
    for p, q in zip(initial, PPO("MlpPolicy", cartpole(), **COMMON).policy.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=0)
    ours = PPO("MlpPolicy", cartpole(), vtrace=False, popart=False, prioritized=False, **COMMON)
    ours.learn(32 * 4)
    np.testing.assert_allclose(host(ours.rollout_buffer, "advantages"), stock.rollout_buffer.advantages.reshape(4, 32).T,
                               atol=1e-6)
    moved = 0.0
    for (name, p), q, p0 in zip(stock.policy.named_parameters(), ours.policy.parameters(), initial):
        torch.testing.assert_close(q, p, rtol=0, atol=1e-6, msg=name)
        moved = max(moved, float((p.detach() - p0).abs().max()))
    assert moved > 1e-4  # the update did change the parameters


def test_single_epoch_vtrace_is_on_policy_ppo():
    stock = SB3PPO("MlpPolicy", cartpole(), **{**COMMON, "n_epochs": 1})
    stock.learn(32 * 4)
    ours = PPO("MlpPolicy", cartpole(), vtrace=True, popart=False, prioritized=False, **{**COMMON, "n_epochs": 1})
    ours.learn(32 * 4)
    for p, q in zip(stock.policy.parameters(), ours.policy.parameters()):
        torch.testing.assert_close(q, p, rtol=0, atol=1e-6)


#: The quick preset without its road users: four controlled cars per world, whose terminations within
#: the first rollout these tests rely on (DPSA padding). They start at 4-8 m/s so that random actions
#: leave the road within the 32 steps (at the preset's 1-3 m/s the rate-limited steering keeps a random
#: car on the road for about 4 s).
CARS_ONLY = {"init.num_agents": [4, 4], "road_users.idm_fraction": 0.0, "road_users.parked": 0,
             "init.initial_speed": [4.0, 8.0]}


def quick_model(policy_kwargs=SMALL, **kwargs):
    venv = DPSA(terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled", **CARS_ONLY), threshold=0.5, horizon=20)
    return PPO("DeepSetsPolicy", venv, n_steps=32, seed=0, policy_kwargs=policy_kwargs, **kwargs)


def collect(model):
    from stable_baselines3.common.callbacks import CallbackList

    model._setup_learn(model.n_steps * model.n_envs, CallbackList([]))
    callback = CallbackList([])
    callback.init_callback(model)
    assert model.collect_rollouts(model.env, callback, model.rollout_buffer, model.n_steps)
    return model.rollout_buffer


def test_the_default_fused_adam_updates_as_the_per_tensor_loop():
    """The optimizer defaults to Adam with ``fused=True`` (one kernel per parameter instead of torch's
    per-parameter loop of elementwise ops, or its multi-tensor step, which was the default before and
    updates bit for bit as the loop): the same updates up to float rounding, so two rollouts and
    updates end at the loop's parameters within float32 tolerance."""
    if torch.__version__ < "2.4":
        pytest.skip("torch's fused Adam runs on the CPU from torch 2.4 (the default is the multi-tensor step before)")
    optimizer = quick_model().policy.optimizer
    assert optimizer.defaults["fused"] is True and not optimizer.defaults["foreach"]
    runs = []
    for fused in (True, False):
        per_tensor = {**SMALL, "optimizer_kwargs": {"eps": 1e-8, "foreach": False}}
        model = quick_model() if fused else quick_model(policy_kwargs=per_tensor)
        assert bool(model.policy.optimizer.defaults["fused"]) is fused
        model.learn(2 * model.n_steps * model.n_envs)
        runs.append([p.detach().clone() for p in model.policy.parameters()])
    for a, b in zip(*runs):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_padding_leaves_loss_and_gradient_unchanged():
    model = quick_model()
    buf = collect(model)
    assert not buf.valid.all()  # DPSA produced padding
    real = np.flatnonzero(buf._flat(buf.valid).cpu().numpy())[:48]
    batch = buf._samples(real)
    rng = np.random.default_rng(0)
    pad = 17
    obs_pad = torch.as_tensor(rng.normal(scale=1e3, size=(pad, batch.observations.shape[1])), dtype=torch.float32)
    nan = torch.full((pad,), float("nan"))
    padded = batch._replace(
        observations=torch.cat([obs_pad[:7], batch.observations, obs_pad[7:]]),
        actions=torch.cat([torch.full((7, 1), 3.0), batch.actions, torch.full((pad - 7, 1), 11.0)]),
        old_log_prob=torch.cat([nan[:7], batch.old_log_prob, torch.full((pad - 7,), float("inf"))]),
        advantages=torch.cat([nan[:7] * 0 + 1e9, batch.advantages, nan[7:]]),
        returns=torch.cat([nan[:7], batch.returns, nan[7:] * 0 - 1e9]),
        valid=torch.cat([torch.zeros(7, dtype=torch.bool), batch.valid, torch.zeros(pad - 7, dtype=torch.bool)]))

    def loss_and_grad(b):
        model.policy.zero_grad()
        values, log_prob, entropy = model.policy.evaluate_actions(b.observations, b.actions.long().flatten())
        loss, _ = losses.masked_ppo_loss(log_prob, b.old_log_prob, b.advantages, values.flatten(), b.returns,
                                         entropy, b.valid, 0.2, 0.01, 0.5)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.policy.parameters()]

    l1, g1 = loss_and_grad(batch)
    l2, g2 = loss_and_grad(padded)
    # float32 (SB3 casts observations to float32): the padded sums run over more zeros in another order,
    # so the loss (a sum of O(1) terms that nearly cancel) may move by float32 rounding of those terms.
    torch.testing.assert_close(l2, l1, rtol=1e-5, atol=1e-6)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
    assert any(float(a.abs().max()) > 0 for a in g1)


def test_buffer_bootstraps_truncation_not_terminal():
    buf = MaskedRolloutBuffer(2, gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), "cpu", gae_lambda=0.8,
                              gamma=0.9, n_envs=2, segment_length=1)
    obs, act = np.zeros((2, 3), np.float32), np.zeros((2, 1))
    buf.add(obs, act, np.array([1.0, 1.0]), np.zeros(2), torch.tensor([0.5, 0.5]), torch.zeros(2),
            valid=np.ones(2, bool), terminated=np.zeros(2, bool), dones=np.zeros(2, bool), final_values=np.zeros(2))
    buf.add(obs, act, np.array([2.0, 2.0]), np.zeros(2), torch.tensor([0.25, 0.25]), torch.zeros(2),
            valid=np.ones(2, bool), terminated=np.array([False, True]), dones=np.array([True, True]),
            final_values=np.array([4.0, 99.0]))
    buf.compute_returns_and_advantage(torch.tensor([[123.0], [-55.0]]), np.array([True, True]))
    np.testing.assert_allclose(host(buf, "next_values"), [[0.25, 0.25], [4.0, 0.0]])
    np.testing.assert_allclose(host(buf, "advantages"), [[4.577, 1.985], [5.35, 1.75]], rtol=1e-6)


def test_collect_records_truncation_bootstrap_and_padding():
    model = quick_model(popart=False)
    dones, terminated, valid, final_values, next_values, advantages = host(
        collect(model), "dones", "terminated", "valid", "final_values", "next_values", "advantages")
    truncated = dones & ~terminated & valid
    assert truncated.any()  # DPSA truncates the survivors at its global reset
    assert np.all(final_values[truncated] != 0)
    np.testing.assert_array_equal(next_values[truncated], final_values[truncated])
    assert np.all(advantages[~valid] == 0)
    # A valid step followed by padding ends its trace.
    assert np.all(dones[:-1][valid[:-1] & ~valid[1:]])


def test_popart_step_preserves_denormalized_values():
    model = quick_model(popart=True)
    buf = collect(model)
    buf.returns = buf.returns * 30.0 + 50.0  # far from the current statistics
    obs = torch.as_tensor(buf.observations[:, 0])
    with torch.no_grad():
        before = model.denormalize_values(model.policy.predict_values(obs))
    model._popart_step()
    with torch.no_grad():
        after = model.denormalize_values(model.policy.predict_values(obs))
    assert model.popart_mean > 1.0
    torch.testing.assert_close(after, before, rtol=0, atol=1e-5)


def test_prioritized_minibatches_are_weighted_segments():
    model = quick_model(segment_length=8)
    buf = collect(model)
    torch.manual_seed(0)
    batches = list(buf.get_prioritized(model.batch_size, 16, 0.85, 0.9))
    assert len(batches) == 16
    for b in batches:
        assert b.indices.device == buf.advantages.device
        seg = b.indices.cpu().numpy().reshape(-1, 8)
        assert np.all(seg % 8 == np.arange(8)) and np.all(np.diff(seg, axis=1) == 1)
        assert b.weights is not None and float(b.weights.max()) <= 1.0 + 1e-6 and float(b.weights.min()) > 0


def test_vtrace_recompute_uses_stored_ratios():
    model = quick_model()
    buf = collect(model)
    rng = np.random.default_rng(1)
    idx = rng.choice(buf.buffer_size * buf.n_envs, 40, replace=False)
    buf.store_log_rhos(idx, rng.normal(size=40).astype(np.float32))
    assert np.count_nonzero(host(buf, "log_rhos")) == 40
    buf.recompute_vtrace(1.0, 1.0)
    adv, vs = losses.vtrace_gae(*host(buf, "log_rhos", "rewards", "values", "next_values", "terminated", "dones",
                                      "valid"), buf.gamma, buf.gae_lambda)
    # float32: torch's and NumPy's exp may differ in the last bit of a ratio.
    np.testing.assert_allclose(host(buf, "advantages"), adv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(host(buf, "returns"), vs, rtol=1e-5, atol=1e-6)


def test_learn_save_load_predict(tmp_path):
    model = quick_model()
    model.learn(model.n_steps * model.n_envs)
    assert model.popart_mean != 0.0
    model.save(tmp_path / "m.zip")
    loaded = PPO.load(tmp_path / "m.zip")
    obs = model.rollout_buffer.observations[0].cpu().numpy()
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])
    assert loaded.popart_mean == model.popart_mean


def test_popart_refuses_reward_normalization():
    with pytest.raises(ValueError, match="PopArt"):
        PPO("MlpPolicy", VecNormalize(cartpole(2)), n_steps=16, popart=True, prioritized=False)
    PPO("MlpPolicy", VecNormalize(cartpole(2)), n_steps=16, popart=False, prioritized=False)


def _trained(array_path, sampler="dpsa", rollouts=3):
    if sampler == "dpsa":
        venv = DPSA(terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled"), threshold=0.5, horizon=20)
    else:  # per-world autoreset: the native env restarts finished worlds on the next step
        from terrazero_env.wrappers import SamplingStats
        venv = SamplingStats(terrazero_env.make_vec(2, "quick", autoreset_mode="NextStep"))
    model = PPO("DeepSetsPolicy", venv, n_steps=32, seed=0, policy_kwargs=SMALL, array_path=array_path)
    model.learn(model.n_steps * model.n_envs * rollouts)
    return model


@pytest.mark.parametrize("sampler", ["dpsa", "autoreset"])
def test_array_path_reproduces_the_sb3_adapter_path_exactly(sampler):
    """The array-only rollout loop stores the same transitions (observations, actions, rewards,
    validity, terminal flags, V(s_final) bootstraps) and so reaches the same parameters as the loop
    through the SB3 adapter's per-slot infos, over several rollouts with episode ends."""
    fast, slow = _trained(True, sampler), _trained(False, sampler)
    assert fast.episode_tally is not None and slow.episode_tally is None  # each took its own path
    a, b = fast.rollout_buffer, slow.rollout_buffer
    assert bool((a.dones & a.valid).any()) and bool((a.dones & ~a.terminated).any())  # episodes ended, some truncated
    torch.testing.assert_close(a.observations, b.observations, rtol=0, atol=0)
    for name in ("actions", "rewards", "valid", "terminated", "dones", "final_values", "values", "log_probs",
                 "advantages", "returns", "episode_starts"):
        torch.testing.assert_close(getattr(a, name), getattr(b, name), rtol=0, atol=0, msg=name)
    np.testing.assert_array_equal(fast._last_obs, slow._last_obs)
    for (name, p), q in zip(fast.policy.named_parameters(), slow.policy.parameters()):
        torch.testing.assert_close(p, q, rtol=0, atol=0, msg=name)
    assert fast.popart_mean == slow.popart_mean
    # The array path keeps its own running returns and lengths (no VecMonitor around its adapter);
    # they continue the same way as the adapter path's VecMonitor.
    assert not isinstance(fast.env, VecMonitor) and isinstance(slow.env, VecMonitor)
    np.testing.assert_array_equal(fast.episode_tally.returns, slow.env.episode_returns)
    np.testing.assert_array_equal(fast.episode_tally.lengths, slow.env.episode_lengths)
    assert fast.episode_tally.count == slow.env.episode_count > 0
    # SB3's episode log (rollout/ep_rew_mean) holds the same episodes.
    assert len(fast.ep_info_buffer) == len(slow.ep_info_buffer) > 0
    assert [(e["r"], e["l"]) for e in fast.ep_info_buffer] == [(e["r"], e["l"]) for e in slow.ep_info_buffer]


def test_a_checkpointed_monitor_state_goes_to_the_episode_tally():
    """A checkpoint written while the array path's episode statistics lived in a ``VecMonitor``
    restores into the bare adapter the trainer now builds, handing the monitor's counts back."""
    from terrazero_env.agents.checkpoint import env_state, set_env_state
    from terrazero_env.wrappers import SB3VecEnv

    adapter = SB3VecEnv(DPSA(terrazero_env.make_vec(2, "quick", autoreset_mode="Disabled"), threshold=0.5,
                             horizon=20))
    adapter.reset()
    n = adapter.num_envs
    old = {"kind": "VecMonitor", "returns": np.arange(n, dtype=np.float32), "lengths": np.arange(n, dtype=np.int32),
           "count": 7, "inner": env_state(adapter)}
    handed = set_env_state(adapter, old)
    np.testing.assert_array_equal(handed["returns"], old["returns"])
    assert handed["count"] == 7
    assert set_env_state(adapter, env_state(adapter)) is None
    with pytest.raises(ValueError, match="VecMonitor"):
        set_env_state(adapter.vector_env, old)
    adapter.close()


def test_popart_epoch_schedule_updates_once_per_epoch_and_preserves_outputs():
    """``popart_schedule="epoch"``: one statistics update per epoch (two per update here), each
    leaving the denormalized value predictions unchanged; unknown schedules are refused."""
    model = quick_model(popart=True, popart_schedule="epoch", n_epochs=2)
    buf = collect(model)
    obs = buf.observations[:, 0]
    with torch.no_grad():
        before = model.denormalize_values(model.policy.predict_values(obs))
    model._popart_step()
    with torch.no_grad():
        after = model.denormalize_values(model.policy.predict_values(obs))
    torch.testing.assert_close(after, before, rtol=0, atol=1e-5)
    assert model.popart_updates == 1
    targets = buf.returns[buf.valid]
    assert model.popart_mean == pytest.approx(float(targets.mean()), rel=1e-6)  # first update: the batch mean
    model.train()
    assert model.popart_updates == 3
    with pytest.raises(ValueError, match="popart_schedule"):
        quick_model(popart_schedule="rollout")


def test_float16_observations_stay_float16_on_the_data_path():
    """With ``obs.dtype: float16`` the rollout storage holds the env's float16 observations as they
    came (half the memory and transfer), and an update runs on them."""
    cfg = terrazero_env.load_config("quick", **{"obs.dtype": "float16"}).with_overrides(num_worlds=2)
    venv = DPSA(terrazero_env.envs.TerraZeroVectorEnv(cfg, autoreset_mode="Disabled"), threshold=0.5, horizon=20)
    model = PPO("DeepSetsPolicy", venv, n_steps=16, seed=0, policy_kwargs=SMALL)
    before = [p.detach().clone() for p in model.policy.parameters()]
    model.learn(16 * model.n_envs)
    buf = model.rollout_buffer
    assert buf.observations.dtype == torch.float16 and model._last_obs.dtype == np.float16
    assert buf.observations.abs().sum() > 0 and bool(torch.isfinite(buf.advantages).all())
    assert any(not torch.equal(p, q) for p, q in zip(model.policy.parameters(), before))


def test_learn_without_tensorboard_leaves_no_sb3_temp_folder(tmp_path, monkeypatch, capsys):
    """SB3's logger set-up makes an empty ``tempdir/SB3-<time>`` folder on every ``learn`` without a
    TensorBoard folder; ours logs the same (nothing at verbose 0, the table on stdout at 1) without it."""
    import tempfile

    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stock = SB3PPO("MlpPolicy", cartpole(), **COMMON)
    stock.learn(32 * 4)
    assert [p.name[:4] for p in tmp_path.iterdir()] == ["SB3-"]  # what this guards against
    for p in tmp_path.iterdir():
        p.rmdir()
    quiet = PPO("MlpPolicy", cartpole(), **COMMON)
    quiet.learn(32 * 4)
    quiet.learn(32 * 4, reset_num_timesteps=False)
    assert capsys.readouterr().out == ""
    loud = PPO("MlpPolicy", cartpole(), verbose=1, **COMMON)
    loud.learn(32 * 4)
    assert "total_timesteps" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []
