"""The array-only rollout path of :class:`terrazero_env.agents.PPO`.

When PPO's env is a Gymnasium vector env seen through ``SB3VecEnv``, the rollout
loop steps that vector env itself and reads ``valid``, ``terminated``, ``truncated``, the final
observations and the rule counters as arrays: no per-slot info dict, no list comprehension over
slots. Observations go from the env's buffer straight into the rollout storage on the training
device (through one pinned staging buffer when that device is a GPU), and the policy reads them
there. Episode statistics (count, return, goal / collision / off-road counters) are summed with
array operations on the steps where episodes end and read once per rollout by the trainer
(:attr:`EpisodeTally.totals`).

It reproduces what the SB3 adapter path computes, value for value: the same actions, stored
transitions, bootstraps and episode returns (``tests/test_agents_ppo.py`` trains both and compares).
Supported autoreset conventions: ``SAME_STEP`` (DPSA, SGR, the native env in that mode) and
``NEXT_STEP`` over worlds of several slots (the native env restarts finished worlds itself); other
vector envs keep the adapter path.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.vec_env import VecEnv

from terrazero_env import engine as core

__all__ = ["EpisodeTally", "ObservationStage", "array_vector_env", "final_observations"]

_COUNTERS = list(core.COUNTER_NAMES)
#: Columns of the rule counters summed per finished episode (any count > 0 is one episode).
TALLY_COUNTERS = ("goal_reached", "collision", "offroad")


def array_vector_env(env: VecEnv) -> Any | None:
    """The Gymnasium vector env under a bare ``SB3VecEnv(...)`` when the array path supports its
    autoreset convention; else None. A ``VecMonitor`` (or any other SB3 wrapper) a user put around
    the adapter keeps the adapter path, which steps through it and so keeps its counters."""
    from ..wrappers.sb3 import SB3VecEnv

    if type(env) is not SB3VecEnv:
        return None
    mode = env.autoreset_mode
    if mode is AutoresetMode.SAME_STEP or (mode is AutoresetMode.NEXT_STEP and env.world_slots > 1):
        return env.vector_env
    return None


def final_observations(obs: np.ndarray, info: dict[str, Any], ids: np.ndarray) -> np.ndarray:
    """The last observation of the episodes of slots ``ids`` that ended this step ``[len(ids), D]``:
    ``info["final_obs"]`` where the env restarted the slot within the step (SAME_STEP), else the
    returned row (a slot that waits for its world or for DPSA's global reset returns its last
    observation itself, as the SB3 adapter reads it)."""
    rows = np.array(obs[ids])
    mask = info.get("_final_obs")
    if mask is not None:
        sel = np.flatnonzero(np.asarray(mask, bool)[ids])
        if sel.size:
            rows[sel] = np.stack([info["final_obs"][i] for i in ids[sel]])
    return rows


class ObservationStage:
    """Copies a batch of observations from the env's NumPy buffer into a device tensor: directly on
    the CPU, through one pinned host buffer and an asynchronous copy on CUDA (the next host write
    into that buffer follows the copy, since the policy's actions are read back in between)."""

    def __init__(self, shape: tuple[int, ...], device: torch.device, dtype: torch.dtype = torch.float32) -> None:
        self.device = device
        self.pinned = (torch.empty(shape, dtype=dtype, pin_memory=True)
                       if device.type == "cuda" else None)

    def copy_into(self, dst: torch.Tensor, obs: np.ndarray, row: int = 0) -> None:
        """``dst[...] = obs`` (``dst``: on :attr:`device`, the stage's dtype and the shape of ``obs``);
        ``row``: where ``obs`` starts in the full batch (its rows of the staging buffer are used)."""
        if self.pinned is None:
            dst.copy_(torch.from_numpy(np.asarray(obs)))
        else:
            staging = self.pinned[row:row + len(obs)]
            np.copyto(staging.numpy(), obs, casting="same_kind")
            dst.copy_(staging, non_blocking=True)


class EpisodeTally:
    """Episode returns, lengths and end-of-episode counters as arrays, with ``VecMonitor``'s
    accounting (float32 returns summed over every step of a slot, reset at every episode end) kept
    here, since the array path steps the vector env under the SB3 adapter directly;
    :attr:`totals` counts the finished valid episodes, their return sum and the episodes whose goal /
    collision / off-road counter was set, since the last :meth:`take`."""

    def __init__(self, num_envs: int, episode_log: Any = None) -> None:
        #: SB3's ``ep_info_buffer`` (a bounded deque): gets ``{"r", "l", "t"}`` per finished episode,
        #: as ``VecMonitor`` infos would give it.
        self.episode_log = episode_log
        self.returns = np.zeros(num_envs, np.float32)
        self.lengths = np.zeros(num_envs, np.int32)
        self.count = 0
        self.t_start = time.time()
        self.totals = np.zeros(2 + len(TALLY_COUNTERS))
        self._cols = [_COUNTERS.index(k) for k in TALLY_COUNTERS]

    def state(self) -> dict[str, Any]:
        """The running returns, lengths and episode count (for a checkpoint)."""
        return {"returns": self.returns.copy(), "lengths": self.lengths.copy(), "count": self.count}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state` (the slot count must match)."""
        returns, lengths = np.asarray(state["returns"], np.float32), np.asarray(state["lengths"], np.int32)
        if returns.shape != self.returns.shape or lengths.shape != self.lengths.shape:
            raise ValueError(f"episode tally of {returns.shape[0]} slots, the run has {self.returns.shape[0]}: "
                             "resume with the settings the run was started with")
        self.returns, self.lengths, self.count = returns.copy(), lengths.copy(), int(state["count"])

    def step(self, rewards: np.ndarray, dones: np.ndarray, valid: np.ndarray, info: dict[str, Any]) -> None:
        """Add one step: ``rewards`` float32 ``[N]``, ``dones`` and ``valid`` bool ``[N]``."""
        self.returns += rewards
        self.lengths += 1
        if not dones.any():
            return
        ended = dones & valid
        if ended.any():
            counters = np.asarray(info.get("counters", np.zeros((dones.shape[0], len(_COUNTERS)))))
            final = info.get("final_info")
            if isinstance(final, dict) and "counters" in final:  # counters as they stood before a restart
                fmask = np.asarray(final.get("_counters", info.get("_final_info")), bool)
                counters = np.where(fmask[:, None], final["counters"], counters)
            self.totals[0] += ended.sum()
            self.totals[1] += float(np.sum(self.returns[ended]))
            self.totals[2:] += (counters[ended][:, self._cols] > 0).sum(axis=0)
        if self.episode_log is not None:
            ids = np.flatnonzero(dones)[-(self.episode_log.maxlen or dones.shape[0]):]
            t = round(time.time() - self.t_start, 6)
            for r, length in zip(self.returns[ids], self.lengths[ids]):
                self.episode_log.append({"r": r, "l": length, "t": t})
        self.count += int(dones.sum())
        self.lengths[dones] = 0
        self.returns[dones] = 0.0

    def take(self) -> np.ndarray:
        """The totals since the last call, then zero them."""
        out = self.totals.copy()
        self.totals[:] = 0.0
        return out
