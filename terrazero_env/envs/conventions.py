"""The conventions third-party RL code relies on, checked in one place for every env of this package.

This module owns: the keyword check of the env constructors (a name that is no config setting raises
``TypeError``, as any Python callable does), Gymnasium's seed rule (``None`` or a non-negative integer
below 2**64, never a float, string or bool, so no two seeds alias one episode), the integer action check
of the single-agent and PettingZoo envs (no silent wrap to int32), the bound on ``max_reset_tries``
(each try is a full placement of a world, so a huge count is a hang, not a retry policy), the "env is closed" error that
replaces the engine when an env is closed, and the pickling of the compiled ``Engine`` (registered
with :mod:`copyreg`, built on ``Engine.get_state``/``set_state``), which makes ``copy.deepcopy`` and
``pickle`` of every env a copy with the same future: the copy steps to the same observations and
rewards as the original under the same actions.
"""

from __future__ import annotations

import copyreg
import dataclasses
from collections.abc import Mapping
from typing import Any, NoReturn

import numpy as np

from .. import _engine
from .. import engine as core
from ..config import EngineConfig

__all__ = ["EnvClosedError", "MAX_RESET_TRIES", "MAX_SEED", "check_action", "check_overrides", "check_reset_tries",
           "check_seed", "closed_engine", "require_open"]

#: Seeds are unsigned 64-bit integers: the engine's per-world generators take nothing wider.
MAX_SEED = 2**64 - 1
#: Most redraws of a scene without a controlled agent before ``reset`` gives up (ours).
MAX_RESET_TRIES = 10_000


class EnvClosedError(RuntimeError):
    """An env was used after ``close()``."""


# ------------------------------------------------------------------------------------- keywords

def _known_path(parts: list[str]) -> bool:
    """Whether a dotted name is a setting of :class:`EngineConfig` (checked two levels deep; a bad
    value or a deeper name is left to the config's own validation, which names the field)."""
    base = EngineConfig()
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    if parts[0] not in fields:
        return False
    value = fields[parts[0]]
    if len(parts) == 1:
        return True
    if dataclasses.is_dataclass(value):
        return parts[1] in {f.name for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        keys = {k if isinstance(k, str) else k.name.lower() for k in value}
        return parts[1] in keys
    return False  # a plain setting has no sub-settings


def check_overrides(owner: str, overrides: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` ("unexpected keyword argument") for a keyword that names no config setting
    (``obs__dtype`` and ``**{"obs.dtype": ...}`` name ``obs.dtype``)."""
    for name in overrides:
        if not isinstance(name, str) or not _known_path(name.replace("__", ".").split(".")):
            raise TypeError(f"{owner}() got an unexpected keyword argument {name!r} "
                            "(neither an argument nor a config setting)")


# ---------------------------------------------------------------------------------------- seeds

def check_seed(seed: Any, where: str = "seed") -> int | None:
    """``seed`` as a Python int in [0, 2**64), or None; anything else raises an error naming it:
    ``TypeError`` for a float, string, bool or other non-integer, ``ValueError`` for a negative or
    too large integer."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{where} must be None or a non-negative integer, got {type(seed).__name__} {seed!r}")
    s = int(seed)
    if not 0 <= s <= MAX_SEED:
        raise ValueError(f"{where} must be a non-negative integer below 2**64, got {s}")
    return s


def check_reset_tries(tries: Any) -> int:
    """``max_reset_tries`` as an int in [1, MAX_RESET_TRIES]; a float, bool or other type raises
    ``TypeError``, an integer out of range ``ValueError``, both naming the argument."""
    if isinstance(tries, (bool, np.bool_)) or not isinstance(tries, (int, np.integer)):
        raise TypeError(f"max_reset_tries must be an integer, got {type(tries).__name__} {tries!r}")
    if not 1 <= int(tries) <= MAX_RESET_TRIES:
        raise ValueError(f"max_reset_tries must lie in [1, {MAX_RESET_TRIES}], got {int(tries)}")
    return int(tries)


# -------------------------------------------------------------------------------------- actions

def check_action(action: Any, n: int, where: str = "action") -> int:
    """One discrete action as a Python int in [0, n): a scalar or one-element array of an integer
    dtype; floats, bools and out-of-range values raise ``ValueError`` (they never wrap to int32)."""
    if isinstance(action, (bool, np.bool_)):
        raise ValueError(f"{where} must be an integer in [0, {n}), got {action!r}")
    a = np.asarray(action)
    if a.shape not in ((), (1,)) or a.dtype.kind not in "iu":
        raise ValueError(f"{where} must be an integer in [0, {n}), got {action!r}")
    value = int(a.reshape(()))
    if not 0 <= value < n:
        raise ValueError(f"{where} {value} out of range: the action space is [0, {n})")
    return value


# -------------------------------------------------------------------------------------- closing

class _ClosedEngine:
    """Stands in for a closed env's engine: any use raises :class:`EnvClosedError`."""

    __slots__ = ("_owner",)

    def __init__(self, owner: str) -> None:
        self._owner = owner

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):  # copy, pickle and friends probe dunders; they are simply absent
            raise AttributeError(name)
        raise EnvClosedError(f"{self._owner} is closed (close() was called): make a new env")

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _ClosedEngine, (self._owner,)

    def __bool__(self) -> bool:
        return False


def closed_engine(owner: str) -> Any:
    """The stand-in a closed env keeps in place of its engine."""
    return _ClosedEngine(owner)


def require_open(engine: Any) -> None:
    """Raise :class:`EnvClosedError` when ``engine`` is a closed env's stand-in."""
    if isinstance(engine, _ClosedEngine):
        engine.num_worlds  # noqa: B018 -- raises, naming the env


# ------------------------------------------------------------------------------------- pickling

def _rebuild_engine(config: EngineConfig, maps: list[Any], world_map: np.ndarray, num_threads: int,
                    state: dict[str, Any]) -> Any:
    engine = core.Engine(config, maps=maps, world_map=world_map, num_threads=num_threads)
    # The per-world signal arrays are as wide as the largest map an engine has held (a dataset may
    # have grown them); the columns past the largest map in use now are never read, so a fresh
    # engine, sized for the maps in use, takes the leading columns.
    fresh = engine.get_state()
    state = {k: (v[:, : fresh[k].shape[1]] if k.startswith("signal/") and v.ndim == 2
                 and v.shape[1] > fresh[k].shape[1] else v) for k, v in state.items()}
    engine.set_state(state)
    return engine


def _reduce_engine(engine: core.Engine) -> tuple[Any, tuple[Any, ...]]:
    # The maps travel as data (a dataset may have put worlds on maps the config does not name).
    return _rebuild_engine, (engine.config, [rm.map_data for rm in engine.road_maps], np.array(engine.world_map),
                             int(engine.num_threads), engine.get_state())


def _refuse_raw_engine(engine: _engine.Engine) -> Any:
    # The compiled engine holds its settings, not the config they came from, so it cannot be rebuilt.
    raise TypeError("a terrazero_env._engine.Engine built from engine_settings() cannot be pickled or copied; "
                    "build terrazero_env.engine.Engine(config, maps) instead, which can")


copyreg.pickle(_engine.Engine, _refuse_raw_engine)
copyreg.pickle(core.Engine, _reduce_engine)
