"""Training checkpoints that continue exactly.

A checkpoint is a folder ``RUN/checkpoints/iter_NNNNNN/`` taken between two iterations (after an
update, before the next rollout) holding:

* ``model.zip``: the policy as :meth:`terrazero_env.agents.PPO.save` writes it (what
  ``PPO.load`` and ``terrazero eval`` read), written by rank 0;
* ``rank<r>.pt``: everything rank ``r`` needs to continue bit for bit: policy and optimizer
  state, PopArt statistics, step and update counters, the last observation, the episode-info
  buffer, the Python, NumPy and torch (and CUDA) generator states, and the state of every env
  wrapper down to the engine's worlds.

``RUN/checkpoints/latest`` names the newest complete checkpoint; it is replaced atomically after
every rank has written its file, so an interrupted save never becomes the one a resume reads.

A ``rank<r>.pt`` file holds only tensors and plain data (dicts, lists, tuples, strings, numbers):
NumPy arrays and scalars are stored as their bytes in a uint8 tensor with their dtype description,
so it is read with ``torch.load(..., weights_only=True)`` and loading a shared file runs no code.
"""

from __future__ import annotations

import math
import random
from collections import deque
from pathlib import Path
from typing import Any

import numpy as np
import torch
from stable_baselines3.common.vec_env import VecMonitor

from terrazero_env.foundation.safe_files import UnsafeFileError, atomic_write, atomic_writer, read_text

from ..wrappers.sb3 import SB3VecEnv

__all__ = ["CHECKPOINT_FORMAT", "env_state", "from_plain", "latest_checkpoint", "load_rank_state", "mark_latest",
           "save_rank_state", "set_env_state", "to_plain"]

#: 2: tensors and plain data only (format 1 pickled NumPy objects and is no longer read).
CHECKPOINT_FORMAT = 2
#: The key that marks a NumPy array or scalar encoded by :func:`to_plain`.
_NUMPY_TAG = "__numpy__"


def to_plain(obj: Any, where: str = "state") -> Any:
    """``obj`` with every NumPy array or scalar replaced by ``{_NUMPY_TAG: uint8 tensor of its bytes,
    "descr": dtype description, "shape": [...], "scalar": bool}`` (and deques by lists), so that
    ``torch.load(weights_only=True)`` can read it back; anything else that is not a tensor or
    plain data raises ``TypeError`` naming where it is."""
    if isinstance(obj, (np.ndarray, np.generic)):
        arr = np.asarray(obj)  # tobytes() is C order whatever the strides
        raw = torch.from_numpy(np.frombuffer(arr.tobytes(), np.uint8).copy())
        return {_NUMPY_TAG: raw, "descr": np.lib.format.dtype_to_descr(arr.dtype), "shape": list(arr.shape),
                "scalar": isinstance(obj, np.generic)}
    if obj is None or isinstance(obj, (bool, int, float, str, torch.Tensor)):
        return obj
    if isinstance(obj, dict):
        return {k: to_plain(v, f"{where}[{k!r}]") for k, v in obj.items()}
    if isinstance(obj, (list, deque)):
        return [to_plain(v, f"{where}[{i}]") for i, v in enumerate(obj)]
    if isinstance(obj, tuple):
        return tuple(to_plain(v, f"{where}[{i}]") for i, v in enumerate(obj))
    raise TypeError(f"cannot checkpoint {where}: a {type(obj).__name__} is neither a tensor nor plain data")


def from_plain(obj: Any) -> Any:
    """The inverse of :func:`to_plain` (deques come back as lists)."""
    if isinstance(obj, dict):
        if _NUMPY_TAG in obj:
            dtype = np.lib.format.descr_to_dtype(obj["descr"])
            arr = np.frombuffer(obj[_NUMPY_TAG].cpu().numpy().tobytes(), dtype).reshape(obj["shape"]).copy()
            return arr[()] if obj["scalar"] else arr
        return {k: from_plain(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [from_plain(v) for v in obj]
    if isinstance(obj, tuple):
        return tuple(from_plain(v) for v in obj)
    return obj


def env_state(env: Any) -> dict[str, Any]:
    """The state of the SB3 env chain (VecMonitor, SB3VecEnv, then any Gymnasium vector env with
    ``get_state``, such as DPSA over the native env)."""
    if isinstance(env, VecMonitor):
        return {"kind": "VecMonitor", "returns": env.episode_returns.copy(), "lengths": env.episode_lengths.copy(),
                "count": env.episode_count, "inner": env_state(env.venv)}
    if isinstance(env, SB3VecEnv):
        return {"kind": "SB3VecEnv", "inner": env_state(env.vector_env)}
    if hasattr(env, "get_state"):
        return {"kind": type(env).__name__, "state": env.get_state()}
    raise TypeError(f"cannot checkpoint an env of type {type(env).__name__} (no get_state)")


def set_env_state(env: Any, state: dict[str, Any]) -> dict[str, Any] | None:
    """Restore :func:`env_state` into an env chain built the same way. Returns the running episode
    returns, lengths and count of a ``VecMonitor`` state that the chain no longer has (a checkpoint of
    the array path from before it kept them itself), for the episode tally; else None."""
    kind = state["kind"]
    if isinstance(env, VecMonitor) and kind == "VecMonitor":
        env.episode_returns, env.episode_lengths = state["returns"].copy(), state["lengths"].copy()
        env.episode_count = state["count"]
        return set_env_state(env.venv, state["inner"])
    if isinstance(env, SB3VecEnv) and kind == "VecMonitor":
        set_env_state(env, state["inner"])
        return {"returns": state["returns"], "lengths": state["lengths"], "count": state["count"]}
    if isinstance(env, SB3VecEnv) and kind == "SB3VecEnv":
        return set_env_state(env.vector_env, state["inner"])
    if kind == type(env).__name__ and hasattr(env, "set_state"):
        env.set_state(state["state"])
        return None
    raise ValueError(f"checkpoint env state is for a {kind}, the run has a {type(env).__name__}: "
                     "resume with the settings the run was started with")


def _rng_state(device: torch.device) -> dict[str, Any]:
    out = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if device.type == "cuda":
        out["cuda"] = torch.cuda.get_rng_state(device)
    return out


def _set_rng_state(state: dict[str, Any], device: torch.device) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    # The states are CPU byte tensors, also when the checkpoint was loaded onto a GPU.
    torch.set_rng_state(state["torch"].cpu())
    if "cuda" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


def save_rank_state(model: Any, path: Path, rank: int, world_size: int, extra: dict[str, Any]) -> None:
    """Write ``path`` (``rank<r>.pt``) atomically."""
    state = {
        "format": CHECKPOINT_FORMAT, "rank": rank, "world_size": world_size,
        "policy": model.policy.state_dict(), "optimizer": model.policy.optimizer.state_dict(),
        **model.training_state(),
        "rng": _rng_state(model.device), "env": env_state(model.env), "extra": extra,
    }
    with atomic_writer(path, "checkpoint file") as f:
        torch.save(to_plain(state), f)


def load_rank_state(model: Any, path: Path, rank: int, world_size: int) -> dict[str, Any]:
    """Restore ``rank<r>.pt`` into a model built with the run's settings; returns its ``extra``."""
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file {path} is missing (was the run started with {world_size} ranks?)")
    try:
        # weights_only: tensors and plain data only; a file holding anything else (pickled code
        # included) is refused before any of it runs.
        state = torch.load(path, map_location=model.device, weights_only=True)
    except Exception as exc:  # a truncated or foreign file, or one that needs unpickling code
        detail = (str(exc).strip().splitlines() or [""])[0]
        raise ValueError(f"cannot read checkpoint {path} as tensors and plain data (it is not a checkpoint of "
                         f"format {CHECKPOINT_FORMAT}, or it holds pickled objects, which are never loaded): "
                         f"{type(exc).__name__}: {detail}") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a terrazero training checkpoint (format {CHECKPOINT_FORMAT})")
    state = from_plain(state)
    check_learner_state(state, path)
    if state["world_size"] != world_size:
        raise ValueError(f"{path} was written by a run of {state['world_size']} ranks; this one has {world_size}")
    try:
        model.policy.load_state_dict(state["policy"])
    except RuntimeError as exc:
        raise ValueError(f"{path}: the policy does not match this run's settings ({exc})") from None
    model.policy.optimizer.load_state_dict(state["optimizer"])
    monitor = set_env_state(model.env, state["env"])
    if monitor is not None and state.get("episode_tally") is None:
        # A checkpoint written while the array path's statistics lived in a VecMonitor.
        state["episode_tally"] = monitor
    model.load_training_state(state)
    _set_rng_state(state["rng"], model.device)
    return state["extra"]


#: Most agent steps, updates or episodes a checkpoint may claim (2**53: exact in a float64, far past any run).
MAX_COUNT = 2 ** 53


def _finite_tensors(obj: Any, where: str, path: Path) -> None:
    """Every tensor (or float) under ``obj`` is finite; else one line naming the file and the entry."""
    if isinstance(obj, torch.Tensor):
        if obj.is_floating_point() and not bool(torch.isfinite(obj).all()):
            raise ValueError(f"checkpoint {path}: {where} holds NaN or infinite values (refused: training would "
                             "continue from a broken state)")
    elif isinstance(obj, (np.ndarray, np.generic)):
        if np.asarray(obj).dtype.kind in "fc" and not bool(np.isfinite(obj).all()):
            raise ValueError(f"checkpoint {path}: {where} holds NaN or infinite values (refused: training would "
                             "continue from a broken state)")
    elif isinstance(obj, float):
        if not math.isfinite(obj):
            raise ValueError(f"checkpoint {path}: {where} is {obj!r}, not a finite number")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            _finite_tensors(v, f"{where}.{k}", path)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            _finite_tensors(v, f"{where}[{i}]", path)


def check_learner_state(state: dict[str, Any], path: Path) -> None:
    """What a resume takes from ``rank<r>.pt`` before anything is restored: finite weights, optimizer
    moments and PopArt statistics, and counts that are integers in ``[0, MAX_COUNT]``. A tampered or
    corrupted file is refused with one line naming the file and the entry."""
    for key in ("policy", "optimizer", "popart", "num_timesteps", "n_updates", "episode_num", "world_size"):
        if key not in state:
            raise ValueError(f"checkpoint {path}: no {key!r} entry")
    _finite_tensors(state["policy"], "policy", path)
    _finite_tensors(state["optimizer"], "optimizer", path)
    popart = state["popart"]
    if not isinstance(popart, (list, tuple)) or len(popart) < 2:
        raise ValueError(f"checkpoint {path}: popart must hold (mean, squared mean[, updates]), got {type(popart).__name__}")
    _finite_tensors(list(popart[:2]), "popart", path)
    for key, value in (("num_timesteps", state["num_timesteps"]), ("n_updates", state["n_updates"]),
                       ("episode_num", state["episode_num"]),
                       *((("popart updates", popart[2]),) if len(popart) > 2 else ())):
        if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
            value = int(value)
        elif isinstance(value, np.integer):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
            raise ValueError(f"checkpoint {path}: {key} must be an integer in [0, 2**53], got {value!r}")


def _run_path(run_dir: Path, path: Path, what: str) -> Path:
    """``path`` itself, refused when it is a symbolic link or resolves outside ``run_dir`` (a run
    folder shared with others must not lead reads or writes into another folder)."""
    if path.is_symlink():
        raise ValueError(f"{what} {path} is a symbolic link; a run folder's files and folders may not be links")
    root = Path(run_dir).resolve()
    if root != path.resolve() and root not in path.resolve().parents:
        raise ValueError(f"{what} {path} lies outside the run folder {run_dir}")
    return path


def latest_checkpoint(run_dir: Path) -> Path | None:
    """The newest complete checkpoint folder of a run, or None. The pointer ``checkpoints/latest``
    must be a regular file holding one folder name (``iter_NNNNNN``) of ``checkpoints/``; a pointer
    that is a link, names a path (``../..``, an absolute path) or a link is refused naming it."""
    checkpoints = _run_path(run_dir, Path(run_dir) / "checkpoints", "checkpoint folder")
    pointer = checkpoints / "latest"
    if not pointer.exists() and not pointer.is_symlink():
        return None
    _run_path(run_dir, pointer, "checkpoint pointer")
    try:
        name = read_text(pointer, 4096, "checkpoint pointer").strip()
    except UnsafeFileError as e:
        raise ValueError(str(e)) from None
    if not name.startswith("iter_") or not name[5:].isdigit() or len(name) > 32:
        raise ValueError(f"checkpoint pointer {pointer} holds {name[:80]!r}, not the name of a checkpoint folder "
                         "(iter_NNNNNN) of the run")
    folder = _run_path(run_dir, checkpoints / name, "checkpoint folder")
    return folder if folder.is_dir() else None


def mark_latest(folder: Path) -> None:
    """Point ``checkpoints/latest`` at ``folder`` (atomic replace, never through a link)."""
    atomic_write(folder.parent / "latest", folder.name + "\n", "checkpoint pointer")
