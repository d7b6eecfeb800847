"""What the env layer needs of an engine, as :class:`typing.Protocol` classes.

Two engines implement it: :class:`terrazero_env.engine.Engine` (the worlds in this process) and
:class:`terrazero_env.envs.workers.MultiProcessEngine` (the worlds split over worker processes, with
the same Python API over shared memory). The env classes (``envs/vector.py``, ``envs/single.py``,
``envs/multi.py``) talk to either through :class:`VectorEngine`; what only one of them can do is a
protocol of its own, asked with ``isinstance`` (the protocols are runtime-checkable):

- :class:`SnapshotEngine`: ``get_state``/``set_state`` (the in-process engine; a worker engine's
  worlds live in other processes).
- :class:`ScenarioEngine`: ``assign_scenarios`` (an engine that holds its dataset's road maps itself,
  as worker processes do, so the env names scenarios by index rather than handing over road maps).
- :class:`MapAssigningEngine`: ``assign_maps`` (an engine that takes road maps built in this process).
- :class:`ClosableEngine`: ``close`` (an engine with resources to release: worker processes and
  their shared memory).

Buffers are NumPy arrays the engine rewrites in place on every ``step`` and ``reset``; row ``w * K + k``
is slot ``k`` of world ``w`` (``K`` = ``slots_per_world``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..config import EngineConfig

__all__ = ["ClosableEngine", "MapAssigningEngine", "ScenarioEngine", "SnapshotEngine", "VectorEngine"]


@runtime_checkable
class VectorEngine(Protocol):
    """W worlds x K controlled slots, stepped together."""

    config: EngineConfig
    num_worlds: int
    slots_per_world: int
    #: The observation's column layout (``terrazero_env.engine`` documents its keys).
    obs_layout: Any
    #: One road map per map index; ``world_map[w]`` is world w's index.
    road_maps: Sequence[Any]
    world_map: np.ndarray
    #: float32 (or float16) ``[W*K, obs_dim]``.
    observations: np.ndarray
    #: float32 ``[W*K]``.
    rewards: np.ndarray
    #: bool ``[W*K]``.
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray
    #: int32 ``[W*K, n_counters]``: the violation counters of each slot's episode.
    counters: np.ndarray

    @property
    def obs_dim(self) -> int: ...

    @property
    def agents(self) -> np.ndarray:
        """Structured ``[W, max_agents]``: every agent of every world."""
        ...

    @property
    def n_agents_per_world(self) -> np.ndarray: ...

    @property
    def world_steps(self) -> np.ndarray: ...

    def num_actions(self, cls: int) -> int:
        """The size of class ``cls``'s discrete action grid."""
        ...

    def reset(self, world_ids: Any = None, seeds: Any = None) -> None:
        """Reset the given worlds (all by default), each from its seed."""
        ...

    def step(self, actions: np.ndarray | None = None) -> None:
        """Step every world with one action index per slot (``int [W*K]``)."""
        ...


@runtime_checkable
class SnapshotEngine(VectorEngine, Protocol):
    def get_state(self) -> dict[str, Any]: ...

    def set_state(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class ScenarioEngine(VectorEngine, Protocol):
    def assign_scenarios(self, world_ids: Any, indices: Any) -> None:
        """Put each world of ``world_ids`` on the dataset scenario of the same position in ``indices``."""
        ...


@runtime_checkable
class MapAssigningEngine(VectorEngine, Protocol):
    def assign_maps(self, world_ids: Any, road_maps: Any) -> None:
        """Put each world of ``world_ids`` on the road map of the same position in ``road_maps``."""
        ...


@runtime_checkable
class ClosableEngine(Protocol):
    def close(self) -> None: ...
