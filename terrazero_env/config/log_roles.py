"""Roles of logged agents in log and hybrid scenes (TerraZero algorithm 1 step 9, appendix D.2).

At a reset from a log, every logged agent valid at step 0 starts at its logged state and then takes a
role, drawn per agent and episode by its class's :class:`LogRoles` weights (``InitConfig.log_roles``):

* **replay**: it follows its track exactly (position, heading and speed every 0.1 s) and leaves the
  scene when the track ends;
* **idm**: the IDM driver (section 4.4) takes it over from its logged pose and speed, on the lane
  nearest to it (vehicles only);
* **policy**: a policy slot, towards its last logged position when that is reachable along the lane
  graph (appendix D.5), else towards a goal sampled ahead along the lane graph;
* **planner**: handed over as for ``idm``, then driven by the closed-loop planner in the style of
  PDM-Closed (``RoadUsersConfig.planner_*``) as planner traffic is (vehicles only).

An agent whose drawn role cannot be had replays instead (see each field). A class with a single
non-zero weight draws nothing from the world's generator, so the default mix (policy for the
classes ``InitConfig.controlled`` names, replay for the rest) reproduces scenes bit for bit. The
fields are in the engine's order (``LOG_ROLES``); ``planner`` came last, after ``policy``, so that
positional construction from before it (``LogRoles(replay, idm, policy)``) keeps its meaning. New
roles become new fields after these.
``terrazero_env.config`` re-exports the names here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ..foundation.checks import check_float, check_tuple
from ..maps.schema import AgentType

__all__ = ["LogRoles", "check_log_roles", "log_role_table"]

#: Classes the IDM driver and the planner can drive (cars, trucks, buses).
_IDM_CLASSES = (AgentType.CAR, AgentType.TRUCK, AgentType.BUS)


@dataclass(frozen=True)
class LogRoles:
    """Relative weights (non-negative, not all zero) of the roles a logged agent of one class takes.

    ``LogRoles(replay=1)`` replays every agent of the class; ``LogRoles(replay=1, idm=1, policy=2)``
    replays a quarter, hands a quarter to the IDM driver and gives half to the policy;
    ``LogRoles(idm=1, planner=1)`` hands half to the IDM driver and half to the planner. Positional
    order: replay, idm, policy, planner.
    """

    replay: float = 0.0
    """Replay its track exactly and leave the scene when it ends (the paper's cyclists, section 4.4)."""
    idm: float = 0.0
    """The IDM driver from its logged pose and speed, on the lane nearest to it; cars, trucks and buses
    only. A vehicle further than ``EngineConfig.lane_max_distance`` from every lane, or facing
    against the nearest one, replays instead."""
    policy: float = 0.0
    """A policy slot (the class must be in ``InitConfig.controlled``), towards its last logged position
    when that lies at least ``goal_min_forward`` away and is reachable along the lane graph
    (appendix D.5), else towards a goal sampled ahead as random placement does. With no free slot, a
    last position closer than ``goal_min_forward`` (appendix D.2), or no goal found, it replays."""
    planner: float = 0.0
    """The IDM hand-over as for ``idm`` (logged pose and speed, nearest lane, a driver mode), then driven
    by the closed-loop planner (``RoadUsersConfig.planner_*``; ``Engine.planner_state`` reports it) as
    a planner vehicle of planner traffic is, whatever ``RoadUsersConfig.planner_fraction`` says; cars,
    trucks and buses only. A vehicle the IDM role could not take replays instead."""

    def __post_init__(self) -> None:
        _check_weights("LogRoles", self)


def _check_weights(where: str, roles: LogRoles) -> None:
    w = [check_float(f"{where}.{f.name}", getattr(roles, f.name), 0.0) for f in fields(LogRoles)]
    if sum(w) <= 0:
        raise ValueError(f"{where}: role weights {dict(zip(_names(), w))} must not all be zero")


def _names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(LogRoles))


def _default(controlled: bool) -> LogRoles:
    return LogRoles(policy=1.0) if controlled else LogRoles(replay=1.0)


def check_log_roles(where: str, value: Any, controlled: tuple[bool, ...]) -> tuple[LogRoles | None, ...] | None:
    """``InitConfig.log_roles`` in canonical form: None, or five entries (car, truck, bus, pedestrian,
    cyclist), each a :class:`LogRoles` (a mapping of its fields is converted) or None (the class's
    default). Raises ``ValueError`` naming the entry for an unknown field, a bad weight, an IDM or
    planner share of a pedestrian or cyclist, or a policy share of a class ``controlled`` leaves out."""
    if value is None:
        return None
    entries = check_tuple(where, value, len(AgentType))
    out: list[LogRoles | None] = []
    for c, x in zip(AgentType, entries):
        at = f"{where}[{int(c)}] ({c.name.lower()})"
        if isinstance(x, Mapping):
            unknown = set(x) - set(_names())
            if unknown:
                raise ValueError(f"{at}: unknown roles {sorted(map(str, unknown))} (known: {list(_names())})")
            try:
                x = LogRoles(**{k: x[k] for k in _names() if k in x})
            except ValueError as err:  # named as this entry, not as a bare LogRoles
                raise ValueError(str(err).replace("LogRoles", at, 1)) from None
        if x is not None and not isinstance(x, LogRoles):
            raise ValueError(f"{at}: a LogRoles, a mapping of its fields {list(_names())} or None, got {x!r}")
        if x is not None:
            _check_weights(at, x)
            if x.idm > 0 and c not in _IDM_CLASSES:
                raise ValueError(f"{at}.idm: only cars, trucks and buses drive by IDM, got weight {x.idm!r}")
            if x.planner > 0 and c not in _IDM_CLASSES:
                raise ValueError(f"{at}.planner: only cars, trucks and buses are driven by the planner, "
                                 f"got weight {x.planner!r}")
            if x.policy > 0 and not controlled[c]:
                raise ValueError(f"{at}.policy: the policy does not control {c.name.lower()}s "
                                 f"(InitConfig.controlled[{int(c)}] is false), got weight {x.policy!r}")
        out.append(x)
    return None if all(x is None for x in out) else tuple(out)


def log_role_table(log_roles: tuple[LogRoles | None, ...] | None, controlled: tuple[bool, ...]) -> np.ndarray:
    """float64 ``[5, len(LOG_ROLES)]``: each class's role weights in field order, the default where
    ``log_roles`` (or its entry) is None."""
    rows = log_roles if log_roles is not None else (None,) * len(AgentType)
    return np.array([[getattr(r if r is not None else _default(bool(controlled[c])), n) for n in _names()]
                     for c, r in zip(AgentType, rows)], np.float64)
