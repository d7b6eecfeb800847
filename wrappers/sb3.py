"""Stable-Baselines3 adapter for Gymnasium vector environments.

:class:`SB3VecEnv` presents any :class:`gymnasium.vector.VectorEnv` (a native batched environment,
:class:`~gymnasium.vector.SyncVectorEnv` or :class:`~gymnasium.vector.AsyncVectorEnv`) as a
Stable-Baselines3 :class:`~stable_baselines3.common.vec_env.VecEnv`, so stock SB3 algorithms train on it::

    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecMonitor

    from terrazero_env.wrappers import SB3VecEnv

    vector_env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    env = VecMonitor(SB3VecEnv(vector_env))
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=64)
    model.learn(total_timesteps=512)
    env.close()

The adapter reads the vector env's autoreset mode from ``metadata["autoreset_mode"]`` (a
:class:`gymnasium.vector.AutoresetMode`; absent means ``NEXT_STEP``) and turns each mode into SB3's
convention, where a finished sub-env is reset within the step that ends its episode:

* ``NEXT_STEP`` and ``DISABLED``: the finished sub-envs are reset at once with
  ``vector_env.reset(options={"reset_mask": done})``. A masked reset also clears the vector env's
  pending autoreset, so under ``NEXT_STEP`` the following step is a real step of the new episode.
  A native vector env must therefore accept ``options["reset_mask"]`` (a bool array of shape
  ``(num_envs,)``) and reset only those sub-envs.
* ``SAME_STEP``: the vector env has already reset them; the last observation and step info are taken
  from ``infos["final_obs"]`` and ``infos["final_info"]``, and the top-level info of those sub-envs
  (their reset info) goes to ``reset_infos``.

Gymnasium's ``AsyncVectorEnv(shared_memory=False)`` does not clear its pending autoreset on
``reset`` (gymnasium 1.1 to 1.4), so with ``NEXT_STEP`` it would drop the action after every episode
start; the adapter refuses that combination (use ``shared_memory=True`` or ``autoreset_mode=DISABLED``).

Importing this module needs stable-baselines3 (and so torch) and gymnasium >= 1.1;
``terrazero_env.wrappers`` itself imports it only when ``SB3VecEnv`` is first used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

try:
    from gymnasium.vector import AsyncVectorEnv, AutoresetMode, VectorEnv
except ImportError as err:  # gymnasium 1.0 has neither autoreset modes nor partial resets
    raise ImportError("SB3VecEnv needs gymnasium>=1.1 (vector autoreset modes and reset_mask)") from err
try:
    from stable_baselines3.common.env_util import is_wrapped
    from stable_baselines3.common.vec_env import VecEnv
    from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvObs, VecEnvStepReturn
except ImportError as err:
    raise ImportError(
        "SB3VecEnv needs stable-baselines3; install it with `pip install terrazero-env[train]`"
    ) from err

__all__ = ["SB3VecEnv"]

_ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class SB3VecEnv(VecEnv):
    """A Gymnasium vector env seen as a Stable-Baselines3 ``VecEnv``.

    ``step_wait`` returns ``(obs, rewards, dones, infos)`` as SB3 expects: float32 rewards,
    ``dones = terminated | truncated``, and one info dict per sub-env built from Gymnasium's
    dict-of-arrays infos (a key is kept for sub-env ``i`` when its ``_key`` mask is true there, or
    when it has no mask). Every info carries ``"TimeLimit.truncated"`` (``truncated and not
    terminated``); at an episode end it also carries ``"terminal_observation"``, the last observation
    of that episode, while the returned ``obs`` row is the first observation of the next one. A
    ``"valid"`` info key is passed on to every sub-env's info on every step.

    ``seed()`` and ``set_options()`` take effect at the next ``reset()``, as in SB3's ``DummyVecEnv``;
    the options must be the same for all sub-envs, since a Gymnasium vector env's ``reset`` takes one
    options dict (a ``reset_mask`` reset needs every sub-env to have been reset before).

    Sub-env access (``get_attr``, ``set_attr``, ``env_method``, ``env_is_wrapped``) depends on what
    the vector env exposes:

    * ``SyncVectorEnv`` (sub-envs in ``vector_env.unwrapped.envs``): per sub-env, like ``DummyVecEnv``.
    * ``AsyncVectorEnv`` and other vector envs with Gymnasium's ``call``/``get_attr``/``set_attr``:
      ``get_attr`` and ``set_attr`` address any sub-envs (a partial ``set_attr`` reads the others'
      values and writes them back); ``env_method`` runs on all sub-envs only; ``env_is_wrapped`` is
      False for all, since the sub-envs live in other processes.
    * Native batched envs (no sub-env objects): ``get_attr`` returns the vector env's attribute once
      per index, ``set_attr`` sets it on the vector env and ``env_method`` calls the vector env's
      method once, returning its result once per sub-env; both need all sub-envs to be addressed.
      ``env_is_wrapped`` is False for all.

    ``render`` goes through the vector env's ``render()``: one frame per sub-env (tiled by SB3), or a
    single ``(H, W, C)`` frame for the whole vector env.

    :param vector_env: the Gymnasium vector env; its single action space must be ``Box``,
        ``Discrete``, ``MultiDiscrete`` or ``MultiBinary``.
    """

    def __init__(self, vector_env: VectorEnv) -> None:
        if not isinstance(vector_env, VectorEnv):
            raise TypeError(
                f"SB3VecEnv expects a gymnasium.vector.VectorEnv, got {type(vector_env).__name__}"
            )
        mode = vector_env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        try:
            self.autoreset_mode = AutoresetMode(mode)
        except ValueError:
            raise ValueError(
                f"metadata['autoreset_mode'] must be a gymnasium.vector.AutoresetMode "
                f"({', '.join(m.name for m in AutoresetMode)}), got {mode!r}"
            ) from None
        action_space = vector_env.single_action_space
        if not isinstance(action_space, _ACTION_SPACES):
            raise TypeError(
                f"SB3VecEnv supports Box, Discrete, MultiDiscrete and MultiBinary action spaces, got {action_space}"
            )
        base = vector_env.unwrapped
        if (
            self.autoreset_mode is AutoresetMode.NEXT_STEP
            and isinstance(base, AsyncVectorEnv)
            and not base.shared_memory
        ):
            raise ValueError(
                "AsyncVectorEnv(shared_memory=False) keeps its pending NEXT_STEP autoreset across reset(), "
                "which would drop the first action of every episode; use shared_memory=True or "
                "autoreset_mode=AutoresetMode.DISABLED"
            )
        # Vector envs whose sub-envs are agent slots of shared worlds (metadata["slots_per_world"] > 1)
        # restart a world once all its slots are done; a slot cannot be reset on its own. Between its
        # episode's end and its world's restart such a slot yields padding steps (reward 0, marked
        # infos[i]["valid"] = False), which a mask-aware learner skips.
        self._world_slots = int(vector_env.metadata.get("slots_per_world", 1) or 1)
        if self._world_slots > 1 and self.autoreset_mode is AutoresetMode.DISABLED:
            raise ValueError(
                f"sub-envs are slots of worlds of {self._world_slots} and cannot reset one by one; use "
                "autoreset_mode NEXT_STEP or SAME_STEP, where the vector env restarts finished worlds itself"
            )
        self.vector_env = vector_env
        self._base = base
        self._sub_envs: list[gym.Env] | None = getattr(base, "envs", None)
        self._remote = self._sub_envs is None and callable(getattr(base, "call", None))
        self._actions: np.ndarray | None = None
        super().__init__(vector_env.num_envs, vector_env.single_observation_space, action_space)

    @property
    def world_slots(self) -> int:
        """Sub-envs per shared world (``metadata["slots_per_world"]``; 1: each sub-env is its own)."""
        return self._world_slots

    def reset(self) -> VecEnvObs:
        options = self._options[0]
        if not all(other is options or other == options for other in self._options):
            raise ValueError(
                "a Gymnasium vector env takes one reset options dict for all sub-envs; got different "
                f"options per sub-env: {self._options}"
            )
        obs, infos = self.vector_env.reset(seed=self._vector_seed(), options=dict(options) or None)
        self.reset_infos = _unbatch_info(infos, self.num_envs)
        self._reset_seeds()
        self._reset_options()
        return _copy_obs(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = self._batch_actions(actions)

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() called without a pending step_async()")
        obs, rewards, terminated, truncated, infos = self.vector_env.step(self._actions)
        self._actions = None
        rewards = self._per_env(rewards, "rewards", np.float32)
        terminated = self._per_env(terminated, "terminated", np.bool_)
        truncated = self._per_env(truncated, "truncated", np.bool_)
        dones = terminated | truncated
        obs = _copy_obs(obs)
        self.batch_info = infos
        env_infos = _unbatch_info(infos, self.num_envs)
        if dones.any():
            if self.autoreset_mode is AutoresetMode.SAME_STEP:
                self._take_final(obs, env_infos, dones)
            elif self._world_slots > 1:  # NEXT_STEP over shared worlds: the env restarts them itself
                for i in np.flatnonzero(dones):
                    env_infos[i]["terminal_observation"] = _row(obs, i)
            else:
                self._reset_finished(obs, env_infos, dones)
        valid = infos.get("valid")
        for i, info in enumerate(env_infos):
            info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            if valid is not None:
                info.setdefault("valid", bool(valid[i]))
        return obs, rewards, dones, env_infos

    def close(self) -> None:
        self.vector_env.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        idx = list(self._get_indices(indices))
        if self._sub_envs is not None:
            return [self._sub_envs[i].get_wrapper_attr(attr_name) for i in idx]
        if self._remote:
            values = self._base.get_attr(attr_name)
            return [values[i] for i in idx]
        value = getattr(self.vector_env, attr_name)
        return [value for _ in idx]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        idx = list(self._get_indices(indices))
        if self._sub_envs is not None:
            for i in idx:
                self._sub_envs[i].set_wrapper_attr(attr_name, value)
        elif self._remote:
            selected = set(idx)
            current = None if len(selected) == self.num_envs else self._base.get_attr(attr_name)
            self._base.set_attr(
                attr_name, [value if i in selected else current[i] for i in range(self.num_envs)]
            )
        else:
            self._require_all(idx, f"set_attr({attr_name!r})")
            setattr(self.vector_env, attr_name, value)

    def env_method(
        self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs
    ) -> list[Any]:
        idx = list(self._get_indices(indices))
        if self._sub_envs is not None:
            return [
                self._sub_envs[i].get_wrapper_attr(method_name)(*method_args, **method_kwargs) for i in idx
            ]
        self._require_all(idx, f"env_method({method_name!r})")
        if self._remote:
            return list(self._base.call(method_name, *method_args, **method_kwargs))
        result = getattr(self.vector_env, method_name)(*method_args, **method_kwargs)
        return [result for _ in idx]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        idx = list(self._get_indices(indices))
        if self._sub_envs is not None:
            return [is_wrapped(self._sub_envs[i], wrapper_class) for i in idx]
        return [False for _ in idx]

    def get_images(self) -> Sequence[np.ndarray | None]:
        frames = self.vector_env.render()
        if frames is None:
            return [None] * self.num_envs
        if isinstance(frames, np.ndarray) and frames.ndim == 3:  # one (H, W, C) frame for the whole env
            return [frames]
        return list(frames)

    def _batch_actions(self, actions: np.ndarray) -> np.ndarray:
        """SB3's actions as the vector env's batch: shape ``(num_envs, *action_shape)``, the space's dtype."""
        space = self.action_space
        expected = (self.num_envs, *space.shape)
        batch = np.asarray(actions)
        if isinstance(space, spaces.Discrete) and batch.shape == (self.num_envs, 1):
            batch = batch.reshape(self.num_envs)
        if batch.shape != expected:
            raise ValueError(
                f"expected actions of shape {expected} and dtype {space.dtype} (one per sub-env, "
                f"{self.num_envs} sub-envs), got shape {batch.shape} and dtype {batch.dtype}"
            )
        if np.issubdtype(space.dtype, np.integer) and not np.issubdtype(batch.dtype, np.integer):
            if not np.all(np.mod(batch, 1) == 0):
                raise TypeError(
                    f"expected integer actions of shape {expected} and dtype {space.dtype}, got non-integral "
                    f"values of dtype {batch.dtype}"
                )
        return batch.astype(space.dtype)

    def _vector_seed(self) -> int | list[int | None] | None:
        """``self._seeds`` in the vector env's ``reset`` format: None when unset, ``s`` for SB3's
        ``seed(s)`` (``[s, s + 1, ...]``, which is what Gymnasium makes of an int), else the list."""
        first = self._seeds[0]
        if all(seed is None for seed in self._seeds):
            return None
        if first is not None and self._seeds == [first + i for i in range(self.num_envs)]:
            return first
        return list(self._seeds)

    def _per_env(self, values: Any, name: str, dtype: type[np.generic]) -> np.ndarray:
        array = np.asarray(values)
        if array.shape != (self.num_envs,):
            raise ValueError(
                f"the vector env returned {name} of shape {array.shape}; expected shape ({self.num_envs},) "
                f"convertible to dtype {np.dtype(dtype)}"
            )
        return array.astype(dtype)

    def _reset_finished(self, obs: VecEnvObs, env_infos: list[dict[str, Any]], dones: np.ndarray) -> None:
        """NEXT_STEP / DISABLED: keep the last observations, then reset the finished sub-envs in ``obs``."""
        finished = np.flatnonzero(dones)
        for i in finished:
            env_infos[i]["terminal_observation"] = _row(obs, i)
        reset_obs, infos = self.vector_env.reset(options={"reset_mask": dones})
        _assign_rows(obs, reset_obs, dones)
        reset_infos = _unbatch_info(infos, self.num_envs)
        for i in finished:
            self.reset_infos[i] = reset_infos[i]

    def _take_final(self, obs: VecEnvObs, env_infos: list[dict[str, Any]], dones: np.ndarray) -> None:
        """SAME_STEP: a finished sub-env's top-level info is its reset info; its step info is ``final_info``.
        A sub-env that ended without restarting (no ``final_obs`` entry, e.g. DPSA's virtual
        continuation or a slot waiting for its world) returned its last observation itself."""
        for i in np.flatnonzero(dones):
            reset_info = env_infos[i]
            if "final_obs" not in reset_info:
                env_infos[i] = {**reset_info, "terminal_observation": _row(obs, i)}
                continue
            final_obs = reset_info.pop("final_obs")
            step_info = reset_info.pop("final_info", {})
            self.reset_infos[i] = reset_info
            env_infos[i] = {**step_info, "terminal_observation": final_obs}

    def _require_all(self, idx: list[int], what: str) -> None:
        if sorted(set(idx)) != list(range(self.num_envs)):
            raise ValueError(
                f"{what} for sub-envs {idx}: {type(self._base).__name__} can only address all "
                f"{self.num_envs} sub-envs at once"
            )


def _unbatch_info(info: dict[str, Any], num_envs: int) -> list[dict[str, Any]]:
    """Gymnasium's vector info (arrays plus ``_key`` masks, nested for dict values) as one dict per
    sub-env. Whole-batch entries that are not per-sub-env arrays (e.g. DPSA's ``rho`` and ``stats``)
    are left out here; ``SB3VecEnv.batch_info`` keeps the last step's full info."""
    out: list[dict[str, Any]] = [{} for _ in range(num_envs)]
    for key, value in info.items():
        if key.startswith("_") and key[1:] in info:
            continue
        if isinstance(value, dict):
            per_env = _unbatch_info(value, num_envs)
            if not any(per_env):
                continue
        elif not (isinstance(value, np.ndarray) and value.ndim >= 1 and value.shape[0] == num_envs):
            continue
        else:
            per_env = None
        mask = info.get(f"_{key}")
        for i in range(num_envs):
            if mask is None or mask[i]:
                out[i][key] = per_env[i] if per_env is not None else _item(value[i])
    return out


def _item(value: Any) -> Any:
    """One sub-env's entry of an info array: numpy scalars as Python scalars, arrays copied."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def _copy_obs(obs: Any) -> Any:
    if isinstance(obs, dict):
        return {key: _copy_obs(value) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_copy_obs(value) for value in obs)
    return np.array(obs)


def _row(obs: Any, i: int) -> Any:
    """Sub-env ``i``'s observation out of a batch, as a copy."""
    if isinstance(obs, dict):
        return {key: _row(value, i) for key, value in obs.items()}
    if isinstance(obs, tuple):
        return tuple(_row(value, i) for value in obs)
    row = obs[i]
    return row.copy() if isinstance(row, np.ndarray) else row


def _assign_rows(dst: Any, src: Any, mask: np.ndarray) -> None:
    """Overwrite the rows of batch ``dst`` selected by ``mask`` with those of ``src``."""
    if isinstance(dst, dict):
        for key in dst:
            _assign_rows(dst[key], src[key], mask)
    elif isinstance(dst, tuple):
        for d, s in zip(dst, src, strict=True):
            _assign_rows(d, s, mask)
    else:
        dst[mask] = src[mask]
