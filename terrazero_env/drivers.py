"""Baseline drivers: controllers that drive the controlled agents of an engine in place of a policy,
so every evaluation table can print them beside a learned one (``terrazero eval --driver NAME``).

* ``reference``: :class:`ReferenceDriver`, the simulator's drivability check. It drives each car
  through its own dynamics and its own discrete action grid, the actions a policy could choose
  (``cyext/reference.pxd``: the IDM law with the rule-based vehicles' constraints for speed, pure
  pursuit along the lane-graph route to the goal for steering, each grid action tried through the
  engine's own step), so what it reaches a policy can reach.
* ``idm``: :class:`IdmDriver`, the engine's IDM vehicle law (``roadusers.pxd``, as
  ``Engine.hand_to_idm`` uses it) driving the agent along the route to its goal with its own
  kinematics, not the class's action grid; InterPlan's and nuPlan's IDM baseline.
* ``planner``: :class:`PlannerDriver`, the planner traffic's PDM-style logic (``planner.pxd``: a few
  target speeds and lateral offsets scored over a short horizon, tracked by the IDM law), likewise.

A driver is used where a model would be: ``driver.act(engine)`` returns one action per slot (int32
``[W * K]``), and ``driver.begin(engine, worlds, slots)`` is called after every reset with the slots
whose episodes are scored. The three drivers read the engine's state (privileged information, as the
rule-based road users do); the idm and planner drivers switch the named slots to the engine's
rule-based motion (``Engine.set_ego_driver``): the agents stay controlled, so every rule, reward,
counter and episode metric is measured for them exactly as for a policy.

Example::

    from terrazero_env import load_config
    from terrazero_env.agents.evaluate import evaluate
    from terrazero_env.drivers import make_driver

    result = evaluate(make_driver("reference"), load_config("quick"), episodes=200)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

__all__ = ["DRIVERS", "Driver", "IdmDriver", "PlannerDriver", "ReferenceDriver", "make_driver"]


class Driver(ABC):
    """A controller of an engine's controlled agents (see the module docstring)."""

    name = "driver"

    def begin(self, engine: Any, worlds: np.ndarray, slots: np.ndarray) -> None:  # noqa: B027 (an optional hook)
        """Called after each reset with the (world, slot) pairs to drive; nothing by default."""

    @abstractmethod
    def act(self, engine: Any) -> np.ndarray:
        """One action index per slot, int32 ``[W * K]`` (ignored for slots that read none)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ReferenceDriver(Driver):
    """The reference driver on the agent's own dynamics and action grid (``Engine.reference_actions``).

    Settings (keyword arguments; ours): ``preview`` (s) the curvature the wheels are turned for lies
    this far ahead at the present speed; ``goal_speed`` (m/s) and ``goal_decel`` (m/s^2) how it
    arrives at its goal; ``action_price`` and ``comfort_price`` what a non-zero action and a jerk above
    the class's comfort limit cost in its choice (the jerk model's classes only: an acceleration-actuated
    class cannot change its acceleration within a comfort limit); ``swept_path`` (m) the largest lateral
    offset a box of 7 m or more takes to keep its sweep through a bend on the road (a shorter box in proportion
    to its length), and ``swept_margin`` (m) the
    room it keeps from the road edges there where an offset allows it; ``walk_speed`` (m/s) for
    pedestrians. Unknown names
    raise ``TypeError``; bad values ``ValueError`` (checked by the engine on first use)."""

    name = "reference"

    def __init__(self, **settings: float) -> None:
        from . import _engine

        self.settings = _engine._reference_settings(settings)  # checked now, not at the first step
        self._out: np.ndarray | None = None

    def act(self, engine: Any) -> np.ndarray:
        n = engine.num_worlds * engine.slots_per_world
        if self._out is None or self._out.shape != (n,):
            self._out = np.zeros(n, np.int32)
        return engine.reference_actions(self._out, **self.settings)

    def __repr__(self) -> str:
        return f"ReferenceDriver({', '.join(f'{k}={v}' for k, v in self.settings.items())})"


class _RuleDriver(Driver):
    """Switches the scored slots to one of the engine's rule-based drivers; their actions are ignored."""

    mode = "idm"

    def __init__(self, idm_mode: int = 0) -> None:
        if isinstance(idm_mode, bool) or not isinstance(idm_mode, (int, np.integer)) or not 0 <= idm_mode <= 2:
            raise ValueError(f"idm_mode must be 0 (default), 1 (assertive) or 2 (cautious), got {idm_mode!r}")
        self.idm_mode = int(idm_mode)

    def begin(self, engine: Any, worlds: np.ndarray, slots: np.ndarray) -> None:
        engine.set_ego_driver(worlds, slots, self.mode, idm_mode=self.idm_mode)

    def act(self, engine: Any) -> np.ndarray:
        return np.zeros(engine.num_worlds * engine.slots_per_world, np.int32)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(idm_mode={self.idm_mode})"


class IdmDriver(_RuleDriver):
    """The engine's IDM vehicle law along the route to each agent's goal."""

    name = mode = "idm"


class PlannerDriver(_RuleDriver):
    """The planner traffic's logic (``planner.pxd``) along the route to each agent's goal."""

    name = mode = "planner"


#: The drivers ``terrazero eval --driver`` knows, by name.
DRIVERS: dict[str, type[Driver]] = {"reference": ReferenceDriver, "idm": IdmDriver, "planner": PlannerDriver}


def make_driver(name: str, **settings: Any) -> Driver:
    """The driver called ``name`` (one of :data:`DRIVERS`) with its settings."""
    if name not in DRIVERS:
        raise ValueError(f"unknown driver {name!r}; known: {', '.join(DRIVERS)}")
    return DRIVERS[name](**settings)
