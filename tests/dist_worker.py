"""One rank of the data-parallel update test (run by ``torchrun --nproc-per-node 2``; see
tests/test_train.py). Every rank collects the same two-world rollout with a one-process model, keeps
its own world's columns in a one-world model, and runs one distributed update; it also runs the
one-process update on the whole rollout, and saves both results to OUT/rank<r>.pt."""

import sys
from pathlib import Path

import numpy as np
import torch
from stable_baselines3.common.callbacks import CallbackList
from stable_baselines3.common.logger import Logger
from terrazero_env.agents import PPO, losses
from terrazero_env.agents.checkpoint import to_plain
from terrazero_env.agents.distributed import init_from_environment, shutdown
from terrazero_env.wrappers import DPSA

import terrazero_env

SMALL = {"ego_hidden": 32, "entity_hidden": 32, "trunk": (64, 64)}
KW = dict(n_steps=16, num_minibatches=1, n_epochs=2, seed=0, policy_kwargs=SMALL, prioritized=False,
          vtrace=True, popart=True, learning_rate=1e-3)


def model(worlds):
    venv = DPSA(terrazero_env.make_vec(worlds, "quick", autoreset_mode="Disabled"), threshold=0.5, horizon=12)
    m = PPO("DeepSetsPolicy", venv, **KW)
    m.set_logger(Logger(folder=None, output_formats=[]))
    return m


def main(out: str) -> None:
    torch.set_num_threads(1)
    sync, _ = init_from_environment("cpu")
    whole = model(2)
    whole._setup_learn(whole.n_steps * whole.n_envs, CallbackList([]))
    cb = CallbackList([])
    cb.init_callback(whole)
    assert whole.collect_rollouts(whole.env, cb, whole.rollout_buffer, whole.n_steps)
    src = whole.rollout_buffer
    # Padding (as DPSA's virtual continuation produces) in a third of the steps, garbage rewards in it.
    pad = torch.as_tensor(np.random.default_rng(1).random(tuple(src.valid.shape)) < 0.3)
    src.valid &= ~pad
    src.rewards[pad] = 1e3
    src.dones[:-1] |= ~src.valid[1:]
    src.advantages, src.returns = losses.masked_gae(src.rewards, src.values, src.next_values, src.terminated,
                                                   src.dones, src.valid, src.gamma, src.gae_lambda)
    part = model(1)
    part.policy.load_state_dict(whole.policy.state_dict())
    part.sync = sync
    sync.broadcast_module(part.policy)
    n = part.n_envs
    cols = slice(sync.rank * n, (sync.rank + 1) * n)
    dst = part.rollout_buffer
    for name, value in vars(src).items():  # the per-step tensors, observations included
        if (isinstance(value, (np.ndarray, torch.Tensor)) and value.ndim >= 2
                and tuple(value.shape[:2]) == (src.buffer_size, src.n_envs)):
            setattr(dst, name, value[:, cols].clone() if isinstance(value, torch.Tensor) else value[:, cols].copy())
    dst.full, dst.pos = True, src.buffer_size
    part.train()
    whole.train()
    torch.save(to_plain({"part": {k: v.clone() for k, v in part.policy.state_dict().items()},
                "whole": {k: v.clone() for k, v in whole.policy.state_dict().items()},
                "popart_part": (part.popart_mean, part.popart_sq_mean),
                "popart_whole": (whole.popart_mean, whole.popart_sq_mean),
                "valid": float(src.valid.float().mean()),
                "targets": src.returns[src.valid].double().numpy()}),
               Path(out) / f"rank{sync.rank}.pt")
    shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
